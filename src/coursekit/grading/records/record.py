"""The trusted recorder: the one writer of the gradebook and of the course's graded folders.

It runs nbgrader's autograde pipeline around the workers' execution, with one gradebook connection
and one instance of every step kept for the whole class (nbgrader's converter builds them again for
every notebook):

  sanitize  (before a worker runs it)  Autograde.sanitize_preprocessors: ClearOutput, DeduplicateIds,
                                       OverwriteKernelspec, OverwriteCells (locked cells and hidden
                                       tests back from the gradebook), CheckCellMetadata
  [worker]                             the steps before SaveAutoGrades (execution and output caps)
  record    (after it ran)             the rest: SaveAutoGrades, AssignLatePenalties, CheckCellMetadata;
                                       then autograded/ notebook, execution and fabricated-output flags
                                       from that one run, feedback HTML, and a journal line

The journal (.ingest/graded.jsonl) says which students are finished and from which files, so an
interrupted `coursekit grade` run picks up where it stopped.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import shutil
import sys
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType

import jsonschema
import nbformat
import sqlalchemy
from nbformat.notebooknode import NotebookNode
from nbgrader.api import (
    Assignment,
    BaseCell,
    Comment,
    Grade,
    Gradebook,
    MissingEntry,
    Notebook,
    Student,
    SubmittedAssignment,
    SubmittedNotebook,
)
from nbgrader.converters import Autograde
from nbgrader.nbgraderformat import MetadataValidator, SchemaTooNewError, SchemaTooOldError
from nbgrader.nbgraderformat.common import BaseMetadataValidator
from nbgrader.preprocessors import CheckCellMetadata
from traitlets.config import Config

from coursekit.grading.boundary import StudentStep
from coursekit.grading.course import CONFIG_FILE, Course, put_venv_on_path, worker_steps
from coursekit.grading.judge import flags as F
from coursekit.grading.judge.verdicts import FINDINGS, error_output
from coursekit.grading.records.feedback import FeedbackWriter


class Recorder:
    """Sanitises submissions for the workers and records what they ran; one per `coursekit grade` run."""

    def __init__(self, course: Course, config: Config):
        put_venv_on_path()
        warnings.filterwarnings("ignore", module="nbgrader")  # its SQLAlchemy warnings are about its sessions
        self.course = course
        self.config = config
        converter = Autograde(coursedir=course.coursedir(config), config=config)
        self.sanitize_steps = [kept_warm(step)(config=config) for step in converter.sanitize_preprocessors]
        self.record_steps = [kept_warm(step)(config=config)
                             for step in worker_steps(converter.autograde_preprocessors)[1]]
        self.permissions = int(str(converter.permissions), 8)
        self.gb = Gradebook(course.db_url, course.coursedir(config).course_id)
        self.feedback = FeedbackWriter(course)
        self.opening_gradebooks = modules_opening_gradebooks(
            [type(step) for step in self.sanitize_steps + self.record_steps] + self.feedback.steps)
        self.journal = Journal(course.ingest_dir / "graded.jsonl")
        self.release = ReleaseCells()  # the release's cells, looked up once for the class (sanitize)
        self.defer_feedback = False  # True: record() leaves the feedback page to write_feedback
        self.feedback_due: list[str] = []  # students recorded with their page still to write
        self.fingerprint = hashlib.sha256(course.release_notebook.read_bytes()
                                          + (course.root / CONFIG_FILE).read_bytes()
                                          + repr(sorted(config.SandboxExecute.items())).encode()).hexdigest()

    def close(self) -> None:
        self.gb.close()
        self.journal.close()

    def worker_config(self) -> Config:
        """The config sections the worker steps read, and nothing else (no gradebook URL, no paths)."""
        steps, _ = worker_steps(self.config.Autograde.autograde_preprocessors)
        config = Config()
        config.Autograde.autograde_preprocessors = steps
        for step in steps:
            for base in step.mro():
                if base.__name__ in self.config:
                    config[base.__name__] = copy.deepcopy(self.config[base.__name__])
        # The kernel OverwriteKernelspec puts in every notebook, so that kernels can start before it comes.
        kernelspec = self.gb.find_notebook(self.course.notebook, self.course.assignment).kernelspec
        config.SandboxExecute.kernel_name = json.loads(kernelspec)["name"] if kernelspec else "python3"
        return config

    def _resources(self, student_id: str) -> dict:
        return {"unique_key": self.course.notebook, "output_files_dir": f"{self.course.notebook}_files",
                "nbgrader": {"student": student_id, "assignment": self.course.assignment,
                             "notebook": self.course.notebook,
                             "db_url": self.course.db_url}}

    def key(self, student_id: str) -> str:
        """What a finished grade depends on: the prepared submission, the release, the grading config."""
        data = self.course.submitted_notebook(student_id).read_bytes()
        return hashlib.sha256(data + self.fingerprint.encode()).hexdigest()

    def finished(self, student_id: str, key: str, since: int = 0) -> list[str] | None:
        """The execution flags of a student already graded from the same files (at journal line `since`
        or later: in this --regrade pass), else None."""
        flags = self.journal.flags(student_id, key, since)
        if flags is None or not self.course.autograded_notebook(student_id).is_file():
            return None
        try:
            self.gb.find_submission_notebook(self.course.notebook, self.course.assignment, student_id)
        except MissingEntry:
            return None
        if not self.course.feedback_html(student_id).is_file():  # recorded, its page not written yet
            with lent_to_nbgrader_steps(self.gb, self.course.db_url, self.opening_gradebooks):
                self.feedback.write(student_id)
        return flags

    def sanitize(self, student_id: str) -> NotebookNode:
        """The submitted notebook as nbgrader's autograde would run it (test cells from the gradebook)."""
        nb = nbformat.read(self.course.submitted_notebook(student_id), as_version=4)
        resources = self._resources(student_id)
        with lent_to_nbgrader_steps(self.gb, self.course.db_url, self.opening_gradebooks, self.release):
            for step in self.sanitize_steps:
                nb, resources = step(nb, resources)
        return nb

    def record(self, student_id: str, key: str, executed: str | None, failure: str | None) -> list[str]:
        """Save the grades and files of one executed submission; return its execution flags."""
        with lent_to_nbgrader_steps(self.gb, self.course.db_url, self.opening_gradebooks), \
                one_commit(self.gb.db) as commit:
            return self._record(student_id, key, executed, failure, commit)

    def _record(self, student_id: str, key: str, executed: str | None, failure: str | None,
                commit: Callable[[], None]) -> list[str]:
        flags = [] if self.config.SandboxExecute.get("sandbox", True) else [F.UNSANDBOXED]
        if executed is None:  # the worker could not run it: no cell counts as run
            if failure and failure.startswith(F.OVER_BUDGET + ": "):  # the pool's watchdog
                flags.append(F.flag(F.OVER_BUDGET, failure[len(F.OVER_BUDGET) + 2:]))
            else:
                flags.append(F.flag(F.ERROR, f"grader could not run the notebook: {failure}"))
            ran = self.sanitize(student_id)
            for cell in ran.cells:
                if cell.cell_type == "code":
                    cell.outputs = [error_output("GraderError", "not run: the grading worker failed")]
            ran.metadata.pop(FINDINGS, None)  # the student's, if any: only SandboxExecute writes it
            findings = {}
        else:
            ran = nbformat.reads(executed, as_version=4)
            findings = ran.metadata.pop(FINDINGS, {})  # written by the worker's SandboxExecute
        self.gb.update_or_create_student(student_id)
        self.gb.update_or_create_submission(self.course.assignment, student_id)
        resources = self._resources(student_id)
        for step in self.record_steps:
            ran, resources = step(ran, resources)
        self._write_autograded(student_id, ran)
        memory = self.config.SandboxExecute.get("memory_limit", 2 << 30)
        flags.extend(F.execution_flags(ran, f"memory capped at {memory / (1 << 30):g} GiB",
                                       findings.get("kernel_errors")))
        submitted = nbformat.read(self.course.submitted_notebook(student_id), as_version=4)
        flags.extend(F.fabricated_outputs(submitted, ran, self.config.CapOutput.get("max_chars", 20000)))
        F.add_findings(flags, findings)
        if self.defer_feedback:  # written from the autograded notebook after the class (write_feedback)
            self.feedback_due.append(student_id)
        else:
            self.feedback.write(student_id, ran)  # changes ran (hidden tests out), so last
        commit()  # the student's grades, all at once, before the journal says the student is done
        self.journal.add(student_id, key, flags)
        return flags

    def _write_autograded(self, student_id: str, nb: NotebookNode) -> None:
        path = self.course.autograded_notebook(student_id)
        if path.parent.exists():
            shutil.rmtree(path.parent)
        path.parent.mkdir(parents=True)
        nbformat.write(nb, path)
        os.chmod(path, self.permissions)


