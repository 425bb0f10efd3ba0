"""Issue 33: a written answer's math, inline code and code blocks reach the page exactly as written.

The pages (formgrader, feedback) render the sanitised Markdown with nbconvert's renderer, which escapes
math and code once; what a browser decodes from that (and MathJax reads) must be the student's text.
The browser checks of the same texts are in test_math_pages.py."""

from __future__ import annotations

import pytest
from answer_texts import references
from bs4 import BeautifulSoup
from nbconvert.filters.markdown import markdown2html

from coursekit.grading.preprocessors import clean_markdown, literal_spans

CASES = ("$$\nA_i = \\begin{cases} (r_i - \\mu)/\\sigma & \\sigma \\ge \\epsilon \\\\ 0 & \\sigma < \\epsilon "
         "\\end{cases}\n$$")
ALIGNED = "\\begin{aligned} \\hat A_i &> 0 \\\\ r_i &< \\mu \\end{aligned}"
OBSERVED = "判断用 `std < eps`；$\\sigma<\\epsilon$ 时置零，$\\hat A_i>0$ 的回答被鼓励；`a & b`。"
FENCE = "```python\nif std < eps and a & b:\n    return [0.0] * len(rewards)\n```\n"
TEXTS = {**references(), "cases": CASES, "aligned": ALIGNED, "observed": OBSERVED, "fence": FENCE}


def page_text(markdown: str) -> str:
    return BeautifulSoup(markdown2html(clean_markdown(markdown)), "html.parser").get_text()


@pytest.mark.parametrize("name", TEXTS)
def test_math_and_code_read_as_written(name):
    text = TEXTS[name]
    literals = [text[a:b].strip("`$\n") for a, b in literal_spans(text)]
    assert literals
    shown = page_text(text)
    for literal in literals:
        body = literal.removeprefix("python\n") if literal.startswith("python\n") else literal
        assert body in shown, (body, shown)
    assert "&lt;" not in shown and "&gt;" not in shown and "amp;" not in shown


def test_the_lessons_reference_answers_hold_the_observed_less_than():
    assert "`std < eps`" in TEXTS["explanation"] and "\\sigma < \\epsilon" in TEXTS["q1"]


@pytest.mark.parametrize("attack", [
    "<div>$a<b onmouseover=alert(1)>x$</div>",             # math inside an HTML block is not math
    "<span title='$'>x</span>$<img src=x onerror=alert(1)>$",  # a "span" that starts inside a tag
    "\\(\\h<!-- -->ref{javascript:alert(1)}{x}\\)",         # not math for the renderer: a comment
    "```mermaid\n<img src=x onerror=alert(1)>\n```",        # Mermaid blocks are not escaped
    "`x` <script>alert(1)</script> $y$",
])
def test_markup_outside_what_the_renderer_escapes_is_still_escaped(attack):
    page = markdown2html(clean_markdown(attack))
    soup = BeautifulSoup(page, "html.parser")
    assert not soup.find_all(["script", "img", "svg"]), page
    assert not any(name.startswith("on") for tag in soup.find_all(True) for name in tag.attrs), page
    assert "<!--" not in page
