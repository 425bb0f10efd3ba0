"""Benchmark of the in-browser runner on the exercise page of both renderings, in headless Chromium.

    python bench/bench_runner.py [--repeat N]

Builds the exercise preview into a temp folder (running `coursekit release` first if the release
notebook is missing), serves it on 127.0.0.1 and, in N fresh browser contexts (empty cache and storage):

- load -> first Check: from page.goto to the first Check result (Pyodide loads in between), in a
  fresh context, and again after a reload once the page has stored its start-up snapshot (HTTP cache
  and Cache Storage warm: what a student gets on every later visit);
- second Check: click to result, as timed by the page (runner.js) and as seen from here;
- baselines from the same run, interleaved with the lesson page: a blank page that starts the lesson page's
  own worker with its own boot and, once Python is ready, sends it the same Check (BLANK_PAGE: the floor of a
  first Check, what issue 33's target is a ratio to); a blank page that only loads the same Pyodide in a module
  worker (PYODIDE_PAGE: the floor of earlier notes, and of the reload's target); load -> "Python ready" on the
  lesson page; and a Run of `pass` (the worker's round trip without the checks).

The same is measured on the lesson in the shape of a Quarto page (Quarto cannot run here): the
preview's lesson content with its formulas as TeX (as Quarto writes them) in a Bootstrap page with site.css,
MathJax where Quarto puts it, and the <head> Quarto writes for runner.lua's dependencies, computed by running
the filter (tests/runner/quarto_filter.py): the inline worker boot, then runner.js and its files from
site_libs/quarto-contrib/; and, as a baseline, the same page without the boot (runner.js starts the worker, as
before issue 22). A second baseline, "preview_mathjax", is the preview's lesson page as it was before its
formulas were typeset at build time (issue 33): the same page with the TeX, the site's MathJax and its options
and typesetting order (assets/site/quarto-head.html) in the page: what build-time typesetting saves, measured
in the same rounds.

Each round measures the two blank pages, then every page in turn (in reverse order every other round), then the
blank pages again in reverse order; a page's ratio is its first Check over the mean of that round's two loads of
a blank page, so a change of the machine's load weighs on both alike. A warm-up load of each page comes first, not
counted. Each load starts once Chromium is idle (`settle`): the teardown of the page closed before it (a renderer
freeing Pyodide's memory) overlapped the next load, and scattered the ratios. Each wait for a result is a promise in
the page that a DOM change settles (`wait_in_page`), not Playwright's polling in requestAnimationFrame, which made
the page draw 60 frames a second while Python started: work a student's page does not do.
Printed: a line per round with the 1-minute load average at its start and each rendering's ratio, then
median, min and max of each ratio with the targets (issues 12 and 33: first Check <= 1.1x the blank page on
both renderings, reload <= 0.6x; second Check <= 200 ms); nothing is asserted.

--first-only measures only the first Check (quicker rounds); --variants adds, first Check only, each page
with one piece of its start-up work taken out or changed (VARIANTS: on the Quarto-shaped page no MathJax,
MathJax typesetting every formula at once, MathJax loaded but no formula typeset before Python has started,
MathJax's components without its context menu; on the preview no site.js, no head boot, no JupyterLab
index.css, its formulas as plain text, every formula drawn as the page is parsed): what the first Check loses
to each (--variants TEXT: only the variants whose label contains TEXT). (The preview's pages load no MathJax:
their formulas are typeset when the site is built, and the lesson page draws them after its start.)

--against REV adds the exercise preview's lesson page as git revision REV builds it (a worktree of this repository in
the temp folder, built by that revision's own `coursekit release` and `coursekit site --preview`, with this checkout's
virtual environment and node_modules), measured in the same rounds: its ratio, and the per-round difference of the
preview's ratio and REV's (the median of the differences: a regression check of the first Check against an earlier
page, which the two medians alone, on a machine whose loads scatter by 10-20%, cannot give).

--busy N keeps N processes spinning on the CPU during the rounds (the warm-up excepted): the loaded measurement
(issue 33: the target holds quiet and loaded).

With --first-only, each load also reads Chromium's CPU seconds from /proc (the browser's processes, the page's
renderer with the runner's worker read before its context closes) and prints each page's and variant's CPU
over the blank page's: what its start-up work costs the machine. Another process's load inflates it far less
than the wall time, so it tells the variants apart on a shared machine where the wall-time ratios scatter.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import http.server
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import urlsplit

import psutil
from bs4 import BeautifulSoup

from coursekit import preview, runner
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
# The floor of a first Check (issue 33's blank page): a page with nothing in it but the lesson page's own boot
# (coursekit.runner.boot_script: its worker, runner-worker.js, with Pyodide, the runner's helpers and the lesson's
# runner config) that, once Python is ready, sends the worker the Check the widget sends (the code, the config's
# checks and given checks, its time limit); its title then says how many checks passed, or the worker's error.
# What the lesson page's first Check takes beyond this is what the page itself costs it.
BLANK_PAGE = """<!DOCTYPE html><html><head><meta charset="utf-8"><link rel="icon" href="data:,">
{boot}</head><body><script>
const {{worker, events}} = window.courseRunnerWorker;
let config = null, ready = false;
const check = () => config && ready && worker.postMessage({{type: "check", id: 1, code: {code}, checks: config.checks,
  given: config.given_checks || null, timeLimitS: config.time_limit_s, maxOutput: 100000}});
