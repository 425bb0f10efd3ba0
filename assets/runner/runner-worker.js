// Course runner worker (a module worker, as Pyodide 314 requires): loads Pyodide once, then runs the
// student's code ("run") or the visible checks against it ("check"). The page terminates and
// recreates this worker to stop a runaway job.
//
// Messages in:  {type: "boot", configURL, indexURL}  (first worker of a page: start Pyodide and fetch
//                 the config at the same time; answer {type: "config", config}). The page passes it
//                 in the worker URL's fragment (#<JSON>) instead, so the worker starts as soon as
//                 its script runs: a posted message waits for the page's busy main thread.
//               {type: "init", indexURL}            (a replacement worker: start Pyodide only)
//               {type: "snapshot", indexURL}        (a background worker: store a start-up snapshot, exit)
//               {type: "run", id, code, timeLimitS, maxOutput}
//               {type: "check", id, code, checks: [{id, title, code, own_run}], given: {title, lines, veto},
//                timeLimitS, maxOutput}
// Messages out: {type: "config", config} | {type: "config-error", message}
//               {type: "ready", fromSnapshot} | {type: "init-error", message}
//               {type: "stream", id, name: "stdout"|"stderr", text}
//               {type: "done", id, result}   (run: {error}, check: {setup_error, given_error, results: [...]})
//               {type: "fatal", id, message} (the interpreter died; the page replaces this worker)
//               {type: "snapshot-done", stored}
//
// Start-up snapshot: the first load of a browser profile starts Python the slow way (download,
// compile, unpack the standard library, run the start-up code). Later a background worker makes a
// memory snapshot of a freshly started interpreter (helpers defined, no student code run yet) and
// keeps it in Cache Storage; every later load restores it instead (Pyodide's `_loadSnapshot`),
// falling back to the slow way if it is missing or does not load. The snapshot's name carries a hash of
// the helpers and it is stored with the Pyodide version that made it (checked before it is restored), so a
// new site release never restores an old state. The lookup runs while pyodide.mjs is fetched, not after:
// on a fresh start, Pyodide's files are requested as soon as pyodide.mjs is in (a Cache Storage lookup
// after it held them up by 50-150 ms on a busy 2-core machine).

let pyodide = null;
let runPython = null; // the helpers below, as Python callables
let checkPython = null;
let currentId = null;
let streamed = 0; // characters of output sent for the current job
let maxOutput = Infinity;
let initStarted = false;