def write_feedback(course: Course, pages: list[tuple[str, tuple[str, ...], float]],
                   writer: FeedbackWriter | None = None, processes: int = 2,
                   meanwhile: Callable[[], None] | None = None) -> list[str]:
    """Write the feedback pages (student id, veto reasons, cap: see FeedbackWriter.write) from the
    autograded notebooks, off the grading loop: shared out among `processes` forked processes, each
    with its copy of `writer` (made here when None; best warmed: FeedbackWriter.warm) and one open
    gradebook lent to nbgrader's steps, while this process runs `meanwhile` (its exception is raised
    once they are done). Returns the students whose page could not be written (the next `coursekit
    grade` writes it: Recorder.finished)."""
    if not pages:
        if meanwhile is not None:
            meanwhile()
        return []
    processes = max(1, min(processes, len(pages)))
    writer = writer or FeedbackWriter(course)

    def share(part: list[tuple[str, tuple[str, ...], float]]) -> list[str]:
        failed = []
        with Gradebook(course.db_url) as gb, \
                lent_to_nbgrader_steps(gb, course.db_url, modules_opening_gradebooks(writer.steps)):
            for student_id, vetoes, cap in part:
                with StudentStep([], "feedback") as step:  # named below; the other pages are still written
                    writer.write(student_id, vetoes=vetoes, cap=cap)
                if step.failed:
                    failed.append(student_id)
        return failed

    if processes == 1:
        failed = share(pages)
        if meanwhile is not None:
            meanwhile()
    else:
        children, failed = [], []
        for k in range(processes):
            read, write = os.pipe()
            pid = os.fork()
            if pid == 0:
                os.close(read)
                code = 1
                try:
                    os.write(write, json.dumps(share(pages[k::processes])).encode())
                    code = 0
                finally:
                    os._exit(code)
            os.close(write)
            children.append((pid, read, [p[0] for p in pages[k::processes]]))
        error: BaseException | None = None
        if meanwhile is not None:
            try:
                meanwhile()
            except BaseException as exc:  # noqa: BLE001 - raised below, once the children are reaped
                error = exc
        for pid, read, students in children:
            with os.fdopen(read, "rb") as answer:
                text = answer.read()
            _, status = os.waitpid(pid, 0)
            failed += json.loads(text) if status == 0 and text else students
        if error is not None:
            raise error
    return sorted(failed)


