"""Synthetic submissions of every kind `make grade` must survive, built from the release notebook.

`KINDS` maps a kind to (builder, expected automatic scores (normal, boundary, aggregation), the flag
names expected in the row). Used by the grading tests and by bench/bench_grading.py.
"""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path

import nbformat

from coursekit.lesson import BLANK, parse_lesson

REPO = Path(__file__).resolve().parents[2]
LESSON = REPO / "lessons" / "lesson11_grpo.qmd"
EXERCISE = REPO / "exercises" / "lesson11_grpo.ipynb"
ANSWERS = {"explanation": "总体方差除以 G；std < eps 时整组归零；空组抛出 ValueError。",
           "q1": "输入一组回答与奖励，组内标准化得到优势，输出策略更新。",
           "q2": "全局均值保留题目难度偏移；组内标准化消除偏移并按 1/std 重加权。",
           "q3": "大 G 统计稳但题目少；小 G 覆盖广但零方差组多。"}
HARD_CODED = '''import math

def group_advantages(rewards, eps=1e-8):
    if not rewards:
        raise ValueError("group cannot be empty")
    known = {(2., 2.): [0.0, 0.0], (1., 2., 3.): [-math.sqrt(1.5), 0., math.sqrt(1.5)],
             (1.,): [0.], (0., 1.): [-1., 1.]}
    return known.get(tuple(rewards), [0.0] * len(rewards))
'''


def _cells(nb, gid):
    return [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == gid]


def _code(nb):
    tagged = [c for c in nb.cells if "course-exercise" in c.metadata.get("tags", [])]
    return (_cells(nb, "group_advantages") or tagged)[0]


def solve(nb, answers=True):
    """Fill the blanks with the lesson's reference lines (the reference solution) and the answers."""
    cell = _code(nb)
    answers_left = iter(parse_lesson(LESSON).answer_lines)
    cell.source = "\n".join(next(answers_left) if BLANK in line else line for line in cell.source.split("\n"))
    if answers:
        for gid, text in ANSWERS.items():
            cell = (_cells(nb, gid) or [c for c in nb.cells if c.metadata.get("course_answer_id") == gid])[0]
            cell.source += "\n\n" + text
    return nb


def _extra(nb, after, source, outputs=()):
    cell = nbformat.v4.new_code_cell(source)
    cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=t) for t in outputs]
    cell.execution_count = 1 if outputs else None
    nb.cells.insert(nb.cells.index(after) + 1, cell)


def k_correct(nb):
    solve(nb)
    _extra(nb, _cells(nb, "test_aggregation")[0], "print(group_advantages([1., 2., 3.]))",
           ["[-1.224744871391589, 0.0, 1.224744871391589]\n"])
    return nb


def k_untouched(nb):
    return nb


def k_sample_variance(nb):
    solve(nb)
    _code(nb).source = _code(nb).source.replace("/ len(rewards)\n    std", "/ (len(rewards) - 1)\n    std")
    return nb


def _variance_line(nb, line):
    """The reference solution with its variance line replaced (another way to fill the first blank)."""
    solve(nb)
    cell = _code(nb)
    old = next(x for x in cell.source.split("\n") if x.lstrip().startswith("var = "))
    cell.source = cell.source.replace(old, line)
    return nb


def k_one_pass_clamped(nb):
    return _variance_line(nb, "    var = max(sum(r * r for r in rewards) / len(rewards) - mean ** 2, 0.0)")


def k_one_pass(nb):
    """Negative variance (rounding) on a constant group of 0.1s: math.sqrt raises there."""
    return _variance_line(nb, "    var = sum(r * r for r in rewards) / len(rewards) - mean ** 2")


def k_divide_by_mean(nb):
    return _variance_line(nb, "    var = mean ** 2")


def k_std_eq_zero(nb):
    solve(nb)
    _code(nb).source = _code(nb).source.replace("if std < eps:", "if std == 0:")
    return nb


def k_hard_coded(nb):
    solve(nb)
    cell = _code(nb)
    cell.source = HARD_CODED + cell.source[cell.source.index("\nassert"):]
    return nb


def k_deleted_asserts(nb):
    solve(nb)
    cell = _code(nb)
    cell.source = cell.source[: cell.source.index("\nassert")]
    return nb


