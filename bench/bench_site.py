"""Benchmark of the no-Quarto preview build: a cold build, a rebuild, and the nbconvert share of it.

    python bench/bench_site.py

Baselines are measured in the same run: the rebuild (vendored MathJax/Mermaid/Pyodide already in place,
so only pages, home, search index and runner config are written) is reported as a ratio of the cold
build; the lesson page's nbconvert export as a share of the rebuild. Numbers are printed, never asserted.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import nbformat

from coursekit import preview

ROOT = Path(__file__).resolve().parents[1]
LINE = "{name:<40} {value}"


def timed(fn: Callable[..., object], *args: object) -> float:
    start = time.perf_counter()
    fn(*args)
    return time.perf_counter() - start


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        site = Path(tmp) / "_site"
        cold = timed(preview.build_preview, ROOT, "exercise", site)
        warm = timed(preview.build_preview, ROOT, "exercise", site)
        build = preview.Build(ROOT, preview.BRANCHES["exercise"], Path(tmp) / "pages-only")
        page = build.pages[0]  # the first lesson's page
        nb = nbformat.read(ROOT / page.source, as_version=4)
        export = timed(preview.write_html, build, page.target, nb, None)
        size = sum(p.stat().st_size for p in site.rglob("*") if p.is_file())
    print(LINE.format(name="cold build (s)", value=f"{cold:.2f}"))
    print(LINE.format(name="rebuild (s)", value=f"{warm:.2f}"))
    print(LINE.format(name="rebuild / cold build", value=f"{warm / cold:.2f}"))
    print(LINE.format(name="lesson page export (s)", value=f"{export:.2f}"))
    print(LINE.format(name="lesson page export / rebuild", value=f"{export / warm:.2f}"))
    print(LINE.format(name="exercise site size (MiB)", value=f"{size / 2**20:.1f}"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
