"""The runner in headless Chromium: the CodeMirror editor, checks (one verdict with the grader), run
output, saved work, stop and time limits, the page's hints, keyboard use, the 学号 rule, hand-in, fonts,
the start-up snapshot and no off-site requests.

Pages come from the fixture site (see conftest.py); Python runs in the page through the site's Pyodide.
"""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import pytest
from quarto_dom import RAW_TEX

from coursekit.cli import main
from coursekit.grading.course import Course
from coursekit.lesson import parse_lesson

pytestmark = pytest.mark.browser

LESSON_11 = parse_lesson(Path(__file__).resolve().parents[2] / "lessons" / "lesson11_grpo.qmd")
ANSWER_GRADE_ID = LESSON_11.exercise_id
CORRECT = LESSON_11.reference_code
# Sample variance (divide by G - 1): normal inputs fail, boundary inputs still pass.
SAMPLE_VARIANCE = LESSON_11.blank_code.replace(
    "var = ______", "var = sum((r - mean) ** 2 for r in rewards) / max(len(rewards) - 1, 1)", 1
).replace("return ______", "return [0.0] * len(rewards)", 1)
INFINITE_LOOP = "while True:\n    pass\n"
ANSWER_IDS = [div.attrs["id"] for div in LESSON_11.answers()]
RUNNER = "document.querySelector('.cr-host').courseRunner"
# Extended_Pictographic: characters that need an emoji font (▶ ✔ ⬇ 💡 ...)
PICTOGRAPHS = r"/\p{Extended_Pictographic}/u"
SERIF = ("Serif", "Times", "Georgia", "Song", "Ming")


class Widget:
    """Drives the runner on one page."""

    def __init__(self, page: object, url: str):
        self.page = page
        page.goto(url)
        page.wait_for_selector(".cr-widget")

    def wait_ready(self) -> None:
        self.page.wait_for_selector(".cr-widget[data-state=ready]", timeout=60_000)

    def wait_editor(self) -> None:
        """Until CodeMirror has replaced the plain textarea (once Python has started, or on focus)."""
        self.page.wait_for_selector(".cr-editor[data-editor=codemirror] .cm-content", timeout=60_000)

    @property
    def code(self) -> str:
        return self.page.evaluate(f"{RUNNER}.code")

    def type_code(self, code: str) -> None:
        """Replace the editor's text (CodeMirror's own change path, as a paste would)."""
        self.page.evaluate(f"code => {{ {RUNNER}.code = code; }}", code)

    def completed(self) -> int:
        return int(self.page.get_attribute(".cr-widget", "data-completed") or 0)

    def wait_completed(self, before: int, timeout_ms: int = 60_000) -> None:
        self.page.wait_for_function(
            f"() => Number(document.querySelector('.cr-widget').dataset.completed || 0) > {before}",
            timeout=timeout_ms)

    def _click_and_wait(self, action: str, timeout_ms: int = 60_000) -> None:
        before = self.completed()
        self.page.click(f"button[data-action={action}]")
        self.wait_completed(before, timeout_ms)

    def results(self) -> dict[str, tuple[str, str]]:
        return {li.get_attribute("data-check-id"): (li.get_attribute("data-status"), li.inner_text())
                for li in self.page.query_selector_all(".cr-check")}

    def check(self) -> dict[str, tuple[str, str]]:
        """{check id: (pass|fail, Chinese line)} after one Check."""
        self._click_and_wait("check")
        return self.results()

    def run(self) -> str:
        self._click_and_wait("run")
        return self.page.inner_text(".cr-output")


# resolves once the page has not scrolled for two frames (a smooth scroll has ended), or after 3 s
SCROLL_SETTLED = """() => new Promise(resolve => {
    let last = null, still = 0;
    const frame = () => {
        still = scrollY === last ? still + 1 : 0;
        last = scrollY;
        if (still >= 2) resolve(); else requestAnimationFrame(frame);
    };
    requestAnimationFrame(frame);
    setTimeout(resolve, 3000);
})"""


def statuses(results: dict[str, tuple[str, str]]) -> dict[str, str]:
    return {k: status for k, (status, _) in results.items()}


# ---------------------------------------------------------------- checks: one verdict with the grader

def test_blank_code_fails_every_check_and_says_the_aggregation_is_scored_on_the_own_run(tab, pages) -> None:
    widget = Widget(tab, pages["preview"])
    assert widget.code == LESSON_11.blank_code
    results = widget.check()
    assert statuses(results) == {"normal": "fail", "boundary": "fail", "aggregation": "fail"}
    assert "正常输入：未通过" in results["normal"][1] and "NameError" in results["normal"][1]
    aggregation = results["aggregation"][1]
    assert "长度聚合与 GSPO（按你自己代码的运行结果计分）：未通过" in aggregation
    assert "response_mean" in aggregation and "评分时此项 0 分" in aggregation


def test_wrong_variance_fails_with_the_graders_chinese_reason_and_the_own_run_it_never_reached(tab, pages):
    """The self-checks (the test cells' SELF-CHECKS blocks) say why, in the hidden tests' words, not a
    bare AssertionError of the given asserts."""
    widget = Widget(tab, pages["preview"])
    widget.type_code(SAMPLE_VARIANCE)
    results = widget.check()
    assert statuses(results) == {"normal": "fail", "boundary": "fail", "aggregation": "fail"}
    for check_id in ("normal", "boundary"):
        # the reason first, and no line number of the self-check code the student never sees (issue 33)
        reason = results[check_id][1].split("\n", 1)[1]  # after the title line
        assert reason.startswith("本课约定用总体方差（除以 G），不是样本方差（除以 G-1；"
                                 "verl 与 TRL 的 torch.std 是样本方差"), reason
        assert not re.search(r"第 \d+ 行", results[check_id][1]), results[check_id][1]
    assert "3 组检查中通过 0 组" in widget.page.inner_text(".cr-summary")


