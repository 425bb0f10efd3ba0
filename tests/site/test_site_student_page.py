"""The preview pages as a student meets them (issue 25): axe-core finds nothing serious or critical on
any page (phone width, and the exercise page on a laptop too), the home page has an <h1>, search
marks the words it found (also after the snippet's leading "…"), fits a 390 px phone and shows no TeX.

axe-core (npm, package.json) runs in the page; its rules: link-in-text-block, color-contrast and
scrollable-region-focusable are the ones these pages broke (axe-core lib/rules/*.json).
"""

from __future__ import annotations

import pytest
from playwright.sync_api import TimeoutError as PlaywrightTimeout
from test_site_browser import LESSON_PAGE, PAGES, open_page, search

pytestmark = pytest.mark.browser

# every box in <main> that scrolls is a tab stop (what site.js's markScrollBoxes does; the runner's editor aside)
SCROLL_BOXES_MARKED = """() => [...document.querySelectorAll('main *')].every(box => {
    if (box.closest('.cr-widget') || box.tabIndex >= 0) return true;
    const style = getComputedStyle(box);
    return !((/auto|scroll/.test(style.overflowX) && box.scrollWidth > box.clientWidth + 1)
             || (/auto|scroll/.test(style.overflowY) && box.scrollHeight > box.clientHeight + 1));
})"""
PHONE = {"width": 390, "height": 844}
LAPTOP = {"width": 1366, "height": 768}


def _open_for_axe(page: object, url: str, viewport: dict) -> object:
    page.set_viewport_size(viewport)
    open_page(page, url)  # every formula typeset and every diagram drawn
    if page.locator(".cr-widget").count():  # the runner's CodeMirror editor, built once Python has started
        page.wait_for_selector(".cr-editor[data-editor=codemirror] .cm-content", timeout=90_000)
    try:  # site.js re-marks scrolling boxes 200 ms after the page changes: wait until it has
        page.wait_for_function(SCROLL_BOXES_MARKED, polling=100, timeout=10_000)
    except PlaywrightTimeout:
        pass  # axe-core then names the box that is no tab stop
    return page


@pytest.mark.parametrize(("branch", "target"), PAGES)
def test_axe_finds_nothing_serious_on_a_phone(branch, target, page_and_log, site_urls, axe_violations) -> None:
    page = _open_for_axe(page_and_log[0], site_urls[branch] + target, PHONE)
    assert axe_violations(page) == [], f"{branch} {target}"


def test_axe_finds_nothing_serious_on_the_exercise_page_on_a_laptop(page_and_log, site_urls, axe_violations) -> None:
    page = _open_for_axe(page_and_log[0], site_urls["exercise"] + LESSON_PAGE["exercise"], LAPTOP)
    assert axe_violations(page) == []


@pytest.mark.parametrize("branch", ["exercise", "solution"])
def test_the_home_page_has_one_h1_with_the_sites_title(branch, page_and_log, site_urls) -> None:
    page, _ = page_and_log
    page.goto(site_urls[branch] + "index.html")
    assert page.locator("main h1").count() == 1
    assert page.locator("main h1").inner_text().rstrip("¶").strip() == page.title()


MARKS = """() => [...document.querySelectorAll('#course-search-results small')].map(s => ({
    text: s.textContent, marks: [...s.querySelectorAll('mark')].map(m => m.textContent)}))"""


@pytest.mark.parametrize("query", ["标准差", "eps", "零方差", "优势"])
def test_search_marks_exactly_the_words_found_even_after_the_leading_ellipsis(query, page_and_log,
                                                                              site_urls) -> None:
    page, _ = page_and_log
    page.goto(site_urls["solution"] + LESSON_PAGE["solution"])
    assert search(page, query)
    snippets = page.evaluate(MARKS)
    assert any(s["text"].startswith("…") and s["marks"] for s in snippets), snippets  # the case that was off by 2
    for s in snippets:  # (a section found by its heading may show no mark)
        assert all(m.lower() in query.lower() for m in s["marks"]), s  # each mark is (part of) a query word
        assert "$" not in s["text"] and "\\" not in s["text"], s  # no raw TeX


def test_search_results_fit_a_390px_phone(page_and_log, site_urls) -> None:
    page = page_and_log[0]
    page.set_viewport_size(PHONE)
    page.goto(site_urls["exercise"] + LESSON_PAGE["exercise"])
    assert search(page, "优势")
    box = page.locator("#course-search-results").bounding_box()
    assert box["x"] >= 0 and box["x"] + box["width"] <= PHONE["width"], box
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
