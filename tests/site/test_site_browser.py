"""The preview sites in headless Chromium: clean loads, typeset math, diagrams, images, hints, search."""

from __future__ import annotations

import pytest

from coursekit import preview

pytestmark = pytest.mark.browser

PAGES = [
    (branch, target)
    for branch, spec in preview.BRANCHES.items()
    for target in ("index.html", spec.lesson.target, preview.DEMO.target)
]


def open_page(page: object, url: str) -> None:
    page.goto(url, wait_until="networkidle")
    page.wait_for_function("() => !window.MathJax || (MathJax.startup && MathJax.startup.promise)")
    page.evaluate("() => window.MathJax ? MathJax.startup.promise : null")


@pytest.mark.parametrize(("branch", "target"), PAGES)
def test_page_loads_clean_from_localhost_only(branch, target, page_and_log, site_urls, screenshot) -> None:
    page, log = page_and_log
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
    open_page(page, site_urls[branch] + preview.BRANCHES[branch].lesson.target)
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
    open_page(page, site_urls["exercise"] + preview.BRANCHES["exercise"].lesson.target)
    summary = {n: page.locator(f"details.course-hint[data-level='{n}'] > summary") for n in (1, 2, 3)}
    assert page.locator("details.course-hint[data-level='4']").count() == 0, "the answer hint leaked"
    assert summary[1].is_visible() and not summary[2].is_visible()
    summary[1].click()
    assert summary[2].is_visible() and not summary[3].is_visible()
    summary[2].click()
    assert summary[3].is_visible()
    screenshot(page, "exercise-hints-open")


def test_solution_has_the_fourth_hint_level(page_and_log, site_urls) -> None:
    page, _ = page_and_log
    open_page(page, site_urls["solution"] + preview.BRANCHES["solution"].lesson.target)
    for level in (1, 2, 3):
        page.locator(f"details.course-hint[data-level='{level}'] > summary").click()
    assert page.locator("details.course-hint[data-level='4'] > summary").is_visible()


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