const receive = ({{data, message}}) => {{
  if (data === undefined) document.title = `error worker: ${{message || "runner-worker.js failed to load"}}`;
  else if (data.type === "config") {{ config = data.config; check(); }}
  else if (data.type === "ready") {{ ready = true; check(); }}
  else if (data.type === "done") document.title = `passed ${{data.result.results.filter(r => r.passed).length}}`;
  else if (data.type !== "stream") document.title = `error ${{data.type}}: ${{data.message || ""}}`;
}};
worker.onmessage = worker.onerror = receive;
events.forEach(receive);  // what came before this script ran
</script></body></html>
"""
# The floor the bench used before (issue 12's; the ratios of earlier notes): a blank page that only loads the same
# Pyodide in a module worker, without the runner's helpers or the Check. The reload's target is against it.
PYODIDE_PAGE = """<!DOCTYPE html><html><head><meta charset="utf-8"><link rel="icon" href="data:,"></head><body><script>
const worker = new Worker("pyodide-only-worker.js", {type: "module"});
worker.onmessage = () => { document.title = "passed 0"; };
worker.postMessage(new URL("assets/pyodide/", location.href).href);
</script></body></html>
"""
PYODIDE_WORKER = """self.onmessage = async (event) => {
  const { loadPyodide } = await import(event.data + "pyodide.mjs");
  await loadPyodide({ indexURL: event.data });
  postMessage("ready");
};
"""
# the blank pages, by the name of their loads in a round: the floor of the ratios first
FLOORS = {"blank": "blank.html", "pyodide_only": "pyodide-only.html"}


def write_blank_pages(site: Path, code: str) -> None:
    """BLANK_PAGE (blank.html, booted as the lesson page is, `code` checked) and PYODIDE_PAGE (pyodide-only.html)
    at the root of `site`."""
    boot = runner.boot_script("", config=runner.config_name(LESSON.slug))
    (site / "blank.html").write_text(BLANK_PAGE.format(boot=boot, code=json.dumps(code)), encoding="utf-8")
    (site / "pyodide-only.html").write_text(PYODIDE_PAGE, encoding="utf-8")
    (site / "pyodide-only-worker.js").write_text(PYODIDE_WORKER, encoding="utf-8")


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
    """The preview's lesson content with its formulas as TeX (the page at `target` under TEX_SITE) as a
    Quarto-shaped page at <folder>/<name>.html (without runner.lua's dependencies named in `leave_out`); return
    that path."""
    page = f"{folder}/{Path(target).name}"
    soup = BeautifulSoup((site / TEX_SITE / target).read_text(encoding="utf-8"), "html.parser")
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


class QuietServer(http.server.ThreadingHTTPServer):
    """A page closed while a file was still being sent (a context closed after its Check) is no error."""

    def handle_error(self, request: object, client_address: object) -> None:
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


# Where build_site writes the lesson page with its formulas as TeX (the pages of the preview have them typeset).
TEX_SITE = "tex-source"
# The preview's page as it was before its formulas were typeset at build time: its TeX delimiters, then the
# site's MathJax options and typesetting order (quarto-head.html) and MathJax, as preview.html.j2 wrote them.
PREVIEW_MATHJAX = """{head}
<script>
MathJax.tex = {{inlineMath: [["$", "$"], ["\\\\(", "\\\\)"]], displayMath: [["$$", "$$"], ["\\\\[", "\\\\]"]],
  processEscapes: true, processEnvironments: true}};
MathJax.options.ignoreHtmlClass = "tex2jax_ignore";
MathJax.options.processHtmlClass = "tex2jax_process";
</script>
<script defer src="../assets/vendor/mathjax/tex-chtml.js"></script>"""
MATH_CSS_LINK = re.compile(r'<link\b[^>]*\bhref="[^"]*' + re.escape(preview.MATH_CSS) + '"[^>]*>')


def build_site(out: Path) -> str:
    """The exercise preview in `out`, with the site's MathJax (for the Quarto-shaped pages) and the lesson page
    with its formulas as TeX under out/TEX_SITE; return the lesson page's path inside each."""
    if not (ROOT / LESSON.release_notebook).is_file():
        assert coursekit(["release"]) == 0, "coursekit release failed"
    preview.build_preview(ROOT, "exercise", out, lesson=LESSON.id)
    tex = preview.Build(root=ROOT, branch=preview.BRANCHES["exercise"], site_dir=out / TEX_SITE, lesson=LESSON.id)
    preview.write_pages(tex)
    preview.copy_mathjax(preview.Build(root=ROOT, branch=preview.BRANCHES["exercise"], site_dir=out))
    return preview.lesson_page(LESSON, "exercise").target


def revision_build_steps(tree: Path) -> list[list[str]]:
    """The Python command lines (arguments after the interpreter) that build a revision's preview in its worktree
    `tree`, in that revision's own words (--against)."""
    return [["-m", "coursekit", "release"], ["-m", "coursekit", "site", "--preview", "--root", str(tree),
                                              "--lesson", LESSON.id]]


def build_revision(rev: str, tmp: Path) -> Path:
    """The exercise preview as git revision `rev` builds it (--against): a worktree in `tmp`, released and previewed
    by that revision's own code; return its site folder. A step that fails, or a build without the lesson page,
    stops the bench with its reason."""
    tree = tmp / f"rev-{re.sub(r'[^A-Za-z0-9._-]+', '-', rev)}"
    git = ["git", "-C", str(ROOT)]

    def run(what: str, step: list[str], **kwargs: object) -> None:
        done = subprocess.run(step, capture_output=True, text=True, check=False, **kwargs)
        if done.returncode:
            reason = (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1]
            raise SystemExit(f"error: --against {rev}: {what} failed: {reason}")

    run("git worktree add", [*git, "worktree", "add", "--detach", "--quiet", str(tree), rev])
    try:
        (tree / "node_modules").symlink_to(ROOT / "node_modules")
        env = {**os.environ, "PYTHONPATH": str(tree / "src")}  # that revision's coursekit, not this checkout's
        for step in revision_build_steps(tree):
            run(f"`python {' '.join(step[:4])}`", [sys.executable, *step], cwd=tree, env=env)
        page = preview.lesson_page(LESSON, "exercise").target  # the page the bench measures
        if not (tree / "_site" / page).is_file():
            raise SystemExit(f"error: --against {rev}: its build wrote no _site/{page}")
        site = tmp / "against-site"
        (tree / "_site").rename(site)
        return site
    finally:
        run("git worktree remove", [*git, "worktree", "remove", "--force", str(tree)])


@contextlib.contextmanager
def busy_processes(count: int) -> Iterator[list[subprocess.Popen]]:
    """`count` processes spinning on the CPU until the block ends (--busy); the block gets them."""
    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]
    try:
        yield spinners
    finally:
        for spinner in spinners:
            spinner.kill()
            spinner.wait()