MAX_VALID_KEPT = 10_000  # distinct valid cell metadata remembered (_SchemaBuiltOnce)


class _SchemaBuiltOnce(BaseMetadataValidator):
    """nbgrader's per-cell check with the schema's validator built once: jsonschema.validate, which
    nbgrader calls for every cell, first validates the schema itself and builds a new validator; and
    each distinct cell metadata validated once (the submissions repeat the release's)."""

    _validators: dict[int, jsonschema.protocols.Validator] = {}
    _valid: set[str] = set()  # nbgrader metadata (with its schema version, as JSON text) found valid

    def validate_cell(self, cell: NotebookNode) -> None:
        if "nbgrader" not in cell.metadata:
            return
        version = cell.metadata["nbgrader"].get("schema_version", 0)
        if version < self.schema_version:
            raise SchemaTooOldError(f"Outdated schema version: {version} (expected {self.schema_version})",
                                    version, self.schema_version)
        if version > self.schema_version:
            raise SchemaTooNewError(f"Schema version is too new: {version} (expected {self.schema_version})",
                                    version, self.schema_version)
        try:  # the same metadata as a cell validated before (every submission's cells repeat the release's)
            text = json.dumps([self.schema_version, cell.metadata["nbgrader"]], sort_keys=True)
        except (TypeError, ValueError):
            text = None
        if text is not None and text in self._valid:
            return
        validator = self._validators.get(self.schema_version)
        if validator is None:
            validator = jsonschema.validators.validator_for(self.schema)(self.schema)
            self._validators[self.schema_version] = validator
        validator.validate(cell.metadata["nbgrader"])
        if text is not None and len(self._valid) < MAX_VALID_KEPT:
            self._valid.add(text)


