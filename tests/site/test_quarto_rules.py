"""Quarto's rules for adding files from another host, held against every source the site renders.

Quarto cannot be installed here; its rules are read from quarto-cli's source and encoded in
coursekit.quarto_rules. The one that broke `make site` on 78c0374 (Quarto 1.10.18):

- src/core/jupyter/widgets.ts lines 33-36: `jsWidgets = haveOutputType(nb, [kApplicationJavascript,
  kTextHtml])`; lines 102-112: when true, the page's head gets require.js and jQuery from a CDN and an
  inline `define('jquery')`; lines 118-121: `application/vnd.jupyter.widget-view+json` adds
  `@jupyter-widgets/html-manager/dist/embed-amd.js` from unpkg. `haveOutputType` (end of the file) looks at
  every `display_data` / `execute_result` output (display-data.ts `isDisplayData`) of every code cell.
- src/core/jupyter/jupyter.ts lines 736-740: `jupyterToMarkdown` runs `extractJupyterWidgetDependencies`
  on the whole notebook before any cell's options are read, so `#| output: false` does not help.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import nbformat
import pytest
import yaml

from coursekit import preview, quarto_rules
from coursekit import site as site_cli
from coursekit.errors import CourseError

ROOT = Path(__file__).resolve().parents[2]
BROKEN_COMMIT = "78c0374"  # the demo showed its figures as display(HTML('<img src="data:...">'))
DEMO = "lessons/lesson11_grpo_demo.ipynb"
JQUERY = "https://cdn.jsdelivr.net/npm/jquery@3.5.1/dist/jquery.min.js"  # what 1.10.18 added (issue 22)


def notebook_with(*outputs: dict, source: str = "x") -> nbformat.NotebookNode:
    cell = nbformat.v4.new_code_cell(source)
    cell.outputs = [nbformat.from_dict(o) for o in outputs]
    return nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# t"), cell])


def display(mime: str, value: object = "v", kind: str = "display_data") -> dict:
    out = {"output_type": kind, "data": {mime: value, "text/plain": "p"}, "metadata": {}}
    return out | ({"execution_count": 1} if kind == "execute_result" else {})


def findings(tmp_path: Path, nb: nbformat.NotebookNode) -> list[quarto_rules.Finding]:
    path = tmp_path / "n.ipynb"
    nbformat.write(nb, path)
    return quarto_rules.notebook_findings(tmp_path, path)


@pytest.mark.parametrize("profile", list(preview.BRANCHES))
def test_no_page_quarto_renders_makes_it_load_files_from_another_host(profile: str) -> None:
    """Every .ipynb page and every executed .qmd page (its executed branch notebook) of the profile, its
    Markdown, and the website options. Fails on 78c0374's demo notebook (five text/html figure outputs)."""
    assert quarto_rules.summary(quarto_rules.project_findings(ROOT, profile)) == []


def test_the_rule_catches_78c0374s_demo_notebook(tmp_path: Path) -> None:
    old = subprocess.run(["git", "show", f"{BROKEN_COMMIT}:{DEMO}"], cwd=ROOT, capture_output=True, check=True)
    (tmp_path / "demo.ipynb").write_bytes(old.stdout)
    found = quarto_rules.notebook_findings(tmp_path, tmp_path / "demo.ipynb")
    assert [f.where for f in found] == [f"cell {c}, output 2 (display_data: text/html)" for c in (5, 7, 9, 11, 13)]
    assert all(f.rule == quarto_rules.WIDGETS_TS and "jQuery" in f.adds for f in found)


@pytest.mark.parametrize(("output", "adds"), [
    (display("text/html"), "jQuery"),
    (display("application/javascript", kind="execute_result"), "jQuery"),  # e.g. a DataFrame: text/html
    (display(quarto_rules.JUPYTER_WIDGET_MIME, {"model_id": "m"}), "embed-amd.js"),
], ids=["display_data text/html", "execute_result javascript", "widget view"])
def test_each_output_type_quarto_reacts_to_is_caught_even_with_output_false(tmp_path, output, adds) -> None:
    (found,) = findings(tmp_path, notebook_with(output, source="#| output: false\nx"))
    assert adds in found.adds and found.where.startswith("cell 2, output 1")


def test_outputs_quarto_adds_nothing_for_pass(tmp_path: Path) -> None:
    """Images, Markdown (an <img> with alt text and a relative src), plain text, streams and errors."""
    nb = notebook_with(
        display("image/png", "iVBORw0KGgo="),
        display("text/markdown", '<img src="../assets/figs/demo_training.png" alt="图 (a)"/>'),
        {"output_type": "stream", "name": "stdout", "text": "<b>html-looking text</b>"},
        {"output_type": "error", "ename": "E", "evalue": "<i>", "traceback": []},
        display("text/plain", "<table>"),
    )
    assert findings(tmp_path, nb) == []