def build_preview_with_mathjax(site: Path, target: str) -> str:
    """The preview's lesson page with its formulas as TeX and MathJax in the page (PREVIEW_MATHJAX) instead of
    the typeset formulas' stylesheet, beside it as <name>-mathjax.html; return that path."""
    page = (site / target).read_text(encoding="utf-8")
    tex = (site / TEX_SITE / target).read_text(encoding="utf-8")
    head = PREVIEW_MATHJAX.format(head=(ROOT / "assets/site/quarto-head.html").read_text(encoding="utf-8"))
    page, links = MATH_CSS_LINK.subn(lambda _m: head, page)
    page, mains = preview.MAIN.subn(lambda _m: preview.MAIN.search(tex)[0], page)
    if (links, mains) != (1, 1):
        raise SystemExit(f"error: {target}: {links} typeset-math stylesheet links and {mains} <main> to replace")
    out = str(Path(target).with_name(f"{Path(target).stem}-mathjax.html"))
    (site / out).write_text(page, encoding="utf-8")
    return out


def chromium_cpu() -> dict[int, float]:
    """CPU seconds (user + system) used so far by each Chromium process under this one (the browser, its
    renderers with their workers, GPU and network processes)."""
    out = {}
    for process in psutil.Process().children(recursive=True):
        with contextlib.suppress(psutil.Error):  # a process that ended meanwhile
            if "chrom" in process.name() or "headless" in process.name():
                times = process.cpu_times()
                out[process.pid] = times.user + times.system
    return out


