"""`coursekit grade SUBMISSIONS`: autograde a class from an LMS download and write the report.

Steps, in order (each a function or class named below), streamed one student at a time:
  check_sandbox    -> the OS sandbox can start here (else stop before grading anyone), or --no-sandbox
  ensure_released  -> gradebook and release notebook exist and are current
  ingest           -> one Entry per student; gradable copies in submitted/ (originals only read)
  skip             -> students the journal says are graded from the same files (an interrupted run)
  Recorder.sanitize-> nbgrader's sanitising steps, in this process (test cells from the gradebook)
  pool             -> workers run each notebook in a fresh sandboxed kernel and judge its test cells
                      outside it (SandboxExecute; LocalWorkers, or DaskWorkers with --scheduler);
                      they never see the gradebook or the course folder
  Recorder.record  -> as each notebook comes back: grades into the gradebook (this process is the only
                      writer, one commit per notebook), autograded/ notebook, flags, journal line
  report           -> .ingest/lesson11.json (rows and flags, merged with earlier runs': grading a folder
                      of late submissions adds to the class) and reports/lesson11.csv
  write_feedback   -> the feedback HTML of the students graded now, from their autograded notebooks, by
                      two forked processes after the class (a page an interrupted run did not write is
                      written by the next run, which finds that student recorded), while this process
                      draws the class report
--dry-run grades into a scratch copy of the course (scratch_course) instead.

Ctrl-C stops the workers and leaves every student either recorded completely (but for the feedback
page) or not at all; the same command then grades the rest and writes the missing pages. A --regrade
pass is remembered until it completes (.ingest/regrade-<lesson>.json: the journal line it started at), so
a rerun after Ctrl-C, with or without --regrade, regrades only the students that pass has not regraded yet.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from importlib import import_module
from pathlib import Path

from tqdm import tqdm
from traitlets.config import Config

from coursekit.errors import CourseError
from coursekit.grading.boundary import StudentStep
from coursekit.grading.course import CONFIG_FILE, DEFAULT_ROOT, Course
from coursekit.grading.intake.ingest import Entry, Ingest
from coursekit.grading.intake.release import ensure_released
from coursekit.grading.judge import flags as F
from coursekit.grading.records.feedback import FeedbackWriter
from coursekit.grading.records.record import Recorder, write_feedback
from coursekit.grading.records.report import WRITER_MODULES, summary_line, write_rows
from coursekit.grading.sandbox.bubblewrap import KernelZygote, unavailable_reason
from coursekit.grading.sandbox.execute import task_json
from coursekit.grading.sandbox.pool import DaskWorkers, LocalWorkers

INTERRUPTED = 130  # exit status after Ctrl-C, as a shell reports it


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("submissions", type=Path, nargs="?",
                        help="folder of <student_id>.ipynb or <student_id>/<any>.ipynb, or a .zip of either")
    parser.add_argument("--course", type=Path, default=DEFAULT_ROOT, help="nbgrader course folder")
    parser.add_argument("--lesson", default=None,
                        help="lesson id of course.yml the submissions are for (default: the first lesson)")
    parser.add_argument("--jobs", type=int, default=default_jobs(),
                        help="notebooks executed in parallel (default: one more than the cores, at most 9)")
    parser.add_argument("--timeout", type=int, default=None,
                        help="seconds per cell (default: SandboxExecute.timeout in nbgrader_config.py)")
    parser.add_argument("--scheduler", metavar="ADDRESS", default=None,
                        help="run the notebooks on a Dask cluster (e.g. tcp://10.0.0.5:8786) instead of "
                        "local processes; needs the 'distributed' package")
    parser.add_argument("--no-sandbox", action="store_true",
                        help="grade without the OS sandbox (student code can then reach this machine); "
                        "every row is flagged unsandboxed")
    parser.add_argument("--regrade", action="store_true",
                        help="grade every student again, also those already graded from the same files")
    parser.add_argument("--dry-run", action="store_true",
                        help="a trial run: grade into a scratch copy of the course (.<course folder>-dry-run/ "
                        "beside it, with its own sqlite gradebook); the term's gradebook, reports and "
                        "feedback are not touched")


def run(args: argparse.Namespace) -> int:
    if args.submissions is None:
        raise CourseError("no submissions given; run 'make grade SUBMISSIONS=<folder or .zip>'")
    if args.jobs < 1:
        raise CourseError(f"--jobs {args.jobs}: give at least 1")
    course = Course.at(args.course, args.lesson)
    if args.dry_run:
        course = scratch_course(course)
        print(f"dry run: grading into {course.root}; the course's gradebook, reports and feedback are "
              "not touched", file=sys.stderr)
    try:
        rows = grade(course, args.submissions, jobs=args.jobs, timeout=args.timeout,
                     scheduler=args.scheduler, regrade=args.regrade, sandbox=not args.no_sandbox)
    except Interrupted as stop:
        print(f"interrupted: {stop}; run the same command again to grade the rest", file=sys.stderr)
        return INTERRUPTED
    print(summary_line(rows, course.report_csv))
    return 0


class Interrupted(Exception):
    """Ctrl-C during grading, after the workers were stopped and the recorded students kept."""


def grade(course: Course, submissions: Path, jobs: int = 2, timeout: int | None = None,
          scheduler: str | None = None, regrade: bool = False, sandbox: bool = True) -> list:
    """Run every step; return the report rows."""
    # one kernel zygote for the run: the sandbox's probe starts it, the local workers borrow it
    zygote = KernelZygote(shared=True) if sandbox and scheduler is None else None
    try:
        return _grade(course, submissions, jobs, timeout, scheduler, regrade, sandbox, zygote)
    finally:
        if zygote is not None:
            zygote.close()  # closed already unless grading stopped before the workers had ended


def _grade(course: Course, submissions: Path, jobs: int, timeout: int | None, scheduler: str | None,
           regrade: bool, sandbox: bool, zygote: KernelZygote | None) -> list:
    if sandbox:
        check_sandbox(course, zygote)
    try:
        ensure_released(course)
    except KeyboardInterrupt:
        course.release_notebook.unlink(missing_ok=True)  # half a release: the rerun releases again
        raise Interrupted("during the automatic release, before any student was graded") from None
    config = Config(course.config)
    config.SandboxExecute.sandbox = sandbox
    if timeout is not None:
        config.SandboxExecute.timeout = timeout
    students = Ingest(course, submissions.resolve())
    entries: list[Entry] = []  # flags only: the notebooks are on disk, one at a time in memory
    running: dict[str, tuple[Entry, str]] = {}  # sent to a worker, not recorded yet: entry, journal key
    recorder = Recorder(course, config)
    recorder.defer_feedback = True
    since = regrade_pass(course, recorder.journal.lines, regrade)
    pool = bar = None
    try:
        pool = make_pool(scheduler, jobs, recorder.worker_config(), zygote)
        preparing = prepare_while_grading(WRITER_MODULES, recorder.feedback)
        bar = tqdm(total=len(students), desc="grade", unit="nb", file=sys.stderr)
        for student_id, executed, failure in pool.map(tasks(recorder, students, entries, running, since, bar)):
            with deferred_interrupt():  # a student is recorded completely or not at all
                entry, key = running.pop(student_id)
                record_student(recorder, entry, key, executed, failure)
            bar.update()
        regrade_marker(course).unlink(missing_ok=True)  # every student of this pass is graded
    except KeyboardInterrupt:
        pool.close()  # stops the workers at once; their kernels are killed
        finished = len(entries) - len(running)
        raise Interrupted(f"{finished} of {len(students)} students finished") from None
    finally:
        if bar is not None:
            bar.close()
        if pool is not None:
            pool.close()
        if zygote is not None:
            zygote.close()  # the workers have ended; the feedback processes forked below do not hold it
        recorder.close()
    # the report imports what the thread may be importing (a module it half imported, seen in sys.modules,
    # breaks matplotlib), and the feedback processes are forked: no thread of ours is left running
    preparing.join()
    write_manifest(course, submissions, entries)
    rows, class_report = write_rows(course)
    # the pages of the students graded now, and every page with an automatic veto (deleted_asserts: the
    # page shows the capped score), written off the grading loop by two processes while this one draws
    # the class report
    due = set(recorder.feedback_due)
    pages = [(row.student_id, row.veto_reasons, row.veto_cap) if row.vetoed else (row.student_id, (), 0.0)
             for row in rows if row.graded and (row.student_id in due or row.vetoed)]
    unwritten = write_feedback(course, pages, recorder.feedback, meanwhile=class_report)
    if unwritten:
        print(f"feedback pages not written (the next run writes them): {', '.join(unwritten[:10])}", file=sys.stderr)
    return rows


def default_jobs() -> int:
    """One worker more than the cores (at most 8 of them): a worker spends part of each notebook waiting
    (for its kernel's replies, for the recorder), and the extra one uses that time. Measured on a quiet
    2-core machine, 60 mixed notebooks: 3 workers 31.3-31.4 s, 2 workers 35.1-35.3 s (two runs each)."""
    return min(8, os.cpu_count() or 1) + 1


def prepare_while_grading(modules: tuple[str, ...], feedback: FeedbackWriter) -> threading.Thread:
    """Import what only the report needs (about 1 s) and warm the feedback writer (its template,
    MathJax head and the release's highlighted code, which the processes writing the pages then
    share) in a thread while the workers run, instead of serially before the first notebook or after
    the last. Called once the workers are forked; joined before the feedback processes are forked, so
    the thread never meets a fork. A failure is left for the report or the feedback pages to raise."""
    def prepare() -> None:
        for name in modules:
            with suppress(Exception):
                import_module(name)
        with suppress(Exception):
            feedback.warm()

    thread = threading.Thread(target=prepare, name="prepare-report-and-feedback", daemon=True)
    thread.start()
    return thread


def check_sandbox(course: Course, zygote: KernelZygote | None = None) -> None:
    """Stop before grading anyone when no sandbox can start here, with the reason and the fix; the
    probe's kernel comes from `zygote` when given (which that starts, for the workers)."""
    reason = unavailable_reason(course.root, zygote=zygote)
    if reason:
        raise CourseError(f"cannot grade safely: {reason}")


def make_pool(scheduler: str | None, jobs: int, config: Config, zygote: KernelZygote | None = None):
    """Local worker processes (forking their kernels with `zygote` when given), or the Dask cluster at
    `scheduler` (Dask is imported only then)."""
    if scheduler is None:
        return LocalWorkers(jobs, config, zygote)
    return DaskWorkers(scheduler, config)


def regrade_marker(course: Course) -> Path:
    return course.ingest_dir / f"regrade-{course.assignment}.json"


def regrade_pass(course: Course, journal_lines: int, regrade: bool) -> int:
    """The journal line from which a grade counts as done in this run: 0 (any grade from the same files),
    the start of an unfinished --regrade pass (resumed, whatever the arguments), or now (a new pass)."""
    marker = regrade_marker(course)
    with suppress(OSError, ValueError, KeyError, TypeError):
        since = int(json.loads(marker.read_text(encoding="utf-8"))["from_line"])
        print("resuming the --regrade that was interrupted: the students it regraded are kept, the rest are "
              "regraded", file=sys.stderr)
        return since
    if not regrade:
        return 0
    course.ingest_dir.mkdir(parents=True, exist_ok=True)
    marker.write_text(json.dumps({"from_line": journal_lines}) + "\n", encoding="utf-8")
    return journal_lines


def tasks(recorder: Recorder, students: Ingest, entries: list[Entry], running: dict[str, tuple[Entry, str]],
          since: int, bar: tqdm) -> Iterator[tuple[str, str]]:
    """(student_id, sanitised notebook JSON) for each gradable student not graded from these files yet
    (at journal line `since` or later: see regrade_pass)."""
    for entry in students:  # Ingest reads and prepares each notebook inside its own StudentStep
        entries.append(entry)
        if entry.gradable:
            done = task = None
            with StudentStep(entry.flags, "nbgrader could not prepare the notebook for grading") as step:
                key = recorder.key(entry.student_id)
                done = recorder.finished(entry.student_id, key, since)
                if done is None:
                    task = entry.student_id, task_json(recorder.sanitize(entry.student_id))
            if step.failed:
                entry.gradable = False  # its row: the error flag, no points
            elif task is not None:
                running[entry.student_id] = (entry, key)
                yield task
                continue
            else:
                entry.flags.extend(done)
        bar.update()


def record_student(recorder: Recorder, entry: Entry, key: str, executed: str | None, failure: str | None) -> None:
    """Record one student's run inside the boundary. When recording what the worker ran fails, the
    student is recorded as not run (a clean row of 0 automatic points, open to manual grading); when
    that fails too, the row is the error flag alone."""
    with StudentStep(entry.flags, "could not record the grades") as recording:
        entry.flags.extend(recorder.record(entry.student_id, key, executed, failure))
    if recording.failed:
        with StudentStep([], "recording as not run") as fallback:
            recorder.record(entry.student_id, key, None, "its run could not be recorded")
        entry.gradable = not fallback.failed


@contextmanager
def deferred_interrupt():
    """Hold a Ctrl-C that arrives inside the block until the block is done, then raise it."""
    caught = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: caught.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if caught:
        raise KeyboardInterrupt


def write_manifest(course: Course, submissions: Path, entries: list[Entry]) -> None:
    """The class after this run: this run's students merged into the earlier runs' (a folder of late
    submissions adds to the class, it does not replace it). A student whose earlier notebook was graded
    keeps it when this run's upload cannot be read, with a note naming the upload."""
    students = {}
    if course.manifest.is_file():
        students = {s["student_id"]: s for s in json.loads(course.manifest.read_text(encoding="utf-8"))["students"]}
    for e in entries:
        earlier = students.get(e.student_id)
        if earlier and earlier["graded"] and not e.gradable:
            why = ", ".join(e.flags)[:300]
            earlier["flags"] = [*earlier["flags"], F.flag(F.REJECTED_FILE, f"later upload {e.source} not graded "
                                                          f"({why}), kept {earlier['source']}")]
            continue
        students[e.student_id] = {"student_id": e.student_id, "source": e.source, "graded": e.gradable,
                                  "flags": e.flags}
    course.ingest_dir.mkdir(parents=True, exist_ok=True)
    data = {"assignment": course.assignment, "submissions": str(submissions),
            "students": [students[sid] for sid in sorted(students)]}
    course.manifest.write_text(json.dumps(data, ensure_ascii=False, indent=1), encoding="utf-8")


SCRATCH_DB = """
# coursekit grade --dry-run: this copy's own gradebook, whatever db_url the course above uses
c.CourseDirectory.db_url = {url!r}
"""


def scratch_course(course: Course) -> Course:
    """A trial copy of `course` beside it (`.<folder>-dry-run/`, emptied first): its config with a sqlite
    gradebook of its own, and its source notebooks. Grading it never touches the course's gradebook
    (sqlite or PostgreSQL), reports, feedback or journal."""
    root = course.root.parent / f".{course.root.name}-dry-run"
    if root.exists():
        shutil.rmtree(root)
    root.mkdir()
    shutil.copytree(course.root / "source", root / "source")
    config = (course.root / CONFIG_FILE).read_text(encoding="utf-8")
    url = "sqlite:///" + str(root / "gradebook.db")
    (root / CONFIG_FILE).write_text(config + SCRATCH_DB.format(url=url), encoding="utf-8")
    return Course.at(root, course.assignment)