@pytest.mark.parametrize("markdown", [
    "![图](https://example.org/a.png)",
    '<img alt="a" src="//cdn.example.org/a.png">',
    "<script src='https://cdn.example.org/x.js'></script>",
    '<iframe src="https://www.youtube.com/embed/x"></iframe>',
    "```{ojs}\nd3 = require('d3')\n```",
])
def test_markdown_that_names_another_host_is_caught_with_its_line(markdown: str) -> None:
    (found,) = quarto_rules.markdown_findings("p.qmd", "page", "intro\n\n" + markdown)
    assert found.where.startswith("page, line 3")


def test_links_and_relative_files_in_markdown_pass() -> None:
    text = "[论文](https://arxiv.org/abs/2402.03300) <a href='https://example.org'>x</a> ![图](../assets/figs/a.png)"
    assert quarto_rules.markdown_findings("p.qmd", "page", text) == []


@pytest.mark.parametrize("option", [{"google-analytics": "G-1"}, {"comments": {"utterances": {"repo": "a/b"}}},
                                    {"search": {"algolia": {"index-name": "x"}}}, {"cookie-consent": True}])
def test_website_options_that_load_a_service_are_caught(tmp_path: Path, option: dict) -> None:
    (tmp_path / "_quarto.yml").write_text(yaml.safe_dump({"website": option}), encoding="utf-8")
    (tmp_path / "_quarto-exercise.yml").write_text("project:\n  render: []\n", encoding="utf-8")
    (found,) = quarto_rules.project_findings(tmp_path, "exercise")
    assert found.source == "_quarto.yml" and found.where.startswith("website.")


def test_a_notebook_a_page_embeds_is_held_to_the_rule(tmp_path: Path) -> None:
    (tmp_path / "lessons").mkdir()
    nbformat.write(notebook_with(display("text/html", "<b>")), tmp_path / "lessons" / "nb.ipynb")
    (tmp_path / "page.qmd").write_text("# p\n\n{{< embed lessons/nb.ipynb#fig-x >}}\n", encoding="utf-8")
    (tmp_path / "_quarto.yml").write_text("project:\n  type: website\n", encoding="utf-8")
    (tmp_path / "_quarto-exercise.yml").write_text("project:\n  render: [page.qmd]\n", encoding="utf-8")
    (found,) = quarto_rules.project_findings(tmp_path, "exercise")
    assert found.source == "lessons/nb.ipynb" and "jQuery" in found.adds


def broken_demo_project(root: Path) -> Path:
    """A project whose demo notebook has a text/html output, as 78c0374's had."""
    (root / "lessons").mkdir(parents=True)
    nbformat.write(notebook_with(display("text/html", "<img>")), root / DEMO)
    for profile in preview.BRANCHES:
        (root / f"_quarto-{profile}.yml").write_text(f"project:\n  render: [{DEMO}]\n", encoding="utf-8")
    (root / "_quarto.yml").write_text("project:\n  type: website\n", encoding="utf-8")
    return root


def test_post_render_names_the_page_the_url_the_output_and_the_fix(tmp_path: Path) -> None:
    root = broken_demo_project(tmp_path / "project")
    build = preview.Build(root=root, branch=preview.BRANCHES["exercise"], site_dir=tmp_path / "_site")
    page = build.site_dir / "lessons" / "lesson11_grpo_demo.html"
    page.parent.mkdir(parents=True)
    page.write_text(f'<head><script src="{JQUERY}"></script></head>', encoding="utf-8")
    with pytest.raises(CourseError) as error:
        site_cli.self_host(build)
    (line,) = str(error.value).splitlines()
    assert line.startswith(f"{page}: loads {JQUERY} from another host; cause: {DEMO}: cell 2, output 1 "
                           "(display_data: text/html): Quarto adds require.js and jQuery from a CDN")
    assert "figure_markdown" in line and "make demo" in line and "make site" not in line


def test_an_off_host_url_no_source_names_points_at_the_site_options(tmp_path: Path) -> None:
    root = broken_demo_project(tmp_path / "project")
    build = preview.Build(root=root, branch=preview.BRANCHES["exercise"], site_dir=tmp_path / "_site")
    build.site_dir.mkdir()
    (build.site_dir / "index.html").write_text('<link href="https://fonts.example.org/x.css">', encoding="utf-8")
    with pytest.raises(CourseError, match=r"index\.html: loads https://fonts\.example\.org/x\.css from another "
                                          r"host; nothing in index\.qmd names it.*assets/site/theme\.scss"):
        site_cli.self_host(build)


def test_make_site_stops_before_quarto_runs_on_a_source_that_breaks_the_rule(tmp_path: Path) -> None:
    root = broken_demo_project(tmp_path)
    marker = tmp_path / "quarto-ran"
    fake = tmp_path / "quarto"
    fake.write_text(f"#!/bin/sh\ntouch {marker}\n", encoding="utf-8")
    fake.chmod(0o755)
    with pytest.raises(CourseError, match=rf"{DEMO}: cell 2, output 1 \(display_data: text/html\): Quarto adds"):
        site_cli.render_quarto(root, str(fake))
    assert not marker.exists()
