"""bench/bench_runner.py's CPU column: Chromium's CPU seconds, read from /proc for each Chromium process under
this one, and what a page made them use (its ratios to the blank page's tell the bench's variants apart on a
shared machine, where the wall-time ratios scatter)."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))
import bench_runner  # noqa: E402 - the bench, not a package

BUSY = "() => { const end = performance.now() + 300; while (performance.now() < end) {} }"


def test_the_bench_counts_the_cpu_a_page_makes_chromium_use(browser: object) -> None:
    """Stands in for a bench round: a page's renderer (started after the reading before it) is counted, read
    while its context is open; a process that has ended since the reading before takes nothing off."""
    before = bench_runner.chromium_cpu()
    assert before, "the session's Chromium runs under this process and shows in /proc"
    context = browser.new_context()
    page = context.new_page()
    page.set_content("<p>busy</p>")
    page.evaluate(BUSY)  # CPU in the page's renderer, a process the reading before did not know
    used = bench_runner.cpu_since(before)
    gone = bench_runner.cpu_since(before | {2**22 + 1: 1e6})  # a pid above Linux's pid_max: never alive
    context.close()
    assert used > 0, "the page's renderer was not counted"
    assert gone > 0, "a process that ended was counted against the page"
