"""Grades do not depend on the machine's load (issue 23, class 8): a small class whose submissions sit
near the limits is graded twice, once as the machine is and once with a busy process on every core,
and the two CSVs are compared byte for byte. The limits are in CPU time and bytes
(coursekit.grading.sandbox.executor: `timeout`, `notebook_timeout`); wall-clock limits are ten times
those, far above what these submissions need even on a loaded machine."""

from __future__ import annotations

import copy
import json
import multiprocessing
import os
import shutil

import nbformat
import pytest
from grading_support import fresh_copy
from submission_kinds import _code, _extra, k_correct, k_infinite_loop, k_prints_50mb, solve

from coursekit.cli import main

pytestmark = pytest.mark.slow
TIMEOUT = "3"  # CPU seconds per cell, as the other grading tests use


def burn(seconds: float) -> str:
    """Code that uses about `seconds` of CPU time (measured as it runs, so the same on any load)."""
    return f"import time as _t\n_end = _t.process_time() + {seconds}\nwhile _t.process_time() < _end:\n    pass\n"


def k_cpu_heavy(nb):
    """2 s of CPU in one cell: under the 3 s limit, however long it takes on a busy machine."""
    solve(nb)
    _extra(nb, _code(nb), burn(2.0))
    return nb


def k_child_cpu(nb):
    """The cell waits for a child process that uses 1.5 s of CPU."""
    solve(nb)
    code = burn(1.5)
    _extra(nb, _code(nb), f"import subprocess, sys\nsubprocess.run([sys.executable, '-c', {code!r}], check=True)")
    return nb


def k_slow_checks(nb):
    """Every call of the hidden checks uses 50 ms of CPU (about 2 s in all)."""
    solve(nb)
    _extra(nb, _code(nb), "_right = group_advantages\ndef group_advantages(rewards, eps=1e-8):\n"
                          + "\n".join("    " + line for line in burn(0.05).split("\n")) + "\n"
                          "    return _right(rewards, eps)\n")
    return nb


def k_sleeps(nb):
    """1.5 s of waiting (no CPU) in one cell."""
    solve(nb)
    _extra(nb, _code(nb), "import time\ntime.sleep(1.5)")
    return nb


KINDS = {"correct": k_correct, "cpu_heavy": k_cpu_heavy, "child_cpu": k_child_cpu, "slow_checks": k_slow_checks,
         "sleeps": k_sleeps, "prints_50mb": k_prints_50mb, "infinite_loop": k_infinite_loop}


def _busy() -> None:
    while True:
        pass


@pytest.fixture(scope="module")
def two_grades(release_template, tmp_path_factory):
    course = fresh_copy(release_template, tmp_path_factory.mktemp("load") / "course")
    folder = tmp_path_factory.mktemp("load-lms") / "download"
    folder.mkdir()
    base = nbformat.read(course.release_notebook, as_version=4)
    for n, (kind, build) in enumerate(KINDS.items()):
        (folder / f"l{n:02d}_{kind}.ipynb").write_text(json.dumps(build(copy.deepcopy(base))), encoding="utf-8")
    args = ["grade", str(folder), "--course", str(course.root), "--timeout", TIMEOUT, "--regrade"]
    assert main(args) == 0
    idle = course.report_csv.read_text(encoding="utf-8")
    context = multiprocessing.get_context("spawn")
    hogs = [context.Process(target=_busy, daemon=True) for _ in range(os.cpu_count() or 1)]  # one per core
    for hog in hogs:
        hog.start()
    try:
        assert main(args) == 0
    finally:
        for hog in hogs:
            hog.kill()
            hog.join()
    loaded = course.report_csv.read_text(encoding="utf-8")
    shutil.rmtree(folder)
    return idle, loaded


def test_the_same_class_gets_the_same_csv_idle_and_loaded(two_grades):
    idle, loaded = two_grades
    assert loaded == idle


def test_the_submissions_near_the_limits_are_graded_as_they_deserve(two_grades):
    rows = {line.split(",")[0]: line for line in two_grades[0].splitlines()[1:]}
    for sid, row in rows.items():
        if "infinite_loop" in sid:
            assert "timeout" in row
        else:
            assert "timeout" not in row and ",1.5,1,0.5," in row, row


def test_a_worker_past_the_wall_clock_watchdog_is_replaced_and_the_class_goes_on(release_template, tmp_path,
                                                                                  monkeypatch):
    """The pool's per-student watchdog (coursekit.grading.sandbox.pool.student_wall_limit), set here far
    below the executor's own backstops: the student it catches gets over_budget, the others their grades.
    The limit leaves room for a fresh worker's start-up, which the clock of its first student includes: at
    6 s, under load 14 on 2 cores, the honest student after the sleeper was caught too."""
    from coursekit.grading.sandbox import pool

    monkeypatch.setattr(pool, "student_wall_limit", lambda config: 15.0)
    course = fresh_copy(release_template, tmp_path / "course")
    folder = tmp_path / "download"
    folder.mkdir()
    base = nbformat.read(course.release_notebook, as_version=4)
    sleeper = solve(copy.deepcopy(base))
    _extra(sleeper, _code(sleeper), "import time\ntime.sleep(3600)")
    for sid, nb in (("a_sleeper", sleeper), ("b_correct", k_correct(copy.deepcopy(base))),
                    ("c_correct", k_correct(copy.deepcopy(base)))):
        (folder / f"{sid}.ipynb").write_text(json.dumps(nb), encoding="utf-8")
    assert main(["grade", str(folder), "--course", str(course.root), "--timeout", "60", "--jobs", "1"]) == 0
    rows = {line.split(",")[0]: line for line in course.report_csv.read_text(encoding="utf-8").splitlines()[1:]}
    assert "over_budget(wall clock per student over 15 s)" in rows["a_sleeper"]
    assert rows["b_correct"].startswith("b_correct,1.5,1,0.5,") and rows["c_correct"].startswith("c_correct,1.5,1,0.5,")