def test_std_equal_to_zero_fails_a_self_check_with_the_graders_reason(tab, pages) -> None:
    widget = Widget(tab, pages["preview"])
    widget.type_code(CORRECT.replace("if std < eps:", "if std == 0:"))
    results = widget.check()
    assert statuses(results) == {"normal": "pass", "boundary": "fail", "aggregation": "pass"}
    assert "浮点误差让 std 略大于 0，组没有归零：要用 std < eps 判断，而不是 std == 0" in results["boundary"][1]


def test_a_rewritten_guard_is_named_as_the_rubrics_veto(tab, pages) -> None:
    widget = Widget(tab, pages["preview"])
    widget.type_code(CORRECT.replace("if not rewards:", "if len(rewards) == 0:"))
    results = widget.check()
    assert [status for status, _ in results.values()] == ["pass"] * 3  # full automatic points ...
    given = widget.page.inner_text(".cr-given-error")  # ... and the veto, named
    assert "题目给出的检查" in given and "`if not rewards:` 被删除或改动" in given and "一票否决" in given
    assert "一票否决" in widget.page.inner_text(".cr-summary")


def test_changed_recipe_fails_the_own_run_check_with_the_values(tab, pages) -> None:
    widget = Widget(tab, pages["preview"])
    widget.type_code(CORRECT.replace("ratios = [4., .25]", "ratios = [4., .25]\nratios = (4., .25)"))
    results = widget.check()
    assert statuses(results) == {"normal": "pass", "boundary": "pass", "aggregation": "fail"}
    assert "你的 ratios = (4.0, 0.25)，应为 [4.0, 0.25]" in results["aggregation"][1]


def test_correct_answer_passes_all_checks_without_leaving_localhost(tab, pages, requests) -> None:
    widget = Widget(tab, pages["preview"])
    widget.type_code(CORRECT)
    for _ in range(2):  # the second Check reuses the warm worker
        results = widget.check()
        assert [status for status, _ in results.values()] == ["pass"] * 3
    assert "全部 3 组检查通过" in widget.page.inner_text(".cr-summary")
    widget.wait_editor()
    assert any(u.endswith("/assets/pyodide/pyodide.asm.wasm") for u in requests.urls)
    assert any(u.endswith("/assets/runner/editor.js") for u in requests.urls)
    assert requests.off_host() == []
    assert requests.errors == []


def test_run_shows_stdout_and_the_traceback(tab, pages) -> None:
    widget = Widget(tab, pages["preview"])
    widget.type_code('print("你好", 1 + 1)\nimport sys\nprint("警告", file=sys.stderr)\n1 / 0\n')
    output = widget.run()
    assert "你好 2" in output and "警告" in output
    assert 'File "<你的代码>", line 4' in output and "ZeroDivisionError: division by zero" in output
    assert widget.page.query_selector(".cr-output .cr-stderr") is not None


# ---------------------------------------------------------------- the editor (CodeMirror 6)

def test_editor_is_codemirror_with_highlighting_line_numbers_and_brackets(tab, pages) -> None:
    page = tab
    widget = Widget(page, pages["preview"])
    widget.wait_editor()
    assert page.locator(".cr-editor .cm-editor").count() == 1
    assert page.locator("textarea.cr-editor").count() == 0, "the hand-written textarea editor is gone"
    assert page.locator(".cm-lineNumbers .cm-gutterElement", has_text="1").first.is_visible()
    keyword = page.locator(".cm-line", has_text="def group_advantages").locator("span").first
    assert keyword.inner_text() == "def"
    assert keyword.evaluate("e => getComputedStyle(e).color") != page.locator(".cm-content").evaluate(
        "e => getComputedStyle(e).color"), "keywords are highlighted"
    widget.type_code("print(len([1, 2]))")
    page.click(".cm-content")
    page.keyboard.press("Control+End")
    assert page.locator(".cm-matchingBracket").count() == 2  # the last ")" and its "("
    label = page.get_attribute(".cm-content", "aria-label")
    assert "代码编辑器" in label and "Esc" in label
    assert page.get_attribute(".cm-content", "role") == "textbox"


def test_editor_keys_indent_dedent_undo_redo_and_close_brackets(tab, pages) -> None:
    page = tab
    widget = Widget(page, pages["preview"])
    widget.type_code("")
    widget.wait_editor()
    page.click(".cm-content")
    page.keyboard.type("def f(")
    assert widget.code == "def f()", "the closing bracket is added"
    page.keyboard.type("):")  # typing the closing bracket steps over it
    page.keyboard.press("Enter")
    page.keyboard.type("return 1")
    assert widget.code == "def f():\n    return 1"
    page.wait_for_timeout(600)  # CodeMirror groups edits less than 500 ms apart into one undo step
    page.keyboard.press("Shift+Tab")
    assert widget.code == "def f():\nreturn 1"
    page.keyboard.press("Control+z")
    assert widget.code == "def f():\n    return 1"
    page.keyboard.press("Control+Shift+Z")  # event.key "Z", as a real keyboard sends
    assert widget.code == "def f():\nreturn 1"
    page.keyboard.press("Control+z")
    page.keyboard.press("Tab")
    assert widget.code == "def f():\n        return 1"


