"""The preview sites in headless Chromium: clean loads, typeset math, diagrams, images, hints, search."""

from __future__ import annotations

import re
import time

import pytest
from quarto_dom import RAW_TEX

from coursekit import preview
from coursekit.course_file import load_course

pytestmark = pytest.mark.browser

LESSON_11 = load_course().lesson("lesson11")
LESSON_PAGE = {branch: preview.lesson_page(LESSON_11, branch).target for branch in preview.BRANCHES}
PAGES = [
    (branch, target)
    for branch in preview.BRANCHES
    for target in ("index.html", LESSON_PAGE[branch], LESSON_11.demos[0].target)
]


def open_page(page: object, url: str) -> None:
    """Load a page and bring each diagram into view, as a reader scrolling down would, until it is drawn (site.js
    draws a diagram when it comes near the viewport; the formulas are typeset when the site is built:
    coursekit.preview.typeset_math); then back to the top. (Scrolling through the whole page instead cost about
    1.2 s of CPU per page, 40 pages a run: the suite is CPU-bound.)"""
    page.bring_to_front()  # a background tab gets no frames, so no IntersectionObserver callback
    page.goto(url, wait_until="networkidle")
    for diagram in page.locator(".jp-Mermaid").all():
        diagram.scroll_into_view_if_needed()
        diagram.locator("svg").first.wait_for(timeout=30_000)  # drawn
    page.evaluate("scrollTo(0, 0)")


# resolves after two frames, or after 100 ms where no frame comes (a background page)
_NEXT_FRAMES = "() => new Promise(r => { requestAnimationFrame(() => requestAnimationFrame(r)); setTimeout(r, 100); })"


def settled_top(page: object, locator: object, limit_s: float = 10.0) -> float:
    """The element's top (viewport y) once it has stopped moving: the same in two reads two frames apart
    (a scroll into view, smooth or not, has finished), or as it is after limit_s."""
    last, deadline = None, time.monotonic() + limit_s
    while True:
        top = locator.bounding_box()["y"]
        if top == last or time.monotonic() > deadline:
            return top
        last = top
        page.evaluate(_NEXT_FRAMES)


@pytest.mark.parametrize(("branch", "target"), PAGES)
def test_page_loads_clean_from_localhost_only(branch, target, first_visit_page_and_log, site_urls,
                                             screenshot) -> None:
    page, log = first_visit_page_and_log
    open_page(page, site_urls[branch] + target)
    broken = page.evaluate(
        "() => [...document.images].filter(i => !i.complete || i.naturalWidth === 0).map(i => i.src)"
    )
    shot = screenshot(page, f"{branch}-{target.replace('/', '-').removesuffix('.html')}")
    assert not log.errors, f"{target}: {log.errors} (screenshot {shot})"
    assert not log.failed, f"{target}: failed requests {log.failed}"
    assert not log.off_host(), f"{target}: requests off localhost {log.off_host()}"
    assert not broken, f"{target}: images that did not load {broken}"


@pytest.mark.parametrize("branch", list(preview.BRANCHES))
def test_lesson_math_is_typeset_and_the_diagram_drawn(branch, page_and_log, site_urls) -> None:
    page, log = page_and_log
    open_page(page, site_urls[branch] + LESSON_PAGE[branch])
    page.wait_for_selector(".jp-Mermaid svg", timeout=15_000)
    assert page.locator("mjx-container").count() > 20
    assert page.locator("mjx-container[display='true']").count() >= 2  # the two $$ formulas
    raw = page.evaluate(
        "() => [...document.querySelectorAll('.jp-RenderedMarkdown p')].map(p => p.innerText)"
        ".filter(t => /\\$\\$|\\\\frac|\\\\hat/.test(t))"
    )
    assert not raw, f"untypeset TeX left on the page: {raw[:2]}"
    assert "获取一批查询" in page.locator(".jp-Mermaid svg").first.text_content()
    assert not log.errors


