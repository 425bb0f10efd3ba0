"""What makes Quarto add a URL from another host to a page, as rules over the sources it renders.

Read from quarto-cli's source (Quarto 1.10; file and function named per rule) and from its documentation:

- Notebook outputs (src/core/jupyter/widgets.ts, `extractJupyterWidgetDependencies` and
  `includesForJupyterWidgetDependencies`): if ANY `display_data` or `execute_result` output of a notebook
  has a `text/html` or `application/javascript` entry, every page rendered from it gets require.js and
  jQuery from a CDN plus an inline `define('jquery')`; an `application/vnd.jupyter.widget-view+json`
  entry adds `embed-amd.js` from unpkg too. The scan covers the whole notebook before any cell option is
  read (src/core/jupyter/jupyter.ts, `jupyterToMarkdown` calls it first), so `output: false` does not
  help. It applies to `.ipynb` pages, to executed `.qmd` pages, whose outputs are the executed branch
  notebook's (`make branches` runs the same code; a pandas DataFrame result counts: it has text/html),
  and to notebooks a page embeds (`{{< embed nb.ipynb#label >}}`).
- Markdown that names another host (pandoc writes the URL as it is): an image, or an HTML tag that the
  browser fetches (`<img>`, `<script>`, `<iframe>`, `<link>`, `<video>`, `<audio>`, `<source>`), in a
  Markdown cell, a `.qmd` page or a Markdown output.
- `{ojs}` cells: Quarto's OJS runtime resolves `require()` and `import` from jsDelivr
  (src/resources/formats/html/ojs/quarto-ojs-runtime.js; quarto.org docs/interactive/ojs/libraries).
- Website options that load a third-party service by design (quarto.org docs/websites/website-tools:
  `google-analytics`, `cookie-consent`; docs/reference/projects/websites: `comments`; docs/websites/
  website-search: `search.algolia`).

`coursekit site` checks these before `quarto render` (the render would otherwise fail only at the
post-render step), the post-render step names the output behind an off-host URL it finds, and
tests/site/test_quarto_rules.py holds every rendered source to them.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

import nbformat
import yaml

from coursekit.errors import CourseError

WIDGETS_TS = "quarto-cli src/core/jupyter/widgets.ts (extractJupyterWidgetDependencies)"
JS_WIDGET_MIMES = ("text/html", "application/javascript")  # -> require.js + jQuery from a CDN
JUPYTER_WIDGET_MIME = "application/vnd.jupyter.widget-view+json"  # -> also embed-amd.js from unpkg
DISPLAY_OUTPUTS = ("display_data", "execute_result")  # widgets.ts isDisplayData
FIGURE_FIX = ("show it as an image or Markdown instead: a figure as a Markdown output with an <img> and its "
              "alt text (grpolab.demo_plots.figure_markdown), a table as Markdown (DataFrame.to_markdown()) or "
              "plain text; then re-run the notebook (`make demo`, or `make branches` for a lesson)")
OFF_HOST = r"(?:https?:)?//[^\s\"')>]+"
MARKDOWN_IMAGE = re.compile(r"!\[[^\]]*\]\(\s*<?(?P<url>" + OFF_HOST + ")")
FETCHED_TAG = re.compile(r"<(?:img|script|iframe|link|video|audio|source)\b[^>]*?\b(?:src|href)\s*=\s*[\"']?"
                         r"(?P<url>" + OFF_HOST + ")", re.I)
EMBED = re.compile(r"\{\{<\s*embed\s+(?P<path>[^\s#>]+\.ipynb)")  # {{< embed notebook.ipynb#label >}}
OJS_CELL = re.compile(r"^[ \t]*```+[ \t]*\{ojs\b", re.M)
THIRD_PARTY_WEBSITE_KEYS = {
    "google-analytics": "quarto.org docs/websites/website-tools (Google Analytics)",
    "cookie-consent": "quarto.org docs/websites/website-tools (Cookie Consent)",
    "comments": "quarto.org docs/reference/projects/websites (comments: hypothesis, utterances, giscus)",
}


@dataclass(frozen=True)
class Finding:
    """One thing in a rendered source that makes Quarto's page fetch from another host."""

    source: str  # the file Quarto renders (or the notebook holding its outputs), relative to the root
    where: str  # e.g. "cell 5, output 2 (display_data: text/html)"
    adds: str  # what the page then loads
    rule: str  # where Quarto does it
    fix: str

    def line(self) -> str:
        return f"{self.source}: {self.where}: Quarto adds {self.adds} ({self.rule}); {self.fix}"


def rendered_sources(root: Path, profile: str) -> list[str]:
    """project.render of `_quarto-<profile>.yml`: the files Quarto renders for that profile."""
    path = root / f"_quarto-{profile}.yml"
    try:
        return list(yaml.safe_load(path.read_text(encoding="utf-8"))["project"]["render"])
    except (OSError, yaml.YAMLError, KeyError, TypeError) as exc:
        raise CourseError(f"{path}: no readable project.render list ({exc})") from None


def executed_notebook(root: Path, source: str) -> Path | None:
    """The notebook whose outputs a page shows: the .ipynb itself, or for a .qmd page the executed branch
    notebook beside it (same cells, run by `make branches`); None for a page without one."""
    path = root / source
    if path.suffix == ".ipynb":
        return path
    beside = path.with_suffix(".ipynb")
    return beside if path.suffix == ".qmd" and beside.is_file() else None


