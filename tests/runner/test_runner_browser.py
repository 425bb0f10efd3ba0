"""The runner in headless Chromium: checks, run output, saved work, stop, hints, hand-in, no off-site requests.

Pages come from the fixture site (see conftest.py); Python runs in the page through the site's Pyodide.
"""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import pytest

from coursekit.cli import main
from coursekit.grading.course import Course
from coursekit.lesson import parse_lesson
from coursekit.runner import ANSWER_GRADE_ID, LESSON

pytestmark = pytest.mark.browser

LESSON_11 = parse_lesson(Path(__file__).resolve().parents[2] / LESSON)
CORRECT = LESSON_11.reference_code
# Sample variance (divide by G - 1): normal inputs fail, boundary inputs still pass.
SAMPLE_VARIANCE = LESSON_11.blank_code.replace(
    "var = ______", "var = sum((r - mean) ** 2 for r in rewards) / max(len(rewards) - 1, 1)", 1
).replace("return ______", "return [0.0] * len(rewards)", 1)
INFINITE_LOOP = "while True:\n    pass\n"
ANSWER_IDS = [div.attrs["id"] for div in LESSON_11.answers()]


class Widget:
    """Drives the runner on one page."""

    def __init__(self, page: object, url: str):
        self.page = page
        page.goto(url)
        page.wait_for_selector(".cr-widget")

    def wait_ready(self) -> None:
        self.page.wait_for_selector(".cr-widget[data-state=ready]", timeout=60_000)

    @property
    def code(self) -> str:
        return self.page.evaluate("document.querySelector('.cr-host').courseRunner.code")

    def type_code(self, code: str) -> None:
        """Replace the editor's text (CodeMirror's own change path, as a paste would)."""
        self.page.evaluate("code => { document.querySelector('.cr-host').courseRunner.code = code; }", code)

    def _click_and_wait(self, action: str, timeout_ms: int = 60_000) -> None:
        before = self.page.get_attribute(".cr-widget", "data-completed") or "0"
        self.page.click(f"button[data-action={action}]")
        self.page.wait_for_function(
            f"() => Number(document.querySelector('.cr-widget').dataset.completed || 0) > {before}",
            timeout=timeout_ms)

    def check(self) -> dict[str, tuple[str, str]]:
        """{check id: (pass|fail, Chinese line)} after one Check."""
        self._click_and_wait("check")
        return {li.get_attribute("data-check-id"): (li.get_attribute("data-status"), li.inner_text())
                for li in self.page.query_selector_all(".cr-check")}

    def run(self) -> str:
        self._click_and_wait("run")
        return self.page.inner_text(".cr-output")


def test_blank_code_fails_the_function_checks_with_the_error(context, pages) -> None:
    widget = Widget(context.new_page(), pages["preview"])
    assert widget.code == LESSON_11.blank_code
    results = widget.check()
    assert list(results) == ["normal", "boundary", "aggregation"]
    assert results["normal"][0] == results["boundary"][0] == "fail"
    assert results["aggregation"] == ("pass", results["aggregation"][1])
    assert "正常输入：未通过" in results["normal"][1] and "NameError" in results["normal"][1]
    assert "长度聚合与 GSPO：通过" in results["aggregation"][1]


def test_wrong_variance_fails_only_the_normal_inputs_check(context, pages) -> None:
    widget = Widget(context.new_page(), pages["preview"])
    widget.type_code(SAMPLE_VARIANCE)
    results = widget.check()
    assert {k: status for k, (status, _) in results.items()} == {
        "normal": "fail", "boundary": "pass", "aggregation": "pass"}
    assert re.search(r"第 \d+ 行：assert .*\nAssertionError", results["normal"][1])
    assert "3 组检查中通过 2 组" in widget.page.inner_text(".cr-summary")