def test_hints_open_one_level_at_a_time(page_and_log, site_urls, screenshot) -> None:
    page, _ = page_and_log
    open_page(page, site_urls["exercise"] + LESSON_PAGE["exercise"])
    summary = {n: page.locator(f"details.course-hint[data-level='{n}'] > summary") for n in (1, 2, 3, 4)}
    assert summary[1].is_visible() and not summary[2].is_visible()
    summary[1].click()
    assert summary[2].is_visible() and not summary[3].is_visible()
    summary[2].click()
    assert summary[3].is_visible() and not summary[4].is_visible()
    summary[3].click()
    summary[4].click()
    level4 = page.locator("details.course-hint[data-level='4']").inner_text()
    assert "参考答案版" in level4 and "[0.0] * len(rewards)" not in level4, "the 4th level says where the answer is"
    screenshot(page, "exercise-hints-open")


def test_solution_has_the_fourth_hint_level(page_and_log, site_urls) -> None:
    page, _ = page_and_log
    open_page(page, site_urls["solution"] + LESSON_PAGE["solution"])
    for level in (1, 2, 3):
        page.locator(f"details.course-hint[data-level='{level}'] > summary").click()
    assert page.locator("details.course-hint[data-level='4'] > summary").is_visible()
    page.locator("details.course-hint[data-level='4'] > summary").click()
    assert "[0.0] * len(rewards)" in page.locator("details.course-hint[data-level='4']").inner_text()


def test_search_box_finds_a_section_and_links_to_it(page_and_log, site_urls, screenshot) -> None:
    page, log = page_and_log
    open_page(page, site_urls["exercise"] + "index.html")
    page.fill("#course-search-input", "零方差")
    results = page.locator("#course-search-results a")
    results.first.wait_for(timeout=5_000)
    hrefs = [results.nth(i).get_attribute("href") for i in range(results.count())]
    assert any(h.startswith("exercises/lesson11_grpo.html#") for h in hrefs), hrefs
    screenshot(page, "exercise-search")
    results.first.click()
    page.wait_for_load_state("networkidle")
    assert "零方差" in page.locator("main").inner_text()
    assert not log.errors and not log.failed


# ---- issue 12: language and fonts, search, phone and laptop layout, keyboard and screen readers

PICTOGRAPHS = r"/\p{Extended_Pictographic}/u"
ALL_PAGES = PAGES


def platform_fonts(page: object, selector: str) -> list[str]:
    """The fonts Chromium really used for the text of the first element matching `selector`."""
    cdp = page.context.new_cdp_session(page)
    cdp.send("DOM.enable")
    cdp.send("CSS.enable")
    root = cdp.send("DOM.getDocument", {"depth": -1})["root"]["nodeId"]
    node = cdp.send("DOM.querySelector", {"nodeId": root, "selector": selector})["nodeId"]
    return [f["familyName"] for f in cdp.send("CSS.getPlatformFontsForNode", {"nodeId": node})["fonts"]]


@pytest.mark.parametrize(("branch", "target"), ALL_PAGES)
def test_pages_are_chinese_with_chinese_glyphs_and_no_emoji(branch, target, page_and_log, site_urls) -> None:
    page, _ = page_and_log
    open_page(page, site_urls[branch] + target)
    assert page.get_attribute("html", "lang") == "zh-Hans"
    assert page.evaluate(f"() => {PICTOGRAPHS}.test(document.body.innerText)") is False
    fonts = platform_fonts(page, ".jp-RenderedMarkdown p")
    assert any(f.endswith("CJK SC") for f in fonts), fonts  # 。，“” in their Chinese forms, not JP
    assert not any(f.endswith(("CJK JP", "CJK KR", "CJK TC", "CJK HK")) for f in fonts), fonts


def search(page: object, query: str) -> list[str]:
    page.fill("#course-search-input", query)
    page.locator("#course-search-results li").first.wait_for(timeout=5_000)
    return page.locator("#course-search-results [role=option] a").all_inner_texts()