// Python side: exec with a named source (so tracebacks show the student's lines) and a time limit
// per step, and a check runner that mirrors the grader (nbgrader, one kernel): the student's code
// first (errors and time-outs recorded, not fatal: what it defined stays), then each check in the
// same namespace, each passing or failing on its own with its own time limit. A check with
// `own_run` names (see coursekit.lesson.VisibleCheck) passes only if the student's own run left each
// name with the value the check's visible lines give it: that is what the grader scores.
const PYTHON_HELPERS = String.raw`
import json, linecache, sys, time, traceback

class CourseTimeLimit(BaseException):
    """Raised into the running code when its step is over the time limit."""

_COURSE_MISSING = object()
_COURSE_BARE_ASSERT = "（题目给出的断言不成立；为什么不成立，见下面各组检查的说明）"

def _course_exec(source, filename, ns, limit_s):
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    code = compile(source, filename, "exec")
    deadline = time.monotonic() + limit_s
    def tracer(frame, event, arg):
        if time.monotonic() > deadline:
            raise CourseTimeLimit(f"运行超过 {limit_s:g} 秒，已自动停止（是否有死循环？）")
        return tracer
    sys.settrace(tracer)
    try:
        exec(code, ns)
    finally:
        sys.settrace(None)

def _course_user_tb(exc):
    """Drop the leading frames of this helper (file "<exec>") and of Pyodide's own modules."""
    tb = exc.__traceback__
    while tb is not None and (tb.tb_frame.f_code.co_filename == "<exec>"
                              or not tb.tb_frame.f_code.co_filename.startswith("<")):
        tb = tb.tb_next
    return tb

def _course_format(exc):
    if isinstance(exc, CourseTimeLimit):
        return str(exc) + "\n"
    return "".join(traceback.format_exception(type(exc), exc, _course_user_tb(exc)))

def _course_run(source, limit_s):
    ns = {"__name__": "__main__"}
    try:
        _course_exec(source, "<你的代码>", ns, limit_s)
    except BaseException as exc:
        return json.dumps({"error": _course_format(exc)})
    return json.dumps({"error": None})

def _course_summary(exc, filename, note=None):
    """Why it failed, reason first: an assertion's own message (else the exception's type and message),
    then the note, then where in the student's own code it failed when it failed there. Never a line
    number of the checks' code, which the student does not see: a bare assertion of a check is quoted."""
    message = str(exc)
    if isinstance(exc, CourseTimeLimit) or (isinstance(exc, AssertionError) and message):
        text = message
    else:
        text = type(exc).__name__ + (f": {message}" if message else "")
    if note:
        text += "\n" + note
    frames = traceback.extract_tb(exc.__traceback__)
    mine = [f for f in frames if f.filename == "<你的代码>"]
    here = [f for f in frames if f.filename == filename]
    if mine:
        text += f"\n（出错位置：你的代码第 {mine[-1].lineno} 行：{(mine[-1].line or '').strip()}）"
    elif here and isinstance(exc, AssertionError) and not message:
        text += f"\n（不成立的检查：{(here[-1].line or '').strip()}）"
    return text

def _course_same(a, b):
    try:
        return bool(a == b)
    except Exception:
        return False

def _course_own_run(names, before, ns):
    """Why the student's own run does not give these names their checked values, or None."""
    missing = [n for n in names if before[n] is _COURSE_MISSING]
    if missing:
        return ("此项按你自己代码的运行结果计分：你的代码没有算出 " + "、".join(missing)
                + "（代码在这之前出错或断言失败，没有运行到这些赋值）。评分时此项 0 分。")
    wrong = [n for n in names if not _course_same(before[n], ns.get(n))]
    if wrong:
        return ("此项按你自己代码的运行结果计分：" + "；".join(
            f"你的 {n} = {before[n]!r}，应为 {ns.get(n)!r}" for n in wrong) + "。评分时此项 0 分。")
    return None

def _course_given(source, given):
    """Why the student's code breaks the exercise's given checks (coursekit.lesson.given_checks: each
    given line must still be there, whitespace inside a line ignored), or None."""
    mine = {"".join(line.split()) for line in source.split("\n")}
    gone = [line for line in given["lines"] if "".join(line.split()) not in mine]
    if not gone:
        return None
    return "、".join(f"\u0060{line}\u0060" for line in gone) + f" 被删除或改动；{given['veto']}"

def _course_check(source, checks, limit_s, given=None):
    ns = {"__name__": "__main__"}
    out = {"setup_error": None, "given_error": None, "results": []}
    try:
        _course_exec(source, "<你的代码>", ns, limit_s)
    except BaseException as exc:
        bare = isinstance(exc, AssertionError) and not str(exc)
        out["setup_error"] = _course_summary(exc, "<你的代码>", _COURSE_BARE_ASSERT if bare else None)
    for check in checks:
        filename = f"<检查：{check['title']}>"
        names = list(check.get("own_run") or [])
        before = {n: ns.get(n, _COURSE_MISSING) for n in names}
        result = {"id": check["id"], "title": check["title"], "own_run": names, "passed": True, "message": ""}
        try:
            _course_exec(check["code"], filename, ns, limit_s)
        except BaseException as exc:
            result.update(passed=False, message=_course_summary(exc, filename))
        else:
            why = _course_own_run(names, before, ns)
            if why:
                result.update(passed=False, message=why)
        out["results"].append(result)
    out["given_error"] = _course_given(source, given) if given else None
    return json.dumps(out, ensure_ascii=False)
`;

// Output goes to the page line by line with the current job's id, up to maxOutput characters.
function stream(name) {
  return (text) => {
    const room = maxOutput - streamed;
    if (room <= 0) return;
    streamed += text.length + 1;
    const shown = streamed > maxOutput ? `${text.slice(0, room)}\n（输出过长，后面的部分未显示）\n` : `${text}\n`;
    postMessage({ type: "stream", id: currentId, name, text: shown });
  };
}

function hashText(text) { // FNV-1a, enough to tell two helper versions apart
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) h = Math.imul(h ^ text.charCodeAt(i), 0x01000193) >>> 0;
  return h.toString(16);
}

const SNAPSHOT_CACHE = "course-runner-snapshot";
const SNAPSHOT_VERSION = "X-Course-Runner-Pyodide"; // the header that says which Pyodide made the snapshot

// The Cache Storage key of the snapshot with these helpers for the Pyodide in indexURL.
function snapshotKey(indexURL) {
  return new URL(`course-runner-snapshot-${hashText(PYTHON_HELPERS)}.bin`, indexURL).href;
}

