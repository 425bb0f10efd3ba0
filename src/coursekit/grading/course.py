"""The nbgrader course on disk: where its folders are and how its config is read."""

from __future__ import annotations

import os
import sys
import warnings
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from nbgrader.coursedir import CourseDirectory
from nbgrader.utils import capture_log
from traitlets.config import Config, PyFileConfigLoader

from coursekit.course_file import COURSE_FILE, CourseFile, LessonEntry, load_course
from coursekit.errors import CourseError

CONFIG_FILE = "nbgrader_config.py"
DEFAULT_ROOT = Path("autograder")
# grade ids of the source notebook (contract: coursekit branches); the CSV columns follow AUTO_CELLS.
AUTO_CELLS = {"test_normal": "normal", "test_boundary": "boundary", "test_aggregation": "aggregation"}
MANUAL_CELLS = ("explanation", "q1", "q2", "q3")
CODE_CELL = "group_advantages"
MAX_SCORE = 10.0
PASS_SCORE = 8.0


@dataclass(frozen=True)
class Course:
    """One nbgrader course folder (by default `autograder/`) and one of its assignments (a lesson).

    The assignment id is the lesson's id in course.yml (default: the first lesson); its one notebook
    has the same name. All lessons share the folder and its gradebook.
    """

    root: Path
    assignment: str = field(default_factory=lambda: load_course().first.id)

    @classmethod
    def at(cls, root: Path | str = DEFAULT_ROOT, lesson: str | None = None) -> Course:
        """The course folder at `root`, for the lesson with id or slug `lesson` (default: the first) of
        the course file beside the folder (`root/../course.yml`), else of the default course file."""
        root = Path(root).resolve()
        if not (root / CONFIG_FILE).is_file():
            raise CourseError(f"{root / CONFIG_FILE}: no nbgrader config here; pass the course folder "
                              f"(the one holding {CONFIG_FILE}), e.g. --course autograder")
        course = project_course(root)
        return cls(root, (course.lesson(lesson) if lesson else course.first).id)

    @property
    def lesson(self) -> LessonEntry:
        """This assignment's lesson in the project's course file."""
        return project_course(self.root).lesson(self.assignment)

    @property
    def notebook(self) -> str:
        """The assignment's notebook name (without .ipynb)."""
        return self.assignment

    @cached_property
    def config(self) -> Config:
        """nbgrader_config.py as a traitlets Config (root fixed to this folder)."""
        cfg = PyFileConfigLoader(CONFIG_FILE, path=str(self.root)).load_config()
        cfg.CourseDirectory.root = str(self.root)
        return cfg

    def coursedir(self, config: Config | None = None) -> CourseDirectory:
        return CourseDirectory(config=config or self.config)

    @property
    def db_url(self) -> str:
        return self.coursedir().db_url

    @property
    def source_notebook(self) -> Path:
        return self.root / "source" / self.assignment / f"{self.notebook}.ipynb"

    @property
    def release_notebook(self) -> Path:
        return self.root / "release" / self.assignment / f"{self.notebook}.ipynb"

    def submitted_notebook(self, student_id: str) -> Path:
        return self.root / "submitted" / student_id / self.assignment / f"{self.notebook}.ipynb"

    def autograded_notebook(self, student_id: str) -> Path:
        return self.root / "autograded" / student_id / self.assignment / f"{self.notebook}.ipynb"

    def feedback_html(self, student_id: str) -> Path:
        return self.root / "feedback" / student_id / self.assignment / f"{self.notebook}.html"

    @property
    def ingest_dir(self) -> Path:
        """Private state of `coursekit grade`: the manifest and the executed notebooks."""
        return self.root / ".ingest"

    @property
    def manifest(self) -> Path:
        return self.ingest_dir / f"{self.assignment}.json"

    @property
    def report_csv(self) -> Path:
        return self.root / "reports" / f"{self.assignment}.csv"


def run_converter(course: Course, converter: type, student_id: str = "*", config: Config | None = None,
                  **attrs) -> str:
    """Run an nbgrader converter (GenerateAssignment, Autograde, ...) in-process; return its log.

    Raises CourseError carrying the end of nbgrader's log when the converter fails.
    """
    put_venv_on_path()
    cfg = config or course.config
    coursedir = course.coursedir(cfg)
    coursedir.assignment_id = course.assignment
    coursedir.student_id = student_id
    app = converter(coursedir=coursedir, config=cfg)
    app.log.propagate = False  # nbgrader's chatter goes to the captured log, not the terminal
    for name, value in attrs.items():
        setattr(app, name, value)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # nbgrader's SQLAlchemy warnings are about its own sessions
        result = capture_log(app)
    if not result["success"]:
        detail = (result.get("error") or result.get("log") or "").strip().splitlines()[-3:]
        raise CourseError(f"{course.root}: nbgrader {converter.__name__} failed for "
                          f"'{student_id}': " + " | ".join(detail))
    return result.get("log", "")


def project_course(root: Path) -> CourseFile:
    """The course file beside a course folder (`root/../course.yml`), else the default one."""
    beside = Path(root).parent / COURSE_FILE
    return load_course(beside if beside.is_file() else None)


def put_venv_on_path() -> None:
    """nbgrader runs the `alembic` executable (new gradebooks) from PATH; make it this venv's."""
    bin_dir = os.path.dirname(sys.executable)
    if bin_dir not in os.environ.get("PATH", "").split(os.pathsep):
        os.environ["PATH"] = bin_dir + os.pathsep + os.environ.get("PATH", "")
