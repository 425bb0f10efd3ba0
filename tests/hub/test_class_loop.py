"""The whole class in Chromium: an instructor and two students, each logged in through the hub's own
login page, from release to feedback.

nbgrader's UI, as used here: formgrader's Manage Assignments row icons (generate = glyphicon-education,
release = glyphicon-cloud-upload, collect = glyphicon-cloud-download; nbgrader/server_extensions/
formgrader/static/js/manage_assignments.js) and success modal (#success-modal); the formgrade page's
manual score input `input.score#<grade_id>`, saved on change (templates/formgrade/index.html.j2 l.63,
static/js/formgrade_models.js l.4); the lab extension's "Assignment List" command with its Fetch, Submit,
Fetch Feedback buttons and the notebook toolbar's Validate button (@jupyter/nbgrader 0.9.6).
"""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path

import pytest
from exercise_fill import fill_blanks
from hub_support import PASSWORDS, ClassHub
from playwright.sync_api import TimeoutError as PlaywrightTimeout

WAIT = 180_000  # ms: a server's first start and a grading run under load
SHOTS = os.environ.get("COURSEKIT_HUB_SHOTS")  # a folder: screenshots of the Validate dialog and formgrader
RIGHT = "var = sum((r - mean) ** 2 for r in rewards) / len(rewards)"
# alice's written explanation: `<` in inline math and a `cases` block (issue 33: "Misplaced &", `amp;`)
EXPLANATION = ("**你的实现解释、实际输出与边界说明：**\n\n用总体方差；当 $\\sigma<\\epsilon$ 时整组归零，"
               "$\\hat A_i>0$ 表示高于组均值：\n\n$$\n\\hat A_i = \\begin{cases} 0, & \\sigma<\\epsilon \\\\\n"
               "\\dfrac{r_i-\\mu}{\\sigma}, & \\text{否则} \\end{cases}\n$$\n")
REASON = ("本课约定用总体方差（除以 G），不是样本方差（除以 G-1；"
          "verl 与 TRL 的 torch.std 是样本方差，换算见正文“本课的约定”）")
SELF_CHECK_CODE = ("### BEGIN SELF-CHECKS", "_check_group", "_standardised")
WRONG = "var = sum((r - mean) ** 2 for r in rewards) / (len(rewards) - 1)  # sample variance"


def exercise_cell(release: Path, var_line: str, marker: str) -> str:
    """The released fill-in cell with its two blanks filled: `var_line`, and the zero-variance return."""
    cells = json.loads(release.read_text(encoding="utf-8"))["cells"]
    source = next("".join(c["source"]) for c in cells
                  if c["metadata"].get("nbgrader", {}).get("grade_id") == "group_advantages")
    return f"# {marker}\n" + fill_blanks(source, var_line)


def shot(page, name: str, element=None) -> None:  # noqa: ANN001
    """Save a screenshot of `page` (or of one element of it) as COURSEKIT_HUB_SHOTS/after-<name>.png when
    that folder is set. An element is cut from a capture of the whole page: Playwright's own element screenshot of
    formgrader's answer cell (12,000 px down the page, which stayed at scrollY 0 after scrollIntoView) came out
    white."""
    if SHOTS:
        Path(SHOTS).mkdir(parents=True, exist_ok=True)
        path = str(Path(SHOTS) / f"after-{name}.png")
        if element is None:
            page.screenshot(path=path)
        else:
            page.evaluate("() => scrollTo(0, 0)")  # the box in page coordinates, as a whole-page clip takes it
            page.screenshot(path=path, full_page=True, clip=element.bounding_box())


def log_in(browser, hub: ClassHub, user: str):  # noqa: ANN001, ANN201 - playwright objects
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    page = context.new_page()
    page.goto(f"{hub.base}/hub/login")
    page.fill("#username_input", user)
    page.fill("#password_input", PASSWORDS[user])
    page.click("#login_submit")
    page.wait_for_url(f"**/user/{user}/lab**", timeout=WAIT)
    page.wait_for_selector("#jp-main-dock-panel", timeout=WAIT)
    return page


def formgrader_action(page, icon: str) -> str:  # noqa: ANN001
    page.click(f"table .glyphicon-{icon}")
    page.wait_for_selector("#success-modal", state="visible", timeout=WAIT)
    text = page.inner_text("#success-modal")
    page.click("#success-modal button.btn-primary")
    page.wait_for_selector("#success-modal", state="detached", timeout=30_000)
    return text


def open_assignment_list(page) -> None:  # noqa: ANN001
    page.click(".lm-MenuBar-itemLabel:text-is('Nbgrader')")
    page.click(".lm-Menu-itemLabel:text-is('Assignment List')")
    page.wait_for_selector("#nbgrader-assignment-list", timeout=WAIT)


def wait_until(check, what: str, timeout: float = 180, log: Path | None = None) -> None:  # noqa: ANN001
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        if log is not None and log.is_file() and "error:" in log.read_text(errors="replace"):
            raise AssertionError(f"{what}: {log.read_text(errors='replace')[-2000:]}")
        time.sleep(0.5)
    raise AssertionError(f"timed out waiting for {what}")