def cpu_since(before: dict[int, float]) -> float:
    """Chromium's CPU seconds since `before` (chromium_cpu()), summed over the processes alive now: a page's
    renderer (its main thread and the runner's worker) is read before its context closes."""
    return sum(cpu - before.get(pid, 0.0) for pid, cpu in chromium_cpu().items())


def settle(limit_s: float = 3.0) -> None:
    """Wait until Chromium is idle (under 5% of a core for 0.2 s), at most `limit_s`: the teardown of the context
    closed before (its renderer freeing Pyodide's memory and ending) otherwise overlaps the next load, and weighs
    on whichever page comes next."""
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        before = chromium_cpu()
        time.sleep(0.2)
        if cpu_since(before) < 0.01:
            return


def wait_in_page(page: object, condition: str, observe: str, arg: object = None, timeout_s: float = 120) -> None:
    """Wait until `condition` (a JavaScript function of `arg`) holds in the page, tested again on each DOM change
    that `observe` (a MutationObserver's options, as JavaScript) names: not polled. (Playwright's
    wait_for_function polls in requestAnimationFrame, which makes the page draw a frame 60 times a second, about
    0.1 CPU-s of the lesson page's main thread up to its first Check, a student's page does not.)"""
    page.evaluate(f"""async (arg) => {{
      const ok = () => ({condition})(arg);
      if (ok()) return;
      await new Promise((resolve, reject) => {{
        const observer = new MutationObserver(() => {{ if (ok()) {{ observer.disconnect(); resolve(); }} }});
        observer.observe(document, {observe});
        setTimeout(() => reject(new Error("bench: still waiting after {timeout_s} s: " + {json.dumps(condition)})),
                   {timeout_s * 1000});
      }});
    }}""", arg)


TITLE_SET = "() => document.title.startsWith('passed') || document.title.startsWith('error')"
TITLE_CHANGES = "{subtree: true, childList: true, characterData: true}"
COMPLETED_CHANGES = "{subtree: true, attributes: true, attributeFilter: ['data-completed']}"


def blank_load(browser: object, url: str) -> dict[str, float]:
    """A blank page (BLANK_PAGE or PYODIDE_PAGE) in a fresh context: seconds from its load to its title, Chromium's
    CPU seconds meanwhile, and the checks it passed."""
    context = browser.new_context()
    page = context.new_page()
    settle()
    cpu = chromium_cpu()
    start = time.perf_counter()
    page.goto(url)
    wait_in_page(page, TITLE_SET, TITLE_CHANGES)
    out = {"first": time.perf_counter() - start, "cpu": cpu_since(cpu)}
    title = page.title()
    context.close()
    if title.startswith("error"):
        raise SystemExit(f"error: {urlsplit(url).path}: the blank page's worker said {title[6:]}")
    out["passed"] = float(title.split()[1])
    return out


