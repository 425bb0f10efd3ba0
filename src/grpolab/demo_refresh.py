"""Rewrite the demo notebook's text from the committed numbers, without training again.

The demo (`make demo`) trains for many minutes and samples new numbers; its paragraphs, summary and
figure alt texts are written by `grpolab.demo_text` from the numbers each section stores in
`assets/figs/demo_*.json`. When only the wording changes, `make demo-text` (this module) puts the new
wording into the committed notebook's Markdown outputs, read from the same JSON files, and changes
nothing else (figures, logs and timings stay those of the committed run).

    python -m grpolab.demo_refresh [lessons/lesson11_grpo_demo.ipynb]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import nbformat

from grpolab import demo_plots, demo_text

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOK = ROOT / "lessons" / "lesson11_grpo_demo.ipynb"
FIGS = ROOT / "assets" / "figs"
SECTION_TEXT = {"a": (demo_text.section_a, demo_text.alt_a), "b": (demo_text.section_b, demo_text.alt_b),
                "c": (demo_text.section_c, demo_text.alt_c), "d": (demo_text.section_d, demo_text.alt_d),
                "e": (demo_text.section_e, demo_text.alt_e)}


def committed(figs: Path = FIGS) -> dict[str, dict]:
    """Each section's stored numbers, by letter."""
    return {k: json.loads((figs / f"demo_{demo_plots.SECTIONS[k]}.json").read_text(encoding="utf-8"))
            for k in SECTION_TEXT}


def paragraphs(data: dict[str, dict]) -> list[str]:
    """The notebook's Markdown paragraphs in order: sections (a)–(e), then the closing summary."""
    return [SECTION_TEXT[k][0](data[k]) for k in "abcde"] + [demo_text.summary(*(data[k] for k in "abcde"))]


def figures(data: dict[str, dict], notebook: Path) -> list[str]:
    """The five figure outputs (an <img> with its alt text), sections (a)–(e)."""
    return [demo_plots.figure_markdown(FIGS / f"demo_{demo_plots.SECTIONS[k]}.png", SECTION_TEXT[k][1](data[k]),
                                       start=notebook.parent) for k in "abcde"]


def refresh(notebook: Path = NOTEBOOK, figs: Path = FIGS) -> bool:
    """Put the current wording into the notebook's Markdown outputs; True if anything changed."""
    nb = nbformat.read(notebook, as_version=4)
    data = committed(figs)
    shown = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
             if "text/markdown" in o.get("data", {})]
    is_figure = [o["data"]["text/markdown"].startswith("<img ") for o in shown]
    texts, imgs = iter(paragraphs(data)), iter(figures(data, notebook))
    want = [next(imgs) if fig else next(texts) for fig in is_figure]
    if len(shown) != 11 or sum(is_figure) != 5:
        raise SystemExit(f"{notebook}: expected 5 figure and 6 text Markdown outputs, found "
                         f"{sum(is_figure)} and {len(shown) - sum(is_figure)}; run `make demo` instead")
    changed = [o for o, text in zip(shown, want, strict=True) if o["data"]["text/markdown"] != text]
    for o, text in zip(shown, want, strict=True):
        o["data"]["text/markdown"] = text
    if changed:
        nbformat.write(nb, notebook)
    return bool(changed)


if __name__ == "__main__":
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else NOTEBOOK
    print(f"{target}: {'rewritten' if refresh(target) else 'already current'}")
