--[[
runner.lua — Quarto filter that wires the course runner (runner.js) into the exercise page.

It finds the exercise cell and wraps it in `<div class="course-runner" data-runner-root="...">`;
runner.js replaces that div's content with the editor (Run / Check / Stop, hints, saved work,
"download notebook"). It also adds runner.js / runner.css as an HTML dependency, with
runner-worker.js copied beside runner.js (the page starts the worker from there).

The exercise cell is found as (first that applies):
  - a Div with class `course-exercise` (e.g. `::: {.course-exercise}` around the cell), or
  - Quarto's cell Div carrying the cell option `#| course_role: exercise` as the attribute
    `course_role="exercise"` (the Jupyter engine keeps unknown cell options as Div attributes), or
  - a CodeBlock with that attribute.

The runner reads its config and Pyodide from the site root (`assets/runner/runner-config.json`,
`assets/pyodide/`); `coursekit site --post-render` puts them there. `data-runner-root` is the
page's relative path to the project root, from `quarto.doc.project_output_file()`; without it
runner.js falls back to `<meta name="quarto:offset">`.

Use in _quarto.yml:   filters: [assets/runner/runner.lua]
]]

local DEPENDENCY = {
  name = "course-runner",
  version = "1.0.0",
  scripts = { { path = "runner.js", attribs = { defer = "defer" } } },
  stylesheets = { "runner.css" },
  resources = { { name = "runner-worker.js", path = "runner-worker.js" } },
}

local dependency_added = false

local function add_dependency()
  if not dependency_added then
    quarto.doc.add_html_dependency(DEPENDENCY)
    dependency_added = true
  end
end

-- "../" once per folder between the page and the project root, or nil outside a project.
local function root_offset()
  local ok, output = pcall(function() return quarto.doc.project_output_file() end)
  if not ok or output == nil then
    return nil
  end
  local _, depth = string.gsub(output, "/", "")
  return string.rep("../", depth)
end

local function is_exercise(el)
  return el.classes:includes("course-exercise") or el.attributes["course_role"] == "exercise"
end

local function already_wrapped(el)
  if el.classes:includes("course-runner") then
    return true
  end
  for _, child in ipairs(el.content or {}) do
    if child.t == "Div" and child.classes:includes("course-runner") then
      return true
    end
  end
  return false
end

local function wrap(el)
  if not quarto.doc.is_format("html:js") or not is_exercise(el) then
    return nil
  end
  if el.t == "Div" and already_wrapped(el) then
    return nil
  end
  add_dependency()
  local attributes = {}
  local offset = root_offset()
  if offset ~= nil then
    attributes["data-runner-root"] = offset
  end
  return pandoc.Div({ el }, pandoc.Attr("", { "course-runner" }, attributes))
end

return {
  { CodeBlock = wrap, Div = wrap },
}