def click_and_wait(page: object, action: str) -> float:
    """Click a runner button and wait for its result; return the seconds it took, seen from here."""
    before = int(page.get_attribute(".cr-widget", "data-completed") or 0)
    start = time.perf_counter()
    page.click(f"button[data-action={action}]")
    wait_in_page(page, DONE, COMPLETED_CHANGES, before)
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
    wait_in_page(page, DONE, COMPLETED_CHANGES, before)
    first = time.perf_counter() - start
    origin_ms, ready_ms = page.evaluate("() => [performance.timeOrigin, window.__benchReadyAt]")
    return (origin_ms + ready_ms) / 1000 - wall_start, first


def measure(browser: object, url: str, code: str) -> dict[str, float]:
    context = browser.new_context()
    page = context.new_page()
    key = f"course-runner:v1:{urlsplit(url).path}:lesson11:code"  # runner.js's saved-work key
    page.add_init_script(f"localStorage.setItem({json.dumps(key)}, {json.dumps(code)})")
    page.add_init_script(READY_AT)
    settle()
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


# Variants of the two pages, each with one piece of its start-up work taken out or changed (--variants): what
# the first Check loses to each. (page kind, label, [(text in the page, its replacement)]): each text must
# occur exactly once in the page, or the bench stops (a variant that changed nothing would measure nothing); a
# replacement that is a function (of the match) is made wherever the text occurs, at least once.
MATHJAX_SCRIPT = re.compile(r'<script[^>]*src="[^"]*assets/vendor/mathjax/tex-chtml\.js"[^>]*></script>')
SITE_JS = re.compile(r'<script[^>]*src="[^"]*assets/site/site\.js"[^>]*></script>')
HEAD_BOOT = re.compile(r"<script>\(\(\) => \{ /\* the runner's worker, started before runner\.js.*?</script>", re.S)
# quarto-head.html's typesetting order: every formula at once, as on a page without the runner (no yield to Python)
ALL_AT_ONCE = re.compile(re.escape('if (html.dataset.courseRunnerStarting !== "true" ||'))
# quarto-head.html's formulas near the screen, typeset as soon as MathJax has loaded: left with the others instead
NEAR_AT_ONCE = re.compile(re.escape("return typeset(now);"))
# MathJax's components loaded one by one (startup.js: its loader), as tex-chtml.js holds them but without the
# context menu (ui/menu, 426 KB of its 1.16 MB); the bench copies startup.js and core.js beside the site's copy
LEAN_MATHJAX_FILES = ("startup.js", "core.js")
# JupyterLab's index.css, which nbconvert's lab template inlines (about 240 KB; the page uses a part of it)
LAB_CSS = re.compile(r'<style type="text/css">(?:(?!</style>).)*?Mozilla scrollbar styling.*?</style>', re.S)
# the browser skips the layout and paint of a Markdown cell (its text and SVG formulas) until it nears the screen
HEAD_END = re.compile(re.escape("</head>"))
SKIP_OFF_SCREEN = "<style>.jp-MarkdownCell { content-visibility: auto; contain-intrinsic-size: auto 600px; }</style>"
# a typeset formula of the preview (its SVG or the blank box it is drawn in later, then its assistive MathML), left
# as the MathML's plain text: the first Check of the page with no formula drawn or waiting to be, the least the
# formulas can cost
FORMULA = re.compile(r"<mjx-container[^>]*>(?:(?!</mjx-container>).)*?<mjx-assistive-mml[^>]*>(.*?)</mjx-assistive-mml>"
                     r"</mjx-container>", re.S)


def formula_text(match: re.Match) -> str:
    return re.sub(r"<[^>]+>", "", match[1])