// Pyodide's loader ({loadPyodide, version}) and the stored snapshot for that version (bytes, or null),
// looked up while pyodide.mjs is fetched.
async function pyodideAndSnapshot(indexURL) {
  const loading = import(new URL("pyodide.mjs", indexURL).href);
  const lookup = storedSnapshot(indexURL);
  const pyodideModule = await loading;
  const stored = await lookup;
  try {
    const current = stored && stored.headers.get(SNAPSHOT_VERSION) === pyodideModule.version;
    return { pyodideModule, snapshot: current ? new Uint8Array(await stored.arrayBuffer()) : null };
  } catch {
    return { pyodideModule, snapshot: null };
  }
}

// The stored snapshot's response, or null (none stored; no Cache Storage, e.g. not a secure context).
async function storedSnapshot(indexURL) {
  try {
    return (await caches.match(snapshotKey(indexURL), { cacheName: SNAPSHOT_CACHE })) || null;
  } catch {
    return null;
  }
}

async function forgetSnapshots() {
  try {
    await caches.delete(SNAPSHOT_CACHE);
  } catch {
    /* nothing stored */
  }
}

async function init(indexURL) {
  if (initStarted) return;
  initStarted = true;
  try {
    const { pyodideModule: { loadPyodide }, snapshot } = await pyodideAndSnapshot(indexURL);
    const io = { stdout: stream("stdout"), stderr: stream("stderr") };
    if (snapshot) {
      try {
        pyodide = await loadPyodide({ indexURL, _loadSnapshot: snapshot, ...io });
      } catch {
        await forgetSnapshots();
        pyodide = null;
      }
    }
    const fromSnapshot = pyodide !== null;
    if (!fromSnapshot) {
      pyodide = await loadPyodide({ indexURL, ...io });
      pyodide.runPython(PYTHON_HELPERS);
    }
    runPython = pyodide.globals.get("_course_run");
    checkPython = pyodide.globals.get("_course_check");
    postMessage({ type: "ready", fromSnapshot });
  } catch (err) {
    postMessage({ type: "init-error", message: String(err && err.message ? err.message : err) });
  }
}

// A background worker: start a fresh interpreter, define the helpers, store its memory; nothing else
// ever runs in it.
async function makeSnapshot(indexURL) {
  let stored = false;
  try {
    const { pyodideModule: { loadPyodide, version }, snapshot } = await pyodideAndSnapshot(indexURL);
    if (!snapshot) {
      const fresh = await loadPyodide({ indexURL, _makeSnapshot: true });
      fresh.runPython(PYTHON_HELPERS);
      const memory = fresh.makeMemorySnapshot();
      await forgetSnapshots(); // older versions
      await (await caches.open(SNAPSHOT_CACHE)).put(snapshotKey(indexURL),
                                                    new Response(memory, { headers: { [SNAPSHOT_VERSION]: version } }));
      stored = true;
    }
  } catch {
    /* no snapshot: the next load starts the slow way again */
  }
  postMessage({ type: "snapshot-done", stored });
}

async function boot({ configURL, indexURL }) {
  init(indexURL); // at once, in parallel with the config
  try {
    const response = await fetch(configURL);
    if (!response.ok) throw new Error(`${new URL(configURL).pathname}: HTTP ${response.status}`);
    postMessage({ type: "config", config: await response.json() });
  } catch (err) {
    postMessage({ type: "config-error", message: String(err && err.message ? err.message : err) });
  }
}

// A JavaScript-level failure here (Pyodide's "fatal error", e.g. the wasm stack overflowing, or
// os._exit) leaves the interpreter unusable: report it as "fatal" and let the page start a fresh worker.
function execute(message) {
  currentId = message.id;
  streamed = 0;
  maxOutput = message.maxOutput || Infinity;
  try {
    let json;
    if (message.type === "run") {
      json = runPython(message.code, message.timeLimitS);
    } else {
      const checks = pyodide.toPy(message.checks);
      const given = pyodide.toPy(message.given || null);
      json = checkPython(message.code, checks, message.timeLimitS, given);
      checks.destroy();
      if (given) given.destroy();
    }
    postMessage({ type: "done", id: message.id, result: JSON.parse(json) });
  } catch (err) {
    postMessage({ type: "fatal", id: message.id, message: String(err && err.message ? err.message : err) });
  }
  currentId = null;
}

if (self.location.hash.length > 1) boot(JSON.parse(decodeURIComponent(self.location.hash.slice(1))));

self.onmessage = (event) => {
  const message = event.data;
  if (message.type === "boot") {
    boot(message);
  } else if (message.type === "init") {
    init(message.indexURL);
  } else if (message.type === "snapshot") {
    makeSnapshot(message.indexURL);
  } else if (message.type === "run" || message.type === "check") {
    execute(message);
  }
};
