--[[
runner.lua — Quarto filter that wires the course runner (runner.js) into the exercise page.

It finds the exercise cell and wraps it in `<div class="course-runner">`; runner.js replaces that
div's content with the editor (Run / Check / Stop, hints, saved work, "download notebook"). It puts in
<head>, first, the inline script that starts the runner's worker and Pyodide at once (the preview's
boot, coursekit.runner.head_tags), then adds runner.js (a classic, blocking script in <head>, with data-runner-root) / runner.css as an HTML
dependency, with runner-worker.js and editor.js (the CodeMirror bundle) copied beside runner.js (the
page starts the worker and imports the editor from there).

The exercise cell is found as (first that applies):
  - a Div with class `course-exercise` (e.g. `::: {.course-exercise}` around the cell), or
  - Quarto's cell Div carrying the cell option `#| course_role: exercise` as the attribute
    `course_role="exercise"` (the Jupyter engine keeps unknown cell options as Div attributes), or
  - a CodeBlock with that attribute.

The runner reads the page's lesson config and Pyodide from the site root
(`assets/runner/runner-config-<page name>.json`, named in the script's data-runner-config, and
`assets/pyodide/`); `coursekit site --post-render` puts them there, one config per lesson. The script's
`data-runner-root` is the page's relative path to the project root, from
`quarto.doc.project_output_file()`; without it runner.js falls back to `<meta name="quarto:offset">`.

Use in _quarto.yml:   filters: [assets/runner/runner.lua]
]]

local VERSION = "2.0.0"
-- Where Quarto copies an extension's dependency: <site_libs>/quarto-contrib/<name>-<version>/ (quarto-cli
-- src/command/render/pandoc-dependencies-html.ts, targetDirectoryInfo); a website's lib dir is site_libs/.
local DEPENDENCY_DIR = "site_libs/quarto-contrib/course-runner-" .. VERSION .. "/"

local dependency_added = false

-- "../" once per folder between the page and the project root, or nil outside a project.
local function root_offset()
  local ok, output = pcall(function() return quarto.doc.project_output_file() end)
  if not ok or output == nil then
    return nil
  end
  local _, depth = string.gsub(output, "/", "")
  return string.rep("../", depth)
end

-- A path as a JavaScript string literal (the paths here are the page's offset and file names).
local function js_string(path)
  assert(not string.find(path, '["\\\n<]'), "runner.lua: unexpected character in path " .. path)
  return '"' .. path .. '"'
end

-- The inline <head> script that starts the runner's worker, and with it Pyodide, before runner.js is
-- fetched: the same script as coursekit.runner.head_tags gives the preview, with the worker URL runner.js
-- computes on a Quarto page (runner-worker.js beside it in DEPENDENCY_DIR). runner.js adopts the worker
-- (window.courseRunnerWorker) when it was booted from that URL, else ends it and starts its own.
local function boot_script(offset, config)
  local boot = '{type: "boot", configURL: at(' .. js_string(offset .. config) .. '), indexURL: at('
    .. js_string(offset .. "assets/pyodide/") .. ')}'
  return "<script>(() => { /* the runner's worker, started before runner.js is fetched (runner.js adopts it) */\n"
    .. "  const at = (path) => new URL(path, location.href).href;\n"
    .. "  const boot = " .. boot .. ";\n"
    .. "  const url = at(" .. js_string(offset .. DEPENDENCY_DIR .. "runner-worker.js") .. ') + "#" + '
    .. "encodeURIComponent(JSON.stringify(boot));\n"
    .. '  const worker = new Worker(url, { type: "module" });\n'
    .. "  const events = [];\n"
    .. "  worker.onmessage = worker.onerror = (event) => { events.push(event); };\n"
    .. "  window.courseRunnerWorker = { url, worker, events };\n"
    .. "})();</script>"
end

-- runner.js is a classic script without `async` or `defer`, so it runs, and starts the worker with
-- Pyodide, before the parser reaches the page's body (as in the preview; `async` let the parser's long
-- tasks delay the worker by 0.5-1.5 s there). A script object may only carry `path`, `attribs` and
-- `afterBody` (https://quarto.org/docs/extensions/lua-api.html, "Script Object"): Quarto puts the tag
-- in <head> with the other dependencies, after Quarto's own; no option puts it first.
local function add_dependency()
  if dependency_added then
    return
  end
  local attribs = {}
  local offset = root_offset()
  if offset ~= nil then
    attribs["data-runner-root"] = offset
    local page = string.match(quarto.doc.project_output_file(), "([^/]+)%.html$")
    if page ~= nil then
      attribs["data-runner-config"] = "assets/runner/runner-config-" .. page .. ".json"  -- from the site root
      -- Quarto injects dependencies in the order they were added, each one's scripts, then stylesheets,
      -- then its `head` HTML (pandoc-dependencies-html.ts, processHtmlDependencies): a dependency of
      -- its own, added first, puts the boot script before runner.js.
      quarto.doc.add_html_dependency({
        name = "course-runner-boot",
        version = VERSION,
        head = boot_script(offset, attribs["data-runner-config"]),
      })
    end
  end
  quarto.doc.add_html_dependency({
    name = "course-runner",
    version = VERSION,
    scripts = { { path = "runner.js", attribs = attribs } },
    stylesheets = { "runner.css" },
    resources = {
      { name = "runner-worker.js", path = "runner-worker.js" },
      { name = "editor.js", path = "editor.js" },
    },
  })
  dependency_added = true
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
  return pandoc.Div({ el }, pandoc.Attr("", { "course-runner" }))
end

return {
  { CodeBlock = wrap, Div = wrap },
}