# a formula of the preview's lesson page waiting to be drawn (site.js draws it after the page's start), and the
# store its SVG comes from (coursekit/typeset_math.cjs): drawn in the page as it is parsed instead, as before
BLANK_FORMULA = re.compile(r'<mjx-blank data-formula="(\d+)"[^>]*></mjx-blank>')
FORMULA_STORE = re.compile(r'<script type="application/json" id="course-formula-svg">(.*?)</script>', re.S)


@functools.lru_cache(maxsize=1)
def stored_svgs(page: str) -> list[str]:
    """The SVGs in the page's store (read once per page, not once per formula)."""
    return json.loads(FORMULA_STORE.search(page)[1])


def formula_drawn(match: re.Match) -> str:
    """BLANK_FORMULA's match replaced by its SVG from the page's store."""
    return stored_svgs(match.string)[int(match[1])]


LEAN_MATHJAX = ('<script>MathJax.loader = {load: ["input/tex", "output/chtml", "a11y/assistive-mml"]};</script>'
                '<script defer src="../assets/vendor/mathjax/startup.js"></script>')
VARIANTS = {
    "quarto, MathJax without its menu": ("quarto", [(MATHJAX_SCRIPT, LEAN_MATHJAX)]),
    "preview, no site.js (search, Mermaid, scroll boxes)": ("preview", [(SITE_JS, "")]),
    "preview, no head boot": ("preview", [(HEAD_BOOT, "")]),
    "preview, no JupyterLab index.css": ("preview", [(LAB_CSS, "")]),
    "preview, Markdown cells off screen not rendered": ("preview", [(HEAD_END, SKIP_OFF_SCREEN + "</head>")]),
    "preview, formulas as plain text": ("preview", [(FORMULA, formula_text)]),
    "preview, every formula drawn at load": ("preview", [(BLANK_FORMULA, formula_drawn), (FORMULA_STORE, "")]),
    "quarto, no MathJax": ("quarto", [(MATHJAX_SCRIPT, "")]),
    "quarto, nothing typeset before Python": ("quarto", [(NEAR_AT_ONCE, "return left = now.concat(left), queue;")]),
    "quarto, MathJax all at once": ("quarto", [(ALL_AT_ONCE, "if (true ||")]),
}


def copy_lean_mathjax(site: Path) -> None:
    """MathJax's loader and core (LEAN_MATHJAX_FILES) beside the site's copy, for the variant that loads
    MathJax's components one by one (the site holds only the combined tex-chtml.js and what it loads later)."""
    for name in LEAN_MATHJAX_FILES:
        (site / "assets/vendor/mathjax" / name).write_bytes((ROOT / preview.MATHJAX / name).read_bytes())


def write_variant(site: Path, page: str, label: str,
                  changes: list[tuple[re.Pattern, str | Callable[[re.Match], str]]]) -> str:
    """`page` with `changes` made, beside it as <name>-<label>.html; return its path."""
    text = (site / page).read_text(encoding="utf-8")
    for pattern, replacement in changes:
        every = callable(replacement)
        text, count = pattern.subn(replacement if every else lambda _m, r=replacement: r, text)
        if count != 1 and not (every and count):
            raise SystemExit(f"error: bench variant {label!r}: {pattern.pattern[:60]!r} occurs {count} times in {page}")
    slug = re.sub(r"[^a-z]+", "-", label.lower()).strip("-")
    out = str(Path(page).with_name(f"{Path(page).stem}-{slug}.html"))
    (site / out).write_text(text, encoding="utf-8")
    return out


def first_only(browser: object, url: str, code: str) -> dict[str, float]:
    """A fresh context: seconds from load to the first Check result, and Chromium's CPU seconds meanwhile."""
    context = browser.new_context()
    page = context.new_page()
    key = f"course-runner:v1:{urlsplit(url).path}:lesson11:code"
    page.add_init_script(f"localStorage.setItem({json.dumps(key)}, {json.dumps(code)})")
    page.add_init_script(READY_AT)
    settle()
    cpu = chromium_cpu()
    _, first = first_check(page, url)
    cpu = cpu_since(cpu)
    passed = page.get_attribute(".cr-summary", "data-passed")
    context.close()
    return {"first": first, "cpu": cpu, "passed": float(passed)}


