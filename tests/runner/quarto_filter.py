"""What assets/runner/runner.lua puts in a Quarto page's <head>, computed by running the filter itself.

Quarto cannot run here. The filter runs in Lua (lupa) with the Quarto Lua API calls it makes stubbed
(quarto.doc.project_output_file, is_format, add_html_dependency; pandoc.Div, pandoc.Attr), on an
exercise Div; its dependencies are then written as Quarto writes them (quarto-cli
src/command/render/pandoc-dependencies-html.ts, processHtmlDependencies and domDependencyInjector):
dependencies in the order they were added, each one's scripts, then stylesheets, then its `head`
HTML, with file URLs `<site_libs>/quarto-contrib/<name>-<version>/<file>` relative to the page.
Used by tests/runner/conftest.py (the Quarto fixture page) and bench/bench_runner.py.
"""

from __future__ import annotations

import html
from pathlib import Path

RUNNER_LUA = Path(__file__).resolve().parents[2] / "assets" / "runner" / "runner.lua"

STUBS = """
local output_file = ...
local dependencies = {}
pandoc = {
  Div = function(content, attr) return { t = "Div", content = content, attr = attr } end,
  Attr = function(id, classes) return { identifier = id, classes = classes } end,
}
quarto = { doc = {
  project_output_file = function() return output_file end,
  is_format = function(name) return name == "html:js" end,
  add_html_dependency = function(dep) table.insert(dependencies, dep) end,
} }
return dependencies
"""
EXERCISE_DIV = """
local classes = setmetatable({}, { __index = { includes = function(_, c) return c == "course-exercise" end } })
return { t = "Div", classes = classes, attributes = {}, content = {} }
"""


def runner_dependencies(output_file: str) -> list[dict]:
    """The HTML dependencies runner.lua adds on the page Quarto writes to `output_file` (relative to the
    output folder), as plain Python data."""
    from lupa import LuaRuntime  # a pinned test dependency (requirements.txt)

    lua = LuaRuntime(unpack_returned_tuples=True)
    dependencies = lua.execute(STUBS, output_file)
    filters = lua.execute(RUNNER_LUA.read_text(encoding="utf-8"))
    filters[1]["Div"](lua.execute(EXERCISE_DIV))
    return [to_python(dep) for dep in dependencies.values()]


def to_python(value: object) -> object:
    """A Lua table as a dict, or a list when its keys are 1..n."""
    if not hasattr(value, "items"):
        return value
    items = {k: to_python(v) for k, v in value.items()}
    return [items[i] for i in range(1, len(items) + 1)] if list(items) == list(range(1, len(items) + 1)) else items


def head_html(output_file: str, leave_out: tuple[str, ...] = ()) -> str:
    """The <head> tags Quarto writes for runner.lua's dependencies on the page at `output_file` (less the
    dependencies named in `leave_out`: the bench's page without the head boot)."""
    lib = "../" * output_file.count("/") + "site_libs/quarto-contrib"
    tags = []
    for dep in (d for d in runner_dependencies(output_file) if d["name"] not in leave_out):
        folder = f"{lib}/{dep['name']}-{dep['version']}"
        for script in dep.get("scripts", []):
            script = script if isinstance(script, dict) else {"path": script}
            attribs = "".join(f' {k}="{html.escape(v)}"' for k, v in script.get("attribs", {}).items())
            tags.append(f'<script src="{folder}/{Path(script["path"]).name}"{attribs}></script>')
        tags += [f'<link href="{folder}/{Path(css).name}" rel="stylesheet">' for css in dep.get("stylesheets", [])]
        if dep.get("head"):
            tags.append(dep["head"])
    return "\n".join(tags)