def write_answer(page, prompt: str, text: str) -> None:  # noqa: ANN001
    """Replace the written-answer cell that starts with `prompt` by `text`, in JupyterLab's Markdown editor."""
    cell = page.locator(".jp-MarkdownCell", has_text=prompt).first
    editor = cell.locator(".cm-content")
    cell.scroll_into_view_if_needed()
    cell.click()  # the active cell, in command mode; Enter opens its editor (a double click sometimes did not)
    page.keyboard.press("Escape")
    page.keyboard.press("Enter")
    editor.wait_for(state="visible", timeout=30_000)
    editor.click()
    page.keyboard.press("Control+a")
    page.keyboard.insert_text(text)
    page.keyboard.press("Shift+Enter")


def student_works(page, hub: ClassHub, user: str, var_line: str, explanation: str | None = None) -> str:  # noqa: ANN001
    """Fetch, fill the exercise (and the explanation), validate, submit; return the validation dialog's text."""
    home = hub.layout.home(user)
    open_assignment_list(page)
    page.click("#nbgrader-assignment-list button:text-is('Fetch')")
    wait_until(lambda: (home / "lesson11" / "lesson11.ipynb").is_file(), f"{user}'s fetched notebook")
    page.goto(f"{hub.base}/user/{user}/lab/tree/lesson11/lesson11.ipynb")
    cell = page.locator(".jp-CodeCell", has_text="var = ______").first
    cell.wait_for(timeout=WAIT)
    cell.locator(".cm-content").click()
    page.keyboard.press("Control+a")
    page.keyboard.insert_text(exercise_cell(hub.layout.course / "release" / "lesson11" / "lesson11.ipynb",
                                            var_line, f"{user} 的提交"))
    if explanation:
        write_answer(page, "你的实现解释", explanation)
    page.keyboard.press("Control+s")
    saved = [var_line] + ([explanation.split("\n")[2]] if explanation else [])
    wait_until(lambda: all(json.dumps(line, ensure_ascii=False)[1:-1] in (home / "lesson11" / "lesson11.ipynb")
                           .read_text(encoding="utf-8") for line in saved), f"{user}'s saved notebook")
    page.click(".jp-NotebookPanel .validate-button")
    dialog = page.wait_for_selector(".jp-Dialog-content", timeout=WAIT)
    page.wait_for_function("() => !document.querySelector('.jp-Dialog-content')?.innerText.includes('Validating')",
                           timeout=WAIT)
    result = dialog.inner_text()
    shot(page, f"validate-{user}")
    page.click(".jp-Dialog-footer button")
    open_assignment_list(page)
    page.click("#nbgrader-assignment-list button:text-is('Submit')")
    inbound = hub.layout.exchange_course() / "inbound" / user
    wait_until(lambda: any(inbound.glob(f"{user}+lesson11+*/lesson11.ipynb")), f"{user}'s submission")
    return result


def terminal_command(page, command: str) -> None:  # noqa: ANN001
    """Type `command` into a JupyterLab terminal: the one the lab restored, else a new one (终端)."""
    try:
        page.wait_for_selector(".jp-Terminal .xterm", timeout=10_000)
    except PlaywrightTimeout:
        page.click(".jp-LauncherCard:has-text('终端')")
        page.wait_for_selector(".jp-Terminal .xterm", timeout=WAIT)
    page.click(".jp-Terminal .xterm")
    time.sleep(1)  # the shell's prompt
    page.keyboard.type(command + "\n")