class _MetadataValidator(MetadataValidator, _SchemaBuiltOnce):
    """nbgrader's MetadataValidator (its checks of grade ids and cell types) over _SchemaBuiltOnce."""


class WarmCheckCellMetadata(CheckCellMetadata):
    """CheckCellMetadata (same checks, same error) with one validator kept for the class."""

    def preprocess(self, nb: NotebookNode, resources: dict) -> tuple[NotebookNode, dict]:
        validator = self.__dict__.setdefault("_validator", _MetadataValidator())
        try:
            validator.validate_nb(nb)
        except jsonschema.ValidationError:
            self.log.error("Notebook failed to validate; the nbgrader metadata may be corrupted.")
            raise jsonschema.ValidationError("Notebook failed to validate; the nbgrader metadata may be "
                                             "corrupted.") from None
        return nb, resources


class ReleaseCells:
    """The release's source and graded cells as nbgrader's sanitize steps look them up (OverwriteCells:
    about 30 lookups per notebook, each a query of three joined tables), read from the gradebook once
    per grading run and kept as read-only copies of their columns. The release does not change while
    a class is graded (it is released before the recorder opens the gradebook); a name the gradebook
    does not have raises MissingEntry, as nbgrader's lookup does, every time."""

    def __init__(self) -> None:
        self._found: dict[tuple[str, str, str, str], ReleaseRow | str] = {}

    def find(self, kind: str, lookup: Callable, name: str, notebook: str, assignment: str) -> ReleaseRow:
        key = (kind, name, notebook, assignment)
        if key not in self._found:
            try:
                self._found[key] = ReleaseRow(lookup(name, notebook, assignment))
            except MissingEntry as missing:
                self._found[key] = str(missing)
        found = self._found[key]
        if isinstance(found, str):
            raise MissingEntry(found)
        return found


class ReleaseRow:
    """A read-only copy of the columns of one gradebook row (its relationships are not copied)."""

    def __init__(self, row: object) -> None:
        columns = {column.key: getattr(row, column.key) for column in sqlalchemy.inspect(row).mapper.column_attrs}
        object.__setattr__(self, "_columns", columns)

    def __getattr__(self, name: str):
        try:
            return self._columns[name]
        except KeyError:
            raise AttributeError(f"{name!r}: not a column of the release row") from None

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("a release row is read-only")


# The cells a student's grades and comments can belong to, in the order nbgrader's find_grade and
# find_comment look for them by name: a grade cell first, else a task cell (comments: solution, task).
_GRADE_CELLS, _COMMENT_CELLS = ("GradeCell", "TaskCell"), ("SolutionCell", "TaskCell")