def test_shortcuts_run_and_check_and_escape_then_tab_leaves_the_editor(tab, pages) -> None:
    page = tab
    widget = Widget(page, pages["preview"])
    widget.wait_ready()
    widget.wait_editor()
    widget.type_code('print("快捷键")')
    page.click(".cm-content")
    before = widget.completed()
    page.keyboard.press("Control+Enter")
    widget.wait_completed(before)
    assert "快捷键" in page.inner_text(".cr-output")
    widget.type_code(CORRECT)
    page.click(".cm-content")
    before = widget.completed()
    page.keyboard.press("Control+Shift+Enter")
    widget.wait_completed(before)
    assert page.get_attribute(".cr-summary", "data-passed") == "3"
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.classList.contains('cm-content')"), "Tab indents in the editor"
    page.keyboard.press("Escape")
    page.keyboard.press("Tab")
    assert not page.evaluate("document.activeElement.classList.contains('cm-content')"), "Esc then Tab leaves"


def test_input_method_composition_commits_only_the_chosen_characters(context, pages) -> None:
    page = context.new_page()
    widget = Widget(page, pages["preview"])
    widget.type_code("x = ''")
    widget.wait_editor()
    page.click(".cm-content")
    page.keyboard.press("Control+End")
    page.keyboard.press("ArrowLeft")
    cdp = context.new_cdp_session(page)
    for partial in ("n", "ni", "nih", "niha", "nihao"):  # 拼音 as it is typed, then the chosen words
        cdp.send("Input.imeSetComposition", {"text": partial, "selectionStart": len(partial),
                                             "selectionEnd": len(partial)})
    cdp.send("Input.insertText", {"text": "你好"})
    page.wait_for_function(f"() => {RUNNER}.code === \"x = '你好'\"")
    page.keyboard.press("Control+Enter")
    page.wait_for_function("() => document.querySelector('.cr-output').textContent.includes('没有输出')")


def test_the_editor_fills_its_column_on_a_bootstrap_styled_page(tab, pages, requests) -> None:
    """Quarto 1.10's pages are Bootstrap 5.3 (its themes compile Bootstrap's CSS): the editor must not shrink."""
    page = tab
    page.set_viewport_size({"width": 1366, "height": 900})
    widget = Widget(page, pages["bootstrap"])
    widget.wait_editor()
    widths = page.evaluate("""() => {
        const main = document.querySelector('main.content');
        const inner = main.clientWidth - parseFloat(getComputedStyle(main).paddingLeft)
                      - parseFloat(getComputedStyle(main).paddingRight);
        return { column: inner, widget: document.querySelector('.cr-widget').getBoundingClientRect().width,
                 editor: document.querySelector('.cr-editor').getBoundingClientRect().width,
                 cm: document.querySelector('.cm-editor').getBoundingClientRect().width,
                 pad: document.querySelector('.cr-widget').clientWidth
                      - document.querySelector('.cr-editor').getBoundingClientRect().width };
    }""")
    assert abs(widths["widget"] - widths["column"]) <= 1, widths
    assert widths["editor"] >= widths["widget"] - 2 * 16, widths  # only the widget's own padding between
    assert abs(widths["cm"] - (widths["editor"] - 2)) <= 1, widths  # CodeMirror fills the editor box
    clipped = page.evaluate("""() => {
        const content = document.querySelector('.cm-content').getBoundingClientRect();
        const scroller = document.querySelector('.cm-scroller');
        return { wider: scroller.scrollWidth - scroller.clientWidth,
                 lines: [...document.querySelectorAll('.cm-line')]
                     .filter(l => l.getBoundingClientRect().right > content.right + 1).length };
    }""")
    assert clipped == {"wider": 0, "lines": 0}, "long lines wrap inside the editor instead of being cut off"
    widget.type_code(CORRECT)
    assert [status for status, _ in widget.check().values()] == ["pass"] * 3
    assert requests.off_host() == []


def test_a_head_worker_booted_otherwise_is_ended_and_replaced(context, pages) -> None:
    """runner.js adopts the worker the page's <head> started only if it was started from the URL
    runner.js would use (worker and boot message); otherwise it ends it and starts its own."""
    page = context.new_page()
    page.add_init_script("""Object.defineProperty(window, "courseRunnerWorker", {
      configurable: true, get() { return this.__early; },
      set(early) {
        early.url += "-other";
        const terminate = early.worker.terminate.bind(early.worker);
        early.worker.terminate = () => { window.__earlyEnded = true; terminate(); };
        this.__early = early;
      } });""")
    widget = Widget(page, pages["preview"])
    widget.wait_ready()
    widget.type_code(CORRECT)
    assert [status for status, _ in widget.check().values()] == ["pass"] * 3, "its own worker runs the checks"
    assert page.evaluate("window.__earlyEnded === true"), "the head's worker was not ended"


def test_code_shows_at_once_and_what_is_typed_before_the_editor_is_built_is_kept(context, pages) -> None:
    """Start-up: the page shows the code in a plain textarea and builds CodeMirror after Python has
    started (here held back by delaying editor.js); the worker is the one the page's <head> started."""
    page = context.new_page()
    held: list[object] = []
    page.route("**/assets/runner/editor.js", lambda route: held.append(route))
    boot_workers: list[str] = []
    page.on("worker", lambda worker: boot_workers.append(worker.url) if "#" in worker.url else None)
    widget = Widget(page, pages["preview"])
    plain = page.locator(".cr-editor[data-editor=plain] textarea.cr-plain-code")
    assert plain.input_value() == LESSON_11.blank_code
    assert "代码编辑器" in plain.get_attribute("aria-label")
    widget.wait_ready()
    widget.type_code(CORRECT)
    assert [status for status, _ in widget.check().values()] == ["pass"] * 3, "Check reads the textarea"
    plain.click()
    page.keyboard.press("Control+End")
    page.keyboard.type("\nprint('早')")
    assert widget.code == CORRECT + "\nprint('早')"
    page.wait_for_function("() => document.querySelector('.cr-editor').dataset.editor === 'plain'")
    while not held:  # editor.js was asked for (Python started, or the focus): let it through now
        page.wait_for_timeout(50)
    held[0].continue_()
    widget.wait_editor()
    assert page.locator("textarea.cr-plain-code").count() == 0
    page.wait_for_function("document.activeElement.classList.contains('cm-content')", timeout=10_000)
    page.keyboard.type("!")  # the caret went over with the text
    assert widget.code == CORRECT + "\nprint('早')!"
    assert len(boot_workers) == 1, boot_workers
    widget = Widget(page, pages["preview"])
    assert widget.code == CORRECT + "\nprint('早')!", "typing in either is saved"


