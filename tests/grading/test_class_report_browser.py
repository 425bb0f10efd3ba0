"""The class report opened from disk in Chromium with every network request refused."""

from __future__ import annotations

import pytest

from coursekit.grading.records.classreport import report_html

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def test_class_report_opens_offline_from_disk(browser, instructor_class):
    path = report_html(instructor_class)
    page = browser.new_page()
    requests, errors = [], []

    def refuse_network(route):
        requests.append(route.request.url)
        if route.request.url == path.as_uri():
            route.continue_()
        else:
            route.abort()

    page.route("**/*", refuse_network)
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    try:
        page.goto(path.as_uri())
        assert requests == [path.as_uri()] and errors == []
        plots = page.locator(".plot svg")
        assert plots.count() == 4
        for k in range(4):  # drawn, with their glyphs (CJK labels as paths)
            box = plots.nth(k).bounding_box()
            assert box["width"] > 300 and box["height"] > 100
            assert plots.nth(k).locator("use").count() > 10
        cards = {s: page.locator(f"[data-count='{s}']").inner_text() for s in ("yes", "no", "pending")}
        assert cards == {"yes": "0", "no": "4", "pending": "4"}  # s03 s04 s07 s08 cannot reach 8
        common = page.locator("#common-mistakes tr").all_inner_texts()
        assert any("边界输入" in row and "2 人" in row and "s05, s06" in row for row in common), common
        copies = page.locator("#copy-table").inner_text()
        assert "copied_reference(q2" in copies and "similar_answers(q3: s03, s04" in copies
        assert page.locator("#student-table tr").count() == 1 + 8
    finally:
        page.close()