def _submission_rows(db, model: type, notebook: str, assignment: str, student: str) -> dict[tuple[str, str], list]:
    """Every `model` row (Grade or Comment) of one student's submitted notebook in one query, by (cell
    name, cell type): what nbgrader's find_grade / find_comment query once per cell."""
    rows = db.query(model, BaseCell.name, BaseCell.type)\
        .join(BaseCell, BaseCell.id == model.cell_id)\
        .join(SubmittedNotebook, SubmittedNotebook.id == model.notebook_id)\
        .join(Notebook, Notebook.id == SubmittedNotebook.notebook_id)\
        .join(SubmittedAssignment, SubmittedAssignment.id == SubmittedNotebook.assignment_id)\
        .join(Assignment, Assignment.id == SubmittedAssignment.assignment_id)\
        .join(Student, Student.id == SubmittedAssignment.student_id)\
        .filter(Notebook.name == notebook, Assignment.name == assignment, Student.id == student)
    found: dict[tuple[str, str], list] = {}
    for row, name, kind in rows:
        found.setdefault((name, kind), []).append(row)
    return found


class _LentGradebook:
    """The recorder's open gradebook where an nbgrader step opens its own: the step's `with` block
    leaves it open, and a step that fails leaves its transaction rolled back, as closing would.

    Its lookups of one student's grades and comments (SaveAutoGrades, GetGrades: one query per cell)
    are answered from one query of all of them (the rows themselves, which the step may change), and,
    given `release`, the release's cells from that run-long copy. A name found there other than once
    goes to nbgrader's own lookup, which then raises what it raises."""

    def __init__(self, gradebook: Gradebook, release: ReleaseCells | None = None):
        self._gradebook = gradebook
        self._release = release
        self._submitted: dict[tuple, dict[tuple[str, str], list]] = {}

    def __getattr__(self, name: str):
        return getattr(self._gradebook, name)

    def __enter__(self) -> _LentGradebook:
        return self

    def __exit__(self, exc_type, exc, traceback) -> None:
        if exc_type is not None:
            self._gradebook.db.rollback()

    def find_source_cell(self, name: str, notebook: str, assignment: str):
        if self._release is None:
            return self._gradebook.find_source_cell(name, notebook, assignment)
        return self._release.find("source", self._gradebook.find_source_cell, name, notebook, assignment)

    def find_graded_cell(self, name: str, notebook: str, assignment: str):
        if self._release is None:
            return self._gradebook.find_graded_cell(name, notebook, assignment)
        return self._release.find("graded", self._gradebook.find_graded_cell, name, notebook, assignment)

    def find_grade(self, grade_cell: str, notebook: str, assignment: str, student: str) -> Grade:
        return self._of_submission(Grade, _GRADE_CELLS, self._gradebook.find_grade, grade_cell, notebook,
                                   assignment, student)

    def find_comment(self, solution_cell: str, notebook: str, assignment: str, student: str) -> Comment:
        return self._of_submission(Comment, _COMMENT_CELLS, self._gradebook.find_comment, solution_cell, notebook,
                                   assignment, student)

    def _of_submission(self, model: type, kinds: tuple[str, str], lookup: Callable, name: str, notebook: str,
                       assignment: str, student: str):
        key = (model, notebook, assignment, student)
        if key not in self._submitted:
            self._submitted[key] = _submission_rows(self._gradebook.db, model, notebook, assignment, student)
        for kind in kinds:
            found = self._submitted[key].get((name, kind), [])
            if len(found) == 1:
                return found[0]
            if found:
                break
        return lookup(name, notebook, assignment, student)


