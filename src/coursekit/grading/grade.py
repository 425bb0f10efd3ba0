"""`coursekit grade SUBMISSIONS`: autograde a class from an LMS download and write the report.

Steps, in order (each a function below):
  check_sandbox    -> the OS sandbox can start here (else stop before grading anyone), or --no-sandbox
  ensure_released  -> gradebook and release notebook exist and are current
  ingest           -> one Entry per student; gradable copies in submitted/ (originals only read)
  execute          -> parallel workers: nbgrader autograde against private gradebook copies, output
                      to .ingest/executed/; each kernel in its own sandbox, which holds nothing of
                      the course; test cells judged in the worker (SandboxExecute)
  record           -> as each worker finishes: nbgrader autograde into the real gradebook in this
                      process, replaying the executed outputs (sqlite sees one writer only)
  feedback         -> nbgrader generate_feedback for that student, hidden test source removed
  report           -> .ingest/lesson11.json (rows and flags) and reports/lesson11.csv
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from concurrent.futures import ProcessPoolExecutor, as_completed
from multiprocessing import get_context
from pathlib import Path

import nbformat
from nbgrader.converters import Autograde
from tqdm import tqdm
from traitlets.config import Config

from coursekit.errors import CourseError
from coursekit.grading import flags as F
from coursekit.grading.course import ASSIGNMENT, DEFAULT_ROOT, NOTEBOOK, Course, run_converter
from coursekit.grading.feedback import write_feedback
from coursekit.grading.ingest import Entry, ingest
from coursekit.grading.preprocessors import FINDINGS, CapOutput, ReplayExecution, SandboxExecute
from coursekit.grading.release import ensure_released
from coursekit.grading.report import summary_line, write_report
from coursekit.grading.sandbox import unavailable_reason


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("submissions", type=Path, nargs="?",
                        help="folder of <student_id>.ipynb or <student_id>/<any>.ipynb, or a .zip of either")
    parser.add_argument("--course", type=Path, default=DEFAULT_ROOT, help="nbgrader course folder")
    parser.add_argument("--jobs", type=int, default=min(8, os.cpu_count() or 1),
                        help="notebooks executed in parallel (default: the number of cores, at most 8)")
    parser.add_argument("--timeout", type=int, default=None,
                        help="seconds per cell (default: SandboxExecute.timeout in nbgrader_config.py)")
    parser.add_argument("--no-sandbox", action="store_true",
                        help="grade without the OS sandbox (student code can then reach this machine); "
                        "every row is flagged unsandboxed")


def run(args: argparse.Namespace) -> int:
    if args.submissions is None:
        raise CourseError("no submissions given; run 'make grade SUBMISSIONS=<folder or .zip>'")
    if args.jobs < 1:
        raise CourseError(f"--jobs {args.jobs}: give at least 1")
    course = Course.at(args.course)
    rows = grade(course, args.submissions, jobs=args.jobs, timeout=args.timeout, sandbox=not args.no_sandbox)
    print(summary_line(rows, course.report_csv))
    return 0


def grade(course: Course, submissions: Path, jobs: int = 2, timeout: int | None = None,
          sandbox: bool = True) -> list:
    """Run every step; return the report rows."""
    if sandbox:
        check_sandbox(course)
    ensure_released(course)
    entries = ingest(course, submissions.resolve())
    gradable = {e.student_id: e for e in entries if e.gradable}
    if not sandbox:
        for entry in gradable.values():
            entry.flags.append(F.UNSANDBOXED)
    bar = tqdm(total=len(gradable), desc="grade", unit="nb", file=sys.stderr)
    for student_id, failure in execute(course, list(gradable), jobs, timeout, sandbox):
        try:  # overlaps with the workers still executing
            record(course, gradable[student_id], failure)
            write_feedback(course, student_id)
        except CourseError as exc:  # one student's notebook must not stop the class
            gradable[student_id].flags.append(F.flag(F.ERROR, f"could not record the grades: {exc}"[:300]))
        bar.update()
    bar.close()
    write_manifest(course, submissions, entries)
    return write_report(course)


def check_sandbox(course: Course) -> None:
    """Stop before grading anyone when no sandbox can start here, with the reason and the fix."""
    reason = unavailable_reason(course.root)
    if reason:
        raise CourseError(f"cannot grade safely: {reason}")


# ---------------------------------------------------------------- execute (parallel)

def execute(course: Course, student_ids: list[str], jobs: int, timeout: int | None, sandbox: bool = True):
    """Execute each submission in a worker; yield (student_id, failure message or None) as each ends."""
    executed = course.ingest_dir / "executed"
    shutil.rmtree(executed, ignore_errors=True)
    executed.mkdir(parents=True)
    snapshot = course.ingest_dir / "worker-gradebook.db"  # fixed copy: record() writes the real one meanwhile
    shutil.copyfile(course.root / "gradebook.db", snapshot)
    with ProcessPoolExecutor(max_workers=jobs, mp_context=get_context("spawn")) as pool:
        futures = {pool.submit(execute_one, str(course.root), sid, str(executed), str(snapshot), timeout,
                               sandbox): sid for sid in student_ids}
        for future in as_completed(futures):
            try:
                future.result()
                yield futures[future], None
            except Exception as exc:  # one student's failure must not stop the class
                yield futures[future], str(exc).replace("\n", " ")[:200]


def execute_one(root: str, student_id: str, executed: str, snapshot: str, timeout: int | None,
                sandbox: bool = True) -> None:
    """Worker: nbgrader autograde of one student against a private copy of the gradebook."""
    course = Course(Path(root))
    config = Config(course.config)
    # Only run and cap the cells here; record() applies the rest of the pipeline and saves the grades.
    config.Autograde.autograde_preprocessors = [SandboxExecute, CapOutput]
    config.SandboxExecute.sandbox = sandbox
    if timeout is not None:
        config.SandboxExecute.timeout = timeout
    with tempfile.TemporaryDirectory(prefix="ck-grade-") as tmp:
        # The kernel's working folder is under tmp, away from the course's gradebook and files.
        db = Path(tmp) / "gradebook.db"
        shutil.copyfile(snapshot, db)
        config.CourseDirectory.db_url = f"sqlite:///{db}"
        config.CourseDirectory.autograded_directory = str(Path(tmp) / "executed")
        run_converter(course, Autograde, student_id, config, force=True, create_student=True)
        done = Path(tmp) / "executed" / student_id / ASSIGNMENT / f"{NOTEBOOK}.ipynb"
        target = Path(executed) / student_id / ASSIGNMENT / f"{NOTEBOOK}.ipynb"
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(done, target)


# ---------------------------------------------------------------- record, flags, feedback (serial)

def record(course: Course, entry: Entry, failure: str | None) -> None:
    """nbgrader autograde into the real gradebook with the worker's outputs; set execution flags."""
    executed_dir = course.ingest_dir / "executed"
    executed_nb = executed_dir / entry.student_id / ASSIGNMENT / f"{NOTEBOOK}.ipynb"
    findings = {}
    if failure is not None or not executed_nb.is_file():  # ReplayExecution then fails every code cell
        executed_nb.unlink(missing_ok=True)
        entry.flags.append(F.flag(F.ERROR, f"grader could not run the notebook: {failure}"))
    else:  # written by the worker's SandboxExecute, over anything the submission had there
        findings = nbformat.read(executed_nb, as_version=4).metadata.get(FINDINGS, {})
    config = Config(course.config)
    config.Autograde.autograde_preprocessors = [
        ReplayExecution if step is SandboxExecute else step for step in config.Autograde.autograde_preprocessors]
    config.ReplayExecution.executed_directory = str(executed_dir)
    run_converter(course, Autograde, entry.student_id, config, force=True, create_student=True)
    ran = nbformat.read(course.autograded_notebook(entry.student_id), as_version=4)
    memory = config.SandboxExecute.get("memory_limit", 2 << 30)
    entry.flags.extend(F.execution_flags(ran, f"memory capped at {memory / (1 << 30):g} GiB",
                                         findings.get("kernel_errors")))
    submitted = nbformat.read(course.submitted_notebook(entry.student_id), as_version=4)
    entry.flags.extend(F.fabricated_outputs(submitted, ran, config.CapOutput.get("max_chars", 20000)))
    F.add_findings(entry.flags, findings)


def write_manifest(course: Course, submissions: Path, entries: list[Entry]) -> None:
    course.ingest_dir.mkdir(parents=True, exist_ok=True)
    data = {"assignment": ASSIGNMENT, "submissions": str(submissions),
            "students": [{"student_id": e.student_id, "source": e.source, "graded": e.gradable,
                          "flags": e.flags} for e in entries]}
    course.manifest.write_text(json.dumps(data, ensure_ascii=False, indent=1), encoding="utf-8")