def notebook_findings(root: Path, notebook: Path) -> list[Finding]:
    """Every display output with a MIME type that makes Quarto add scripts from a CDN, and every off-host
    URL in a Markdown cell or output."""
    rel = notebook.relative_to(root).as_posix() if notebook.is_relative_to(root) else str(notebook)
    try:
        nb = nbformat.read(notebook, as_version=4)
    except Exception as exc:  # nbformat raises several unrelated types for a broken file
        raise CourseError(f"{rel}: not a readable notebook ({exc})") from None
    found = []
    for index, cell in enumerate(nb.cells, start=1):
        if cell.cell_type == "markdown":
            found += markdown_findings(rel, f"cell {index} (Markdown)", cell.source)
        for number, output in enumerate(cell.get("outputs", []) if cell.cell_type == "code" else [], start=1):
            if output.get("output_type") not in DISPLAY_OUTPUTS:
                continue
            where = f"cell {index}, output {number} ({output['output_type']}"
            mimes = [m for m in output.get("data", {}) if m in (*JS_WIDGET_MIMES, JUPYTER_WIDGET_MIME)]
            if mimes:
                adds = "require.js and jQuery from a CDN"
                if JUPYTER_WIDGET_MIME in mimes:
                    adds += " and the Jupyter widget manager (embed-amd.js) from unpkg"
                found.append(Finding(rel, f"{where}: {', '.join(mimes)})", adds, WIDGETS_TS, FIGURE_FIX))
            markdown = output.get("data", {}).get("text/markdown")
            if markdown:
                found += markdown_findings(rel, f"{where}: text/markdown)", "".join(markdown))
    return found


def markdown_findings(source: str, where: str, text: str) -> list[Finding]:
    """Off-host images and fetched tags, and OJS cells, in Markdown (a page, a cell or an output)."""
    def at(start: int) -> str:
        return f"{where}, line {text.count(chr(10), 0, start) + 1}"

    found = [Finding(source, f"{at(m.start())}: {m['url']}", "this URL as it is (pandoc keeps it)",
                     "pandoc's HTML writer", "put the file under assets/ and link it by a relative path")
             for pattern in (MARKDOWN_IMAGE, FETCHED_TAG) for m in pattern.finditer(text)]
    found += [Finding(source, f"{at(m.start())}: an {{ojs}} cell", "the OJS runtime's imports from jsDelivr",
                      "quarto-cli src/resources/formats/html/ojs", "drop the {ojs} cell (use Python output)")
              for m in OJS_CELL.finditer(text)]
    return found


def config_findings(root: Path, profile: str) -> list[Finding]:
    """Website options of `_quarto.yml` and the profile that load a third-party service."""
    found = []
    for name in ("_quarto.yml", f"_quarto-{profile}.yml"):
        config = yaml.safe_load((root / name).read_text(encoding="utf-8")) or {}
        website = config.get("website") or {}
        for key, rule in THIRD_PARTY_WEBSITE_KEYS.items():
            if website.get(key):
                found.append(Finding(name, f"website.{key}", "a third-party service's scripts", rule,
                                     f"remove website.{key}"))
        search = website.get("search")
        if isinstance(search, dict) and search.get("algolia"):
            found.append(Finding(name, "website.search.algolia", "Algolia's search client from a CDN",
                                 "quarto.org docs/websites/website-search (Algolia)",
                                 "use Quarto's built-in search (remove search.algolia)"))
    return found


def project_findings(root: Path, profile: str) -> list[Finding]:
    """Everything in one profile's rendered sources and config that makes a page fetch from another host."""
    found = config_findings(root, profile)
    for source in rendered_sources(root, profile):
        path = root / source
        if path.suffix == ".qmd" and path.is_file():
            text = path.read_text(encoding="utf-8")
            found += markdown_findings(source, "page", text)
            for embedded in dict.fromkeys(m["path"] for m in EMBED.finditer(text)):
                found += notebook_findings(root, Path(os.path.normpath(path.parent / embedded)))
        notebook = executed_notebook(root, source)
        if notebook is not None and notebook.is_file():
            found += notebook_findings(root, notebook)
    return found


def summary(found: list[Finding]) -> list[str]:
    """One line per source and cause: the places joined, then what Quarto adds, its rule and the fix."""
    groups: dict[tuple[str, str, str, str], list[str]] = {}
    for f in found:
        groups.setdefault((f.source, f.adds, f.rule, f.fix), []).append(f.where)
    return [f"{source}: {'; '.join(wheres)}: Quarto adds {adds} ({rule}); {fix}"
            for (source, adds, rule, fix), wheres in groups.items()]


def check_project(root: Path, profiles: tuple[str, ...]) -> None:
    """Fail, one line per source and cause, if any profile's pages would fetch from another host."""
    found = list(dict.fromkeys(f for p in profiles for f in project_findings(root, p)))
    if found:
        raise CourseError("the Quarto site would load files from another host:\n  " + "\n  ".join(summary(found)))


def findings_for_url(root: Path, source: str, url: str) -> list[Finding]:
    """The findings in one page's source that explain an off-host URL found in its rendered HTML."""
    notebook = executed_notebook(root, source)
    found = notebook_findings(root, notebook) if notebook is not None and notebook.is_file() else []
    if (root / source).suffix == ".qmd" and (root / source).is_file():
        found += markdown_findings(source, "page", (root / source).read_text(encoding="utf-8"))
    if re.search(r"require|jquery|jupyter-widgets|html-manager", url, re.I):
        return [f for f in found if f.rule == WIDGETS_TS]
    return [f for f in found if url in f.where]
