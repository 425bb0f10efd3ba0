"""MathJax for the pages the kit writes as files (feedback): one vendored MathJax, the npm pin in
package.json (node_modules/mathjax), inlined, so a page shows its math with no network, opened from disk,
from an LMS, or in the hub (served by Jupyter's /files/ or in JupyterLab's trusted HTML viewer; the hub
releases the HTML file alone, so nothing can sit beside it).

- MathJax's SVG output with every TeX extension in one file (es5/tex-svg-full.js): no web fonts and
  no component loaded later, both of which MathJax would fetch from its CDN when it runs inline;
  the extensions that make links, classes, styles or load others (html, unicode, action, require)
  are left out of the TeX input, as the served pages leave them unloaded (static/safe_mathjax.js);
- MathJax's `safe` extension (es5/ui/safe.js) is run from the start-up hook, before MathJax makes its
  document, with the strict URL filter of static/safe_mathjax.js;
- a Content-Security-Policy in the page (a <meta> before any script) with formgrader's directives
  (coursekit.grading.formgrader_extension), its scripts allowed by hash: the student text in the page
  can run nothing, even if it got past the sanitiser.
"""

from __future__ import annotations

import functools
from pathlib import Path

from coursekit.errors import CourseError
from coursekit.grading.formgrader import NODE_MODULES
from coursekit.grading.formgrader_extension import CONTENT_SECURITY_POLICY, csp_hash

SAFE_SETUP = Path(__file__).resolve().parent / "templates" / "static" / "safe_mathjax.js"
BUNDLE = ("es5/tex-svg-full.js", "es5/ui/safe.js")
LEFT_OUT = ("html", "unicode", "action", "require")  # TeX extensions no page of the kit loads

# After static/safe_mathjax.js: everything is in the page, so nothing to load; the safe extension runs
# (`coursekitSafe`: es5/ui/safe.js in a function) just before MathJax's own start-up.
INLINE_SETUP = """
MathJax.loader = { load: [] };
delete MathJax.tex.autoload;  // the extensions it configures are left out below
delete MathJax.tex.require;
MathJax.tex.packages = { "[-]": %s };
MathJax.svg = { fontCache: "global" };
(function (ready) {
  MathJax.startup.ready = function () { coursekitSafe(); ready(); };
})(MathJax.startup.ready);
""" % ("[" + ", ".join(f'"{name}"' for name in LEFT_OUT) + "]")


@functools.lru_cache(maxsize=4)
def _inline_scripts(node_modules: Path) -> tuple[str, ...]:
    mathjax = node_modules / "mathjax"
    missing = [str(mathjax / name) for name in BUNDLE if not (mathjax / name).is_file()]
    if missing:
        raise CourseError(f"{missing[0]}: missing (the feedback pages inline MathJax from it); run 'make setup'")
    bundle, safe = ((mathjax / name).read_text(encoding="utf-8") for name in BUNDLE)
    # the safe extension's code runs inside the start-up hook, so it is defined before the bundle starts
    return (SAFE_SETUP.read_text(encoding="utf-8") + INLINE_SETUP + "function coursekitSafe() {\n" + safe + "\n}\n",
            bundle)


def page_policy(scripts: tuple[str, ...]) -> str:
    """formgrader's Content-Security-Policy for a page read as a file: its scripts allowed by hash,
    and without frame-ancestors (which a <meta> policy cannot set)."""
    hashes = " ".join(csp_hash(s.encode("utf-8")) for s in scripts)
    kept = [d for d in CONTENT_SECURITY_POLICY.split("; ") if not d.startswith(("script-src", "frame-ancestors"))]
    return "; ".join([*kept, f"script-src {hashes}"])


def inline_mathjax(_url: object = None, node_modules: Path = NODE_MODULES) -> str:
    """Jinja filter `coursekit_inline_mathjax` (templates/feedback/mathjax.html.j2): the policy <meta>
    and MathJax's scripts, for the <head> of a page (the same for every page: made once)."""
    return _head(node_modules)


@functools.lru_cache(maxsize=4)
def _head(node_modules: Path) -> str:
    scripts = _inline_scripts(node_modules)
    tags = "".join(f"<script>{s}</script>\n" for s in scripts)
    return f'<meta http-equiv="Content-Security-Policy" content="{page_policy(scripts)}">\n{tags}'
