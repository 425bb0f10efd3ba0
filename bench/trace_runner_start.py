"""What the lesson page's main thread does while the runner's Python starts, from Chromium's performance trace.

    python bench/trace_runner_start.py [--repeat N]

Builds the exercise preview, the Quarto-shaped page and the preview page with MathJax in the page (its formulas
typeset there, as before they were typeset at build time) as bench/bench_runner.py does, loads each in a fresh
context with a trace running, and stops at the first moment the widget says Python is ready. Prints, per
page, the main thread's CPU time (the trace's thread time, which another process's load does not inflate)
from navigation to that moment: in all, and by kind of work (a script's evaluation or calls by its URL,
layout, style, parsing, paint). On a 2-core machine this is CPU the worker's Pyodide start competes with.
Medians over N loads; nothing is asserted. --variants adds bench_runner's VARIANTS (the Quarto-shaped page
without MathJax, with MathJax typesetting every formula at once, ...).

--to-check counts up to the first Check's result instead, the Check clicked as soon as the widget is there
(as bench_runner.py does): the click scrolls the page to the exercise, and what the page does for the formulas
and text it then shows (MathJax typesetting the formulas near the exercise, the layout and paint that
follow) is part of the first Check's cost, which a trace that stops at "Python ready" without a click misses.
"""

from __future__ import annotations

import argparse
import collections
import functools
import json
import statistics
import sys
import tempfile
import threading
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_runner  # noqa: E402 - the bench's pages and server

from coursekit.lesson import parse_lesson  # noqa: E402
from coursekit.system import find_chromium  # noqa: E402

CATEGORIES = ["devtools.timeline", "disabled-by-default-devtools.timeline", "blink.user_timing"]
MARK = "course-bench-python-ready"
# performance.mark when the widget first says "ready" (the mark is a trace event: where to stop counting)
READY_MARK = f"""new MutationObserver((changes, observer) => {{
  if (changes.some(c => c.target.dataset && c.target.dataset.state === "ready")) {{
    performance.mark("{MARK}");
    observer.disconnect();
  }}
}}).observe(document, {{subtree: true, attributes: true, attributeFilter: ["data-state"]}});"""
# the same mark when the widget shows its first result (--to-check)
RESULT_MARK = f"""new MutationObserver((changes, observer) => {{
  if (changes.some(c => c.target.dataset && Number(c.target.dataset.completed || 0) > 0)) {{
    performance.mark("{MARK}");
    observer.disconnect();
  }}
}}).observe(document, {{subtree: true, attributes: true, attributeFilter: ["data-completed"]}});"""
# the widget says Python is ready (a wait that a DOM change settles, as bench_runner's: not polled in animation frames)
READY = "() => document.querySelector('.cr-widget[data-state=ready]') !== null"
STATE_CHANGES = "{subtree: true, childList: true, attributes: true, attributeFilter: ['data-state']}"
SCRIPT_EVENTS = {"EvaluateScript", "v8.evaluateModule", "FunctionCall", "TimerFire", "FireAnimationFrame",
                 "FireIdleCallback", "EventDispatch", "RunMicrotasks", "XHRLoad", "ResourceReceivedData"}
RENDER_EVENTS = {"Layout": "layout", "UpdateLayoutTree": "style", "ParseHTML": "parse HTML",
                 "ParseAuthorStyleSheet": "parse CSS", "Paint": "paint", "PrePaint": "paint"}


def kind(event: dict) -> str:
    """The kind of work a trace event is: rendering, or script named by its file."""
    if event["name"] in RENDER_EVENTS:
        return RENDER_EVENTS[event["name"]]
    data = event.get("args", {}).get("data", {})
    url = data.get("url") or data.get("scriptName") or ""
    if url:
        return f"script {url.rsplit('/', 1)[-1]}"
    return f"script on {data['type']}" if data.get("type") else f"script ({event['name']})"


