"""Benchmark: what a hostile class costs the grader, per student (issue 23's budgets).

1. Each submission of the attack matrix (tests/grading/attack_kinds.py: every attack, the reply and
   print floods and quadratic dicts included) and of the reference solution, graded in this process
   the way a grading worker does (execute.Runner, sandboxed): this process's CPU seconds (executor
   and judge; not the kernel's, which its sandbox limits) and its peak resident memory
   (VmHWM, reset before each student) while that student runs. The baseline is the reference
   solution, measured in the same run.
2. The whole class graded twice with `coursekit grade` (--regrade): the two CSVs are compared.
Targets: worst student <= 2 s of grader CPU and <= 256 MB peak RSS; byte-identical CSVs.
Run: .venv/bin/python bench/bench_hostile.py
"""

from __future__ import annotations

import copy
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat
from traitlets.config import Config

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "grading"))

from attack_kinds import ATTACKS, Target  # noqa: E402
from submission_kinds import k_correct  # noqa: E402

from coursekit.grading.course import Course  # noqa: E402
from coursekit.grading.intake.ingest import Ingest  # noqa: E402
from coursekit.grading.intake.release import release  # noqa: E402
from coursekit.grading.records import record  # noqa: E402
from coursekit.grading.sandbox import execute  # noqa: E402

TIMEOUT = 3  # CPU seconds per cell, as the attack matrix
TARGET_CPU, TARGET_RSS = 2.0, 256 << 20


def peak_rss() -> int:
    with open("/proc/self/status", encoding="ascii") as f:
        return next(int(line.split()[1]) << 10 for line in f if line.startswith("VmHWM:"))


def reset_peak() -> None:
    with open("/proc/self/clear_refs", "w", encoding="ascii") as f:
        f.write("5")  # resets VmHWM to the current RSS (Linux >= 4.0)


def write_class(course: Course, folder: Path, target: Target) -> None:
    """The reference solution twice (the first warms the worker up), then one submission per attack."""
    folder.mkdir()
    base = nbformat.read(course.release_notebook, as_version=4)
    for sid in ("a00_reference", "a01_reference"):
        nbformat.write(k_correct(copy.deepcopy(base)), folder / f"{sid}.ipynb")
    for n, (kind, (builder, _, _)) in enumerate(ATTACKS.items()):
        nbformat.write(builder(copy.deepcopy(base), target), folder / f"m{n:02d}_{kind}.ipynb")


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="bench-hostile-") as tmp:
        root = Path(tmp) / "course"
        root.mkdir()
        shutil.copyfile(REPO / "autograder" / "nbgrader_config.py", root / "nbgrader_config.py")
        shutil.copytree(REPO / "autograder" / "source", root / "source")
        course = Course.at(root)
        release(course)
        for folder in ("reports", "feedback"):
            (root / folder).mkdir(exist_ok=True)
        folder = Path(tmp) / "lms"
        write_class(course, folder, Target(root, 9, "bench-secret"))
        config = Config(course.config)
        config.SandboxExecute.timeout = TIMEOUT
        recorder = record.Recorder(course, config)
        runner = execute.Runner(recorder.worker_config())
        costs: dict[str, tuple[float, int, float]] = {}
        for entry in Ingest(course, folder):
            notebook = nbformat.writes(recorder.sanitize(entry.student_id))
            reset_peak()
            cpu, wall = time.process_time(), time.perf_counter()
            executed = runner.run(notebook)
            costs[entry.student_id] = (time.process_time() - cpu, peak_rss(), time.perf_counter() - wall)
            recorder.record(entry.student_id, recorder.key(entry.student_id), executed, None)
        runner.close()
        recorder.close()
        # in new processes: `coursekit grade` forks its workers, which this one, with threads now, must not do
        command = [str(Path(sys.executable).parent / "coursekit"), "grade", str(folder), "--course", str(root),
                   "--timeout", str(TIMEOUT), "--regrade"]
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        first = course.report_csv.read_bytes()
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        second = course.report_csv.read_bytes()
    baseline = costs["a01_reference"]
    worst_cpu = max(costs, key=lambda s: costs[s][0])
    worst_rss = max(costs, key=lambda s: costs[s][1])
    print(f"bench_hostile: {len(costs)} students ({len(ATTACKS)} attacks), grader process per student")
    print(f"  {'student':34s} {'CPU s':>7s} {'x ref':>6s} {'peak RSS MB':>12s} {'wall s':>7s}")
    for sid in sorted(costs, key=lambda s: -costs[s][0])[:12]:
        cpu, rss, wall = costs[sid]
        print(f"  {sid:34s} {cpu:7.2f} {cpu / baseline[0]:6.1f} {rss / 2**20:12.0f} {wall:7.1f}")
    print(f"  reference solution (baseline): {baseline[0]:.2f} s CPU, {baseline[1] / 2**20:.0f} MB peak RSS")
    print(f"  worst CPU: {worst_cpu} {costs[worst_cpu][0]:.2f} s (target <= {TARGET_CPU:g} s); "
          f"worst peak RSS: {worst_rss} {costs[worst_rss][1] / 2**20:.0f} MB (target <= {TARGET_RSS >> 20} MB)")
    print(f"  two reruns of the class: CSVs {'byte-identical' if first == second else 'DIFFER'}")
    ok = costs[worst_cpu][0] <= TARGET_CPU and costs[worst_rss][1] <= TARGET_RSS and first == second
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
