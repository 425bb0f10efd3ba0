"""The branch pages Quarto renders, in the DOM Quarto 1.10 writes (tests/site/quarto_dom.py), on a phone and a
desktop: Figure 11-2 keeps legible labels and every formula shows its result without scrolling.

Quarto 1.10.18 drew Figure 11-2 (then `flowchart LR`) 1774 px wide and scaled it into the 778 px column
(labels ≈ 7 px) and a phone's 339 px (≈ 3 px); site.css styled `pre.mermaid`, which mermaid-init.js
replaces with the SVG. On a phone the GRPO objective and the inline `var = … ≈ 0.6667` scrolled inside
their boxes, hiding the result.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import quarto_dom

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[2]
PAGES = ["exercises/lesson11_grpo.qmd", "solutions/lesson11_grpo.qmd"]
VIEWPORTS = [(390, 844), (1280, 900)]
MIN_LABEL_PX = 11


@pytest.fixture(scope="module")
def quarto_pages(tmp_path_factory: pytest.TempPathFactory, serve_directory) -> dict[str, str]:
    """{branch page: URL of its Quarto-DOM page}."""
    urls = {}
    for source in PAGES:
        folder = tmp_path_factory.mktemp(Path(source).parent.name)
        page = quarto_dom.write_page(folder, ROOT / source)
        urls[source] = serve_directory(folder) + page.name
    return urls


@pytest.mark.parametrize("viewport", VIEWPORTS, ids=["phone", "desktop"])
@pytest.mark.parametrize("source", PAGES)
def test_quarto_page_diagram_is_legible_and_formulas_show_their_results(source, viewport, browser, quarto_pages,
                                                                         screenshot) -> None:
    context = browser.new_context(viewport={"width": viewport[0], "height": viewport[1]})
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    try:
        page.goto(quarto_pages[source])
        page.wait_for_selector("body[data-mermaid-drawn='1']", timeout=30_000)
        page.wait_for_function("() => window.MathJax && MathJax.startup && MathJax.startup.promise")
        page.evaluate("() => MathJax.startup.promise")
        svg = page.locator("div.quarto-figure-default > figure > div > svg.mermaid-js")
        assert svg.count() == 1, "Quarto's DOM: mermaid-init.js moved the SVG out of its <pre>"
        assert page.locator("pre.mermaid").count() == 0
        assert svg.evaluate("s => getComputedStyle(s.parentElement).overflowX") == "auto", \
            "site.css styles the diagram's box in Quarto's DOM"
        fonts = svg.evaluate("""s => [...s.querySelectorAll('.nodeLabel')].map(l =>
            parseFloat(getComputedStyle(l).fontSize) * s.getBoundingClientRect().width / s.viewBox.baseVal.width)""")
        assert len(fonts) == 6 and min(fonts) >= MIN_LABEL_PX, f"Figure 11-2's labels are {min(fonts):.1f} px"
        assert svg.bounding_box()["width"] <= viewport[0], "the diagram fits the screen"
        result = page.evaluate("""() => {
            const width = document.documentElement.clientWidth;
            const scrolls = m => m.scrollWidth > m.clientWidth + 1;
            const all = [...document.querySelectorAll('mjx-container')];
            return {
                page: document.documentElement.scrollWidth - width,
                count: all.length,
                display: all.filter(m => m.getAttribute('display') === 'true').length,
                scrolling: all.filter(scrolls).map(m => m.textContent.slice(0, 40)),
                results: all.filter(m => /0\\.6667|1\\.2247/.test(m.textContent))
                    .map(m => ({text: m.textContent, right: m.getBoundingClientRect().right, cut: scrolls(m)})),
            };
        }""")
        assert result["display"] >= 2 and result["count"] >= 40, result
        assert result["page"] <= 0, "the page scrolls sideways"
        assert not result["scrolling"], f"formulas that scroll in their box (results cut off): {result['scrolling']}"
        assert len(result["results"]) >= 3 and all(r["right"] <= viewport[0] and not r["cut"]
                                                   for r in result["results"]), result["results"]
        assert not errors, errors
        screenshot(svg, f"quarto-dom-{Path(source).parent.name}-figure-11-2-{viewport[0]}x{viewport[1]}")
    finally:
        context.close()