def spread(values: list[float]) -> str:
    """Median and range of `values`."""
    return f"{statistics.median(values):.2f}  (min {min(values):.2f}, max {max(values):.2f}, n={len(values)})"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", "--rounds", type=int, default=3, help="rounds of fresh page loads (default 3)")
    parser.add_argument("--first-only", action="store_true",
                        help="measure only the first Check (no second Check, Run or reload): quicker rounds")
    parser.add_argument("--variants", nargs="?", const="", metavar="TEXT",
                        help="also each page with one piece of its start-up work changed (VARIANTS; with TEXT, those "
                             "whose label contains it), first Check only")
    parser.add_argument("--against", metavar="REV",
                        help="also the lesson page as git revision REV builds its preview, in the same rounds")
    parser.add_argument("--busy", type=int, default=0, metavar="N",
                        help="N processes spinning on the CPU during the rounds (a loaded machine)")
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
        write_blank_pages(site, code)
        server = QuietServer(("127.0.0.1", 0), functools.partial(QuietHandler, directory=str(site)))
        threading.Thread(target=server.serve_forever, daemon=True).start()
        pages = {"preview": target, "quarto": build_quarto_page(site, target),  # as runner.lua gives it
                 "quarto_no_boot": build_quarto_page(site, target, "quarto-no-boot", ("course-runner-boot",)),
                 "preview_mathjax": build_preview_with_mathjax(site, target)}
        if args.against:
            (site / "against").symlink_to(build_revision(args.against, Path(tmp)), target_is_directory=True)
            pages["against"] = f"against/{target}"
        variants = {label: write_variant(site, pages[kind], label, changes)
                    for label, (kind, changes) in VARIANTS.items()
                    if args.variants is not None and args.variants in label}
        if variants:
            copy_lean_mathjax(site)
        base = f"http://127.0.0.1:{server.server_port}/"
        runs = []
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
            for floor in FLOORS.values():  # warm-up loads, not counted: the files into the OS's cache
                blank_load(browser, base + floor)
            for path in list(pages.values()) + list(variants.values()):
                first_only(browser, base + path, code)
            print(f"{'round':<6} {'load(1m)':>8} {'blank s':>8} " + " ".join(f"{n:>15}" for n in pages)
                  + "   (first Check / blank page)", flush=True)
            with busy_processes(args.busy):  # none unless --busy
                for k in range(args.repeat):
                    load = os.getloadavg()[0]
                    # the blank page before and after the pages, the pages in turn in alternating order: a change
                    # of the machine's load during the round weighs on every page alike
                    order = list(pages) + list(variants)
                    order = order if k % 2 == 0 else order[::-1]
                    floors = {name: [blank_load(browser, base + floor)] for name, floor in FLOORS.items()}
                    run: dict[str, dict[str, float]] = {}
                    for name in order:
                        url = base + (pages.get(name) or variants[name])
                        run[name] = first_only(browser, url, code) if args.first_only or name in variants \
                            else measure(browser, url, code)
                    for name, floor in reversed(FLOORS.items()):
                        floors[name].append(blank_load(browser, base + floor))
                    for name, loads in floors.items():
                        run[name] = {key: statistics.mean(one[key] for one in loads) for key in loads[0]}
                    run["blank"]["load"] = load
                    blank = run["blank"]["first"]
                    runs.append(run)
                    print(f"{k + 1:<6} {load:>8.2f} {blank:>8.2f} "
                          + " ".join(f"{run[n]['first'] / blank:>15.2f}" for n in pages), flush=True)
                    for name in variants:
                        cpu = f"  (CPU {run[name]['cpu'] / run['blank']['cpu']:.2f})" if run["blank"]["cpu"] else ""
                        print(f"{'':<6} {'':>8} {'':>8} {name}: {run[name]['first'] / blank:.2f}{cpu}", flush=True)
            browser.close()
        server.shutdown()

    def ratios(name: str, key: str = "first", floor: str = "blank") -> list[float]:
        return [r[name][key] / r[floor]["first" if key == "reload_first" else key] for r in runs]

    def med(name: str, key: str) -> float:
        return statistics.median(r[name][key] for r in runs)

    loads = [r["blank"]["load"] for r in runs]
    print()
    print(LINE.format(name="rounds (fresh contexts, pages in alternating order)", value=args.repeat))
    print(LINE.format(name="load average (1 min) at each round's start", value=" ".join(f"{x:.2f}" for x in loads)))
    if args.busy:
        print(LINE.format(name="processes spinning on the CPU during the rounds", value=args.busy))
    print(LINE.format(name="blank page -> its Check's result (s)  [baseline]",
                      value=spread([r["blank"]["first"] for r in runs])))
    print(LINE.format(name="blank page: checks passed (of 3), median", value=f"{med('blank', 'passed'):.0f}"))
    print(LINE.format(name="blank page, Pyodide only -> loaded (s)  [baseline]",
                      value=spread([r["pyodide_only"]["first"] for r in runs])))
    for name, title in (("preview", "preview"), ("quarto", "Quarto-shaped page")):
        print(LINE.format(name=f"{title}: checks passed (of 3), median", value=f"{med(name, 'passed'):.0f}"))
        firsts = [r[name]["first"] for r in runs]
        print(LINE.format(name=f"{title}: load -> first Check result (s)", value=spread(firsts)))
        print(LINE.format(name=f"FIRST CHECK RATIO {title} / blank page  [target <= 1.1]", value=spread(ratios(name))))
        print(LINE.format(name=f"{title} / blank page, Pyodide only  [the earlier floor]",
                          value=spread(ratios(name, floor="pyodide_only"))))
    print(LINE.format(name="same Quarto page without runner.lua's head boot / blank  [baseline]",
                      value=spread(ratios("quarto_no_boot"))))
    print(LINE.format(name="preview page with MathJax in the page (before issue 33) / blank  [baseline]",
                      value=spread(ratios("preview_mathjax"))))
    if args.against:
        print(LINE.format(name=f"{args.against}'s preview / blank", value=spread(ratios("against"))))
        gaps = [a - b for a, b in zip(ratios("preview"), ratios("against"), strict=True)]
        print(LINE.format(name=f"preview - {args.against}'s preview, paired by round", value=spread(gaps)))
        print(LINE.format(name=f"rounds in which the preview was faster than {args.against}'s",
                          value=f"{sum(gap < 0 for gap in gaps)} of {len(gaps)}"))
    for name in variants:
        print(LINE.format(name=f"variant: {name} / blank", value=spread(ratios(name))))
    if args.first_only and all(r["blank"]["cpu"] for r in runs):
        # CPU seconds to the first Check over the blank page's: what the page's work costs the machine, which
        # other processes' load inflates far less than the wall time (the machine may be shared)
        print(LINE.format(name="Chromium CPU to load the blank page (s)  [baseline]",
                          value=spread([r["blank"]["cpu"] for r in runs])))
        for name in [*pages, *variants]:
            print(LINE.format(name=f"CPU ratio: {name} / blank", value=spread(ratios(name, "cpu"))))
    if not args.first_only:
        print(LINE.format(name="load -> Python ready (s)", value=f"{med('preview', 'ready'):.2f}"))
        print(LINE.format(name="reload first Check / blank page, Pyodide only  [target <= 0.6]",
                          value=spread(ratios("preview", "reload_first", "pyodide_only"))))
        print(LINE.format(name="Quarto reload first Check / blank page, Pyodide only  [target <= 0.6]",
                          value=spread(ratios("quarto", "reload_first", "pyodide_only"))))
        in_page = med("preview", "second_in_page") * 1000
        print(LINE.format(name="second Check, in page (ms)", value=f"{in_page:.0f}  (target <= 200 ms)"))
        print(LINE.format(name="second Check, click to result (ms)", value=f"{med('preview', 'second') * 1000:.0f}"))
        run_pass = med("preview", "run_pass") * 1000
        print(LINE.format(name="Run `pass`, click to result (ms)  [baseline]", value=f"{run_pass:.0f}"))
        print(LINE.format(name="second Check / Run `pass`",
                          value=f"{med('preview', 'second') / med('preview', 'run_pass'):.2f}"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
