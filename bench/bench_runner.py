"""Benchmark of the in-browser runner on the exercise page of both renderings, in headless Chromium.

    python bench/bench_runner.py [--repeat N]

Builds the exercise preview into a temp folder (running `coursekit release` first if the release
notebook is missing), serves it on 127.0.0.1 and, in N fresh browser contexts (empty cache and storage):

- load -> first Check: from page.goto to the first Check result (Pyodide loads in between), in a
  fresh context, and again after a reload once the page has stored its start-up snapshot (HTTP cache
  and Cache Storage warm: what a student gets on every later visit);
- second Check: click to result, as timed by the page (runner.js) and as seen from here;
- baselines from the same run, interleaved with the lesson page: a blank page that only loads the
  same Pyodide files in a module worker (the floor for any first Check), load -> "Python ready" on
  the lesson page, and a Run of `pass` (the worker's round trip without the checks).

The same is measured on the lesson in the shape of a Quarto page (Quarto cannot run here): the
preview's lesson content in a Bootstrap page with site.css, MathJax where Quarto puts it, and the <head>
Quarto writes for runner.lua's dependencies, computed by running the filter (tests/runner/quarto_filter.py):
the inline worker boot, then runner.js and its files from site_libs/quarto-contrib/; and, as a baseline,
the same page without the boot (runner.js starts the worker, as before issue 22).

Medians are printed with the targets, as ratios to the blank page's Pyodide load measured in the same
run (issue 12: first Check <= 1.1x, reload <= 0.6x; second Check <= 200 ms); nothing is asserted.
"""

from __future__ import annotations

import argparse
import functools
import http.server
import json
import re
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from urllib.parse import urlsplit

from bs4 import BeautifulSoup

from coursekit import preview
from coursekit.cli import main as coursekit
from coursekit.course_file import load_course
from coursekit.lesson import parse_lesson
from coursekit.system import find_chromium

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "runner"))
import quarto_filter  # noqa: E402 - runs runner.lua as Quarto does (a test helper)

LESSON = load_course(ROOT / "course.yml").lesson("lesson11")  # the lesson whose page is measured
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--no-first-run",
]
LINE = "{name:<58} {value}"
DONE = "n => Number(document.querySelector('.cr-widget').dataset.completed || 0) > n"
BARE_PAGE = """<!DOCTYPE html><html><head><meta charset="utf-8"><link rel="icon" href="data:,"></head><body><script>
const worker = new Worker("bare-worker.js", {type: "module"});
worker.onmessage = () => { document.title = "ready"; };
worker.postMessage(new URL("assets/pyodide/", location.href).href);
</script></body></html>
"""
BARE_WORKER = """self.onmessage = async (event) => {
  const { loadPyodide } = await import(event.data + "pyodide.mjs");
  await loadPyodide({ indexURL: event.data });
  postMessage("ready");
};
"""


QUARTO_PAGE = """<!DOCTYPE html>
<html lang="zh-Hans"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title}</title><link rel="icon" href="data:,"><meta name="quarto:offset" content="../">
<link href="../vendor/bootstrap.min.css" rel="stylesheet">
{runner}
<link href="../assets/site/site.css" rel="stylesheet">
{mathjax_options}
<script src="../assets/vendor/mathjax/tex-chtml.js" type="text/javascript"></script>
</head><body class="nav-sidebar docked"><div id="quarto-content" class="page-columns">
<main class="content" id="quarto-document-content">{body}</main></div></body></html>
"""


