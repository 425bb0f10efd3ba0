"""Issue 33: the pages where a written answer is read (the student's feedback page, the instructor's
formgrader) show its math typeset and its code as written, with the network blocked.

One student of the instructor class gets the lesson's own reference answers (and a `cases` block, and the
examples seen in the issue: `std < eps`, $\\sigma<\\epsilon$, $\\hat A_i>0$) as written answers, sanitised as
autograding sanitises them (SanitizeStudentContent); the pages are opened in Chromium with every request
to another host aborted. The student's files are put back afterwards."""

from __future__ import annotations

import copy
import os
import re
from pathlib import Path

import nbformat
import pytest
from answer_texts import references
from test_formgrader import serving_formgrader
from test_written_math import CASES, OBSERVED

from coursekit.grading.preprocessors import SanitizeStudentContent
from coursekit.grading.records.feedback import FeedbackWriter

STUDENT = "s05"
SHOTS = os.environ.get("COURSEKIT_SHOTS")  # a folder: the tests also save what they saw there (PNG)
WRITTEN = {**references(), "q2": references()["q2"] + "\n\n" + OBSERVED, "q3": references()["q3"] + "\n\n" + CASES}
# what the page must show as text, exactly (code spans are not typeset)
CODE = ("std < eps", "a & b")
RAW_TEX = re.compile(r"\\(sigma|epsilon|hat|begin|mu|pi)\b|\$")
TYPESET = """() => {
  const boxes = document.querySelectorAll('mjx-container');
  return boxes.length > 0 && !document.querySelector('mjx-merror, [data-mjx-error]') && boxes.length;
}"""


# resolves once MathJax's start-up typesetting has ended and a typeset of whatever is left has too (MathJax 3:
# startup.promise, typesetPromise; both chain on the same queue, so no pass is still pending after it)
SETTLED = "() => MathJax.startup.promise.then(() => MathJax.typesetPromise()).then(() => true)"


def with_written_answers(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    nb = copy.deepcopy(nb)
    for cell in nb.cells:
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        if cell.cell_type == "markdown" and grade_id in WRITTEN and cell.metadata.nbgrader.get("solution"):
            cell.source = cell.source.split("\n\n", 1)[0] + "\n\n" + WRITTEN[grade_id]
    nb, _ = SanitizeStudentContent().preprocess(nb, {})
    return nb


@pytest.fixture(scope="module")
def math_student(instructor_class):
    """STUDENT's autograded notebook and feedback page with WRITTEN; put back afterwards."""
    course = instructor_class
    notebook = course.autograded_notebook(STUDENT)
    saved = notebook.read_bytes()
    nb = with_written_answers(nbformat.read(notebook, as_version=4))
    sources = "".join(cell.source for cell in nb.cells)
    assert "\\begin{cases}" in sources and "`std < eps`" in sources
    nbformat.write(nb, notebook)
    FeedbackWriter(course).write(STUDENT, copy.deepcopy(nb))
    try:
        yield course
    finally:
        notebook.write_bytes(saved)
        FeedbackWriter(course).write(STUDENT)


def read_page(page, url: str, allowed: str, name: str) -> None:
    """Open url with requests outside `allowed` aborted; assert the math is typeset and the code as written."""
    off_host, errors = [], []

    def local_only(route):
        if route.request.url.startswith(allowed):
            route.continue_()
        else:
            off_host.append(route.request.url)
            route.abort()

    page.route("**/*", local_only)
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.on("console", lambda msg: ("Content Security Policy" in msg.text or msg.type == "error")
            and errors.append(msg.text))
    page.goto(url)
    page.wait_for_function(TYPESET, timeout=60_000)
    page.evaluate(SETTLED)  # MathJax typesets in passes: wait for the last one, not for a fixed time
    assert page.evaluate(TYPESET), "a formula did not typeset"
    answers = page.locator("body").inner_text()
    assert not RAW_TEX.search(answers), RAW_TEX.search(answers)
    for bad in ("Misplaced", "amp;", "&lt;", "&gt;"):
        assert bad not in answers, bad
    codes = page.locator("code").all_inner_texts()
    assert all(any(c == code for code in codes) for c in CODE), codes
    assert off_host == [] and errors == [], (off_host, errors)
    if SHOTS:
        Path(SHOTS).mkdir(parents=True, exist_ok=True)
        page.locator("mjx-container").last.scroll_into_view_if_needed()
        page.screenshot(path=str(Path(SHOTS) / f"{name}.png"))


@pytest.mark.browser
@pytest.mark.slow
def test_the_feedback_page_shows_the_math_offline(browser, math_student):
    html = math_student.feedback_html(STUDENT)
    text = html.read_text(encoding="utf-8")
    assert 'http-equiv="Content-Security-Policy"' in text and not re.search(r"<script[^>]*src=", text)
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    try:
        read_page(page, html.as_uri(), "file://", "feedback")
        assert page.evaluate("() => !!MathJax.startup.document.safe")  # MathJax's safe extension is on
    finally:
        page.close()


@pytest.mark.browser
@pytest.mark.slow
def test_the_feedback_page_runs_no_script_but_its_own(browser, math_student, tmp_path):
    """The page's policy: a script the sanitiser missed (here put in by hand) does not run."""
    page_html = math_student.feedback_html(STUDENT).read_text(encoding="utf-8")
    hostile = tmp_path / "hostile.html"
    hostile.write_text(page_html.replace("<body>", "<body><script>window.__ck_pwned=1</script>"
                                         "<img src=x onerror='window.__ck_pwned=2'>", 1), encoding="utf-8")
    page = browser.new_page()
    try:
        page.goto(hostile.as_uri())
        page.wait_for_function(TYPESET, timeout=60_000)
        assert page.evaluate("typeof window.__ck_pwned") == "undefined"
    finally:
        page.close()


@pytest.fixture
def formgrader_base(math_student):
    token = "coursekit-math-test"
    with serving_formgrader(math_student, token, STUDENT) as (base, submission):
        yield base, f"{base}/formgrader/submissions/{submission}/?token={token}"


@pytest.mark.browser
@pytest.mark.slow
def test_formgrader_shows_the_math_offline(browser, formgrader_base):
    base, url = formgrader_base
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    try:
        read_page(page, url, base + "/", "formgrader")
    finally:
        page.close()


def test_no_page_template_loads_mathjax_from_another_host():
    templates = Path(__file__).resolve().parents[2] / "src" / "coursekit" / "grading" / "templates"
    for template in templates.rglob("*.j2"):
        assert not re.search(r"src=\"https?://", template.read_text(encoding="utf-8")), template


def test_feedback_says_no_response_in_chinese(instructor_class):
    """Issue 33: s08 left its answers as released; nbgrader's automatic comment was "No response."."""
    page = instructor_class.feedback_html("s08").read_text(encoding="utf-8")
    assert "No response." not in page and "未作答。" in page
