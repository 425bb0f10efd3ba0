"""One graded class shared by the grading tests: a temporary copy of autograder/ (config + the
generated source notebook), released, then graded twice (the second time with --regrade) from a
folder mixing every kind of submission in tests/grading/submission_kinds.py."""

from __future__ import annotations

import csv
import hashlib
import io
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest
from submission_kinds import FILE_KINDS, NOTEBOOK_KINDS, write_class

from coursekit.cli import main
from coursekit.grading.course import Course
from coursekit.grading.intake.release import release

REPO = Path(__file__).resolve().parents[2]
CELL_TIMEOUT = "3"  # seconds; the infinite-loop submission costs two of these


def make_course(root: Path) -> Course:
    root.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(REPO / "autograder" / "nbgrader_config.py", root / "nbgrader_config.py")
    shutil.copytree(REPO / "autograder" / "source", root / "source")
    return Course.at(root)


def digests(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def read_rows(text: str) -> dict[str, dict[str, str]]:
    return {row["student_id"]: row for row in csv.DictReader(io.StringIO(text))}


@dataclass
class GradedClass:
    course: Course
    folder: Path
    students: dict[str, str]  # student id -> kind
    before: dict[str, str]    # sha256 of every original file before grading
    after: dict[str, str]     # ... after both runs
    exit_codes: tuple[int, int]
    csv_first: str
    csv_second: str

    @property
    def rows(self) -> dict[str, dict[str, str]]:
        return read_rows(self.csv_first)

    def row(self, kind: str) -> dict[str, str]:
        return self.rows[next(sid for sid, k in self.students.items() if k == kind)]


def fresh_copy(course: Course, root: Path) -> Course:
    """A copy of a released course without its graded class (manifest, journal, reports): saves a release."""
    shutil.copytree(course.root, root, ignore=shutil.ignore_patterns(".ingest", "reports", "feedback", "autograded",
                                                                     "submitted"))
    return Course.at(root)


@pytest.fixture(scope="session")
def released_course(tmp_path_factory) -> Course:
    course = make_course(tmp_path_factory.mktemp("grading") / "course")
    release(course)
    return course


@pytest.fixture(scope="session")
def graded_class(released_course, tmp_path_factory) -> GradedClass:
    course = released_course
    folder = tmp_path_factory.mktemp("lms") / "download"
    students = write_class(course.release_notebook, folder, [*NOTEBOOK_KINDS, *FILE_KINDS])
    before = digests(folder)
    args = ["grade", str(folder), "--course", str(course.root), "--timeout", CELL_TIMEOUT]
    first = main(args)
    csv_first = course.report_csv.read_text(encoding="utf-8")
    second = main([*args, "--regrade"])  # really grade again: without it, finished students are kept
    csv_second = course.report_csv.read_text(encoding="utf-8")
    return GradedClass(course, folder, students, before, digests(folder), (first, second),
                       csv_first, csv_second)


@pytest.fixture(scope="session")
def instructor_class(tmp_path_factory) -> Course:
    """A course of its own with tests/grading/instructor_class.py's eight students graded."""
    from instructor_class import write_instructor_class

    course = make_course(tmp_path_factory.mktemp("instructor") / "course")
    release(course)
    folder = tmp_path_factory.mktemp("instructor-lms") / "download"
    write_instructor_class(course.release_notebook, folder)
    assert main(["grade", str(folder), "--course", str(course.root), "--timeout", CELL_TIMEOUT]) == 0
    return course