def modules_opening_gradebooks(steps: list[type]) -> list[ModuleType]:
    """The modules of the steps (and their bases) that may open `Gradebook(db_url)` themselves; not
    this one, whose Gradebook is the real one that lends."""
    found: dict[str, ModuleType] = {}
    for step in steps:
        for cls in step.__mro__:
            module = sys.modules.get(cls.__module__)
            if module is not None and module.__name__ != __name__ and getattr(module, "Gradebook", None) is Gradebook:
                found[module.__name__] = module
    return list(found.values())


@contextmanager
def lent_to_nbgrader_steps(gradebook: Gradebook, url: str, modules: list[ModuleType],
                           release: ReleaseCells | None = None) -> Iterator[None]:
    """While the block runs, the nbgrader steps of `modules` that open `Gradebook(db_url)` per notebook
    (OverwriteCells, OverwriteKernelspec, SaveAutoGrades, LateSubmissionPenalty, GetGrades) get this
    open one instead of a new engine, a schema check and a cold statement cache each: about 0.1
    CPU-s per notebook. Only for `url`, the one the gradebook was opened with; no other thread runs
    nbgrader's steps, so none sees the swap. With `release`, the release's cells come from it
    (ReleaseCells)."""

    def opened(db_url: str, *args, **kwargs):
        return _LentGradebook(gradebook, release) if db_url == url else Gradebook(db_url, *args, **kwargs)

    before = [module.Gradebook for module in modules]  # the lender's, when nested
    for module in modules:
        module.Gradebook = opened
    try:
        yield
    finally:
        for module, previous in zip(modules, before, strict=True):
            module.Gradebook = previous


@contextmanager
def one_commit(session) -> Iterator[Callable[[], None]]:
    """One commit per notebook: nbgrader's steps commit after every grade and comment (SaveAutoGrades
    a dozen times a notebook, each a write of the sqlite file); while the block runs their commits
    only flush (the SQL is sent, its errors raised where they were), and the block commits once with
    the function it gets. If the block fails, or ends without committing, everything is rolled back."""
    real = session.commit
    session.commit = session.flush
    try:
        yield real
    finally:
        del session.commit
        session.rollback()  # nothing once committed; else the notebook's unfinished writes


def kept_warm(step: type) -> type:
    """The class the recorder instantiates for a configured step: CheckCellMetadata's warm twin."""
    return WarmCheckCellMetadata if step is CheckCellMetadata else step


class Journal:
    """Append-only lines {student_id, key, flags}: the students whose grading finished, and from what.
    `lines` counts the lines so far; a student's latest line number says whether it was written after
    a given line (the start of a --regrade pass)."""

    def __init__(self, path: Path):
        self.path = path
        self.done: dict[str, tuple[str, list[str], int]] = {}  # student -> key, flags, line number
        text = path.read_text(encoding="utf-8") if path.is_file() else ""
        lines = text.splitlines()
        for number, line in enumerate(lines):
            try:
                item = json.loads(line)
                self.done[item["student_id"]] = (item["key"], item["flags"], number)
            except (ValueError, KeyError, TypeError):
                continue  # a line cut short by an interruption: that student is graded again
        self.lines = len(lines)
        path.parent.mkdir(parents=True, exist_ok=True)
        self.out = open(path, "a", encoding="utf-8")  # noqa: SIM115 (kept open for the whole run)
        if text and not text.endswith("\n"):
            self.out.write("\n")  # end the cut line, so the next one starts on a line of its own

    def flags(self, student_id: str, key: str, since: int = 0) -> list[str] | None:
        """The flags of the student's grade from `key`, if it was written at line `since` or later."""
        found = self.done.get(student_id)
        return list(found[1]) if found and found[0] == key and found[2] >= since else None

    def add(self, student_id: str, key: str, flags: list[str]) -> None:
        self.out.write(json.dumps({"student_id": student_id, "key": key, "flags": flags}, ensure_ascii=False) + "\n")
        self.out.flush()
        self.done[student_id] = (key, flags, self.lines)
        self.lines += 1

    def close(self) -> None:
        self.out.close()