def main_thread_cpu(trace: dict) -> dict[str, float]:
    """ms of main-thread CPU from the page's first task to the ready mark: 'all' (every top-level task) and
    by kind (outermost script or rendering event inside those tasks)."""
    events = trace["traceEvents"]
    mark = next(e for e in events if e.get("name") == MARK)
    thread = (mark["pid"], mark["tid"])
    spans = sorted((e for e in events if (e["pid"], e["tid"]) == thread and e.get("ph") == "X" and "tdur" in e),
                   key=lambda e: (e["ts"], -e.get("dur", 0)))
    out: collections.Counter[str] = collections.Counter()
    task_end = kind_end = -1
    for e in spans:
        if e["ts"] >= mark["ts"]:
            break
        if e["name"] == "RunTask" and e["ts"] >= task_end:
            out["all"] += e["tdur"] / 1000
            task_end = e["ts"] + e["dur"]
        elif (e["name"] in SCRIPT_EVENTS or e["name"] in RENDER_EVENTS) and e["ts"] >= kind_end:
            out[kind(e)] += e["tdur"] / 1000
            kind_end = e["ts"] + e["dur"]
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="loads of each page (default 3)")
    parser.add_argument("--variants", action="store_true", help="also bench_runner's VARIANTS of the pages")
    parser.add_argument("--to-check", action="store_true",
                        help="count up to the first Check's result (clicked at once, as bench_runner.py does)")
    args = parser.parse_args(argv)
    until = "the first Check result" if args.to_check else "Python ready"
    from playwright.sync_api import sync_playwright

    executable = find_chromium()
    if executable is None:
        print("error: no Chromium; `make bench` installs it (see src/coursekit/system.py)", file=sys.stderr)
        return 1
    code = parse_lesson(bench_runner.ROOT / bench_runner.LESSON.source).reference_code
    with tempfile.TemporaryDirectory() as tmp:
        site = Path(tmp) / "_site"
        target = bench_runner.build_site(site)
        pages = {"preview": target, "quarto": bench_runner.build_quarto_page(site, target),
                 "preview_mathjax": bench_runner.build_preview_with_mathjax(site, target)}  # before build-time math
        if args.variants:
            pages |= {label: bench_runner.write_variant(site, pages[page], label, changes)
                      for label, (page, changes) in bench_runner.VARIANTS.items()}
            bench_runner.copy_lean_mathjax(site)
        server = bench_runner.QuietServer(("127.0.0.1", 0), functools.partial(bench_runner.QuietHandler,
                                                                              directory=str(site)))
        threading.Thread(target=server.serve_forever, daemon=True).start()
        base = f"http://127.0.0.1:{server.server_port}/"
        runs: dict[str, list[dict[str, float]]] = {name: [] for name in pages}
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=executable, args=bench_runner.CHROMIUM_ARGS)
            for _ in range(args.repeat):
                for name, path in pages.items():
                    context = browser.new_context()
                    page = context.new_page()
                    if args.to_check:  # the reference answer as saved work, as bench_runner.py does
                        key = f"course-runner:v1:/{path}:lesson11:code"
                        page.add_init_script(f"localStorage.setItem({json.dumps(key)}, {json.dumps(code)})")
                    page.add_init_script(RESULT_MARK if args.to_check else READY_MARK)
                    browser.start_tracing(page=page, categories=CATEGORIES)
                    page.goto(base + path)
                    if args.to_check:
                        page.wait_for_selector(".cr-widget")
                        page.click("button[data-action=check]")
                        bench_runner.wait_in_page(page, bench_runner.DONE, bench_runner.COMPLETED_CHANGES, 0)
                    else:
                        bench_runner.wait_in_page(page, READY, STATE_CHANGES)
                    runs[name].append(main_thread_cpu(json.loads(browser.stop_tracing())))
                    context.close()
            browser.close()
        server.shutdown()
    for name, samples in runs.items():
        kinds = sorted({k for s in samples for k in s}, key=lambda k: -statistics.median(s.get(k, 0) for s in samples))
        print(f"{name}: main-thread CPU from navigation to {until} (ms, median of {args.repeat})")
        for k in kinds:
            value = statistics.median(s.get(k, 0) for s in samples)
            if value >= 1:
                print(f"  {value:7.0f}  {k}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
