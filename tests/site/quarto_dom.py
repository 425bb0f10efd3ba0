"""A lesson page in the DOM Quarto 1.10 writes for its formulas and its Mermaid figure, built from the
branch page Quarto renders (exercises/<slug>.qmd).

Quarto cannot run here. What the page holds, and where each shape comes from in quarto-cli's source:
- A ```{mermaid} cell: src/core/handlers/mermaid.ts (makeJs: `<pre class="mermaid mermaid-js">` holding
  the escaped source; html:js output draws with Mermaid in the browser) inside the cell wrapper of
  src/core/handlers/base.ts (build(): `::: {.cell layout-align="default"}` > `::: {.cell-output-display}`
  > `::: {}` > raw `<figure class=''>` > `::: {}` > content, the figure's raw HTML opening and closing
  inside paragraphs). After the page's `load`, src/resources/formats/html/mermaid/mermaid-init.js draws
  each `pre.mermaid-js` with mermaid.render, moves the SVG into the pre's parent `<div>` in the pre's place,
  gives it the class `mermaid-js`, and (postProcess) tags the `<div>` around the `<figure>` with
  `quarto-figure-<layout-align>` (here `quarto-figure-default`); with no fig-width/fig-height the SVG keeps
  Mermaid's `width="100%"` and `max-width: <drawn width>px`. _quarto.yml's `mermaid: theme: neutral`
  becomes `<meta name="mermaid-theme">`, which mermaid-init passes to mermaid.initialize. The script in
  this page (DRAW) does those same steps; it is written here, not copied.
- Display math: pandoc's HTML writer with html-math-method mathjax writes `<span class="math display">
  \\[...\\]</span>` inside a `<p>`; inline math `<span class="math inline">\\(...\\)</span>`.
- The page's text column: Quarto's article grid. Below 768 px (the docked sidebar collapsed) the body
  column is the viewport less 1em each side (_bootstrap-mixins.scss, page-columns-docked-narrow, as in
  fixtures/quarto_narrow_page.html); at 1280 px with the right-hand table of contents Quarto 1.10.18 gave
  the lesson's text column 778 px (measured on a real render; issue 33), which this page sets.
The CSS a Quarto page gets: Bootstrap 5.3 (Quarto's themes are built on it), pandoc's styles and
assets/site/site.css (_quarto.yml format.html.css).
"""

from __future__ import annotations

import html
import re
import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FENCE = re.compile(r"^```\{?(\w+)\}?[^\n]*\n(.*?)^```", re.M | re.S)
DISPLAY_MATH = re.compile(r"^\$\$\n(.+?)\n\$\$", re.M | re.S)
# pandoc's tex_math_dollars: no space after the opening $, none before the closing one, no digit after it
INLINE_MATH = re.compile(r"(?<![\\$])\$(?![\s$])([^$\n]+?)(?<!\s)\$(?!\d)")
INLINE_CODE = re.compile(r"`([^`\n]+)`")
LINK = re.compile(r"\[([^\]\n]+)\]\(([^)\s]+)\)")
HEADER_INCLUDES = "assets/site/quarto-head.html"  # _quarto.yml format.html.include-in-header
TEXT_COLUMN_PX = 778  # Quarto 1.10.18's lesson text column at 1280 px (issue 33)

HEAD = """<!DOCTYPE html>
<html lang="zh-Hans">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="mermaid-theme" content="neutral">
<title>{title}</title>
<link rel="icon" href="data:,">
<style>code{{white-space: pre-wrap;}} span.smallcaps{{font-variant: small-caps;}}</style>
<link href="bootstrap.min.css" rel="stylesheet">
<style>
.page-columns {{ display: grid; gap: 0; grid-template-columns:
  [screen-start body-start] 1em [body-content-start] calc(100vw - 2em) [body-content-end body-end] 1em [screen-end]; }}
main.content {{ grid-column: body-content-start / body-content-end; }}
@media (min-width: 992px) {{
  .page-columns {{ grid-template-columns: [screen-start body-start] 1fr [body-content-start] {column}px
                   [body-content-end] 1fr [screen-end]; }}
}}
</style>
<link href="site.css" rel="stylesheet">
{runner}
{header_includes}
<script src="mathjax/tex-chtml.js" type="text/javascript"></script>
<script src="mermaid.min.js"></script>
</head>
<body class="nav-sidebar docked">
<div id="quarto-content" class="quarto-container page-columns page-rows-contents page-layout-article">
<main class="content" id="quarto-document-content">
"""
FOOT = """{after}</main>
</div>
<script>{draw}</script>
</body>
</html>
"""
# What mermaid-init.js does after `load` (see the module docstring), in this page's own words.
DRAW = """
const theme = document.querySelector('meta[name="mermaid-theme"]');
mermaid.initialize(theme ? { startOnLoad: false, theme: theme.content } : { startOnLoad: false });
window.addEventListener("load", async () => {
  let n = 0;
  for (const pre of [...document.querySelectorAll("pre.mermaid-js")]) {
    const { svg } = await mermaid.render("mermaid-" + ++n, pre.textContent);
    pre.innerHTML = svg;
    const drawn = pre.querySelector("svg");
    const parent = pre.parentElement;
    parent.removeChild(pre);
    parent.appendChild(drawn);
    drawn.classList.add("mermaid-js");
    const wrapper = drawn.parentElement.parentElement.parentElement;
    const align = wrapper.parentElement.parentElement.dataset.layoutAlign;
    if (align) wrapper.classList.add("quarto-figure-" + align);
  }
  document.body.dataset.mermaidDrawn = String(n);
});
"""


