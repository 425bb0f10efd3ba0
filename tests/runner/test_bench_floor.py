"""bench/bench_runner.py's floor (issue 33's blank page): a page with nothing in it that runs the lesson page's own
worker, boot and Check, so that a page's ratio to it is what the page itself costs its first Check; and the
bench's waits, which a DOM change settles instead of polling in requestAnimationFrame."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from coursekit.lesson import parse_lesson

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))
import bench_runner  # noqa: E402 - the bench, not a package


@pytest.fixture
def floor_site(tmp_path: Path, preview_site: Path) -> Path:
    """A folder holding the real preview's assets (a link: the shared site is left as it is) for the blank pages."""
    (tmp_path / "assets").symlink_to(preview_site / "assets", target_is_directory=True)
    return tmp_path


def test_the_blank_page_runs_the_lesson_pages_check_in_its_worker(browser: object, serve_directory,
                                                                  floor_site: Path) -> None:
    """Stands in for the bench's baseline loads: the blank page sends the code to the worker runner.js uses (the
    lesson page's runner-worker.js, its boot and its runner config) and says what the Check gave, so the reference
    answer passes the lesson's three visible checks there as on the lesson page, and the starter code (blanks)
    passes none. (A page that only started Python would say neither.)"""
    lesson = parse_lesson(ROOT / bench_runner.LESSON.source)
    base = serve_directory(floor_site)
    bench_runner.write_blank_pages(floor_site, lesson.reference_code)
    assert bench_runner.blank_load(browser, base + "blank.html")["passed"] == 3
    bench_runner.write_blank_pages(floor_site, lesson.blank_code)
    assert bench_runner.blank_load(browser, base + "blank.html")["passed"] == 0
    pyodide_only = bench_runner.blank_load(browser, base + "pyodide-only.html")
    assert pyodide_only["first"] > 0 and pyodide_only["passed"] == 0


def test_a_blank_page_whose_worker_fails_stops_the_bench_with_its_reason(browser: object, serve_directory,
                                                                         floor_site: Path) -> None:
    """Stands in for a build whose runner config the worker cannot fetch: the bench stops with the worker's own
    reason on one line, instead of timing a page that never checks anything."""
    bench_runner.write_blank_pages(floor_site, "x = 1\n")
    page = floor_site / "blank.html"
    page.write_text(page.read_text(encoding="utf-8").replace("runner-config-", "no-such-config-"), encoding="utf-8")
    with pytest.raises(SystemExit) as stop:
        bench_runner.blank_load(browser, serve_directory(floor_site) + "blank.html")
    message = str(stop.value)
    assert message.startswith("error: /blank.html: the blank page's worker said config-error")
    assert "HTTP 404" in message and "\n" not in message


def test_the_bench_waits_for_a_dom_change_and_gives_up_with_its_condition(browser: object) -> None:
    """The wait the bench uses for every result: settled by the DOM change that makes its condition hold (here an
    attribute a timer sets later, as runner.js sets data-completed), and, when it never holds, an error naming
    the condition once the time is up (not a hang)."""
    context = browser.new_context()
    page = context.new_page()
    page.set_content("<div class='cr-widget'></div><script>setTimeout(() => "
                     "document.querySelector('.cr-widget').dataset.completed = '1', 300)</script>")
    bench_runner.wait_in_page(page, bench_runner.DONE, bench_runner.COMPLETED_CHANGES, 0, timeout_s=10)
    assert page.get_attribute(".cr-widget", "data-completed") == "1"
    with pytest.raises(Exception, match=r"bench: still waiting after 0.5 s: n => Number"):
        bench_runner.wait_in_page(page, bench_runner.DONE, bench_runner.COMPLETED_CHANGES, 1, timeout_s=0.5)
    context.close()