def test_without_the_editor_bundle_the_textarea_still_runs_the_code(tab, pages, requests) -> None:
    page = tab
    page.route("**/assets/runner/editor.js", lambda route: route.abort())
    widget = Widget(page, pages["preview"])
    page.click("textarea.cr-plain-code")  # asks for the editor at once (before Python is ready)
    widget.wait_ready()
    page.wait_for_function("() => document.querySelector('.cr-status').textContent.includes('代码编辑器无法加载')")
    page.fill("textarea.cr-plain-code", 'print("仍可运行")')
    before = widget.completed()
    page.keyboard.press("Control+Enter")
    widget.wait_completed(before)
    assert "仍可运行" in page.inner_text(".cr-output")
    assert requests.errors == [], "the failed import is reported in the status, not thrown"


# ---------------------------------------------------------------- saved work, stop, time limits, crashes

def test_reload_keeps_the_code_and_start_over_restores_the_blanks(tab, pages) -> None:
    page = tab
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


def test_infinite_loop_is_stopped_and_the_time_limit_is_said_once(tab, pages, time_limit_s) -> None:
    page = tab
    widget = Widget(page, pages["preview"])
    widget.type_code(INFINITE_LOOP)
    widget.wait_ready()
    page.click("button[data-action=check]")
    page.wait_for_selector(".cr-widget[data-busy=true]")
    page.click("button[data-action=stop]")
    page.wait_for_selector(".cr-widget[data-busy=false]")
    assert "已停止" in page.inner_text(".cr-checks")
    assert page.evaluate("1 + 1") == 2  # the page's own thread was never blocked

    widget.type_code('while True:\n    print("刷屏")\n')  # floods the page; no Stop: the time limit ends it
    output = widget.run()
    assert "输出过长" in output and len(output) < 60_000
    message = f"运行超过 {time_limit_s:g} 秒"
    assert page.inner_text(".cr-widget").count(message) == 1, "the time-limit message is shown once"

    widget.type_code(CORRECT)
    assert [status for status, _ in widget.check().values()] == ["pass"] * 3


def test_a_loop_in_the_code_times_out_per_step_as_in_the_grader(tab, pages, time_limit_s) -> None:
    """The grader interrupts the cell and goes on; so does Check: what was defined before the loop stays."""
    widget = Widget(tab, pages["preview"])
    widget.type_code(CORRECT.replace("return [0.0] * len(rewards)", "while True:\n            pass"))
    results = widget.check()
    assert statuses(results) == {"normal": "pass", "boundary": "fail", "aggregation": "fail"}
    assert f"运行超过 {time_limit_s:g} 秒" in results["boundary"][1]
    assert f"运行超过 {time_limit_s:g} 秒" in widget.page.inner_text(".cr-setup-error")


def test_a_crashed_interpreter_is_replaced_and_fails_every_check(tab, pages) -> None:
    widget = Widget(tab, pages["preview"])
    widget.type_code("import os\nos._exit(1)\n")  # ends the interpreter itself, not just the code
    assert "Python 内部出错（Program terminated with exit(1)），已重新启动。" in widget.run()
    widget.type_code(CORRECT + "\nimport os\nos._exit(1)\n")
    results = widget.check()
    assert statuses(results) == {"normal": "fail", "boundary": "fail", "aggregation": "fail"}
    assert "所有检查都不得分" in widget.page.inner_text(".cr-setup-error")
    widget.type_code(CORRECT)
    assert [status for status, _ in widget.check().values()] == ["pass"] * 3


# ---------------------------------------------------------------- the page's hints, keyboard, fonts

def test_hints_are_the_pages_own_widget_with_one_state(tab, pages) -> None:
    page = tab
    Widget(page, pages["real"]).wait_ready()  # its status line then says what the hints do, not Python's start
    assert page.locator(".cr-hint, .cr-hints").count() == 0, "the runner has no hint panel of its own"
    opened = []
    while page.get_attribute("button[data-action=hint]", "aria-disabled") == "false":
        page.click("button[data-action=hint]")
        opened.append([d.get_attribute("data-level") for d in page.query_selector_all("details.course-hint[open]")])
        # the opened level scrolls into view smoothly: a click while the page still moves lands where the button
        # was (a fresh-clone run at load 6 found level 3 still shut after the third click, opened by a fifth)
        page.evaluate(SCROLL_SETTLED)
    assert opened == [["1"], ["1", "2"], ["1", "2", "3"], ["1", "2", "3", "4"]]
    # the status line says where the opened hint is: the page puts the hints under the code
    assert page.inner_text(".cr-status") == "已打开提示 4：完整答案（在代码框下方）"
    level4 = page.locator("details.course-hint[data-level='4']").inner_text()
    assert "参考答案版" in level4 and all(line.strip() not in level4 for line in LESSON_11.answer_lines)
    page.locator("details.course-hint[data-level='3'] > summary").click()  # closing on the page counts too
    # the details' toggle event is queued: reload once the runner has seen it (its button says level 3)
    page.wait_for_function("() => document.querySelector('button[data-action=hint]').innerText === '提示（第 3 级）'")
    Widget(page, pages["real"])
    assert [d.get_attribute("data-level") for d in page.query_selector_all("details.course-hint[open]")] == ["1", "2"]
    assert page.inner_text("button[data-action=hint]") == "提示（第 3 级）"


