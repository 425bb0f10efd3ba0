"""`coursekit check NOTEBOOK`: a student's self-check with the lesson's visible checks.

Runs the notebook's own code cells (not its test cells) in a fresh sandboxed kernel, then each
visible check of the lesson (`Lesson.visible_checks`: the seed's asserts, from the source of the
--lesson of course.yml, e.g. lessons/lesson11_grpo.qmd), each cell with the time limit, and prints each
result in plain words.
A check with `own_run` names passes only if the student's own cells left each name with the value
the check's visible lines give it (the grader scores it on the student's run); the browser's Check
(assets/runner/runner-worker.js) applies the same rule. Exits 1 when anything fails — unlike
`nbgrader validate`, which exits 0.
"""

from __future__ import annotations

import argparse
import inspect
import json
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
from traitlets.config import Config

from coursekit.course_file import load_course, resolve_lesson
from coursekit.errors import CourseError
from coursekit.grading.intake.ingest import read_notebook
from coursekit.grading.sandbox.executor import SandboxExecute, own_data
from coursekit.lesson import (
    BLANK,
    GIVEN_CHECKS_TITLE,
    GIVEN_CHECKS_VETO,
    VisibleCheck,
    given_checks,
    missing_given_checks,
    parse_lesson,
)

MARK = "__coursekit_check__"
OWN_RUN = "按你自己代码的运行结果计分"
BARE_ASSERT = "（题目给出的断言不成立；为什么不成立，见下面各组检查的说明）"  # as the browser's Check says it
# One kernel cell per student cell and per check. `own_run` names are read before the check's code
# runs and compared with what it leaves; KeyboardInterrupt is the kernel's time-limit interrupt.
# As the grader (executor.own_data, the same function, run in the kernel): plain data a check reads
# comes from the last answer cell's (nbgrader solution cell's) run, not from a later cell; a notebook
# without answer cells (the exercise branch's) is judged with the names as the checks find them.
# `exit()`/`quit()` in a student's cell end nothing here: IPython would stop the kernel 0.1 s later, in the
# middle of the checks (which of them still ran depended on timing); the grader judges the test cells before
# a later cell ends the kernel (executor.judge_in_replay), and the check's kernel is shut down after the checks.
PREAMBLE = '''import copy as _ck_copy
get_ipython().ask_exit = lambda: None
_ck_solution = None
{own_data}
def _ck_keep(names):
    global _ck_solution
    _ck_solution = {{}}
    for _n in names:
        if _n in globals():
            try:
                _ck_solution[_n] = ("data", _ck_copy.deepcopy(globals()[_n]))
            except Exception:
                _ck_solution[_n] = ("data", globals()[_n])
def _ck_own(names, missing):
    import types
    now = {{_n: ({{"$": "callable", "v": globals()[_n]}} if callable(globals()[_n])
                 or isinstance(globals()[_n], types.ModuleType) else ("data", globals()[_n]))
           for _n in names if _n in globals()}}
    if _ck_solution is None:
        judged = now
    else:
        judged = own_data(now, _ck_solution)
    return {{_n: (judged[_n]["v"] if isinstance(judged[_n], dict) else judged[_n][1]) if _n in judged else missing
            for _n in names}}
'''
HARNESS = '''import json as _ck_json, traceback as _ck_tb
_ck_missing = object()
_ck_before = _ck_own({own_run!r}, _ck_missing)
try:
    exec(compile({source!r}, {name!r}, "exec"), globals())
    _ck_result = {{"ok": True}}
except BaseException as _ck_exc:
    _ck_tb_frames = _ck_tb.extract_tb(_ck_exc.__traceback__)
    _ck_frames = [f.lineno for f in _ck_tb_frames if f.filename == {name!r}]
    _ck_mine = [[int(f.filename[6:-1]), f.lineno] for f in _ck_tb_frames
                if f.filename.startswith("<cell ") and int(f.filename[6:-1]) < {students}]
    _ck_error = (f"运行超过 {timeout} 秒，已停止" if isinstance(_ck_exc, KeyboardInterrupt)
                 else f"{{type(_ck_exc).__name__}}: {{_ck_exc}}".rstrip(": "))
    _ck_result = {{"ok": False, "error": _ck_error, "line": _ck_frames[-1] if _ck_frames else None,
                  "mine": _ck_mine[-1] if _ck_mine else None}}
if _ck_result["ok"]:
    def _ck_same(a, b):
        try:
            return bool(a == b)
        except Exception:
            return False
    _ck_absent = [_n for _n, _v in _ck_before.items() if _v is _ck_missing]
    _ck_wrong = [_n for _n, _v in _ck_before.items() if _v is not _ck_missing and not _ck_same(_v, globals().get(_n))]
    if _ck_absent:
        _ck_result = {{"ok": False, "line": None, "error": "你的代码没有算出 " + "、".join(_ck_absent)
                       + "（在这之前出错或断言失败，没有运行到这些赋值）"}}
    elif _ck_wrong:
        _ck_result = {{"ok": False, "line": None, "error": "；".join(
            f"你的 {{_n}} = {{_ck_before[_n]!r}}，应为 {{globals().get(_n)!r}}" for _n in _ck_wrong)}}
print({mark!r} + _ck_json.dumps(_ck_result, ensure_ascii=False))
{after}'''


