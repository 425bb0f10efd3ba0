"""`coursekit release`: generate the student notebook with nbgrader and copy it where students get it.

Steps (in order): check the source notebook exists -> nbgrader generate_assignment (gradebook +
autograder/release/) -> check the release shows the exercise's blanks -> copy it to --to.
"""

from __future__ import annotations

import argparse
import shutil
import warnings
from pathlib import Path

import nbformat
from nbgrader.api import Gradebook, MissingEntry
from nbgrader.converters import GenerateAssignment

from coursekit.errors import CourseError
from coursekit.grading.course import (
    DEFAULT_ROOT,
    Course,
    project_course,
    put_venv_on_path,
    run_converter,
)
from coursekit.lesson import BLANK

DEFAULT_TO = Path("build/release")
# Text that must never reach students: nbgrader's stubs and solution/hidden-test markers.
FORBIDDEN = ("NotImplementedError", "YOUR CODE HERE", "YOUR ANSWER HERE", "BEGIN SOLUTION",
             "END SOLUTION", "BEGIN HIDDEN TESTS", "# SOLUTION")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--course", type=Path, default=DEFAULT_ROOT, help="nbgrader course folder")
    parser.add_argument("--to", type=Path, default=DEFAULT_TO,
                        help=f"folder that receives the student notebook (default {DEFAULT_TO})")
    parser.add_argument("--lesson", default=None, help="lesson id of course.yml (default: every lesson)")


def run(args: argparse.Namespace) -> int:
    for entry in project_course(args.course).select(args.lesson):
        course = Course.at(args.course, entry.id)
        notebook = release(course)
        args.to.mkdir(parents=True, exist_ok=True)
        target = args.to / f"{course.notebook}.ipynb"
        shutil.copyfile(notebook, target)
        print(f"released {notebook} -> {target}")
    return 0


def release(course: Course) -> Path:
    """Generate autograder/release/<id>/<id>.ipynb and the assignment's gradebook entries; return the path."""
    if not course.source_notebook.is_file():
        raise CourseError(f"{course.source_notebook}: missing; run 'make branches' to generate it "
                          f"from {course.lesson.source}")
    run_converter(course, GenerateAssignment, force=True, create_assignment=True)
    check_release(course.release_notebook, course.rubric.code_cell)
    return course.release_notebook


def ensure_released(course: Course) -> None:
    """Release unless the release notebook is newer than the source and the gradebook (sqlite or
    another database, CourseDirectory.db_url) has the assignment."""
    if not course.release_notebook.is_file() or \
            course.release_notebook.stat().st_mtime < course.source_notebook.stat().st_mtime:
        release(course)
        return
    put_venv_on_path()  # nbgrader runs `alembic` when it creates a new gradebook
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # nbgrader's SQLAlchemy warnings are about its own sessions
        with Gradebook(course.db_url, course.coursedir().course_id) as gb:
            try:
                gb.find_notebook(course.notebook, course.assignment)
            except MissingEntry:
                release(course)


def check_release(path: Path, code_cell: str) -> None:
    """No solution or hidden test text in the release, and its fill-in (grade id `code_cell`) has blanks."""
    nb = nbformat.read(path, as_version=4)
    for index, cell in enumerate(nb.cells):
        for text in FORBIDDEN:
            if text in cell.source:
                raise CourseError(f"{path}: cell {index} contains '{text}'; the release must show the "
                                  "exercise's blanks only (check BlankSolutions in nbgrader_config.py)")
    fill_in = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == code_cell]
    if len(fill_in) != 1 or BLANK not in fill_in[0].source:
        raise CourseError(f"{path}: expected one '{code_cell}' cell with '{BLANK}' blanks")