def mermaid_cell(source: str) -> str:
    """A ```{mermaid} cell as Quarto writes it (mermaid.ts makeJs inside base.ts build())."""
    return ('<div class="cell" data-layout-align="default">\n<div class="cell-output-display">\n<div>\n'
            '<p></p><figure class=""><p></p>\n<div>\n'
            f'<pre class="mermaid mermaid-js">{html.escape(source)}</pre>\n'
            '</div>\n<p></p></figure><p></p>\n</div>\n</div>\n</div>\n')


def inline_text(text: str) -> str:
    """One line of Markdown text as HTML: inline math as pandoc writes it, code as <code>, links as <a>, the
    rest escaped."""
    parts, last = [], 0
    for match in INLINE_MATH.finditer(text):
        parts.append(html.escape(text[last:match.start()]))
        parts.append(f'<span class="math inline">\\({html.escape(match[1])}\\)</span>')
        last = match.end()
    parts.append(html.escape(text[last:]))
    text = INLINE_CODE.sub(lambda m: f"<code>{m[1]}</code>", "".join(parts).replace("**", ""))
    return LINK.sub(lambda m: f'<a href="{m[2]}">{m[1]}</a>', text)


def body(qmd: str) -> str:
    """The Mermaid cells, display formulas and the lines with inline formulas of a .qmd page, in order."""
    blocks: list[tuple[int, str]] = []
    for match in FENCE.finditer(qmd):
        if match[1] == "mermaid":
            blocks.append((match.start(), mermaid_cell(match[2])))
    masked = FENCE.sub(lambda m: "\n" * m[0].count("\n"), qmd)
    for match in DISPLAY_MATH.finditer(masked):
        blocks.append((match.start(), f'<p><span class="math display">\\[{html.escape(match[1])}\\]</span></p>\n'))
    masked = DISPLAY_MATH.sub(lambda m: "\n" * m[0].count("\n"), masked)
    offset = 0
    for line in masked.splitlines(keepends=True):
        if INLINE_MATH.search(line):
            stripped = line.strip()
            item = re.match(r"^(?:[-*]|\d+\.)\s+", stripped)
            text = inline_text(stripped[item.end():] if item else stripped)
            blocks.append((offset, f"<ul><li>{text}</li></ul>\n" if item else f"<p>{text}</p>\n"))
        offset += len(line)
    return "".join(html for _, html in sorted(blocks, key=lambda b: b[0]))


def write_page(folder: Path, qmd_path: Path, name: str = "index.html", runner: str = "", after: str = "") -> Path:
    """Write the page for `qmd_path` (with Bootstrap, site.css, MathJax and Mermaid beside it) into
    `folder`/`name`; return the page's path.

    As Quarto's template (src/resources/formats/html/pandoc/template.html) orders the <head>: the HTML
    dependencies (`runner`: runner.lua's, tests/runner/quarto_filter.py), then the header-includes
    (_quarto.yml's include-in-header, assets/site/quarto-head.html), then the MathJax script
    (html-math-method url). `after`: HTML at the end of the page's <main> (the runner's exercise cell)."""
    from coursekit import preview

    page = folder / name
    text = qmd_path.read_text(encoding="utf-8")
    includes = (ROOT / HEADER_INCLUDES).read_text(encoding="utf-8")
    page.write_text(HEAD.format(title=html.escape(qmd_path.name), column=TEXT_COLUMN_PX, runner=runner,
                                header_includes=includes) + body(text)
                    + FOOT.format(draw=DRAW, after=after), encoding="utf-8")
    shutil.copyfile(ROOT / "node_modules/bootstrap/dist/css/bootstrap.min.css", folder / "bootstrap.min.css")
    shutil.copyfile(ROOT / "assets/site/site.css", folder / "site.css")
    shutil.copyfile(ROOT / preview.MERMAID, folder / "mermaid.min.js")
    if not (folder / "mathjax").exists():
        (folder / "mathjax").symlink_to(ROOT / preview.MATHJAX)
    return page


# TeX a page (Quarto's or the preview's) still shows as text: `$...$`, `\(` or `\[` in a text node outside code.
RAW_TEX = r"""() => {
    const walker = document.createTreeWalker(document.querySelector('main') || document.body, NodeFilter.SHOW_TEXT);
    const raw = [];
    for (let n = walker.nextNode(); n; n = walker.nextNode()) {
        if (n.parentElement.closest('pre, code, textarea, script, style, .cr-widget, .cm-editor')) continue;
        if (/\$[^$\s][^$]*\$|\\\(|\\\[/.test(n.textContent)) raw.push(n.textContent.slice(0, 60));
    }
    return raw;
}"""