def k_edited_locked(nb):
    k_std_eq_zero(nb)
    _cells(nb, "test_boundary")[0].source = "assert True  # 边界检查已通过"
    return nb


def k_deleted_test_cell(nb):
    solve(nb)
    for gid in ("test_normal", "test_boundary"):
        nb.cells.remove(_cells(nb, gid)[0])
    return nb


def k_duplicated(nb):
    blank = copy.deepcopy(_code(nb))
    solve(nb)
    nb.cells.insert(nb.cells.index(_code(nb)), blank)  # same cell id and grade id, blank copy first
    return nb


def k_infinite_loop(nb):
    solve(nb)
    _code(nb).source = _code(nb).source.replace("return [0.0] * len(rewards)", "while True:\n            pass")
    return nb


def k_raises(nb):
    solve(nb)
    _code(nb).source = _code(nb).source.replace("    var = sum", "    raise RuntimeError('not done')\n    var = sum")
    return nb


def k_sys_exit(nb):
    solve(nb)
    _code(nb).source = "import sys\nsys.exit(1)\n" + _code(nb).source
    return nb


def k_os_exit(nb):
    solve(nb)
    _code(nb).source += "\nimport os\nos._exit(1)"
    return nb


def k_memory_hog(nb):
    solve(nb)
    _code(nb).source += "\nblob = bytearray(8 * 1024 ** 3)"
    return nb


def k_prints_50mb(nb):
    solve(nb)
    _code(nb).source += "\nprint('x' * 50_000_000)"
    return nb


def k_fabricated(nb):
    k_std_eq_zero(nb)
    _extra(nb, _cells(nb, "test_aggregation")[0], "print(group_advantages([0.1, 0.1, 0.1]))",
           ["[0.0, 0.0, 0.0]\n"])
    return nb


def k_tampering(nb):
    """Wrong code that tries to swallow failed asserts through IPython: still fails, and is flagged."""
    k_std_eq_zero(nb)
    _code(nb).source += "\nget_ipython().set_custom_exc((AssertionError,), lambda *args, **kwargs: None)"
    return nb


def k_exit_at_end(nb):
    """Correct, with `exit()` in the notebook's last cell (after the test cells and the ungraded
    practice): the kernel is gone when the hidden checks would run, so the grader replays the notebook
    up to the last test cell."""
    k_correct(nb)
    nb.cells.append(nbformat.v4.new_code_cell("exit()"))
    return nb


def k_display_hook(nb):
    """Blanks left empty; the function writes to the kernel's display hook before it reaches them: the
    test cells' own output in the kernel (a non-numeric execute_result) must never become points."""
    cell = _code(nb)
    hook = "    __import__('sys').displayhook('满分')\n"
    cell.source = cell.source.replace("    if not rewards:", hook + "    if not rewards:", 1)
    return nb


def k_aggregation_elsewhere(nb):
    """Blanks left empty (the exercise cell stops at its first assert); another cell sets the names the
    aggregation check reads: the check needs the exercise cell's own run to have produced them."""
    _extra(nb, _code(nb), "response_mean, token_mean, fixed_length_mean = 1., .5, .25\nratios = [4., .25]")
    return nb


def k_exercise_branch(nb):
    """The exercise branch's notebook (no nbgrader metadata, no test cells), solved."""
    return solve(nbformat.read(EXERCISE, as_version=4))