@dataclass
class Report:
    """What `check_notebook` found: the printed lines, each check's verdict, and whether all passed."""

    lines: list[str] = field(default_factory=list)
    passed: dict[str, bool] = field(default_factory=dict)  # check id -> passed
    ok: bool = True


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("notebook", type=Path, nargs="?", help="your notebook (.ipynb)")
    parser.add_argument("--lesson", default=None,
                        help="lesson id of course.yml or lesson source with the checks (default: the first lesson)")
    parser.add_argument("--timeout", type=int, default=10, help="seconds per cell")


def run(args: argparse.Namespace) -> int:
    if args.notebook is None:
        raise CourseError("no notebook given; run 'make check NOTEBOOK=<your .ipynb>'")
    if args.notebook.is_dir():
        raise CourseError(f"{args.notebook}: a folder, not a notebook; give the notebook file, e.g. "
                          f"make check NOTEBOOK={args.notebook.as_posix().rstrip('/')}/<name>.ipynb")
    if not args.notebook.is_file():
        raise CourseError(f"{args.notebook}: no such file; pass the path of your .ipynb")
    nb, problem = read_notebook(args.notebook)
    if problem:
        raise CourseError(f"{args.notebook}: {problem}; save the notebook from Jupyter and try again")
    lesson = parse_lesson(resolve_lesson(args.lesson or load_course().first.id).source)
    report = check_notebook(nb, lesson.visible_checks(), args.timeout, given_checks(lesson.blank_code))
    print(f"检查 {args.notebook}（运行自查；评分时还会运行同类的隐藏检查，输入不同；问答题由老师评分）")
    print("\n".join(report.lines))
    return 0 if report.ok else 1


def student_cells(nb: nbformat.NotebookNode) -> list[nbformat.NotebookNode]:
    """Code cells the student runs; the release's locked test cells are replaced by the lesson's checks."""
    def is_test(cell):
        info = cell.metadata.get("nbgrader", {})
        return info.get("grade") and not info.get("solution")
    return [c for c in nb.cells if c.cell_type == "code" and c.source.strip() and not is_test(c)]