def build_quarto_page(site: Path, target: str, folder: str = "quarto", leave_out: tuple[str, ...] = ()) -> str:
    """The preview's lesson content as a Quarto-shaped page at <folder>/<name>.html (without runner.lua's
    dependencies named in `leave_out`); return that path."""
    page = f"{folder}/{Path(target).name}"
    soup = BeautifulSoup((site / target).read_text(encoding="utf-8"), "html.parser")
    body = "".join(str(node) for node in soup.find("main").contents)
    lib = site / "site_libs" / "quarto-contrib" / "course-runner-2.0.0"
    lib.mkdir(parents=True, exist_ok=True)
    for name in ("runner.js", "runner-worker.js", "runner.css", "editor.js"):
        (lib / name).write_bytes((ROOT / "assets" / "runner" / name).read_bytes())
    (site / "vendor").mkdir(exist_ok=True)
    (site / "vendor" / "bootstrap.min.css").write_bytes(
        (ROOT / "node_modules/bootstrap/dist/css/bootstrap.min.css").read_bytes())
    (site / page).parent.mkdir(parents=True, exist_ok=True)
    (site / page).write_text(QUARTO_PAGE.format(
        title=soup.title.string, runner=quarto_filter.head_html(page, leave_out), body=body,
        mathjax_options=(ROOT / "assets/site/quarto-head.html").read_text(encoding="utf-8")), encoding="utf-8")
    return page


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the base class's name
        pass


def build_site(out: Path) -> str:
    """The exercise preview in `out`; return the lesson page's path inside it."""
    if not (ROOT / LESSON.release_notebook).is_file():
        assert coursekit(["release"]) == 0, "coursekit release failed"
    preview.build_preview(ROOT, "exercise", out, lesson=LESSON.id)
    return preview.lesson_page(LESSON, "exercise").target


def bare_pyodide(browser: object, url: str) -> float:
    """Seconds from page load to Pyodide loaded on a blank page (fresh context)."""
    context = browser.new_context()
    page = context.new_page()
    start = time.perf_counter()
    page.goto(url)
    page.wait_for_function("document.title === 'ready'", timeout=120_000)
    context.close()
    return time.perf_counter() - start


def click_and_wait(page: object, action: str) -> float:
    """Click a runner button and wait for its result; return the seconds it took, seen from here."""
    before = int(page.get_attribute(".cr-widget", "data-completed") or 0)
    start = time.perf_counter()
    page.click(f"button[data-action={action}]")
    page.wait_for_function(DONE, arg=before, timeout=120_000)
    return time.perf_counter() - start


def page_ms(page: object) -> float:
    """The duration runner.js printed in its status line ('检查完成（N 毫秒）')."""
    return float(re.search(r"（(\d+) 毫秒）", page.inner_text(".cr-status"))[1])


# When the widget first says "ready", on the page's clock (ms since navigation start): read from the page
# after the result, so that the first Check is waited for with one wait, as the blank page's load is (a
# second wait in between, for "ready", added its own round trip, 0.1-0.5 s under load, to the result).
READY_AT = """new MutationObserver((changes, observer) => {
  if (changes.some(c => c.target.dataset && c.target.dataset.state === "ready")) {
    window.__benchReadyAt = performance.now();
    observer.disconnect();
  }
}).observe(document, {subtree: true, attributes: true, attributeFilter: ["data-state"]});"""


def first_check(page: object, url: str) -> tuple[float, float]:
    """Load the page and click Check at once; return (seconds to Python ready, to the Check result)."""
    wall_start = time.time()
    start = time.perf_counter()
    page.goto(url)
    page.wait_for_selector(".cr-widget")
    before = int(page.get_attribute(".cr-widget", "data-completed") or 0)
    page.click("button[data-action=check]")
    page.wait_for_function(DONE, arg=before, timeout=120_000)
    first = time.perf_counter() - start
    origin_ms, ready_ms = page.evaluate("() => [performance.timeOrigin, window.__benchReadyAt]")
    return (origin_ms + ready_ms) / 1000 - wall_start, first