def test_search_matches_latin_words_loosely_and_chinese_by_words(page_and_log, site_urls) -> None:
    page, log = page_and_log
    open_page(page, site_urls["exercise"] + "index.html")
    assert search(page, "dr grpo"), "the text says Dr. GRPO"
    assert search(page, "DR.GRPO") == search(page, "dr grpo")
    hits = search(page, "组内优势")  # no such string on the page: 组内 + 优势 are two words
    assert hits and page.locator("#course-search-results mark", has_text="优势").count() > 0
    snippets = page.locator("#course-search-results small").all_inner_texts()
    search(page, "标准差")
    snippets += page.locator("#course-search-results small").all_inner_texts()
    assert not any(re.search(r"\$|\\text|\\frac", s) for s in snippets), snippets
    assert search(page, "无此词条qwzx") == [] and page.locator(".course-search-none").count() == 1
    assert not log.errors


def test_search_results_work_with_the_keyboard_and_land_below_the_sticky_bar(page_and_log, site_urls) -> None:
    page, log = page_and_log
    open_page(page, site_urls["exercise"] + "index.html")
    hits = search(page, "零方差")
    assert len(hits) >= 2
    page.keyboard.press("ArrowDown")
    page.keyboard.press("ArrowDown")
    selected = page.locator("#course-search-results [aria-selected=true]")
    assert selected.count() == 1 and selected.get_attribute("id") == page.get_attribute(
        "#course-search-input", "aria-activedescendant")
    href = selected.locator("a").get_attribute("href")
    page.keyboard.press("ArrowUp")
    page.keyboard.press("ArrowDown")
    page.keyboard.press("Enter")
    page.wait_for_url(re.compile(re.escape(href.split("#")[0].lstrip("./"))))
    page.wait_for_load_state("networkidle")
    anchor = href.split("#", 1)[1]
    heading = page.locator(f"[id='{anchor}']")
    bar = page.locator(".course-nav").bounding_box()
    assert settled_top(page, heading) >= bar["y"] + bar["height"] - 1, "the heading is under the sticky bar"
    assert not log.errors


@pytest.mark.parametrize("viewport", [(390, 844), (1366, 768)], ids=["phone", "laptop"])
def test_formulas_fit_their_column_and_the_diagram_keeps_legible_text(viewport, page_and_log, site_urls,
                                                                         screenshot) -> None:
    page = page_and_log[0]
    page.set_viewport_size({"width": viewport[0], "height": viewport[1]})
    open_page(page, site_urls["exercise"] + LESSON_PAGE["exercise"])
    page.wait_for_selector(".jp-Mermaid svg", timeout=15_000)
    width = page.evaluate("document.documentElement.clientWidth")
    assert page.evaluate("document.documentElement.scrollWidth") <= width, "the page scrolls sideways"
    boxes = page.evaluate("""() => [...document.querySelectorAll('mjx-container[display=true]')].map(m => ({
        right: m.getBoundingClientRect().right, scroll: m.scrollWidth, client: m.clientWidth,
        overflow: getComputedStyle(m).overflowX}))""")
    assert all(b["right"] <= width + 1 and b["overflow"] == "auto" for b in boxes), boxes
    cut = [b for b in boxes if b["scroll"] > b["client"] + 1]
    assert len(boxes) >= 2 and not cut, f"display formulas scroll in their box, their ends cut off: {cut}"
    label = page.locator(".jp-Mermaid svg .nodeLabel, .jp-Mermaid svg text").first
    size = label.evaluate("e => e.getBoundingClientRect().height / (e.getClientRects().length || 1)")
    font = label.evaluate("""e => parseFloat(getComputedStyle(e).fontSize)
        * e.closest('svg').getBoundingClientRect().width / e.closest('svg').viewBox.baseVal.width""")
    assert font >= 11, f"diagram text is {font:.1f} px (box {size:.1f} px)"
    screenshot(page, f"exercise-lesson-{viewport[0]}x{viewport[1]}")