def check_notebook(nb: nbformat.NotebookNode, checks: list[VisibleCheck], timeout: int,
                   given: list[str] = ()) -> Report:
    """Run the student's cells then one harness cell per check; return the report. `given`: the
    exercise's given checks (`coursekit.lesson.given_checks`), each of which the student's cells must keep."""
    mine = student_cells(nb)
    run_nb = nbformat.v4.new_notebook(metadata={"kernelspec": {"name": "python3", "language": "python",
                                                                "display_name": "Python 3"}})
    read = sorted({name for c in checks for name in c.own_run})
    keep = f"_ck_keep({read!r})"  # after each answer cell: the data it left, as the grader keeps it
    cells = ([(c.source, (), keep if c.metadata.get("nbgrader", {}).get("solution") is True else "")
              for c in mine] + [(c.code, c.own_run, "") for c in checks])
    run_nb.cells = [nbformat.v4.new_code_cell(HARNESS.format(source=source, name=f"<cell {k}>", mark=MARK,
                                                             own_run=list(own_run), timeout=timeout,
                                                             students=len(mine), after=after))
                    for k, (source, own_run, after) in enumerate(cells)]
    run_nb.cells.insert(0, nbformat.v4.new_code_cell(PREAMBLE.format(own_data=inspect.getsource(own_data))))
    config = Config()
    config.SandboxExecute.timeout = timeout
    config.SandboxExecute.sandbox = False  # the student's own code on the student's machine (any OS)
    with tempfile.TemporaryDirectory(prefix="ck-check-") as tmp:
        executor = SandboxExecute(config=config)
        executor.folder = tmp  # the kernel's folder too: removed with tmp, however the run ends
        executor.preprocess(run_nb, {"metadata": {"path": tmp}})
    report = Report()
    blanks = sum(c.source.count(BLANK) for c in mine)
    if blanks:
        report.ok = False
        report.lines.append(f"  ✗ 还有 {blanks} 处 {BLANK} 没有填写")
    cells_ok = True
    ran_cells = run_nb.cells[1:]  # after the preamble
    for number, ran in enumerate(ran_cells[:len(mine)], start=1):
        result = _result(ran)
        if not result.get("ok"):
            report.ok = cells_ok = False
            why = BARE_ASSERT if result["error"] == "AssertionError" else ""
            report.lines.append(f"  ✗ 你的第 {number} 个代码单元出错：{result['error']}{why}"
                                f"{_in_mine(mine, [number - 1, result.get('line')])}")
    if cells_ok and not blanks:
        report.lines.append(f"  ✓ 你的 {len(mine)} 个代码单元运行无误")
    gone = missing_given_checks(list(given), "\n".join(c.source for c in mine))
    if gone:
        report.ok = False
        report.lines.append(f"  ✗ {GIVEN_CHECKS_TITLE}：" + "、".join(f"`{line}`" for line in gone)
                            + f" 被删除或改动；{GIVEN_CHECKS_VETO}")
    for check, ran in zip(checks, ran_cells[len(mine):], strict=True):
        result = _result(ran)
        head = f"{check.title}（{check.points} 分{'，' + OWN_RUN if check.own_run else ''}）"
        report.passed[check.id] = bool(result.get("ok"))
        if result.get("ok"):
            report.lines.append(f"  ✓ {head}：通过")
        else:
            report.ok = False
            report.lines.append(f"  ✗ {head}：{_reason(check.code, result)}{_in_mine(mine, result.get('mine'))}")
    passed = sum(report.passed.values())
    report.lines.append(f"结果：{passed}/{len(checks)} 项可见检查通过"
                        + ("。" if report.ok else "；请修改后再运行 make check。"))
    return report


def _reason(check_code: str, result: dict) -> str:
    """Why a check failed, reason first: an assertion's own message, else the error; a bare assertion of
    the check is quoted (never by its line number in the check's code, which the student does not see)."""
    error = result["error"]
    if error.startswith("AssertionError: "):
        return error.removeprefix("AssertionError: ")
    if error == "AssertionError" and result.get("line"):
        return f"未通过（不成立的检查：`{check_code.split(chr(10))[result['line'] - 1].strip()}`）"
    return f"未通过（{error}）"


def _in_mine(mine: list[nbformat.NotebookNode], where: list | None) -> str:
    """"（出错位置：你的第 N 个代码单元第 L 行 `...`）" for [index in `mine`, line], or ""."""
    if not where or where[1] is None:
        return ""
    index, line = where
    return (f"（出错位置：你的第 {index + 1} 个代码单元第 {line} 行 "
            f"`{mine[index].source.split(chr(10))[line - 1].strip()}`）")


def _result(cell: nbformat.NotebookNode) -> dict:
    for output in cell.outputs:
        if output.output_type == "stream" and MARK in output.text:
            return json.loads(output.text.split(MARK, 1)[1].splitlines()[0])
    errors = [o for o in cell.outputs if o.output_type == "error"]
    return {"ok": False, "error": f"{errors[0].ename}: {errors[0].evalue}" if errors else "没有运行"}
