"""The nbgrader course on disk: where its folders are, how its config is read, and each lesson's rubric."""

from __future__ import annotations

import json
import os
import sys
import warnings
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from nbgrader.coursedir import CourseDirectory
from nbgrader.utils import capture_log
from traitlets.config import Config, PyFileConfigLoader

from coursekit.course_file import COURSE_FILE, CourseFile, LessonEntry, load_course
from coursekit.errors import CourseError
from coursekit.lesson import TEST_PREFIX

CONFIG_FILE = "nbgrader_config.py"
DEFAULT_ROOT = Path("autograder")


@dataclass(frozen=True)
class Rubric:
    """What one lesson's notebook grades, read from its nbgrader source notebook (`coursekit branches`
    writes it from the lesson: the exercise cell's grade_id, each test cell's test_id and points, each
    answer area's id and points) and the pass mark of course.yml."""

    code_cell: str  # the fill-in's grade id, e.g. group_advantages
    checks: dict[str, str]  # test cell grade id -> report column (its test_id), in notebook order
    answers: tuple[str, ...]  # written answers' grade ids, in notebook order
    max_score: float  # every graded cell's points
    pass_score: float

    @classmethod
    def of_notebook(cls, path: Path, pass_score: float) -> Rubric:
        """The rubric of a source (or release) notebook; CourseError naming the file when it has none."""
        try:
            cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise CourseError(f"{path}: cannot read the assignment's source notebook ({exc}); "
                              "run `make branches`") from None
        code, checks, answers, points = [], {}, [], 0.0
        for cell in cells:
            info = cell.get("metadata", {}).get("nbgrader", {})
            gid = info.get("grade_id")
            if info.get("grade"):
                points += float(info.get("points", 0))
            if cell.get("cell_type") == "code" and info.get("grade") and info.get("locked"):
                checks[gid] = gid[len(TEST_PREFIX):] if gid.startswith(TEST_PREFIX) else gid
            elif cell.get("cell_type") == "code" and info.get("solution"):
                code.append(gid)
            elif cell.get("cell_type") == "markdown" and info.get("solution") and info.get("grade"):
                answers.append(gid)
        if len(code) != 1 or not checks:
            raise CourseError(f"{path}: expected one exercise cell and at least one test cell with nbgrader "
                              f"metadata, found {len(code)} and {len(checks)}; run `make branches`")
        if pass_score > points:
            raise CourseError(f"{path}: the pass score {pass_score:g} (course.yml) is above the lesson's "
                              f"{points:g} points")
        return cls(code[0], checks, tuple(answers), points, pass_score)

    @property
    def columns(self) -> tuple[str, ...]:
        """The report CSV's per-check columns."""
        return tuple(self.checks.values())


@dataclass(frozen=True)
class Course:
    """One nbgrader course folder (by default `autograder/`) and one of its assignments (a lesson).

    The assignment id is the lesson's id in course.yml; its one notebook has the same name. All lessons
    share the folder and its gradebook.
    """

    root: Path
    assignment: str

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

    @cached_property
    def rubric(self) -> Rubric:
        """This lesson's rubric: from its source notebook, with the pass mark of course.yml."""
        return Rubric.of_notebook(self.source_notebook, self.lesson.pass_score)

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


# The steps of nbgrader's autograde pipeline that a worker runs: everything before SaveAutoGrades
# (execution, output clean-up and caps), so that only small notebooks travel back to the recorder.
RECORDER_STEPS_FROM = "SaveAutoGrades"


def worker_steps(autograde_preprocessors: list) -> tuple[list, list]:
    """Split the configured autograde pipeline into (worker steps, recorder steps)."""
    names = [step.__name__ for step in autograde_preprocessors]
    cut = names.index(RECORDER_STEPS_FROM) if RECORDER_STEPS_FROM in names else len(names)
    return list(autograde_preprocessors[:cut]), list(autograde_preprocessors[cut:])
