"""No page scrolls sideways on a phone (390x844): inline formulas scroll in their own box, inline code wraps.

Quarto 1.10.18 rendered lesson pages 540 px wide at 390 px (inline math: the KL formula, 403 px, and
`var = ... ≈ 0.6667`, 470 px) and index.html 458 px wide (the inline code `make check NOTEBOOK=...`).
Quarto cannot run here. Its stand-in, tests/site/fixtures/quarto_narrow_page.html, holds every inline
formula and inline code span of the sources Quarto renders, as pandoc writes them (`<span class="math
inline">\\(...\\)</span>`, `<code>...</code>`), in Quarto's narrow docked grid with the CSS a Quarto page
gets: Bootstrap 5.3 (which Quarto's themes are built on), pandoc's `code{white-space: pre-wrap}` and
assets/site/site.css (_quarto.yml format.html.css). The preview's pages are checked as they are built.
"""

from __future__ import annotations

import html
import re
import shutil
from pathlib import Path

import nbformat
import pytest
from test_site_browser import PAGES, open_page

from coursekit import preview, quarto_rules

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = Path(__file__).parent / "fixtures" / "quarto_narrow_page.html"
PHONE = {"width": 390, "height": 844}
FENCED = re.compile(r"^```.*?^```", re.M | re.S)
DISPLAY_MATH = re.compile(r"\$\$.+?\$\$", re.S)
INLINE_CODE = re.compile(r"`([^`\n]+)`")
# pandoc's tex_math_dollars: no space after the opening $, none before the closing one, no digit after it
INLINE_MATH = re.compile(r"(?<![\\$])\$(?![\s$])([^$\n]+?)(?<!\s)\$(?!\d)")
# not from a source: the box a formula wider than a phone scrolls in (the lesson's own formulas all fit)
WIDER_THAN_A_PHONE = r"a_1 + a_2 + a_3 + a_4 + a_5 + a_6 + a_7 + a_8 + a_9 + a_{10} + a_{11} + a_{12} + a_{13} + a_{14}"


def markdown_texts() -> list[str]:
    """The Markdown of every page Quarto renders: each profile's .qmd pages and the notebooks' Markdown
    cells and Markdown outputs."""
    texts = []
    for profile in preview.BRANCHES:
        for source in quarto_rules.rendered_sources(ROOT, profile):
            path = ROOT / source
            if path.suffix == ".qmd":
                texts.append(path.read_text(encoding="utf-8"))
            else:
                nb = nbformat.read(path, as_version=4)
                texts += [c.source for c in nb.cells if c.cell_type == "markdown"]
                texts += ["".join(o["data"]["text/markdown"]) for c in nb.cells for o in c.get("outputs", [])
                          if "text/markdown" in o.get("data", {})]
    return texts


def inline_spans() -> tuple[list[str], list[str]]:
    """(inline formulas, inline code spans) of every rendered source, each once."""
    formulas, code = {}, {}
    for text in markdown_texts():
        text = DISPLAY_MATH.sub(" ", FENCED.sub(" ", text))
        code.update(dict.fromkeys(INLINE_CODE.findall(text)))
        formulas.update(dict.fromkeys(INLINE_MATH.findall(INLINE_CODE.sub(" ", text))))
    return list(formulas), list(code)


@pytest.fixture(scope="module")
def narrow_page(tmp_path_factory: pytest.TempPathFactory, serve_directory) -> str:
    """The Quarto stand-in page, served with Bootstrap, site.css and MathJax beside it."""
    folder = tmp_path_factory.mktemp("narrow")
    formulas, code = inline_spans()
    paragraphs = [f'<p>公式 <span class="math inline">\\({html.escape(tex)}\\)</span> 之后的文字。</p>'
                  for tex in formulas]
    paragraphs += [f"<p>运行 <code>{html.escape(text)}</code> 自查。</p>" for text in code]
    wide = html.escape(WIDER_THAN_A_PHONE)
    paragraphs.append(f'<p>比任何手机都宽的公式 <span class="math inline">\\({wide}\\)</span>。</p>')
    (folder / "index.html").write_text(FIXTURE.read_text(encoding="utf-8").replace("{content}", "\n".join(paragraphs)),
                                       encoding="utf-8")
    shutil.copyfile(ROOT / "node_modules/bootstrap/dist/css/bootstrap.min.css", folder / "bootstrap.min.css")
    shutil.copyfile(ROOT / "assets/site/site.css", folder / "site.css")
    (folder / "mathjax").symlink_to(ROOT / preview.MATHJAX)
    return serve_directory(folder) + "index.html"


def sideways(page: object) -> dict:
    """How far the page and each inline formula or code span reach past the viewport, and the formulas'
    own boxes."""
    return page.evaluate("""() => {
        const width = document.documentElement.clientWidth;
        const inline = [...document.querySelectorAll('mjx-container:not([display=true]), :not(pre) > code')];
        return {
            page: document.documentElement.scrollWidth - width,
            past: inline.filter(e => e.getBoundingClientRect().right > width + 0.5)
                .map(e => e.textContent.slice(0, 40)),
            scrolling: [...document.querySelectorAll('mjx-container:not([display=true])')]
                .filter(m => m.scrollWidth > m.clientWidth + 1).map(m => m.textContent.slice(0, 40)),
            count: inline.length,
        };
    }""")


def test_inline_formulas_and_code_stay_in_a_phone_wide_quarto_page(browser, narrow_page) -> None:
    formulas, code = inline_spans()
    assert any("0.6667" in f for f in formulas) and any("D_{\\text{KL}}" in f for f in formulas), "the wide ones"
    assert any(len(c) >= 40 for c in code), "a code span wider than a phone line's share"
    context = browser.new_context(viewport=PHONE)
    page = context.new_page()
    try:
        page.goto(narrow_page)
        page.wait_for_function("() => window.MathJax && MathJax.startup && MathJax.startup.promise")
        page.evaluate("() => MathJax.startup.promise")
        result = sideways(page)
        assert result["count"] >= len(formulas) + len(code) + 1
        assert result["page"] <= 0 and not result["past"], result
        assert [s[:12] for s in result["scrolling"]] == ["a1+a2+a3+a4+"], (
            "only the formula wider than a phone scrolls inside its own box; every source formula fits, so no "
            "result (≈ 0.6667, ≈ −1.2247) is cut off")
        wrapping = page.evaluate("""() => [...document.querySelectorAll(':not(pre) > code')]
            .map(c => getComputedStyle(c).whiteSpace + ' ' + getComputedStyle(c).overflowWrap)""")
        assert set(wrapping) == {"pre-wrap anywhere"}, "inline code wraps anywhere, over Quarto's own rule"
        baseline = page.evaluate("""() => {  /* a formula that fits sits on the text's baseline, as without the CSS */
            const m = document.querySelector('mjx-container:not([display=true])');
            const before = m.querySelector('mjx-math').getBoundingClientRect().bottom;
            m.style.display = 'inline'; m.style.overflow = 'visible'; m.style.padding = '0';
            const after = m.querySelector('mjx-math').getBoundingClientRect().bottom;
            return Math.abs(before - after);
        }""")
        assert baseline < 1.5, f"the formula moved {baseline:.1f} px off the baseline"
    finally:
        context.close()


@pytest.mark.parametrize(("branch", "target"), PAGES)
def test_no_preview_page_scrolls_sideways_on_a_phone(branch, target, page_and_log, site_urls) -> None:
    page = page_and_log[0]
    page.set_viewport_size(PHONE)
    open_page(page, site_urls[branch] + target)
    result = sideways(page)
    assert result["page"] <= 0 and not result["past"], result
