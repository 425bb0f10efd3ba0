"""Benchmark: plain sequential `nbgrader autograde` vs `coursekit grade` on the same 60 submissions,
and the sandbox's own cost: `coursekit grade` vs `coursekit grade --no-sandbox`, same files, same run.

All use autograder/nbgrader_config.py (so the same kernel limits and trusted test cells) with a 3 s
cell timeout; plain nbgrader runs SandboxExecute too, so its kernels are sandboxed. `coursekit
grade` also ingests, writes feedback HTML and the report; plain nbgrader only autogrades the
notebooks `coursekit grade` put in submitted/ (it cannot read the broken files). Prints wall and CPU
times, their ratios, and whether the automatic scores agree. No speed target: this sets the
baseline. Run: .venv/bin/python bench/bench_grading.py
"""

from __future__ import annotations

import csv
import itertools
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from nbgrader.api import Gradebook

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "grading"))

from submission_kinds import FILE_KINDS, NOTEBOOK_KINDS, write_class  # noqa: E402

from coursekit.cli import main as coursekit  # noqa: E402
from coursekit.grading.course import AUTO_CELLS, Course  # noqa: E402
from coursekit.grading.release import release  # noqa: E402

SUBMISSIONS = 60  # write_class adds two students (two notebooks, bad id) to the kinds listed
TIMEOUT = "3"


def cpu_seconds() -> float:
    """CPU time of this process and of its finished descendants (workers, kernels, nbgrader)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def measured(run, *args):
    """(wall seconds, CPU seconds, result): CPU time is less sensitive to other load on the machine."""
    wall, cpu = time.perf_counter(), cpu_seconds()
    result = run(*args)
    return time.perf_counter() - wall, cpu_seconds() - cpu, result


def make_course(root: Path) -> Course:
    root.mkdir(parents=True)
    shutil.copyfile(REPO / "autograder" / "nbgrader_config.py", root / "nbgrader_config.py")
    shutil.copytree(REPO / "autograder" / "source", root / "source")
    course = Course.at(root)
    release(course)
    return course


def coursekit_grade(course: Course, folder: Path, *options: str) -> dict:
    code = coursekit(["grade", str(folder), "--course", str(course.root), "--timeout", TIMEOUT, *options])
    assert code == 0, "coursekit grade failed"
    with open(course.report_csv, encoding="utf-8") as f:
        scores = {row["student_id"]: tuple(float(row[c]) for c in AUTO_CELLS.values())
                  for row in csv.DictReader(f)}
    return scores


def plain_nbgrader(course: Course, submitted: Path) -> dict:
    shutil.copytree(submitted, course.root / "submitted")
    env = {**os.environ, "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"]}
    subprocess.run([sys.executable, "-m", "nbgrader", "autograde", "lesson11", "--force",
                    f"--SandboxExecute.timeout={TIMEOUT}"], cwd=course.root, env=env,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    scores = {}
    with Gradebook(course.db_url) as gb:
        for student in sorted(p.name for p in submitted.iterdir()):
            try:
                nb = gb.find_submission_notebook("lesson11", "lesson11", student)
            except Exception:
                scores[student] = None
                continue
            grades = {g.name: g.score or 0.0 for g in nb.grades}
            scores[student] = tuple(grades[c] for c in AUTO_CELLS)
    return scores


def main() -> int:
    kinds = list(itertools.islice(itertools.cycle([*NOTEBOOK_KINDS, *FILE_KINDS]), SUBMISSIONS - 2))
    with tempfile.TemporaryDirectory(prefix="bench-grading-") as tmp:
        tmp = Path(tmp)
        fast = make_course(tmp / "coursekit")
        bare = make_course(tmp / "unsandboxed")
        plain = make_course(tmp / "plain")
        folder = tmp / "lms"
        students = write_class(fast.release_notebook, folder, kinds)
        fast_s, fast_cpu, fast_scores = measured(coursekit_grade, fast, folder)
        bare_s, bare_cpu, bare_scores = measured(coursekit_grade, bare, folder, "--no-sandbox")
        plain_s, plain_cpu, plain_scores = measured(plain_nbgrader, plain, fast.root / "submitted")
    agree = [sid for sid, s in plain_scores.items() if s == fast_scores.get(sid)]
    differ = sorted(set(plain_scores) - set(agree))
    same_bare = sum(bare_scores.get(sid) == s for sid, s in fast_scores.items())
    print(f"bench_grading: {len(students)} submissions ({len(plain_scores)} gradable), cell timeout {TIMEOUT} s, "
          f"{os.cpu_count()} cores")
    print(f"  plain sequential nbgrader autograde : {plain_s:7.1f} s wall, {plain_cpu:6.1f} s CPU "
          "(autograde only)")
    print(f"  coursekit grade (make grade)        : {fast_s:7.1f} s wall, {fast_cpu:6.1f} s CPU "
          "(ingest + autograde + feedback + report)")
    print(f"  coursekit grade --no-sandbox        : {bare_s:7.1f} s wall, {bare_cpu:6.1f} s CPU (same files)")
    print(f"  ratio plain / coursekit             : {plain_s / fast_s:7.2f}x wall, {plain_cpu / fast_cpu:5.2f}x CPU")
    print(f"  sandbox cost: sandboxed / unsandboxed: {fast_s / bare_s:6.2f}x wall, {fast_cpu / bare_cpu:5.2f}x CPU"
          f"; scores agree {same_bare}/{len(fast_scores)}")
    print(f"  load average (1 min) at the end     : {os.getloadavg()[0]:7.2f} on {os.cpu_count()} cores")
    print(f"  automatic scores agree              : {len(agree)}/{len(plain_scores)}"
          + (f"; differ: {', '.join(differ)}" if differ else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