def test_keyboard_skip_link_and_focus_stays_on_the_pressed_button(tab, pages) -> None:
    page = tab
    widget = Widget(page, pages["real"])
    widget.wait_ready()
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.textContent") == "跳到练习（代码编辑器）"
    page.keyboard.press("Enter")  # focuses the code, which builds the editor if it is not built yet
    page.wait_for_function("document.activeElement.classList.contains('cm-content')", timeout=10_000)
    widget.type_code(CORRECT)
    for action in ("run", "check"):
        page.focus(f"button[data-action={action}]")
        before = widget.completed()
        page.keyboard.press("Enter")
        widget.wait_completed(before)
        assert page.evaluate("document.activeElement.dataset.action") == action


def test_runner_text_uses_sans_serif_fonts_and_no_emoji(context, pages) -> None:
    page = context.new_page()
    widget = Widget(page, pages["real"])
    widget.check()
    assert page.evaluate(f"() => {PICTOGRAPHS}.test(document.querySelector('.cr-widget').innerText)") is False
    cdp = context.new_cdp_session(page)
    cdp.send("DOM.enable")
    cdp.send("CSS.enable")
    root = cdp.send("DOM.getDocument", {"depth": -1})["root"]["nodeId"]
    for selector in ("button[data-action=run]", ".cr-summary", ".cr-check-title", ".cr-id-rule", ".cr-status"):
        node = cdp.send("DOM.querySelector", {"nodeId": root, "selector": selector})["nodeId"]
        fonts = [f["familyName"] for f in cdp.send("CSS.getPlatformFontsForNode", {"nodeId": node})["fonts"]]
        assert fonts and not any(word in f for f in fonts for word in SERIF), (selector, fonts)
        assert not any("JP" in f for f in fonts), (selector, fonts)


# ---------------------------------------------------------------- other pages, the 学号 rule, hand-in

def test_quarto_page_attaches_to_the_course_runner_div(tab, pages, requests) -> None:
    widget = Widget(tab, pages["quarto"])
    assert not widget.page.is_visible(".course-runner > .cell")
    answer_boxes = widget.page.query_selector_all(".course-answer > .cr-answer")
    assert [box.get_attribute("data-answer-id") for box in answer_boxes] == ["q1", "q2", "q3", "explanation"]
    assert not widget.page.is_visible("button[data-action=hint]"), "no hint widget on this page: no button"
    widget.type_code(CORRECT)
    assert [status for status, _ in widget.check().values()] == ["pass"] * 3
    assert any("/site_libs/quarto-contrib/course-runner-2.0.0/runner-worker.js" in u for u in requests.urls)
    assert requests.off_host() == []


# Each runner worker the page makes, with when (Date.now()) and the type of the first message posted to it: the
# runner's own (its boot in the URL's fragment, or "init") or the start-up snapshot's maker ("snapshot"), which
# runner.js starts once the page has been idle SNAPSHOT_IDLE_MS after a fresh start, and which loads Pyodide again.
COUNT_WORKERS = """(() => {
  window.__runnerWorkers = [];
  const Native = window.Worker;
  window.Worker = class extends Native {
    constructor(url, options) {
      super(url, options);
      if (!String(url).includes("runner-worker.js")) return;
      const made = { url: String(url), at: Date.now(), first: null };
      window.__runnerWorkers.push(made);
      const post = this.postMessage.bind(this);
      this.postMessage = (message, ...rest) => { made.first = made.first || message.type; post(message, ...rest); };
    }
  };
  Object.defineProperty(window, "courseRunnerWorker", {
    configurable: true, get() { return this.__early; },
    set(early) {
      window.__earlyAt = document.querySelectorAll("script[src$='runner.js']").length;  // runner.js tags parsed so far
      const terminate = early.worker.terminate.bind(early.worker);
      early.worker.terminate = () => { window.__earlyEnded = true; terminate(); };
      this.__early = early;
    } });
})();"""


def test_quarto_page_starts_python_in_its_head_and_loads_each_runner_file_once(fresh_context, pages) -> None:
    """runner.lua puts the preview's inline boot first in the Quarto page's <head> (its own dependency,
    injected before runner.js's): window.courseRunnerWorker is set before runner.js runs, runner.js adopts
    it, and runner-worker.js and Pyodide's files are each requested once up to the first Check. The snapshot's
    maker, which a slow machine starts before the Check (1.5 s idle after Python is ready), is left out: its
    worker by its first message, its requests by their start (the browser's clock, as the page's Date.now())."""
    started: list[tuple[str, float]] = []
    fresh_context.on("requestfinished", lambda request: started.append((request.url, request.timing["startTime"])))
    page = fresh_context.new_page()
    page.add_init_script(COUNT_WORKERS)
    widget = Widget(page, pages["quarto"])
    widget.wait_ready()
    widget.type_code(CORRECT)
    assert [status for status, _ in widget.check().values()] == ["pass"] * 3
    workers = page.evaluate("window.__runnerWorkers")
    assert page.evaluate("window.__earlyAt") == 0, "the boot ran before any runner.js tag was parsed"
    assert page.evaluate("window.__earlyEnded") is None, "runner.js ended the head's worker instead of adopting it"
    runners = [w for w in workers if w["first"] != "snapshot"]
    assert len(runners) == 1 and "#" in runners[0]["url"], workers
    maker_at = min([w["at"] for w in workers if w["first"] == "snapshot"], default=float("inf"))
    seen = [url for url, start in list(started) if start < maker_at]
    for name in ("runner-worker.js", "runner.js", "runner-config-lesson11_grpo.json", "pyodide.mjs",
                 "pyodide.asm.wasm", "python_stdlib.zip"):
        requested = [u for u in seen if u.split("#")[0].split("?")[0].endswith("/" + name)]
        assert len(requested) == 1, (name, requested)