def measure(browser: object, url: str, code: str) -> dict[str, float]:
    context = browser.new_context()
    page = context.new_page()
    key = f"course-runner:v1:{urlsplit(url).path}:lesson11:code"  # runner.js's saved-work key
    page.add_init_script(f"localStorage.setItem({json.dumps(key)}, {json.dumps(code)})")
    page.add_init_script(READY_AT)
    ready, first = first_check(page, url)
    passed = page.get_attribute(".cr-summary", "data-passed")
    second = click_and_wait(page, "check")
    second_in_page = page_ms(page) / 1000
    page.evaluate("() => { document.querySelector('.cr-host').courseRunner.code = 'pass\\n'; }")
    run_pass = click_and_wait(page, "run")
    page.wait_for_selector(".cr-widget[data-snapshot=stored]", timeout=180_000)
    _, reload_first = first_check(page, url)  # same context: HTTP cache and the start-up snapshot warm
    assert page.get_attribute(".cr-widget", "data-start") == "snapshot", "the reload did not use the snapshot"
    context.close()
    return {"ready": ready, "first": first, "second": second, "second_in_page": second_in_page,
            "run_pass": run_pass, "reload_first": reload_first, "passed": float(passed)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="fresh page loads to measure (default 3)")
    args = parser.parse_args(argv)
    from playwright.sync_api import sync_playwright

    executable = find_chromium()
    if executable is None:
        print("error: no Chromium; `make bench` installs it (see src/coursekit/system.py)", file=sys.stderr)
        return 1
    code = parse_lesson(ROOT / LESSON.source).reference_code
    with tempfile.TemporaryDirectory() as tmp:
        site = Path(tmp) / "_site"
        target = build_site(site)
        (site / "bare.html").write_text(BARE_PAGE, encoding="utf-8")
        (site / "bare-worker.js").write_text(BARE_WORKER, encoding="utf-8")
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(QuietHandler, directory=str(site)))
        threading.Thread(target=server.serve_forever, daemon=True).start()
        quarto = {"quarto": build_quarto_page(site, target),  # as runner.lua gives it
                  "quarto_no_boot": build_quarto_page(site, target, "quarto-no-boot", ("course-runner-boot",))}
        base = f"http://127.0.0.1:{server.server_port}/"
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
            runs = [measure(browser, base + target, code) | {"bare": bare_pyodide(browser, base + "bare.html")}
                    | {f"{name}_{k}": v for name, page in quarto.items()
                       for k, v in measure(browser, base + page, code).items()}
                    for _ in range(args.repeat)]
            browser.close()
        server.shutdown()
    med = {key: statistics.median(r[key] for r in runs) for key in runs[0]}
    print(LINE.format(name="runs (fresh contexts)", value=args.repeat))
    print(LINE.format(name="checks passed (of 3), median", value=f"{med['passed']:.0f}"))
    print(LINE.format(name="blank page -> Pyodide loaded (s)  [baseline]", value=f"{med['bare']:.2f}"))
    print(LINE.format(name="load -> Python ready (s)", value=f"{med['ready']:.2f}"))
    print(LINE.format(name="load -> first Check result (s)", value=f"{med['first']:.2f}"))
    print(LINE.format(name="first Check / blank-page Pyodide  [target <= 1.1]",
                      value=f"{med['first'] / med['bare']:.2f}"))
    print(LINE.format(name="reload -> first Check result (s)", value=f"{med['reload_first']:.2f}"))
    print(LINE.format(name="reload first Check / blank-page Pyodide  [target <= 0.6]",
                      value=f"{med['reload_first'] / med['bare']:.2f}"))
    print(LINE.format(name="Quarto-shaped page: checks passed (of 3), median", value=f"{med['quarto_passed']:.0f}"))
    print(LINE.format(name="Quarto-shaped page: load -> first Check result (s)", value=f"{med['quarto_first']:.2f}"))
    print(LINE.format(name="Quarto first Check / blank-page Pyodide  [target <= 1.1]",
                      value=f"{med['quarto_first'] / med['bare']:.2f}"))
    print(LINE.format(name="Quarto reload first Check / blank-page Pyodide  [target <= 0.6]",
                      value=f"{med['quarto_reload_first'] / med['bare']:.2f}"))
    print(LINE.format(name="same page without runner.lua's head boot: first Check / blank  [baseline]",
                      value=f"{med['quarto_no_boot_first'] / med['bare']:.2f}"))
    in_page = med["second_in_page"] * 1000
    print(LINE.format(name="second Check, in page (ms)", value=f"{in_page:.0f}  (target <= 200 ms)"))
    print(LINE.format(name="second Check, click to result (ms)", value=f"{med['second'] * 1000:.0f}"))
    print(LINE.format(name="Run `pass`, click to result (ms)  [baseline]", value=f"{med['run_pass'] * 1000:.0f}"))
    print(LINE.format(name="second Check / Run `pass`", value=f"{med['second'] / med['run_pass']:.2f}"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
