"""The one font set-up of every chart the kit draws: grpolab's figures and demo plots and the class
report (coursekit.grading.records.classreport) all take their Chinese font from `cjk_font`.

matplotlib's font list is a cache (fontlist-v*.json in MPLCONFIGDIR) written the first time matplotlib
runs; on a machine where that happened before fonts-noto-cjk was installed, the cache lists no CJK
font and matplotlib falls back to DejaVu Sans (boxes for every Chinese character). `cjk_font` then
adds the system's font files the cache does not list, once per process, instead of trusting it.
Only matplotlib's font_manager is imported (no pyplot, no torch): the grading process uses it.
"""

from __future__ import annotations

from matplotlib import font_manager

CJK_FAMILIES = ("Noto Sans CJK SC", "Noto Sans CJK JP", "Noto Serif CJK SC", "WenQuanYi Zen Hei", "SimHei")


class FigureError(RuntimeError):
    """A figure cannot be drawn as committed; the message says what to install."""


def _known_cjk_family() -> str | None:
    known = {f.name for f in font_manager.fontManager.ttflist}
    return next((name for name in CJK_FAMILIES if name in known), None)


def cjk_font() -> str:
    """The first family of CJK_FAMILIES that is installed, rescanning the system fonts once when
    matplotlib's cached font list does not have one; FigureError when none is installed."""
    family = _known_cjk_family()
    if family is None:  # the cache may be older than the font: add the font files it does not list
        listed = {f.fname for f in font_manager.fontManager.ttflist}
        for path in font_manager.findSystemFonts():
            if path not in listed:
                try:
                    font_manager.fontManager.addfont(path)
                except (OSError, RuntimeError, ValueError):
                    pass  # an unreadable font file; matplotlib's own scan skips these too
        family = _known_cjk_family()
    if family is None:
        raise FigureError(f"no CJK font for the figures' Chinese labels (looked for {', '.join(CJK_FAMILIES)}): "
                          "install fonts-noto-cjk (`make figures` does as root)")
    return family