ID_CASES = [("2024001 张三", "invalid"), ("张三", "invalid"), ("_s1", "invalid"), ("s" * 65, "invalid"), ("", "empty"),
            ("2024001", "valid"), ("s001.b-2_c", "valid")]


def test_student_id_is_validated_as_typed_with_the_graders_rule(context, pages) -> None:
    """Each id typed in turn into one page (its Python started once): the widget's state and aria-invalid
    as the grader's STUDENT_ID rule says, and no file saved under an id the grader would not accept."""
    from coursekit.grading.intake.ingest import STUDENT_ID

    page = context.new_page()
    widget = Widget(page, pages["preview"])
    assert "字母" in page.inner_text(".cr-id-rule")
    widget.wait_ready()  # else "Python 已就绪", arriving later under load, replaces the status read below
    downloads = []
    page.on("download", lambda d: downloads.append(d))
    for typed, state in ID_CASES:
        assert (STUDENT_ID.fullmatch(typed) is not None) == (state == "valid"), typed
        page.fill(".cr-student-id", typed)
        assert page.get_attribute(".cr-widget", "data-student-id") == state, typed
        assert page.get_attribute(".cr-student-id", "aria-invalid") == str(state == "invalid").lower(), typed
        if state != "valid":
            page.click("button[data-action=download]")
            page.wait_for_timeout(300)
            assert downloads == [], f"a file was saved under the id {typed!r}, which the grader would not accept"
            assert "学号" in page.inner_text(".cr-status"), typed


def test_downloaded_notebook_autogrades_to_full_automatic_points(tab, pages, course: Course,
                                                                  tmp_path: Path) -> None:
    page = tab
    widget = Widget(page, pages["preview"])
    widget.type_code(CORRECT)
    for grade_id in ANSWER_IDS:
        page.fill(f".cr-answer[data-answer-id={grade_id}]", f"我的{grade_id}回答")
    page.fill(".cr-student-id", "2024001")
    with page.expect_download() as download:
        page.click("button[data-action=download]")
    assert download.value.suggested_filename == "2024001.ipynb"
    downloaded = tmp_path / "2024001.ipynb"
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
        row = next(r for r in csv.DictReader(report) if r["student_id"] == "2024001")
    assert {k: float(row[k]) for k in ("normal", "boundary", "aggregation", "auto_total")} == {
        "normal": 1.5, "boundary": 1.0, "aggregation": 0.5, "auto_total": 3.0}
    assert row["flags"] == "", row["flags"]


def test_real_preview_page_checks_and_offers_answer_boxes(tab, pages, requests) -> None:
    widget = Widget(tab, pages["real"])
    boxes = widget.page.query_selector_all(".celltag_course-answer > .cr-answer")
    assert [box.get_attribute("data-answer-id") for box in boxes] == ANSWER_IDS
    widget.type_code(CORRECT)
    assert [status for status, _ in widget.check().values()] == ["pass"] * 3
    assert requests.off_host() == []
    assert requests.errors == []


# The same, only in shown text (not in a closed hint) within a screen of the viewport: what the reader sees or
# scrolls to next.
NEAR = ("const near = (n) => { const box = n.parentElement.getBoundingClientRect(); return n.parentElement"
        ".checkVisibility() && box.bottom > -innerHeight && box.top < 2 * innerHeight; };")
RAW_TEX_NEAR = RAW_TEX.replace("raw.push(", "near(n) && raw.push(").replace("const raw = [];", "const raw = [];" + NEAR)
TYPESET = "() => document.querySelectorAll('mjx-container').length"
# What comes first from here on: the Check's result (the widget's data-completed) or a formula typeset.
ORDER = """() => {
    window.__order = [];
    new MutationObserver(changes => {
        for (const c of changes) {
            if (c.type === "attributes") __order.push("result");
            else if ([...c.addedNodes].some(n => n.nodeName === "MJX-CONTAINER")) __order.push("typeset");
        }
    }).observe(document.body, {subtree: true, childList: true, attributes: true, attributeFilter: ["data-completed"]});
}"""
SCROLL_TO_WAITING_TEX = r"""() => {  /* the first shown text still in raw TeX, to the screen's middle */
    const walker = document.createTreeWalker(document.querySelector('main') || document.body, NodeFilter.SHOW_TEXT);
    for (let n = walker.nextNode(); n; n = walker.nextNode()) {
        if (n.parentElement.closest('pre, code, textarea, script, style, .cr-widget, .cm-editor')) continue;
        if (/\$[^$\s][^$]*\$|\\\(|\\\[/.test(n.textContent) && n.parentElement.checkVisibility()) {
            n.parentElement.scrollIntoView({block: "center"});
            return;
        }
    }
}"""


def page_holding_the_wasm(context: object) -> tuple[object, list[object], list[str]]:
    """A 1280x900 page of `context` whose requests for Pyodide's wasm are held (Python neither starts nor fails until
    they are let go), the held requests, and the page's errors (uncaught and console) as they come."""
    held: list[object] = []
    context.route("**/pyodide.asm.wasm", lambda route: held.append(route))
    page = context.new_page()
    page.set_viewport_size({"width": 1280, "height": 900})
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    return page, held, errors


