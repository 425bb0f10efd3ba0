"""`coursekit check NOTEBOOK`: a student's self-check with the lesson's visible checks.

Runs the notebook's own code cells (not its test cells) in a fresh sandboxed kernel, then each
visible check of the lesson (the seed's asserts, from lessons/lesson11_grpo.qmd), and prints each
result in plain words. Exits 1 when anything fails — unlike `nbgrader validate`, which exits 0.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from dataclasses import dataclass
from pathlib import Path

import nbformat
from traitlets.config import Config

from coursekit.errors import CourseError
from coursekit.grading.ingest import read_notebook
from coursekit.grading.preprocessors import SandboxExecute
from coursekit.lesson import BLANK, parse_lesson, visible_test_code

DEFAULT_LESSON = Path("lessons/lesson11_grpo.qmd")
MARK = "__coursekit_check__"
HARNESS = '''import json as _ck_json, traceback as _ck_tb
try:
    exec(compile({source!r}, {name!r}, "exec"), globals())
    _ck_result = {{"ok": True}}
except BaseException as _ck_exc:
    _ck_frames = [f.lineno for f in _ck_tb.extract_tb(_ck_exc.__traceback__) if f.filename == {name!r}]
    _ck_result = {{"ok": False, "error": f"{{type(_ck_exc).__name__}}: {{_ck_exc}}".rstrip(": "),
                  "line": _ck_frames[-1] if _ck_frames else None}}
print({mark!r} + _ck_json.dumps(_ck_result, ensure_ascii=False))'''


@dataclass
class Check:
    title: str
    points: str
    source: str


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("notebook", type=Path, nargs="?", help="your notebook (.ipynb)")
    parser.add_argument("--lesson", type=Path, default=DEFAULT_LESSON, help="lesson source with the checks")
    parser.add_argument("--timeout", type=int, default=10, help="seconds per cell")


def run(args: argparse.Namespace) -> int:
    if args.notebook is None:
        raise CourseError("no notebook given; run 'make check NOTEBOOK=<your .ipynb>'")
    if not args.notebook.is_file():
        raise CourseError(f"{args.notebook}: no such file; pass the path of your .ipynb")
    nb, problem = read_notebook(args.notebook)
    if problem:
        raise CourseError(f"{args.notebook}: {problem}; save the notebook from Jupyter and try again")
    checks = [Check(t.options.get("title", t.options["test_id"]), t.options["points"],
                    visible_test_code(t.body)) for t in parse_lesson(args.lesson).tests()]
    lines, ok = check_notebook(nb, checks, args.timeout)
    print(f"检查 {args.notebook}（只运行可见检查；隐藏测试和问答题由老师评分）")
    print("\n".join(lines))
    return 0 if ok else 1


def student_cells(nb: nbformat.NotebookNode) -> list[nbformat.NotebookNode]:
    """Code cells the student runs; the release's locked test cells are replaced by the lesson's checks."""
    def is_test(cell):
        info = cell.metadata.get("nbgrader", {})
        return info.get("grade") and not info.get("solution")
    return [c for c in nb.cells if c.cell_type == "code" and c.source.strip() and not is_test(c)]


def check_notebook(nb: nbformat.NotebookNode, checks: list[Check], timeout: int) -> tuple[list[str], bool]:
    """Run the student's cells then one harness cell per check; return (report lines, all passed)."""
    mine = student_cells(nb)
    run_nb = nbformat.v4.new_notebook(metadata={"kernelspec": {"name": "python3", "language": "python",
                                                                "display_name": "Python 3"}})
    sources = [c.source for c in mine] + [c.source for c in checks]
    run_nb.cells = [nbformat.v4.new_code_cell(HARNESS.format(source=source, name=f"<cell {k}>", mark=MARK))
                    for k, source in enumerate(sources)]
    config = Config()
    config.SandboxExecute.timeout = timeout
    config.SandboxExecute.sandbox = False  # the student's own code on the student's machine (any OS)
    with tempfile.TemporaryDirectory(prefix="ck-check-") as tmp:
        SandboxExecute(config=config).preprocess(run_nb, {"metadata": {"path": tmp}})
    lines, ok = [], True
    blanks = sum(c.source.count(BLANK) for c in mine)
    if blanks:
        ok = False
        lines.append(f"  ✗ 还有 {blanks} 处 {BLANK} 没有填写")
    for number, (cell, ran) in enumerate(zip(mine, run_nb.cells, strict=False), start=1):
        result = _result(ran)
        if not result.get("ok"):
            ok = False
            lines.append(f"  ✗ 你的第 {number} 个代码单元{_where(cell.source, result)}出错（{result['error']}）")
    if ok:
        lines.append(f"  ✓ 你的 {len(mine)} 个代码单元运行无误")
    for check, ran in zip(checks, run_nb.cells[len(mine):], strict=True):
        result = _result(ran)
        head = f"{check.title}（{check.points} 分）"
        if result.get("ok"):
            lines.append(f"  ✓ {head}：通过")
        else:
            ok = False
            lines.append(f"  ✗ {head}：{_where(check.source, result)}未通过（{result['error']}）")
    passed = sum(line.startswith("  ✓") for line in lines[-len(checks):])
    lines.append(f"结果：{passed}/{len(checks)} 项可见检查通过" + ("。" if ok else "；请修改后再运行 make check。"))
    return lines, ok


def _where(source: str, result: dict) -> str:
    if not result.get("line"):
        return ""
    return f"第 {result['line']} 行 `{source.split(chr(10))[result['line'] - 1].strip()}` "


def _result(cell: nbformat.NotebookNode) -> dict:
    for output in cell.outputs:
        if output.output_type == "stream" and MARK in output.text:
            return json.loads(output.text.split(MARK, 1)[1].splitlines()[0])
    errors = [o for o in cell.outputs if o.output_type == "error"]
    return {"ok": False, "error": f"{errors[0].ename}: {errors[0].evalue}" if errors else "没有运行"}