@pytest.mark.timeout(900)
def test_release_to_feedback_in_chromium(browser, class_hub: ClassHub) -> None:  # noqa: ANN001
    hub, course = class_hub, class_hub.layout.course
    teacher = log_in(browser, hub, "teacher")
    assert teacher.is_visible(".lm-MenuBar-itemLabel:text-is('文件')"), "JupyterLab should be in Chinese"

    # 1. the instructor releases lesson 11 in formgrader
    teacher.goto(f"{hub.base}/user/teacher/formgrader")
    teacher.wait_for_selector("table .glyphicon-education", timeout=WAIT)
    assert "lesson11" in formgrader_action(teacher, "education")
    assert "released" in formgrader_action(teacher, "cloud-upload").lower()

    # 2. each student fetches, fills in group_advantages (alice right, bob wrong), validates, submits
    alice, bob = log_in(browser, hub, "alice"), log_in(browser, hub, "bob")
    for page in (alice, bob):  # students have the assignment list, not formgrader or Create Assignment
        page.click(".lm-MenuBar-itemLabel:text-is('Nbgrader')")
        items = page.locator(".lm-Menu-itemLabel").all_inner_texts()
        page.keyboard.press("Escape")
        assert "Assignment List" in items and "Formgrader" not in items, items
    # validation runs the notebook in the student's own server: alice's code passes (only the written
    # answers are still empty), bob's sample variance fails a self-check with the grader's own reason
    alice_checked = student_works(alice, hub, "alice", RIGHT, EXPLANATION)
    assert "Validation Results" in alice_checked and "Error" not in alice_checked, alice_checked
    bob_checked = student_works(bob, hub, "bob", WRONG)
    # issue 33: the reason first, right under nbgrader's heading, and none of the self-check cell's code
    assert re.search(r"The following cell failed:\s*" + re.escape(REASON), bob_checked), bob_checked
    assert not any(code in bob_checked for code in SELF_CHECK_CODE), bob_checked

    # 3. the instructor collects, grades with the kit's sandboxed grader, grades the explanation by hand
    teacher.goto(f"{hub.base}/user/teacher/formgrader")
    teacher.wait_for_selector("table .glyphicon-cloud-download", timeout=WAIT)
    collected = formgrader_action(teacher, "cloud-download")
    assert "alice" in collected and "bob" in collected, collected
    report = course / "reports" / "lesson11.csv"
    teacher.goto(f"{hub.base}/user/teacher/lab")
    terminal_command(teacher, "python -m coursekit hub grade > grade.log 2>&1")
    wait_until(lambda: report.is_file() and report.read_text().count("\n") == 3, "the grading report", 300,
               course / "grade.log")
    rows = {line.split(",")[0]: line.split(",") for line in report.read_text().splitlines()[1:]}
    assert rows["alice"][4] == "3" and rows["bob"][4] == "0", rows  # auto_total: all checks vs none
    assert "unsandboxed" not in report.read_text()

    session = hub.login("teacher")
    notebooks = session.server("GET", "formgrader/api/submitted_notebooks/lesson11/lesson11").json()
    for entry in notebooks:
        points = {"alice": "1", "bob": "0.5"}[entry["student"]]
        teacher.goto(f"{hub.base}/user/teacher/formgrader/submissions/{entry['id']}")
        score = teacher.wait_for_selector("input.score#explanation", timeout=WAIT)
        # issue 33: the hub's formgrader typesets the lesson's math (its MathJax was a 404)
        teacher.wait_for_function("() => document.querySelectorAll('mjx-container').length > 20", timeout=WAIT)
        assert "\\pi_{\\theta" not in teacher.locator("body").inner_text()
        if entry["student"] == "alice":  # her explanation's `<` and `cases`, typeset (issue 33)
            text = teacher.locator("body").inner_text()
            assert "Misplaced" not in text and "amp;" not in text and "&lt;" not in text and "\\sigma" not in text
            answer = teacher.locator(".nbgrader_cell", has=teacher.locator("input.score#explanation"))
            assert answer.locator("mjx-container mjx-mtable").count() == 1, "her cases block is not typeset"
            shot(teacher, "formgrader-math", answer)
        score.fill(points)
        score.press("Tab")  # formgrader saves on change

    def scores() -> dict[str, float]:
        return {e["student"]: e["score"] for e in session.server(
            "GET", "formgrader/api/submitted_notebooks/lesson11/lesson11").json()}
    wait_until(lambda: scores() == {"alice": 4.0, "bob": 0.5}, "the manual grades")

    teacher.goto(f"{hub.base}/user/teacher/lab")
    terminal_command(teacher, "python -m coursekit hub feedback > feedback.log 2>&1")
    released = hub.layout.exchange_course() / "feedback"
    wait_until(lambda: all(any((released / s).glob("*.html")) for s in ("alice", "bob")), "released feedback", 300,
               course / "feedback.log")
    wait_until(lambda: "released feedback" in (course / "feedback.log").read_text(), "the release's count", 60,
               course / "feedback.log")
    assert "released feedback: 2 page(s)" in (course / "feedback.log").read_text()  # issue 33: it said 0

    # 4. each student fetches and reads their own feedback, and only theirs
    for page, user, score, other in ((alice, "alice", "4.0", "bob"), (bob, "bob", "0.5", "alice")):
        open_assignment_list(page)
        page.click("#nbgrader-assignment-list button:text-is('Fetch Feedback')")
        page.click("#nbgrader-assignment-list a:has-text('view feedback')", timeout=WAIT)  # file browser
        page.wait_for_selector(".jp-DirListing-item:has-text('lesson11.html')", timeout=WAIT)
        pages = list((hub.layout.home(user) / "lesson11" / "feedback").rglob("*.html"))
        assert len(pages) == 1, pages
        feedback = page.context.new_page()  # the page the student opens from the file browser
        feedback.goto(f"{hub.base}/user/{user}/files/{pages[0].relative_to(hub.layout.home(user)).as_posix()}")
        feedback.wait_for_function("() => document.querySelectorAll('mjx-container').length > 20", timeout=WAIT)
        text = feedback.inner_text("body")
        assert f"得分：{score} / 10.0" in text and f"{user} 的提交" in text, text[:500]
        assert "\\pi_{\\theta" not in text and "&lt;" not in text  # issue 33: typeset, as on disk
        # and in JupyterLab's own HTML viewer, where the file browser opens it
        page.dblclick(".jp-DirListing-item:has-text('lesson11.html')")
        frame = page.frame_locator(".jp-HTMLViewer iframe, iframe[srcdoc]").first
        frame.locator("mjx-container").nth(20).wait_for(timeout=WAIT)
        assert "\\pi_{\\theta" not in frame.locator("body").inner_text()
        assert f"{other} 的提交" not in text
