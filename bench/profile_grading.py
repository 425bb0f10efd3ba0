"""Where the CPU of grading one notebook goes, stage by stage, in `coursekit grade`'s own code path.

Grades N copies of the reference solution in this process, one after another (no pool), with the
real classes: Ingest, Recorder.sanitize, a worker's Runner (kernel started ahead, sandboxed unless
--no-sandbox) and Recorder.record. Prints this process's CPU seconds per notebook for each stage
(the first notebook is a warm-up and is not counted), and the kernels' own CPU (their processes:
start-up, the student's cells, the calls of the hidden checks; with the sandbox, also the kernel
zygote's one import of ipykernel) per notebook over all N: it reaches this process only when the
zygote ends, at the runner's close.
Run: .venv/bin/python bench/profile_grading.py [N] [--no-sandbox] [--db-url URL]
"""

from __future__ import annotations

import argparse
import copy
import resource
import shutil
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import nbformat
from traitlets.config import Config

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "grading"))

from submission_kinds import k_correct  # noqa: E402

from coursekit.grading.course import Course  # noqa: E402
from coursekit.grading.intake.ingest import Ingest  # noqa: E402
from coursekit.grading.intake.release import release  # noqa: E402
from coursekit.grading.records import record  # noqa: E402
from coursekit.grading.sandbox import execute, executor  # noqa: E402


def cpu() -> tuple[float, float]:
    """(this process, its finished children: the kernels) in CPU seconds."""
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime, kids.ru_utime + kids.ru_stime


class Stages:
    """CPU seconds by stage name; `timed(name, f)` wraps f so that each call is counted."""

    def __init__(self):
        self.own: dict[str, float] = defaultdict(float)
        self.counting = False

    def timed(self, name, function):
        def wrapper(*args, **kwargs):
            before = cpu()
            try:
                return function(*args, **kwargs)
            finally:
                if self.counting:
                    self.own[name] += cpu()[0] - before[0]
        return wrapper


TOP_LEVEL = ("ingest (read, prepare, write submitted/)", "recorder: sanitize (nbgrader sanitize steps)",
             "worker: run (total: execute + judge + steps)", "recorder: record (total)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("n", type=int, nargs="?", default=11, help="notebooks (the first is a warm-up)")
    parser.add_argument("--no-sandbox", action="store_true", help="kernels without bubblewrap")
    parser.add_argument("--db-url", help="gradebook database (CourseDirectory.db_url), e.g. an empty PostgreSQL "
                        "database; default: the course's sqlite file")
    args = parser.parse_args()
    stages = Stages()
    with tempfile.TemporaryDirectory(prefix="profile-grading-") as tmp:
        root = Path(tmp) / "course"
        root.mkdir()
        shutil.copyfile(REPO / "autograder" / "nbgrader_config.py", root / "nbgrader_config.py")
        shutil.copytree(REPO / "autograder" / "source", root / "source")
        if args.db_url:
            with open(root / "nbgrader_config.py", "a", encoding="utf-8") as config:
                config.write(f"\nc.CourseDirectory.db_url = {args.db_url!r}\n")
        course = Course.at(root)
        release(course)
        folder = Path(tmp) / "lms"
        folder.mkdir()
        base = nbformat.read(course.release_notebook, as_version=4)
        for k in range(args.n):
            nbformat.write(k_correct(copy.deepcopy(base)), folder / f"s{k:03d}.ipynb")
        config = Config(course.config)
        config.SandboxExecute.sandbox = not args.no_sandbox
        recorder = record.Recorder(course, config)
        runner = execute.Runner(recorder.worker_config())
        # the stages, named as in the code
        recorder.sanitize = stages.timed("recorder: sanitize (nbgrader sanitize steps)", recorder.sanitize)
        runner._start = stages.timed("worker: start the next kernel (launch)", runner._start)
        for step in recorder.record_steps:
            step.preprocess = stages.timed(f"recorder: {type(step).__name__}", step.preprocess)
        recorder._write_autograded = stages.timed("recorder: write autograded notebook", recorder._write_autograded)
        recorder.feedback.write = stages.timed("recorder: feedback HTML", recorder.feedback.write)
        recorder.journal.add = stages.timed("recorder: journal", recorder.journal.add)
        for step in runner.after:
            step.preprocess = stages.timed(f"worker: {type(step).__name__}", step.preprocess)
        judge_tests = executor.SandboxExecute.judge_tests  # the hidden checks: the judge and its calls
        executor.SandboxExecute.judge_tests = stages.timed("worker: judge the test cells (trusted runs + calls)",
                                                           judge_tests)
        record_one = stages.timed("recorder: record (total)", recorder.record)
        run_one = stages.timed("worker: run (total: execute + judge + steps)", runner.run)
        students = iter(Ingest(course, folder))
        ingest_one = stages.timed("ingest (read, prepare, write submitted/)", next)
        wall = 0.0
        kernels = -cpu()[1]
        for k in range(args.n):
            stages.counting = k > 0
            started = time.perf_counter()
            entry = ingest_one(students)
            key = recorder.key(entry.student_id)
            executed = run_one(nbformat.writes(recorder.sanitize(entry.student_id)))
            flags = record_one(entry.student_id, key, executed, None)
            assert flags == [], flags
            if k > 0:
                wall += time.perf_counter() - started
        runner.close()
        kernels += cpu()[1]
        recorder.close()
    counted = args.n - 1
    print(f"profile_grading: {counted} notebooks (reference solution), sandbox "
          f"{'off' if args.no_sandbox else 'on'}, gradebook {course.db_url.split(':')[0]}; CPU seconds per notebook")
    print(f"  {'stage':58s} {'this process':>12s}")
    for name in sorted(stages.own, key=lambda n: (n.split(":")[0], -stages.own[n])):
        print(f"  {name:58s} {stages.own[name] / counted:12.3f}")
    own = sum(stages.own[name] for name in TOP_LEVEL) / counted
    kernels /= args.n
    print(f"  {'kernels (and zygote), over all ' + str(args.n) + ' notebooks':58s} {kernels:12.3f}")
    print(f"  {'all (grader + kernels)':58s} {own + kernels:12.3f} s CPU, {wall / counted:.3f} s wall per notebook"
          " (one at a time)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
