// Course runner worker (a module worker, as Pyodide 314 requires): loads Pyodide once, then runs the
// student's code ("run") or the visible checks against it ("check"). The page terminates and
// recreates this worker to stop a runaway run.
//
// Messages in:  {type: "boot", configURL, root, pyodideURL}  (first worker of a page: fetch the
//                 config, answer {type: "config", config, indexURL}, and when config.preload is
//                 true start Pyodide right away)
//               {type: "init", indexURL}                    (start Pyodide; once per worker)
//               {type: "run", id, code}
//               {type: "check", id, code, checks: [{id, title, code}]}
// Messages out: {type: "config", config, indexURL} | {type: "config-error", message}
//               {type: "ready"} | {type: "init-error", message}
//               {type: "stream", id, name: "stdout"|"stderr", text}
//               {type: "done", id, result}   (run: {error}, check: {setup_error, results: [...]})
//               {type: "fatal", id, message} (the interpreter died; the page replaces this worker)

let pyodide = null;
let runPython = null; // the helpers below, as Python callables
let checkPython = null;
let currentId = null;
let initStarted = false;

// Python side: exec with a named source (so tracebacks show the student's lines), and a check
// runner that mirrors nbgrader: the answer cell first (errors recorded, not fatal), then each
// check group in the same namespace, each passing or failing on its own.
const PYTHON_HELPERS = String.raw`
import json, linecache, traceback

def _course_exec(source, filename, ns):
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    exec(compile(source, filename, "exec"), ns)

def _course_user_tb(exc):
    """Drop the leading frames of this helper (file "<exec>") and of Pyodide's own modules."""
    tb = exc.__traceback__
    while tb is not None and (tb.tb_frame.f_code.co_filename == "<exec>"
                              or not tb.tb_frame.f_code.co_filename.startswith("<")):
        tb = tb.tb_next
    return tb

def _course_format(exc):
    return "".join(traceback.format_exception(type(exc), exc, _course_user_tb(exc)))

def _course_run(source):
    ns = {"__name__": "__main__"}
    try:
        _course_exec(source, "<你的代码>", ns)
    except BaseException as exc:
        return json.dumps({"error": _course_format(exc)})
    return json.dumps({"error": None})

def _course_summary(exc, filename):
    """'第 N 行：<line>' of the last frame in filename, then 'Type: message', then where in the
    student's code it failed when that is elsewhere."""
    text = type(exc).__name__ + (f": {exc}" if str(exc) else "")
    frames = traceback.extract_tb(exc.__traceback__)
    here = [f for f in frames if f.filename == filename]
    if here:
        text = f"第 {here[-1].lineno} 行：{(here[-1].line or '').strip()}\n{text}"
    inner = [f for f in frames if f.filename == "<你的代码>"]
    if inner and filename != "<你的代码>":
        text += f"\n（出错位置：你的代码第 {inner[-1].lineno} 行：{(inner[-1].line or '').strip()}）"
    return text

def _course_check(source, checks):
    ns = {"__name__": "__main__"}
    out = {"setup_error": None, "results": []}
    try:
        _course_exec(source, "<你的代码>", ns)
    except BaseException as exc:
        out["setup_error"] = _course_summary(exc, "<你的代码>")
    for check in checks:
        filename = f"<检查：{check['title']}>"
        try:
            _course_exec(check["code"], filename, ns)
        except BaseException as exc:
            out["results"].append({"id": check["id"], "title": check["title"], "passed": False,
                                   "message": _course_summary(exc, filename)})
        else:
            out["results"].append({"id": check["id"], "title": check["title"], "passed": True,
                                   "message": ""})
    return json.dumps(out)
`;

// Pyodide hands over output line by line; each line goes to the page with the current job's id.
function stream(name) {
  return (text) => postMessage({ type: "stream", id: currentId, name, text: text + "\n" });
}

async function boot({ configURL, root, pyodideURL }) {
  let config;
  try {
    const response = await fetch(configURL);
    if (!response.ok) throw new Error(`${new URL(configURL).pathname}: HTTP ${response.status}`);
    config = await response.json();
  } catch (err) {
    postMessage({ type: "config-error", message: String(err && err.message ? err.message : err) });
    return;
  }
  const indexURL = new URL(pyodideURL || config.pyodide_url || "assets/pyodide/", root).href;
  postMessage({ type: "config", config, indexURL });
  if (config.preload) init(indexURL);
}

async function init(indexURL) {
  if (initStarted) return;
  initStarted = true;
  try {
    const { loadPyodide } = await import(new URL("pyodide.mjs", indexURL).href);
    pyodide = await loadPyodide({ indexURL, stdout: stream("stdout"), stderr: stream("stderr") });
    pyodide.runPython(PYTHON_HELPERS);
    runPython = pyodide.globals.get("_course_run");
    checkPython = pyodide.globals.get("_course_check");
    postMessage({ type: "ready" });
  } catch (err) {
    postMessage({ type: "init-error", message: String(err && err.message ? err.message : err) });
  }
}

// A JavaScript-level failure here (Pyodide's "fatal error", e.g. the wasm stack overflowing) leaves
// the interpreter unusable: report it as "fatal" and let the page start a fresh worker.
function execute(message) {
  currentId = message.id;
  try {
    let json;
    if (message.type === "run") {
      json = runPython(message.code);
    } else {
      const checks = pyodide.toPy(message.checks);
      json = checkPython(message.code, checks);
      checks.destroy();
    }
    postMessage({ type: "done", id: message.id, result: JSON.parse(json) });
  } catch (err) {
    postMessage({ type: "fatal", id: message.id, message: String(err && err.message ? err.message : err) });
  }
  currentId = null;
}

self.onmessage = (event) => {
  const message = event.data;
  if (message.type === "boot") {
    boot(message);
  } else if (message.type === "init") {
    init(message.indexURL);
  } else if (message.type === "run" || message.type === "check") {
    execute(message);
  }
};