def check_while_python_starts(page: object, held: list[object], order: str) -> list[str]:
    """From the top of the page, Check pressed while Python starts (a click from script: no scroll brings formulas
    near the screen), then the held wasm let go; once Python is ready and every formula is typeset
    (window.courseMathTypeset), what came first from the click on (`order`: ORDER or DRAW_ORDER)."""
    page.evaluate("() => scrollTo(0, 0)")
    page.evaluate(order)
    page.evaluate("() => document.querySelector('button[data-action=check]').click()")
    for route in held:
        route.continue_()
    held.clear()
    page.wait_for_selector(".cr-widget[data-state=ready]", timeout=120_000)
    page.evaluate("() => { window.courseMathTypeset.then(() => { window.__allTypeset = true; }); }")
    page.wait_for_function("() => window.__allTypeset === true", timeout=60_000)
    return page.evaluate("window.__order")


def test_quarto_formulas_near_the_screen_come_at_once_and_the_rest_yield_to_pythons_start(fresh_context,
                                                                                          pages) -> None:
    """With Pyodide's wasm held back (Python neither starts nor fails), the formulas on screen and a screen
    below are typeset (issue 25: no raw TeX in view) and the others wait (issue 33: compiling them all
    competed with Pyodide's start); those scrolled to are typeset at once, still before Python has
    started; once Python has started every formula is typeset without any scrolling, after the result of a
    Check pressed while Python was starting (no typesetting while it is pending). The DOM Quarto writes with
    the site's include-in-header, MathJax and runner.lua's <head>; the preview's formulas are typeset when it
    is built (tests/site/test_site_browser.py: typeset as the page is parsed, no MathJax)."""
    page, held, errors = page_holding_the_wasm(fresh_context)
    try:
        page.goto(pages["quarto_math"])
        page.wait_for_selector(".cr-widget")
        page.wait_for_function("() => window.MathJax && MathJax.startup && MathJax.startup.promise", timeout=30_000)
        page.evaluate("() => { MathJax.startup.promise.then(() => { window.__started = true; }); }")
        page.wait_for_function("() => window.__started === true", timeout=30_000)
        assert page.evaluate(RAW_TEX_NEAR) == [], "raw TeX near the screen once MathJax has started"
        near = page.evaluate(TYPESET)
        waiting = page.evaluate(RAW_TEX)
        assert near > 0 and waiting, f"{near} formulas typeset, {len(waiting)} texts waiting: nothing yielded"
        page.evaluate(SCROLL_TO_WAITING_TEX)
        page.wait_for_function(f"() => ({RAW_TEX_NEAR})().length === 0 && ({TYPESET})() > {near}", timeout=30_000)
        assert page.evaluate(RAW_TEX), "no formula left to wait for Python"
        assert held, "the worker did not request pyodide.asm.wasm"
        assert page.get_attribute(".cr-widget", "data-state") == "loading", "Python started: the test held nothing"
        order = check_while_python_starts(page, held, ORDER)
        assert page.evaluate(RAW_TEX) == [], "formulas left untypeset after Python started"
        assert order[0] == "result" and "typeset" in order, order
        assert not errors, errors
    finally:
        for route in held:
            route.continue_()
        page.close()


# The preview's formulas still waiting to be drawn (a blank box in place of the SVG): all, and those on screen or
# within half a screen of it.
BLANKS = "() => document.querySelectorAll('mjx-blank').length"
BLANKS_NEAR = """() => [...document.querySelectorAll('mjx-blank')].filter(b => {
    const box = b.getBoundingClientRect(); return box.bottom > -innerHeight / 2 && box.top < 1.5 * innerHeight;
}).length"""
DRAWN = "() => document.querySelectorAll('mjx-container > svg').length"
# What comes first from here on: the Check's result (the widget's data-completed) or a formula drawn.
DRAW_ORDER = ORDER.replace('[...c.addedNodes].some(n => n.nodeName === "MJX-CONTAINER")',
                           'c.target.nodeName === "MJX-CONTAINER" && c.addedNodes.length')
# Every formula as a reader gets it: one SVG hidden from screen readers, its glyphs defined in the page, its MathML.
FORMULAS_WHOLE = """() => [...document.querySelectorAll('mjx-container')].every(m =>
    m.querySelectorAll(':scope > svg[aria-hidden=true]').length === 1 && m.querySelector(':scope > mjx-assistive-mml')
    && [...m.querySelectorAll('use')].every(u => document.getElementById(u.href.baseVal.slice(1))))"""


def test_preview_formulas_near_the_screen_are_drawn_and_the_rest_after_pythons_start(fresh_context, pages) -> None:
    """The preview's lesson page draws its formulas within half a screen of the viewport at once (none at its top,
    at 1280x900), the others once Python has started (issue 33: drawing all 118 at first paint took CPU that
    Pyodide's start competes for); one scrolled to is drawn at once, still before Python has started; once Python
    has started every formula is drawn whole without any scrolling, after the result of a Check pressed while
    Python was starting. Stands in for the CPU left to Pyodide's start: with the wasm held back (Python neither
    starts nor fails) the formulas far from the screen stay undrawn."""
    page, held, errors = page_holding_the_wasm(fresh_context)
    try:
        page.goto(pages["real"], wait_until="load")
        page.wait_for_selector(".cr-widget")
        page.wait_for_function(f"() => ({BLANKS_NEAR})() === 0", timeout=10_000)
        drawn, waiting = page.evaluate(DRAWN), page.evaluate(BLANKS)
        assert waiting > 100, (drawn, waiting)
        page.evaluate("() => document.querySelector('mjx-blank').scrollIntoView({block: 'center'})")
        page.wait_for_function(f"() => ({BLANKS_NEAR})() === 0 && ({DRAWN})() > {drawn}", timeout=10_000)
        assert page.evaluate(BLANKS) > 0, "no formula left to wait for Python"
        assert held, "the worker did not request pyodide.asm.wasm"
        assert page.get_attribute(".cr-widget", "data-state") == "loading", "Python started: the test held nothing"
        order = check_while_python_starts(page, held, DRAW_ORDER)
        assert page.evaluate(BLANKS) == 0 and page.evaluate(FORMULAS_WHOLE), "formulas left undrawn or broken"
        assert order[0] == "result" and "typeset" in order, order
        assert not errors, errors
    finally:
        for route in held:
            route.continue_()
        page.close()