def test_correct_answer_passes_all_checks_without_leaving_localhost(context, pages, requests) -> None:
    widget = Widget(context.new_page(), pages["preview"])
    widget.type_code(CORRECT)
    for _ in range(2):  # the second Check reuses the warm worker
        results = widget.check()
        assert [status for status, _ in results.values()] == ["pass"] * 3
    assert "全部 3 组检查通过" in widget.page.inner_text(".cr-summary")
    assert any(u.endswith("/assets/pyodide/pyodide.asm.wasm") for u in requests.urls)
    assert requests.off_host() == []
    assert requests.errors == []


def test_run_shows_stdout_and_the_traceback(context, pages) -> None:
    widget = Widget(context.new_page(), pages["preview"])
    widget.type_code('print("你好", 1 + 1)\nimport sys\nprint("警告", file=sys.stderr)\n1 / 0\n')
    output = widget.run()
    assert "你好 2" in output and "警告" in output
    assert 'File "<你的代码>", line 4' in output and "ZeroDivisionError: division by zero" in output
    assert widget.page.query_selector(".cr-output .cr-stderr") is not None


def test_editor_keys_indent_dedent_and_keep_undo(context, pages) -> None:
    page = context.new_page()
    Widget(page, pages["preview"])
    page.fill(".cr-editor", "")
    page.click(".cr-editor")
    page.keyboard.type("def f():")
    page.keyboard.press("Enter")
    page.keyboard.type("return 1")
    assert page.input_value(".cr-editor") == "def f():\n    return 1"
    page.keyboard.press("Shift+Tab")
    assert page.input_value(".cr-editor") == "def f():\nreturn 1"
    page.keyboard.press("Control+z")
    assert page.input_value(".cr-editor") == "def f():\n    return 1"
    page.keyboard.press("End")
    page.keyboard.press("Tab")
    assert page.input_value(".cr-editor") == "def f():\n    return 1    "


def test_reload_keeps_the_code_and_start_over_restores_the_blanks(context, pages) -> None:
    page = context.new_page()
    widget = Widget(page, pages["preview"])
    widget.type_code(SAMPLE_VARIANCE)
    page.fill(".cr-answer[data-answer-id=q2]", "组内标准化")
    widget = Widget(page, pages["preview"])
    assert widget.code == SAMPLE_VARIANCE
    assert page.input_value(".cr-answer[data-answer-id=q2]") == "组内标准化"
    page.click("button[data-action=reset]")
    assert widget.code == SAMPLE_VARIANCE, "the first click only asks for confirmation"
    page.click("button[data-action=reset]")
    assert widget.code == LESSON_11.blank_code
    widget = Widget(page, pages["preview"])
    assert widget.code == LESSON_11.blank_code


def test_infinite_loop_is_stopped_and_the_page_stays_usable(context, pages, time_limit_s) -> None:
    page = context.new_page()
    widget = Widget(page, pages["preview"])
    widget.type_code(INFINITE_LOOP)
    widget.wait_ready()
    page.click("button[data-action=check]")
    page.wait_for_selector(".cr-widget[data-busy=true]")
    page.click("button[data-action=stop]")
    page.wait_for_selector(".cr-widget[data-busy=false]")
    assert "已停止" in page.inner_text(".cr-output")
    assert page.evaluate("1 + 1") == 2  # the page's own thread was never blocked

    widget.type_code('while True:\n    print("刷屏")\n')  # floods the page; no Stop: the time limit ends it
    output = widget.run()
    assert "输出过长" in output and len(output) < 60_000
    assert f"运行超过 {time_limit_s:g} 秒" in output

    widget.type_code(CORRECT)
    assert [status for status, _ in widget.check().values()] == ["pass"] * 3


def test_a_crashed_interpreter_is_replaced(context, pages) -> None:
    widget = Widget(context.new_page(), pages["preview"])
    widget.type_code("import os\nos._exit(1)\n")  # ends the interpreter itself, not just the code
    assert "Python 内部出错（Program terminated with exit(1)），已重新启动。" in widget.run()
    widget.type_code(CORRECT)
    assert [status for status, _ in widget.check().values()] == ["pass"] * 3