@pytest.mark.parametrize("viewport", [(390, 844), (1366, 768), (1280, 900)], ids=["phone", "laptop", "desktop"])
def test_toolbar_stays_visible_while_editing_and_check_results_come_into_view(viewport, page_and_log,
                                                                              site_urls) -> None:
    page = page_and_log[0]
    page.set_viewport_size({"width": viewport[0], "height": viewport[1]})
    open_page(page, site_urls["exercise"] + LESSON_PAGE["exercise"])
    page.wait_for_selector(".cr-widget[data-state=ready]", timeout=90_000)
    page.wait_for_selector(".cr-editor[data-editor=codemirror] .cm-content", timeout=30_000)
    last_line = page.locator(".cm-line").last
    last_line.scroll_into_view_if_needed()
    last_line.click()
    page.keyboard.type("  # 编辑中")
    toolbar = page.locator(".cr-toolbar").bounding_box()
    assert 0 <= toolbar["y"] and toolbar["y"] + toolbar["height"] <= viewport[1], toolbar
    at = page.evaluate(
        """([x, y]) => document.elementFromPoint(x, y).closest('.cr-toolbar') !== null""",
        [toolbar["x"] + 8, toolbar["y"] + toolbar["height"] / 2])
    assert at, "something covers the toolbar (the sticky bar?)"
    page.click("button[data-action=check]")
    page.wait_for_selector(".cr-summary", timeout=60_000)
    top = settled_top(page, page.locator(".cr-summary"))
    assert 0 <= top < viewport[1] - 20, f"the results start below the fold: {top}"
    # the first reason too (issue 33: at 1280x900 the summary showed, the reasons were below the fold)
    reason = page.locator(".cr-given-error, .cr-setup-error, .cr-fail .cr-message").first.bounding_box()
    assert reason["y"] + reason["height"] <= viewport[1], f"the first reason ends below the fold: {reason}"
    assert page.evaluate("document.activeElement.dataset.action") == "check"


def test_keyboard_reaches_the_exercise_at_once_and_formulas_are_no_tab_stops(page_and_log, site_urls) -> None:
    page, _ = page_and_log
    open_page(page, site_urls["exercise"] + LESSON_PAGE["exercise"])
    page.wait_for_selector(".cr-widget")
    assert page.locator("mjx-container[tabindex]:not([tabindex='-1'])").count() == 0
    # no box is a tab stop before the exercise unless it scrolls (issue 33: nbconvert's ~30 cell wrappers)
    stops = page.evaluate("""() => { const widget = document.querySelector('.cr-widget');
        return [...document.querySelectorAll('main [tabindex]')]
            .filter(e => e.tabIndex >= 0 && !e.closest('.cr-widget') && !('courseScrollStop' in e.dataset))
            .filter(e => e.compareDocumentPosition(widget) & Node.DOCUMENT_POSITION_FOLLOWING)
            .map(e => e.tagName + '.' + e.className); }""")
    assert stops == [], stops
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.className") == "cr-skip-link"
    page.keyboard.press("Enter")  # focuses the code, which builds the editor if it is not built yet
    page.wait_for_function("document.activeElement.classList.contains('cm-content')", timeout=10_000)
    page.keyboard.press("Escape")
    presses = 0
    while page.evaluate("document.activeElement.dataset.action") != "run" and presses < 10:
        page.keyboard.press("Shift+Tab")
        presses += 1
    assert page.evaluate("document.activeElement.dataset.action") == "run", "Run is a few Shift+Tab away"


@pytest.mark.parametrize("branch", list(preview.BRANCHES))
def test_every_figure_has_alt_text_and_the_diagram_a_label(branch, page_and_log, site_urls) -> None:
    page, _ = page_and_log
    open_page(page, site_urls[branch] + LESSON_PAGE[branch])
    page.wait_for_selector(".jp-Mermaid svg", timeout=15_000)
    missing = page.evaluate("() => [...document.images].filter(i => !i.alt.trim()).map(i => i.src)")
    assert not missing, missing
    svg = page.locator(".jp-Mermaid svg").first
    labelled = svg.evaluate("""s => (s.getAttribute('aria-labelledby') || '').split(' ')
        .map(id => document.getElementById(id)).filter(Boolean).map(e => e.textContent).join(' ')""")
    assert "图 11-2" in labelled, labelled
    assert svg.get_attribute("role")