def test_scroll_boxes_are_marked_once_python_has_started(fresh_context, pages) -> None:
    """On a phone the real preview page has a box that scrolls; site.js makes it a tab stop (axe-core's
    scrollable-region-focusable) once the runner's Python has started and has answered a Run clicked
    meanwhile, not before (reading every box's style and size forced the page's style and layout again
    after each change; issue 33). Stands in for the CPU left to Pyodide and to the first Check: with the
    wasm held back, nothing is marked after the page has loaded; once Python has started, nothing is
    marked while the Run (a 2 s sleep) is pending, after the frames in which site.js used to mark them."""
    held: list[object] = []
    fresh_context.route("**/pyodide.asm.wasm", lambda route: held.append(route))
    page = fresh_context.new_page()
    page.set_viewport_size({"width": 390, "height": 844})
    try:
        page.goto(pages["real"], wait_until="load")
        page.wait_for_selector(".cr-widget")
        assert held, "the worker did not request pyodide.asm.wasm"
        assert page.get_attribute(".cr-widget", "data-state") == "loading"
        assert page.locator("[data-course-scroll-stop]").count() == 0, "marked while Python starts"
        page.evaluate(f"code => {{ {RUNNER}.code = code; }}", "import time\ntime.sleep(2)\n")
        page.click("button[data-action=run]")
    finally:
        for route in held:
            route.continue_()
    page.wait_for_selector("html[data-course-runner-starting=false]", state="attached", timeout=120_000)
    for _ in range(3):  # what "course-runner-started" set off (after a frame and a timer) has run
        page.evaluate("() => new Promise(r => requestAnimationFrame(() => setTimeout(r, 50)))")
    assert page.get_attribute("html", "data-course-runner-busy") == "true", "the Run ended too soon to tell"
    assert page.locator("[data-course-scroll-stop]").count() == 0, "marked while the Run is pending"
    page.wait_for_selector("main [data-course-scroll-stop][tabindex='0']", state="attached", timeout=30_000)


# ---------------------------------------------------------------- start-up snapshot

# Prepended to runner-worker.js: each use of Cache Storage first requests /__cache-lookup (seen by the test).
SIGNAL_CACHE_LOOKUPS = """(() => {
  for (const name of ["match", "open", "has", "keys"]) {
    const native = CacheStorage.prototype[name];
    CacheStorage.prototype[name] = function (...args) {
      fetch(new URL("/__cache-lookup", self.location.href)).catch(() => {});
      return native.apply(this, args);
    };
  }
})();
"""


@pytest.mark.parametrize("name", ["preview", "quarto"])
def test_the_snapshot_lookup_runs_while_pyodide_mjs_is_fetched(fresh_context, pages, name) -> None:
    """The worker looks for its start-up snapshot in Cache Storage at once, not after pyodide.mjs has come
    (after it, the lookup held back Pyodide's own requests, the wasm among them, by 50-150 ms on a busy
    2-core machine; issue 33). Stands in for that timing: with pyodide.mjs held back, the lookup has begun;
    then Python starts fresh and checks."""
    held: list[object] = []
    fresh_context.route("**/__cache-lookup", lambda route: route.fulfill(status=204))

    def signalling_worker(route: object) -> None:
        response = route.fetch()
        route.fulfill(response=response, body=SIGNAL_CACHE_LOOKUPS + response.text())

    fresh_context.route("**/runner-worker.js", signalling_worker)
    fresh_context.route("**/pyodide.mjs", lambda route: held.append(route))
    page = fresh_context.new_page()
    try:
        with fresh_context.expect_event("request", lambda r: r.url.endswith("/__cache-lookup"), timeout=30_000):
            widget = Widget(page, pages[name])
        assert held, "the worker did not request pyodide.mjs"
        assert page.get_attribute(".cr-widget", "data-state") == "loading"
    finally:
        for route in held:
            route.continue_()
    fresh_context.unroute("**/pyodide.mjs")
    widget.wait_ready()
    assert page.get_attribute(".cr-widget", "data-start") == "fresh"
    widget.type_code(CORRECT)
    assert [status for status, _ in widget.check().values()] == ["pass"] * 3


def test_a_reload_restores_the_start_up_snapshot_and_still_checks(fresh_context, pages) -> None:
    page = fresh_context.new_page()
    widget = Widget(page, pages["preview"])
    widget.wait_ready()
    assert page.get_attribute(".cr-widget", "data-start") == "fresh"
    widget.type_code("import sys\nsys.modules['math'] = None\n")  # student code must never reach the snapshot
    widget.run()
    page.wait_for_selector(".cr-widget[data-snapshot=stored]", timeout=90_000)
    widget = Widget(page, pages["preview"])
    widget.wait_ready()
    assert page.get_attribute(".cr-widget", "data-start") == "snapshot"
    widget.type_code(CORRECT)
    assert [status for status, _ in widget.check().values()] == ["pass"] * 3
