"""What one student can do to the grading (issue 30), in a class with an honest student:
- cost (item 6): the hidden checks of one notebook, all calls together, have a budget of their own
  (executor.hidden_checks_over);
- erase a runtime flag (item 9): a module patched while the test cells run and put back afterwards
  is still flagged: the grader keeps what it saw before each test cell (executor._keep_patched)."""

from __future__ import annotations

import copy
import json

import nbformat
import pytest
from grading_support import CELL_TIMEOUT, fresh_copy, read_rows
from submission_kinds import _cells, _code, _extra, k_correct, solve

from coursekit.cli import main
from coursekit.grading.sandbox.executor import HIDDEN_CHECKS_WALL_FACTOR, hidden_checks_over

# this class's CPU limit per cell: its wall-clock budget for the hidden checks (HIDDEN_CHECKS_WALL_FACTOR
# times it) is what the sleeper waits out; an honest notebook's cells use a few hundredths of it
SHORT_TIMEOUT = "1"


def sleeper(nb):
    """Right answers; 1.2 s per call of the hidden checks (called by the grader's helper, not from a
    cell): over 100 s of hidden checks in all, full marks and no flag before their budget."""
    solve(nb)
    _extra(nb, _code(nb), '''import sys as _sys, time as _time
_right = group_advantages
def group_advantages(rewards, eps=1e-8):
    if _sys._getframe(1).f_code.co_name in ("call", "_call"):
        _time.sleep(1.2)
    return _right(rewards, eps)
''')
    return nb


def erased_patch(nb):
    """Right answers; math.tau patched in the exercise cell and put back after the last test cell: the
    kernel's own report at the end finds nothing."""
    solve(nb)
    _extra(nb, _code(nb), "import math\n_tau = math.tau\nmath.tau = 0.0\n")
    _extra(nb, _cells(nb, "test_aggregation")[0], "import math\nmath.tau = _tau\n")
    return nb


@pytest.fixture(scope="module")
def graded(released_course, tmp_path_factory):
    course = fresh_copy(released_course, tmp_path_factory.mktemp("costs") / "course")
    folder = tmp_path_factory.mktemp("costs-lms") / "download"
    folder.mkdir(parents=True)
    base = nbformat.read(course.release_notebook, as_version=4)
    for sid, nb in (("a_honest", k_correct(copy.deepcopy(base))), ("b_sleeper", sleeper(copy.deepcopy(base))),
                    ("c_erased_patch", erased_patch(copy.deepcopy(base)))):
        (folder / f"{sid}.ipynb").write_text(json.dumps(nb, ensure_ascii=False), encoding="utf-8")
    assert main(["grade", str(folder), "--course", str(course.root), "--timeout", SHORT_TIMEOUT]) == 0
    return read_rows(course.report_csv.read_text(encoding="utf-8"))


def test_hidden_checks_that_sleep_are_bounded_and_flagged(graded):
    row = graded["b_sleeper"]
    budget = HIDDEN_CHECKS_WALL_FACTOR * float(SHORT_TIMEOUT)
    assert f"over_budget(hidden checks over {budget:g} s in all" in row["flags"], row
    assert float(row["auto_total"]) < 3, row  # the checks left after the budget score 0
    assert "timeout" not in row["flags"], row  # no single call, no cell went over its own limits


def test_an_honest_student_in_the_same_class_keeps_full_marks_and_no_flag(graded):
    assert float(graded["a_honest"]["auto_total"]) == 3 and graded["a_honest"]["flags"] == ""


def test_the_budget_counts_cpu_and_wall_clock_of_all_calls_together():
    assert hidden_checks_over(0.5, 1.0, 10) is None
    assert hidden_checks_over(10.5, 11.0, 10) == "hidden checks over 10 s of CPU in all"
    assert hidden_checks_over(0.1, HIDDEN_CHECKS_WALL_FACTOR * 10 - 1, 10) is None
    assert hidden_checks_over(0.1, HIDDEN_CHECKS_WALL_FACTOR * 10 + 1, 10) == \
        f"hidden checks over {HIDDEN_CHECKS_WALL_FACTOR * 10:g} s in all"


def test_a_patch_put_back_after_the_test_cells_is_still_flagged(graded):
    assert "suspicious_code(" in graded["c_erased_patch"]["flags"] and "math.tau" in graded["c_erased_patch"]["flags"]


def test_a_kernel_that_exits_after_its_last_cell_is_not_flagged_whenever_it_exits(released_course, tmp_path,
                                                                                  monkeypatch):
    """`exit()` in the last cell ends the kernel 0.1 s later, so the grader's question for the kernel's own
    report met a live kernel or a gone one depending on load, and a gone one was flagged suspicious_code
    (the grader's helpers in the kernel); and a grader that saw the kernel gone before it had read the
    `exit()` cell's last messages flagged "kernel died" (a dask run at load 7). Here the grader asks only once
    the kernel has exited, and reads that cell's output half a second late: the late cases, every time. The
    scores and flags are the correct student's."""
    import asyncio
    import time

    from jupyter_client.utils import run_sync
    from submission_kinds import k_exit_at_end

    from coursekit.grading.sandbox.executor import SandboxExecute

    record_run = SandboxExecute.record_run

    def after_the_exit(self, manager, started):
        deadline = time.monotonic() + 30
        while not self.replay and run_sync(manager.is_alive)() and time.monotonic() < deadline:
            time.sleep(0.05)  # the replay (judge_in_replay) stops before the exit() cell: its kernel lives on
        return record_run(self, manager, started)

    poll_output = SandboxExecute._async_poll_output_msg

    async def read_late(self, parent_msg_id, cell, cell_index):
        if cell.source == "exit()":
            await asyncio.sleep(0.5)  # a busy grader: the kernel has ended before its last messages are read
        return await poll_output(self, parent_msg_id, cell, cell_index)

    monkeypatch.setattr(SandboxExecute, "record_run", after_the_exit)  # the grading workers are forked from here
    monkeypatch.setattr(SandboxExecute, "_async_poll_output_msg", read_late)
    course = fresh_copy(released_course, tmp_path / "course")
    folder = tmp_path / "download"
    folder.mkdir()
    base = nbformat.read(course.release_notebook, as_version=4)
    (folder / "e_exit_at_end.ipynb").write_text(json.dumps(k_exit_at_end(copy.deepcopy(base)), ensure_ascii=False),
                                                encoding="utf-8")
    assert main(["grade", str(folder), "--course", str(course.root), "--timeout", CELL_TIMEOUT]) == 0
    row = read_rows(course.report_csv.read_text(encoding="utf-8"))["e_exit_at_end"]
    assert float(row["auto_total"]) == 3 and row["flags"] == "", row