NOTEBOOK_KINDS = {
    # kind: (builder, (normal, boundary, aggregation), expected flag names). The aggregation points
    # need the student's own cell to reach and pass the seed's aggregation / GSPO asserts.
    "correct": (k_correct, (1.5, 1, 0.5), set()),
    "untouched": (k_untouched, (0, 0, 0), {"missing_answer"}),
    # the boundary self-check names the sample variance before the G = 1 assert divides by zero
    "sample_variance": (k_sample_variance, (0, 0, 0), set()),
    "std_eq_zero": (k_std_eq_zero, (1.5, 0, 0.5), set()),
    "hard_coded": (k_hard_coded, (0, 0, 0.5), set()),
    "deleted_asserts": (k_deleted_asserts, (1.5, 1, 0), {"deleted_asserts", "veto"}),
    "edited_locked": (k_edited_locked, (1.5, 0, 0.5), {"edited_locked_cell"}),
    "deleted_test_cell": (k_deleted_test_cell, (1.5, 1, 0.5), {"deleted_test_cell"}),
    "duplicated": (k_duplicated, (1.5, 1, 0.5), {"duplicate_ids"}),
    "infinite_loop": (k_infinite_loop, (1.5, 0, 0), {"timeout"}),
    "raises": (k_raises, (0, 0, 0), {"error"}),
    "sys_exit": (k_sys_exit, (0, 0, 0), {"error"}),
    "os_exit": (k_os_exit, (0, 0, 0), {"error"}),
    "memory_hog": (k_memory_hog, (1.5, 1, 0.5), {"error"}),
    "prints_50mb": (k_prints_50mb, (1.5, 1, 0.5), set()),
    "fabricated": (k_fabricated, (1.5, 0, 0.5), {"fabricated_outputs"}),
    "exercise_branch": (k_exercise_branch, (1.5, 1, 0.5), {"exercise_notebook"}),
    "tampering": (k_tampering, (1.5, 0, 0.5), {"suspicious_code"}),
    "exit_at_end": (k_exit_at_end, (1.5, 1, 0.5), set()),
    "display_hook": (k_display_hook, (0, 0, 0), {"missing_answer", "suspicious_code"}),
    "aggregation_elsewhere": (k_aggregation_elsewhere, (0, 0, 0), {"missing_answer"}),
    "one_pass_clamped": (k_one_pass_clamped, (1.5, 1, 0.5), set()),
    "one_pass": (k_one_pass, (1.5, 0, 0.5), {"error"}),  # its ValueError on 0.1 * 3, named in the reason
    "divide_by_mean": (k_divide_by_mean, (0, 0, 0), set()),
}
FILE_KINDS = {
    # kind: (file bytes, expected flag names); never graded, so scores are 0
    "invalid_json": (b'{"cells": [', {"invalid_notebook"}),
    "empty": (b"", {"invalid_notebook"}),
    "not_a_notebook": (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", {"invalid_notebook"}),
}


def write_class(release: Path, folder: Path, kinds: list[str]) -> dict[str, str]:
    """Write one submission per kind (student id = f"s{n:02d}_{kind}"); return {student_id: kind}.

    Adds a student with two notebooks and a file whose name is not a valid student id.
    """
    folder.mkdir(parents=True, exist_ok=True)
    base = nbformat.read(release, as_version=4)
    students = {}
    for n, kind in enumerate(kinds):
        sid = f"s{n:02d}_{kind}"
        students[sid] = kind
        if kind in FILE_KINDS:
            (folder / f"{sid}.ipynb").write_bytes(FILE_KINDS[kind][0])
            continue
        nb = NOTEBOOK_KINDS[kind][0](copy.deepcopy(base))
        path = folder / sid / "作业.ipynb" if n % 2 else folder / f"{sid}.ipynb"  # both layouts
        path.parent.mkdir(exist_ok=True)
        path.write_text(json.dumps(nb, ensure_ascii=False, indent=1), encoding="utf-8")
    two = folder / "two_notebooks"
    two.mkdir()
    nbformat.write(base, two / "draft.ipynb")
    os.utime(two / "draft.ipynb", (1_600_000_000, 1_600_000_000))
    nbformat.write(k_correct(copy.deepcopy(base)), two / "final.ipynb")
    os.utime(two / "final.ipynb", (1_700_000_000, 1_700_000_000))
    students["two_notebooks"] = "two_notebooks"
    nbformat.write(k_correct(copy.deepcopy(base)), folder / "Bad Name!.ipynb")
    students["Bad Name!"] = "unknown_id"
    return students


EXTRA_EXPECTED = {
    "two_notebooks": ((1.5, 1, 0.5), {"multiple_notebooks"}),
    "unknown_id": ((0, 0, 0), {"unknown_student_id"}),
}


def expected(kind: str) -> tuple[tuple[float, float, float], set[str]]:
    if kind in NOTEBOOK_KINDS:
        return NOTEBOOK_KINDS[kind][1], NOTEBOOK_KINDS[kind][2]
    if kind in FILE_KINDS:
        return (0, 0, 0), FILE_KINDS[kind][1]
    return EXTRA_EXPECTED[kind]
