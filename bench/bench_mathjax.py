"""Benchmark: how long raw TeX stays on screen on the preview's exercise page, in headless Chromium.

    python bench/bench_mathjax.py [--repeat N]

Builds the exercise preview into a temp folder (running `coursekit release` first if the release
notebook is missing), serves it on 127.0.0.1 and, in N fresh browser contexts, records from the
page's own clock (performance.now(), 0 = navigation start): DOMContentLoaded, the first moment no
text node of <main> outside code shows `$...$` TeX (polled every 20 ms), and Python ready (the
runner's widget data-state). Medians are printed with the issue 25 target (no raw TeX 1 s after
load) and, as ratios, against DOMContentLoaded and Python ready measured in the same run: MathJax
must not wait for Python (ratio to Python ready well under 1). Nothing is asserted.
"""

from __future__ import annotations

import argparse
import functools
import http.server
import statistics
import tempfile
import threading
from pathlib import Path

from coursekit import preview
from coursekit.cli import main as coursekit
from coursekit.course_file import load_course
from coursekit.system import find_chromium

ROOT = Path(__file__).resolve().parents[1]
LESSON = load_course(ROOT / "course.yml").lesson("lesson11")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
# Records window.__marks: dcl, noTex (first poll without raw TeX after DOMContentLoaded), ready.
PROBE = r"""(() => {
  window.__marks = {};
  const raw = () => {
    const main = document.querySelector('main');
    if (!main) return true;
    const walker = document.createTreeWalker(main, NodeFilter.SHOW_TEXT);
    for (let n = walker.nextNode(); n; n = walker.nextNode()) {
      if (n.parentElement.closest('pre, code, textarea, script, style, .cr-widget')) continue;
      if (/\$[^$\s][^$]*\$/.test(n.textContent)) return true;
    }
    return false;
  };
  document.addEventListener('DOMContentLoaded', () => {
    window.__marks.dcl = performance.now();
    const poll = setInterval(() => {
      if (window.__marks.noTex === undefined && !raw()) window.__marks.noTex = performance.now();
      const w = document.querySelector('.cr-widget');
      if (window.__marks.ready === undefined && w && w.dataset.state === 'ready') {
        window.__marks.ready = performance.now();
      }
      if (window.__marks.noTex !== undefined && window.__marks.ready !== undefined) clearInterval(poll);
    }, 20);
  });
})();"""


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    if not (ROOT / LESSON.release_notebook).is_file():
        coursekit(["release"])
    with tempfile.TemporaryDirectory() as tmp:
        site = preview.build_preview(ROOT, "exercise", Path(tmp) / "_site", lesson=LESSON.id)
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(site)))
        threading.Thread(target=server.serve_forever, daemon=True).start()
        url = f"http://127.0.0.1:{server.server_port}/{preview.lesson_page(LESSON, 'exercise').target}"
        runs = []
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=find_chromium(), args=CHROMIUM_ARGS)
            for _ in range(args.repeat):
                context = browser.new_context(viewport={"width": 1366, "height": 768})
                page = context.new_page()
                page.add_init_script(PROBE)
                page.goto(url)
                page.wait_for_function("() => window.__marks && window.__marks.noTex !== undefined"
                                       " && window.__marks.ready !== undefined", timeout=120_000)
                runs.append(page.evaluate("window.__marks"))
                context.close()
            browser.close()
        server.shutdown()
    med = {k: statistics.median(r[k] for r in runs) for k in ("dcl", "noTex", "ready")}
    print(f"preview exercise page, {args.repeat} fresh contexts (medians, ms from navigation start)")
    print(f"  DOMContentLoaded                          {med['dcl']:8.0f}")
    print(f"  no raw TeX on screen                      {med['noTex']:8.0f}   target <= 1000 after load")
    print(f"  Python ready                              {med['ready']:8.0f}")
    print(f"  no raw TeX - DOMContentLoaded             {med['noTex'] - med['dcl']:8.0f}")
    ratio = med["noTex"] / med["ready"]
    print(f"  ratio no raw TeX / Python ready           {ratio:8.2f}   (< 1: MathJax does not wait)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
