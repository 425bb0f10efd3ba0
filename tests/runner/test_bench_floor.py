"""bench/bench_runner.py's floor (issue 33's blank page): a page with nothing in it that runs the lesson page's own
worker, boot and Check, so that a page's ratio to it is what the page itself costs its first Check; and the
bench's waits, which a DOM change settles instead of polling in requestAnimationFrame."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from coursekit import preview
from coursekit.lesson import parse_lesson

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))
import bench_runner  # noqa: E402 - the bench, not a package


@pytest.fixture
def floor_site(tmp_path: Path, preview_site: Path) -> tuple[Path, str]:
    """A folder holding the real preview's assets and lesson page (links: the shared site is left as it is) for the
    blank pages; and the lesson page's path in it."""
    target = preview.lesson_page(bench_runner.LESSON, "exercise").target
    for name in ("assets", Path(target).parts[0]):
        (tmp_path / name).symlink_to(preview_site / name, target_is_directory=True)
    return tmp_path, target


def test_the_blank_page_runs_the_lesson_pages_check_in_its_worker(browser: object, serve_directory,
                                                                  floor_site: tuple[Path, str]) -> None:
    """Stands in for the bench's baseline loads: the blank page sends the code to the worker runner.js uses (the
    lesson page's runner-worker.js, its boot and its runner config) and says what the Check gave, so the reference
    answer passes the lesson's three visible checks there as on the lesson page, and the starter code (blanks)
    passes none. (A page that only started Python would say neither.)"""
    site, target = floor_site
    lesson = parse_lesson(ROOT / bench_runner.LESSON.source)
    base = serve_directory(site)
    bench_runner.write_blank_pages(site, target, lesson.reference_code)
    assert bench_runner.blank_load(browser, base + "blank.html")["passed"] == 3
    bench_runner.write_blank_pages(site, target, lesson.blank_code)
    assert bench_runner.blank_load(browser, base + "blank.html")["passed"] == 0
    pyodide_only = bench_runner.blank_load(browser, base + "pyodide-only.html")
    assert pyodide_only["first"] > 0 and pyodide_only["passed"] == 0


def test_a_blank_page_whose_worker_fails_stops_the_bench_with_its_reason(browser: object, serve_directory,
                                                                         floor_site: tuple[Path, str]) -> None:
    """Stands in for a build whose runner config the worker cannot fetch: the bench stops with the worker's own
    reason on one line, instead of timing a page that never checks anything."""
    site, target = floor_site
    bench_runner.write_blank_pages(site, target, "x = 1\n")
    page = site / "blank.html"
    page.write_text(page.read_text(encoding="utf-8").replace("runner-config-", "no-such-config-"), encoding="utf-8")
    with pytest.raises(SystemExit) as stop:
        bench_runner.blank_load(browser, serve_directory(site) + "blank.html")
    message = str(stop.value)
    assert message.startswith("error: /blank.html: the blank page's worker said config-error")
    assert "HTTP 404" in message and "\n" not in message


def test_a_lesson_page_whose_head_names_no_runner_config_stops_the_bench(tmp_path: Path) -> None:
    (tmp_path / "page.html").write_text("<html><head></head><body></body></html>", encoding="utf-8")
    with pytest.raises(SystemExit, match=r"^error: page.html: 0 runner configs in the head boot, expected 1$"):
        bench_runner.write_blank_pages(tmp_path, "page.html", "x = 1\n")


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