# What a page shows of its formulas as soon as its HTML is parsed: the typeset formulas (drawn, or in a box of
# their size until site.js draws them from the page's store), the text a reader or screen reader gets of each
# (MathJax's assistive MathML), the glyphs they draw (each defined in the page), the TeX left as text and the
# scripts the page asked for.
AT_PARSE = """() => { const GLYPHS = () => [...document.querySelectorAll('mjx-container use')].map(u => u.href.baseVal)
    .concat(JSON.parse(document.getElementById('course-formula-svg')?.textContent || '[]')
        .flatMap(svg => [...svg.matchAll(/xlink:href="(#[^"]+)"/g)].map(m => m[1])));
  return {
    typeset: document.querySelectorAll('mjx-container').length,
    display: document.querySelectorAll('mjx-container[display=true]').length,
    spoken: [...document.querySelectorAll('mjx-container > mjx-assistive-mml')].map(m => m.textContent),
    hidden: [...document.querySelectorAll('mjx-container')]
        .every(m => m.querySelector(':scope > svg, :scope > mjx-blank').getAttribute('aria-hidden') === 'true'),
    undrawn: document.querySelectorAll('mjx-container > mjx-blank').length,
    glyphs: GLYPHS(),
    missing: GLYPHS().filter(ref => !document.getElementById(ref.slice(1))),
    code: [...document.querySelectorAll('main code')].map(c => c.textContent),
    scripts: [...document.scripts].map(s => s.src).filter(Boolean),
}; }"""


@pytest.mark.parametrize("branch", list(preview.BRANCHES))
def test_the_preview_shows_its_formulas_typeset_with_no_mathjax_and_nothing_off_localhost(branch, browser,
                                                                                            site_urls) -> None:
    """The preview's formulas are typeset when the site is built (issue 33: typesetting in the page competed
    with Pyodide's start for the first Check): with every request off 127.0.0.1 refused, the lesson page and
    the demo hold their formulas typeset as soon as the HTML is parsed, with no TeX left as text (issue 25),
    load no MathJax, keep `<` exactly in a formula and in code (issue 33: the lesson's answers hold `<`), give
    each formula its MathML for screen readers and draw each glyph from the page's own definitions (SVG). On the
    exercise lesson page (the runner's) the SVGs of the formulas below its top are drawn later, in boxes of their
    size (tests/runner/test_runner_browser.py: near the screen at once, the others once Python has started)."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    refused: list[str] = []
    context.route(re.compile(r"^(?!http://127\.0\.0\.1:)"), lambda route: (refused.append(route.request.url),
                                                                            route.abort()))
    try:
        page = context.new_page()
        for target, display in ((LESSON_PAGE[branch], 2), (LESSON_11.demos[0].target, 0)):  # display formulas
            page.goto(site_urls[branch] + target, wait_until="commit")
            page.wait_for_load_state("domcontentloaded")
            seen = page.evaluate(AT_PARSE)
            assert page.evaluate(RAW_TEX) == [], f"{target}: TeX left as text"
            assert seen["typeset"] > 20 and seen["display"] >= display and seen["hidden"], (target, seen)
            runner = branch == "exercise" and target == LESSON_PAGE[branch]
            assert (seen["undrawn"] > 0) == runner, (target, seen["undrawn"])
            assert not [s for s in seen["scripts"] if "mathjax" in s.lower()], seen["scripts"]
            page.wait_for_load_state("networkidle")
            assert page.evaluate("() => window.MathJax") is None, f"{target}: MathJax was loaded"
            assert seen["glyphs"] and not seen["missing"], f"{target}: glyphs not defined: {seen['missing']}"
        page.goto(site_urls[branch] + LESSON_PAGE[branch], wait_until="domcontentloaded")
        seen = page.evaluate(AT_PARSE)
        # the lesson's rule (`\sigma < \epsilon_{\text{std}}` in a `cases` block, `\text{std} < ...` in a table,
        # `\hat A_i < 0`) and its code `std < eps`, as written
        assert any("σ≥ϵstd0,σ<ϵstd" in text for text in seen["spoken"]), seen["spoken"][:3]
        assert {"std<ϵstd=10−8", "A^i<0"} <= set(seen["spoken"]), seen["spoken"]
        assert "std < eps" in seen["code"], seen["code"][:10]
        assert refused == [], refused
    finally:
        context.close()