def test_hints_open_levels_one_to_three_one_at_a_time(context, pages) -> None:
    page = context.new_page()
    Widget(page, pages["preview"])
    hint_levels = []
    while page.is_visible("button[data-action=hint]"):
        page.click("button[data-action=hint]")
        hint_levels.append([h.get_attribute("data-level") for h in page.query_selector_all(".cr-hint")])
    assert hint_levels == [["1"], ["1", "2"], ["1", "2", "3"]]
    text = page.inner_text(".cr-hints")
    assert "提示 3：关键局部" in text and "完整答案" not in text
    assert all(line.strip() not in text for line in LESSON_11.answer_lines)


def test_quarto_page_attaches_to_the_course_runner_div(context, pages, requests) -> None:
    widget = Widget(context.new_page(), pages["quarto"])
    assert not widget.page.is_visible(".course-runner > .cell")
    answer_boxes = widget.page.query_selector_all(".course-answer > .cr-answer")
    assert [box.get_attribute("data-answer-id") for box in answer_boxes] == ["q1", "q2", "q3", "explanation"]
    widget.type_code(CORRECT)
    assert [status for status, _ in widget.check().values()] == ["pass"] * 3
    assert any("/site_libs/quarto-contrib/course-runner-1.0.0/runner-worker.js" in u for u in requests.urls)
    assert requests.off_host() == []


def test_downloaded_notebook_autogrades_to_full_automatic_points(context, pages, course: Course,
                                                                  tmp_path: Path) -> None:
    page = context.new_page()
    widget = Widget(page, pages["preview"])
    widget.type_code(CORRECT)
    for grade_id in ANSWER_IDS:
        page.fill(f".cr-answer[data-answer-id={grade_id}]", f"我的{grade_id}回答")
    page.fill(".cr-student-id", "s001")
    with page.expect_download() as download:
        page.click("button[data-action=download]")
    assert download.value.suggested_filename == "s001.ipynb"
    downloaded = tmp_path / "s001.ipynb"
    download.value.save_as(downloaded)

    released = json.loads(course.release_notebook.read_text(encoding="utf-8"))
    handed_in = json.loads(downloaded.read_text(encoding="utf-8"))
    changed = [i for i, (a, b) in enumerate(zip(released["cells"], handed_in["cells"], strict=True)) if a != b]
    sources = {handed_in["cells"][i]["metadata"]["nbgrader"]["grade_id"]: "".join(handed_in["cells"][i]["source"])
               for i in changed}
    assert sorted(sources) == sorted([ANSWER_GRADE_ID, *ANSWER_IDS])
    assert sources[ANSWER_GRADE_ID] == CORRECT
    assert sources["q1"] == "**你的答案：**\n\n我的q1回答\n"

    folder = tmp_path / "submissions"
    folder.mkdir()
    downloaded.rename(folder / downloaded.name)
    assert main(["grade", str(folder), "--course", str(course.root), "--jobs", "1"]) == 0
    with course.report_csv.open(encoding="utf-8") as report:
        row = next(r for r in csv.DictReader(report) if r["student_id"] == "s001")
    assert {k: float(row[k]) for k in ("normal", "boundary", "aggregation", "auto_total")} == {
        "normal": 1.5, "boundary": 1.0, "aggregation": 0.5, "auto_total": 3.0}
    assert row["flags"] == "", row["flags"]


def test_real_preview_page_checks_and_offers_answer_boxes(context, pages, requests) -> None:
    widget = Widget(context.new_page(), pages["real"])
    boxes = widget.page.query_selector_all(".celltag_course-answer > .cr-answer")
    assert [box.get_attribute("data-answer-id") for box in boxes] == ANSWER_IDS
    widget.type_code(CORRECT)
    assert [status for status, _ in widget.check().values()] == ["pass"] * 3
    assert requests.off_host() == []
    assert requests.errors == []
