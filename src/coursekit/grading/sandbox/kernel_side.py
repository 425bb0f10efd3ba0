"""The grading kernel's own start-up and helpers. Sent as the text of `python -c`; never imported there.

The sandbox holds nothing of coursekit, so this file is the whole of the kernel's side: REAPER,
the sandbox's init (PID 1), started by bwrap, and `main()` in one of two roles:
- `zygote`: outside the sandboxes, one per grading worker: imports ipykernel and IPython once, then
  for each sandbox forks a child that joins it and forks the kernel there (`_zygote`, `_enter`).
  The kernel closes what it inherited, drops every privilege (when bwrap ran as root: to the
  sandbox's own uid) and applies the limits (memory, file size, processes, no core files);
- otherwise an unsandboxed kernel (`--no-sandbox`), started as its own process.
Then the kernel installs an audit hook, disarmed until the kernel's exec_lines call `arm()` (the
kernel's own start-up is not recorded), and runs ipykernel in its process (see `_lighter_start`).
The grader reaches the helpers only through shell messages of its own (`_answer_requests`):
`snapshot()` (the student's names as plain data or references), `calls()` (a batch of calls of
those references with plain data) and `report()` (what the audit hook and the hook check saw).
The kernel's helpers are on the untrusted side: student code can change any of them, which only
changes its own results and its own flags. Replies are one JSON string in plain data (see trusted.py).

Before any student code exists the kernel loads two seccomp filters that the grader built
(coursekit.grading.sandbox.seccomp): one denies the syscalls a grading kernel never needs (ptrace,
bpf, mount, unshare...), the other sends the file, program and network syscalls to a supervisor
outside the kernel (`_supervise`, in the zygote's child that waits for the kernel), which writes
what it saw to a file of the grader's: the record of what the student's code tried that no code
in the kernel can switch off (the audit hook only adds detail).
"""

from __future__ import annotations

import builtins
import contextlib
import functools
import importlib.util
import json
import math
import os
import re
import resource
import runpy
import signal
import socket
import sys
import threading
import types

BLANK = "______"
REQUEST, REPLY = "coursekit_request", "coursekit_reply"  # the grader's own shell messages (_answer_requests)
SKIPPED_NAMES = {"In", "Out", "get_ipython", "exit", "quit"}
MAX_ITEMS = 200_000       # encoded values (numbers, strings, containers) per reply
MAX_DEPTH = 20
MAX_EVENTS = 40           # distinct audit records kept
MAX_LOGGED = 5000         # calls logged for the judge (see snapshot(log=True)), and their characters
MAX_LOGGED_CHARS = 4 << 20
WATCHED_MODULES = ("math", "random", "json", "operator", "functools", "itertools")
SHELL_HOOKS = ("input_transformers_cleanup", "input_transformers_post", "ast_transformers")
OWN_CALLBACK_MODULES = ("IPython", "ipykernel", "matplotlib_inline", "matplotlib")
CONTROL_EXIT_WAIT = 10.0  # seconds; ipykernel's own flush timeout
STREAM_CHUNK = 1 << 20    # characters of printed text per message
STREAM_KEPT = 1 << 20     # characters of printed text sent per request (the grader keeps as many per cell)

_state: dict = {"armed": False, "events": [], "refs": [], "baseline": {}, "sandboxed": False}
# A sandbox's folders that only hold its mount points ("/", /home, /etc, the folders above the environment)
# are recorded as this one record: what they list is the sandbox's own layout, nothing of the host's, and
# which of them a walk of "/" reaches before it stops depends on the host's trees it walked and the clock
# (the same class graded twice must give the same records).
LAYOUT = "the sandbox's own folders"


class _TooBig(Exception):
    pass


# ---------------------------------------------------------------- plain data (same format as trusted.py)

def _type_name(value) -> str:
    kind = type(value)
    return f"{kind.__module__}.{kind.__qualname__}"[:80]


def encode(value, budget: list, depth: int = 0):
    """Plain data as JSON-ready values; anything else as {"$": "opaque"}."""
    budget[0] -= 1
    if budget[0] < 0:
        raise _TooBig
    kind = type(value)
    if value is None or kind in (bool, int, str):
        if kind is str:
            budget[0] -= len(value) // 16
        return value
    if kind is float:
        return value if math.isfinite(value) else {"$": "float", "v": repr(value)}
    if depth > MAX_DEPTH:
        raise _TooBig
    if kind is list:
        return [encode(v, budget, depth + 1) for v in value]
    if kind is tuple:
        return {"$": "tuple", "v": [encode(v, budget, depth + 1) for v in value]}
    if kind is dict:
        return {"$": "dict", "v": [[encode(k, budget, depth + 1), encode(v, budget, depth + 1)]
                                   for k, v in value.items()]}
    for base in (bool, int, float, str, list, tuple, dict):
        if isinstance(value, base):
            return {"$": "sub", "base": base.__name__, "type": _type_name(value),
                    "v": encode(base(value), budget, depth + 1)}
    if isinstance(value, types.ModuleType):
        return {"$": "module", "name": str(getattr(value, "__name__", ""))[:80]}
    return {"$": "opaque", "type": _type_name(value)}


def decode(value):
    """The grader's arguments: JSON values, tuples, dicts and non-finite floats."""
    if isinstance(value, list):
        return [decode(v) for v in value]
    if isinstance(value, dict):
        tag = value.get("$")
        if tag == "tuple":
            return tuple(decode(v) for v in value["v"])
        if tag == "dict":
            return {decode(k): decode(v) for k, v in value["v"]}
        if tag == "float":
            return float(value["v"])
        raise ValueError(f"unknown tag {tag!r}")
    return value


def _encoded(value):
    try:
        return encode(value, [MAX_ITEMS])
    except _TooBig:
        return {"$": "opaque", "type": "too large"}
    except Exception as exc:  # a subclass whose conversion raises
        return {"$": "opaque", "type": f"unreadable ({type(exc).__name__})"}


class _Reply:
    """Shown by IPython as application/json: {"reply": "<our JSON>"}."""

    def __init__(self, data) -> None:
        self.text = json.dumps(data, ensure_ascii=False, allow_nan=False)

    def _repr_json_(self):
        return {"reply": self.text}


# ---------------------------------------------------------------- what the grader asks for

def _user_namespace() -> dict:
    return _state["shell"].user_ns


def snapshot(log: bool = False) -> _Reply:
    """Every public name of the student's namespace: plain data, or a reference to call later. With
    `log`, the student's functions log their calls until the next cell ends (see `_logging`)."""
    out = {}
    _state["snapshots"] = _state.get("snapshots", 0) + 1
    for name, value in list(_user_namespace().items()):
        if not isinstance(name, str) or name.startswith("_") or name in SKIPPED_NAMES:
            continue
        if callable(value) and not isinstance(value, types.ModuleType):
            _state["refs"].append(value)
            out[name] = {"$": "callable", "ref": len(_state["refs"]) - 1,
                         "name": str(getattr(value, "__name__", name))[:80]}
            if log and isinstance(value, types.FunctionType):
                _logging(name, value, out[name]["ref"])
        else:
            out[name] = _encoded(value)
    return _Reply(out)


def _logging(name: str, function, ref: int) -> None:
    """Put a logging twin of `function` in its place until the end of the next cell (`_end_logging`):
    each call at the top (not one the function makes of itself) is logged as the grader's call of
    `ref` with the same plain data would bring it back, so the judge need not call it again."""
    number = _state["snapshots"]
    log = _state.setdefault("log", [])

    @functools.wraps(function)
    def logged(*args, **kwargs):
        if _state.get("depth", 0) or len(log) >= MAX_LOGGED or _state.get("logged_chars", 0) > MAX_LOGGED_CHARS:
            return function(*args, **kwargs)
        try:
            payload = json.dumps({"args": [_encoded(a) for a in args],
                                  "kwargs": {str(k): _encoded(v) for k, v in kwargs.items()}}, allow_nan=False)
        except Exception:  # noqa: BLE001 - not the grader's kind of call: not logged
            return function(*args, **kwargs)
        reply: dict = {}
        _state["depth"] = 1
        try:
            value = function(*args, **kwargs)
            reply.update(value=_encoded(value), ok=True)
        except KeyboardInterrupt:  # the cell's time limit: no reply, the judge decides
            raise
        except BaseException as exc:
            reply.update(ok=False, raised=_builtin_base(exc),
                         blank=isinstance(exc, NameError) and getattr(exc, "name", None) == BLANK)
            raise
        finally:
            _state["depth"] = 0
            if reply:
                reply["args"] = [_encoded(a) for a in args]
                reply["kwargs"] = {str(k): _encoded(v) for k, v in kwargs.items()}
                with contextlib.suppress(Exception):
                    text = json.dumps(reply, ensure_ascii=False, allow_nan=False)
                    log.append([number, ref, payload, text])
                    _state["logged_chars"] = _state.get("logged_chars", 0) + len(payload) + len(text)
        return value

    _user_namespace()[name] = logged
    _state.setdefault("twins", []).append((name, logged, function))


def _end_logging(*args) -> None:
    """After each cell (IPython's post_run_cell): the student's functions back in their places."""
    namespace = _user_namespace()
    for name, twin, function in _state.pop("twins", []):
        if namespace.get(name) is twin:
            namespace[name] = function


def logged() -> _Reply:
    """The calls logged by the test cells' visible lines: [snapshot number, ref, payload, reply JSON]."""
    return _Reply(_state.get("log", []))


def _builtin_base(exc: BaseException) -> str:
    for kind in type(exc).__mro__:
        if kind.__module__ == "builtins" and issubclass(kind, BaseException):
            return kind.__name__
    return "Exception"


class _CallTimeout(BaseException):
    """Raised in the student's function when its call has used the CPU seconds it may."""


def _call(ref: int, payload: str, limit: float) -> dict:
    """Call a referenced function with the grader's plain data: the result and the arguments after,
    or {"timeout": true} when it used `limit` CPU seconds or was interrupted (by the grader)."""
    data = json.loads(payload)
    args = decode(data["args"])
    kwargs = {k: decode(v) for k, v in data["kwargs"].items()}
    reply: dict = {}
    stopped: list[bool] = []

    def stop(signum, frame):
        stopped.append(True)
        raise _CallTimeout

    handlers = {sig: signal.signal(sig, stop) for sig in (signal.SIGPROF, signal.SIGINT)}
    signal.setitimer(signal.ITIMER_PROF, limit)
    try:
        reply["value"] = _encoded(_state["refs"][ref](*args, **kwargs))
        reply["ok"] = True
    except BaseException as exc:  # noqa: BLE001 - whatever the student's code raised, as a type name
        reply["ok"] = False
        reply["raised"] = _builtin_base(exc)
        reply["blank"] = isinstance(exc, NameError) and getattr(exc, "name", None) == BLANK
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
        for sig, handler in handlers.items():
            signal.signal(sig, handler)
    if stopped:
        return {"timeout": True}
    reply["args"] = [_encoded(a) for a in args]
    reply["kwargs"] = {k: _encoded(v) for k, v in kwargs.items()}
    return reply


def calls(limit: float, batch: list):
    """The grader's calls [[ref, payload]...] in order, one reply each (see `_call`), each sent as
    soon as it is there, in a message of its own; a call that timed out is the last one run."""
    for ref, payload in batch:
        reply = _call(ref, payload, limit)
        yield _Reply(reply)
        if reply.get("timeout"):
            break


def report() -> _Reply:
    """What the student's code tried: audit records, then hooks and modules changed since arm()."""
    return _Reply({"events": _state["events"], "patched": _patched()})


# ---------------------------------------------------------------- recording (audit hook, hook check)

def _record(kind: str, detail) -> None:
    item = [kind, str(detail)[:160]]
    if item not in _state["events"] and len(_state["events"]) < MAX_EVENTS:
        _state["events"].append(item)


def _outside(path) -> str | None:
    """The absolute path when it is outside the paths the sandbox gives Python, or inside them but
    in a folder that does not exist here (a guess at the grader's files); else None."""
    if isinstance(path, bytes):
        path = os.fsdecode(path)
    if not isinstance(path, str):
        return None  # a file descriptor
    full = os.path.normpath(os.path.join(os.getcwd(), path))
    if full.startswith(_state["cell_prefix"]):
        return None  # ipykernel's own files of the cells' code
    if not any(full == p or full.startswith(p.rstrip("/") + "/") for p in _state["allowed"]):
        return LAYOUT if _state["sandboxed"] and _holds_mounts(full, _state["allowed"]) else full
    folder = os.path.dirname(full)
    while any(c in folder for c in "*?["):  # a glob pattern: its fixed part
        folder = os.path.dirname(folder)
    return None if os.path.isdir(folder) else full


def _is_cell(frame) -> bool:
    name = frame.f_code.co_filename
    return name.startswith(("<ipython-input-", _state["cell_prefix"]))


def _on_path(kind):
    def handle(args):
        full = _outside(args[0])
        if full:
            _record(kind, full)
    return handle


def _on_symlink(args):
    _record("symlink", os.fsdecode(args[0]) if isinstance(args[0], (str, bytes)) else args[0])


def _on_connect(args):
    address = args[1]
    _record("network", ":".join(map(str, address)) if isinstance(address, tuple) else address)


def _is_numeric_address(host) -> bool:
    for family in (socket.AF_INET, socket.AF_INET6):
        try:
            socket.inet_pton(family, host)
            return True
        except (OSError, TypeError, ValueError):
            pass
    return False


def _on_lookup(args):
    if not _is_numeric_address(args[0]):  # a numeric address: its connect is recorded
        _record("dns", args[0])


def _on_spawn(args):
    program = args[0] if args[0] is not None else (args[1] or ["?"])[0]
    if isinstance(program, (list, tuple)):
        program = program[0] if program else "?"
    _record("subprocess", os.path.basename(os.fsdecode(program) if isinstance(program, bytes) else str(program)))


def _on_frame(args):
    if args and _is_cell(args[0]):
        _record("frames", "sys._getframe")


HANDLERS = {
    "open": _on_path("file"), "os.listdir": _on_path("file"), "os.scandir": _on_path("file"),
    "glob.glob": _on_path("file"), "os.chdir": _on_path("file"), "os.remove": _on_path("file"),
    "os.rename": _on_path("file"), "os.mkdir": _on_path("file"), "shutil.rmtree": _on_path("file"),
    "sqlite3.connect": _on_path("file"), "os.symlink": _on_symlink, "os.link": _on_symlink,
    "socket.connect": _on_connect, "socket.bind": _on_connect,
    "socket.getaddrinfo": _on_lookup, "socket.gethostbyname": _on_lookup,
    "subprocess.Popen": _on_spawn, "os.posix_spawn": _on_spawn, "os.exec": _on_spawn,
    "os.spawn": lambda a: _on_spawn(a[1:]), "os.system": lambda a: _on_spawn([os.fsdecode(a[0]).split()[:1]]),
    "os.fork": lambda a: _record("fork", "os.fork"), "os.forkpty": lambda a: _record("fork", "os.forkpty"),
    "sys._getframe": _on_frame, "sys._current_frames": lambda a: _record("frames", "sys._current_frames"),
    "sys.settrace": lambda a: _record("trace", "sys.settrace"),
    "sys.setprofile": lambda a: _record("trace", "sys.setprofile"),
    "ctypes.dlopen": lambda a: _record("ctypes", a[0]),
}


def _audit(event: str, args) -> None:
    if not _state["armed"]:
        return
    handler = HANDLERS.get(event)
    if handler is None or getattr(_local, "busy", False):
        return
    _local.busy = True
    try:
        handler(args)
    except Exception:  # noqa: BLE001 - recording must never break the student's code
        pass
    finally:
        _local.busy = False


_local = threading.local()


def _module_state(module) -> dict:
    return {k: id(v) for k, v in vars(module).items()}


def _shell_state(shell) -> dict:
    state = {name: [id(x) for x in getattr(shell, name, [])] for name in SHELL_HOOKS}
    state["custom_exceptions"] = [id(x) for x in shell.custom_exceptions]
    state["events"] = {name: [id(cb) for cb in cbs if not str(getattr(cb, "__module__", "") or "")
                              .startswith(OWN_CALLBACK_MODULES)]
                       for name, cbs in shell.events.callbacks.items()}
    state["methods"] = sorted(k for k in vars(shell) if k in ("run_cell", "run_ast_nodes", "run_code",
                                                              "showtraceback", "_showtraceback"))
    return state


def _owner(hook) -> str:
    """The package a hook comes from; IPython swaps its own hooks in and out around each cell."""
    module = getattr(hook, "__module__", None) or type(hook).__module__
    return "own" if str(module).split(".")[0] in ("IPython", "ipykernel", "sys", "builtins") else str(module)


def _sys_state() -> dict:
    return {"excepthook": _owner(sys.excepthook), "displayhook": _owner(sys.displayhook),
            "meta_path": [id(x) for x in sys.meta_path], "path_hooks": [id(x) for x in sys.path_hooks]}


def arm() -> None:
    """Called from the kernel's exec_lines, just before the first cell: take the baseline, start recording."""
    import IPython

    shell = IPython.get_ipython()
    _state["shell"] = shell
    shell.events.register("post_run_cell", _end_logging)  # before the baseline: it is the grader's own
    _state["baseline"] = {"builtins": _module_state(builtins), "shell": _shell_state(shell), "sys": _sys_state(),
                          "modules": {m: _module_state(sys.modules[m]) for m in WATCHED_MODULES
                                      if m in sys.modules}}
    _state["armed"] = True


def _patched() -> list[str]:
    base = _state["baseline"]
    changed = []
    now = _module_state(builtins)
    ipython_own = set(getattr(_state["shell"].builtin_trap, "auto_builtins", {}))  # exit, quit, get_ipython
    changed += [f"builtins.{k}" for k in sorted(set(now) | set(base["builtins"]))
                if now.get(k) != base["builtins"].get(k) and not k.startswith("_") and k not in ipython_own]
    for name, before in base["modules"].items():
        after = _module_state(sys.modules.get(name, types.ModuleType(name)))
        changed += [f"{name}.{k}" for k in sorted(set(after) | set(before))
                    if after.get(k) != before.get(k) and not k.startswith("_")]
    shell_now = _shell_state(_state["shell"])
    for key, before in base["shell"].items():
        if key == "events":
            changed += [f"events.{name}" for name, cbs in shell_now["events"].items() if cbs != before.get(name, [])]
        elif shell_now[key] != before:
            changed.append(key if key != "methods" else "shell methods")
    changed += [f"sys.{k}" for k, v in _sys_state().items() if v != base["sys"][k]]
    if sys.gettrace() is not None or sys.getprofile() is not None or threading._trace_hook is not None:
        changed.append("sys.settrace")
    return changed[:20]


# ---------------------------------------------------------------- start-up

def _defer_package_init(name: str, light: dict[str, str]) -> None:
    """Make package `name` importable without running its __init__ until an attribute it defines
    is first read; then it runs, in the same module object. `light` maps the attributes the
    kernel's own start-up reads to the submodule defining each: reading one imports that only."""
    spec = importlib.util.find_spec(name)
    if spec is None or spec.loader is None or name in sys.modules:
        return
    package = importlib.util.module_from_spec(spec)
    sys.modules[name] = package

    def attribute(key: str):
        if key in light:
            value = getattr(importlib.import_module(f"{name}.{light[key]}"), key)
            setattr(package, key, value)
            return value
        del package.__getattr__
        spec.loader.exec_module(package)
        return getattr(package, key)

    package.__getattr__ = attribute


def _lighter_start(sandboxed: bool) -> None:
    """Start-up work a throw-away grading kernel does not need; what its cells run and show is unchanged.

    - no debugger: ipykernel imports debugpy (~15% of its start-up imports) when it can; a
      grading kernel is never debugged, so debugpy is not there to import;
    - jupyter_client's __init__ imports every client, manager and kernel provisioner (with their
      entry points); the kernel uses a few of its modules, so the rest is imported when someone
      reads it (`import jupyter_client` in a cell still gets all of it);
    - in a sandbox, ipykernel does not import psutil at shutdown to end the kernel's children:
      the end of the sandbox's PID namespace ends them all.
    """
    sys.modules["debugpy"] = None
    _defer_package_init("jupyter_client", {"write_connection_file": "connect", "find_connection_file": "connect",
                                           "BlockingKernelClient": "blocking"})
    if sandboxed:
        from ipykernel import kernelbase

        if hasattr(kernelbase, "_psutil_import_attempted"):
            kernelbase._psutil_import_attempted = True  # psutil stays None: no children to look for


def _answer_requests() -> None:
    """Let the grader call `snapshot`, `calls`, `report` and `logged` with a shell message of its own
    (REQUEST, answered by REPLY {"reply": <JSON text>, "more": false}; `calls` answers a whole batch of
    calls with one REPLY per call, all but the last with "more": true, so that each reply is read
    within the grader's budgets) rather than a silent execute_request with a user expression: no cell
    run, history, events or display formatting per call, and one request for all the calls the
    grader has. ipykernel's dispatch still sets the parent (the student's prints go out as for a
    cell) and turns SIGINT into KeyboardInterrupt. A request publishes no busy/idle status: the grader
    waits for its REPLY on the shell channel, never for a status, and reads each one only to drop it
    (about 20 messages per notebook)."""
    from ipykernel.kernelapp import IPKernelApp

    init_kernel = IPKernelApp.init_kernel
    helpers = {"snapshot": snapshot, "calls": calls, "report": report, "logged": logged}

    def init_kernel_answering(self) -> None:
        init_kernel(self)
        kernel = self.kernel

        def answer(stream, ident, parent) -> None:
            content = parent.get("content") or {}
            last = ""
            try:  # one reply, or several (calls): each its own message, the last one with more=False
                replies = helpers[content["helper"]](*content.get("args", []))
                for reply in [replies] if isinstance(replies, _Reply) else replies:
                    if last:
                        kernel.session.send(stream, REPLY, {"reply": last, "more": True}, parent, ident)
                    last = reply.text
            except BaseException:  # noqa: BLE001 - not a reply (or the grader stopped the batch): it says so
                last = ""
            kernel.session.send(stream, REPLY, {"reply": last, "more": False}, parent, ident)

        kernel.shell_handlers[REQUEST] = answer
        publish_status = kernel._publish_status

        def publish_status_of_cells(status, channel, parent=None):
            if (parent or kernel.get_parent(channel) or {}).get("header", {}).get("msg_type") != REQUEST:
                publish_status(status, channel, parent)

        kernel._publish_status = publish_status_of_cells

    IPKernelApp.init_kernel = init_kernel_answering


# Text in which IPython's token transformers (MagicAssign, SystemAssign, EscapedCommand, HelpEnd: IPython
# 9 inputtransformer2) may find something: each needs a token "%" right after an assignment's "=" or first
# on a line, a lone "!" (not "!="), any "?", or a line whose first token is one of EscapedCommand's escapes
# (ESCAPE_SINGLES). Over-matching only costs the tokenizer's pass.
MAY_HAVE_IPYTHON_SYNTAX = re.compile(r"\?|!(?!=)|=\s*(?:\\\s*)?%|^\s*[%!?,;/]", re.M)


def transform_cell_quickly(manager, cell: str, transform_cell) -> str:
    """IPython's `transform_cell` (TransformerManager's, passed in), without tokenizing text in which no
    token transformer can find anything: the cleanup and line transformations still run, and their result
    is IPython's when MAY_HAVE_IPYTHON_SYNTAX finds nothing in it. Only for IPython's own transformer
    classes: a manager with others (a cell may add them) gets IPython's whole path."""
    from IPython.core import inputtransformer2 as it

    if tuple(manager.token_transformers) != (it.MagicAssign, it.SystemAssign, it.EscapedCommand, it.HelpEnd):
        return transform_cell(manager, cell)
    text = cell if cell.endswith("\n") else cell + "\n"
    lines = text.splitlines(keepends=True)
    for transform in manager.cleanup_transforms + manager.line_transforms:
        lines = transform(lines)
    if MAY_HAVE_IPYTHON_SYNTAX.search("".join(lines)):
        return transform_cell(manager, cell)
    return "".join(lines)


def _transform_once() -> None:
    """Tokenize each cell once at most: ipykernel transforms a cell's text (IPython's static input
    transformations, the tokenizer's work: %magics, !commands) to decide how to run it, then IPython's
    run_cell transforms the same text again, with no code run in between. The second call takes the first
    one's result when the text and the transformations (the lists a cell may change) are the same objects.
    A cell with no IPython syntax is not tokenized at all (transform_cell_quickly)."""
    from IPython.core.inputtransformer2 import TransformerManager

    transform_cell = TransformerManager.transform_cell
    last: list = []  # [manager, raw cell, its transformations, result] of the last call

    def transforms(manager) -> tuple:
        return (*manager.cleanup_transforms, None, *manager.line_transforms, None, *manager.token_transformers)

    def transform_cell_once(self, cell):
        now = transforms(self)
        if last and last[0] is self and last[1] is cell and len(last[2]) == len(now) \
                and all(a is b for a, b in zip(last[2], now, strict=True)):
            return last[3]
        last.clear()
        result = transform_cell_quickly(self, cell, transform_cell)
        last.extend([self, cell, now, result])
        return result

    TransformerManager.transform_cell = transform_cell_once


def _quick_cell_names() -> None:
    """Name each cell's code file from a C hash of its text: ipykernel names it (<tmp>/ipykernel_<pid>/
    <hash>.py; IPython files the cell's lines under that name for its tracebacks, which show "Cell In[n]")
    from murmur2, computed in pure Python four bytes at a time, twice per cell: about 5 ms of a grading
    kernel's CPU for this lesson. The debugger, the only other reader of these names, is not there in a
    grading kernel; the folder is the same."""
    import hashlib

    from ipykernel import compiler

    def get_file_name(code: str) -> str:
        cell_name = os.environ.get("IPYKERNEL_CELL_NAME")
        if cell_name is None:
            digest = hashlib.blake2b(code.encode("utf-8", "surrogatepass"), digest_size=8).digest()
            cell_name = f"{compiler.get_tmp_directory()}{os.sep}{int.from_bytes(digest, 'little')}.py"
        return cell_name

    compiler.get_file_name = get_file_name


def _small_messages() -> None:
    """Send what a cell prints in messages of at most STREAM_CHUNK characters: the grader drops any
    message over its byte cap (trusted.MAX_REPLY) while reading it, and a print of 50 MB is honest.
    Of each request's printed text (stdout and stderr together, in the order sent) only the first
    STREAM_KEPT characters are sent: the grader keeps no more of a cell (executor.MAX_KEPT_OUTPUT, its
    own cap), so the rest cost the kernel and the grader their encoding, signing and reading for nothing."""
    from ipykernel.iostream import OutStream

    flush_buffers = OutStream._flush_buffers
    sent: dict[str, int] = {}  # characters sent, by the request's msg_id

    def chunked(self):
        for parent, data in flush_buffers(self):
            request = str(parent.get("msg_id", ""))  # (`parent`: the request's header)
            if request not in sent and len(sent) >= 256:
                sent.clear()  # (an old request's next print is sent again; the grader still caps it)
            already = sent.get(request, 0)
            data = data[:max(STREAM_KEPT - already, 0)]
            sent[request] = already + len(data)
            for start in range(0, len(data), STREAM_CHUNK):
                yield parent, data[start:start + STREAM_CHUNK]

    OutStream._flush_buffers = chunked


def _one_traceback_per_error() -> None:
    """Format each error of a cell once: IPython formats it for the cell's error output and then again
    for the shell's history (`history_manager.exceptions`, which nothing in a grading kernel reads: its
    history is off); the history keeps the error's name and message, not a second traceback."""
    from IPython.core.interactiveshell import InteractiveShell

    def name_and_message(self, exception, filename=None, running_compiled_code=False) -> dict:
        return {"ename": type(exception).__name__, "evalue": str(exception), "traceback": []}

    if hasattr(InteractiveShell, "_format_exception_for_storage"):
        InteractiveShell._format_exception_for_storage = name_and_message


def _errors_shown_by_python() -> None:
    """Show the errors nobody can catch (an exception ignored in a destructor or callback: "Exception ignored
    in"; one that ends a thread) as Python's own traceback module shows them, not with Python's C-level
    display. That display looks each frame's source file up by opening it: a relative name (compiled
    modules': pyzmq's frames are "zmq/backend/cython/_zmq.py") in the working folder, then its last part in
    every folder of sys.path, whether it exists or not. The grader's interrupt lands in such a place only
    when the timing says so (it ends a batch of calls while pyzmq frees a sent reply), and each of those
    opens would be a record: a guess at the grader's files, during the hidden checks. The traceback module
    reads a file only where it exists; the text written is the same."""
    import traceback

    def show(header: str, exc_type, value, tb) -> None:
        try:  # a hook that raises is shown by the C-level display in turn: nothing leaves this one
            print(header, file=sys.stderr, flush=True)
            traceback.print_exception(exc_type, value, tb, file=sys.stderr)
            sys.stderr.flush()
        except BaseException:  # noqa: BLE001 - no stderr, or another interrupt while showing this one
            pass

    def unraisable(error) -> None:
        where = error.err_msg or "Exception ignored in"
        try:
            where = f"{where}: {error.object!r}" if error.object is not None else where
        except BaseException:  # noqa: BLE001 - a repr that fails (or is interrupted): the message alone
            pass
        show(where, error.exc_type, error.exc_value, error.exc_traceback)

    def thread_ended(args) -> None:  # threading's own fallback (threading.excepthook without _thread's)
        if args.exc_type is not SystemExit:
            name = args.thread.name if args.thread is not None else threading.get_ident()
            show(f"Exception in thread {name}:", args.exc_type, args.exc_value, args.exc_traceback)

    sys.unraisablehook = unraisable
    threading.excepthook = thread_ended


def _tracebacks_ready() -> None:
    """In the zygote, before any kernel is forked: make an error in a cell cost a kernel its traceback,
    not the setting up of IPython's traceback formatting. A kernel's first traceback imports stack_data
    and pygments' formatters, compiles the Python lexer's rules and maps every loaded module to its
    file (inspect.getmodule), about 40 ms of CPU; and stack_data makes a new lexer class for each
    frame it shows, which compiles those rules again (about 5 ms a frame). Here one lexer class serves
    every frame (`MarkedLexer`, stack_data's own, with the frame's ranges on the instance) and one
    traceback of the zygote's own error is formatted, so every kernel forked afterwards finds all of
    that done. No student exists yet; the text of every traceback is the same as before."""
    import pygments
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.core.ultratb import AutoFormattedTB
    from pygments.lexers import get_lexer_by_name
    from stack_data import core

    class MarkedLexer(type(get_lexer_by_name("python3"))):
        """stack_data's lexer (utils._pygmented_with_ranges): the tokens of the executing node marked."""

        def __init__(self, ranges: list, **options) -> None:
            super().__init__(**options)
            self.ranges = ranges

        def get_tokens(self, text):
            length = 0
            for ttype, value in super().get_tokens(text):
                if any(start <= length < end for start, end in self.ranges):
                    ttype = ttype.ExecutingNode
                length += len(value)
                yield ttype, value

    def pygmented_with_ranges(formatter, code: str, ranges: list) -> list[str]:
        lexer = MarkedLexer(ranges, stripnl=False)
        try:
            highlighted = pygments.highlight(code, lexer, formatter)
        except Exception:  # noqa: BLE001 - as stack_data: the code without highlighting
            highlighted = code
        return highlighted.splitlines()

    if hasattr(core, "_pygmented_with_ranges"):
        core._pygmented_with_ranges = pygmented_with_ranges
    try:
        json.loads("[")
    except ValueError as error:
        formatter = AutoFormattedTB(mode="Context", theme_name=InteractiveShell.colors.default_value)
        formatter.structured_traceback(type(error), error, error.__traceback__)


def _orderly_exit() -> None:
    """Make the kernel exit as soon as a shutdown_request has been answered and its output sent.

    1. The main thread, once its loop has stopped, waits for the control thread to end. A
       shutdown_request, handled in the control thread, stops the main loop and then flushes
       stdout and stderr through the IOPub thread, waiting up to 10 s for that flush. Without
       this wait the main thread leaves its loop and runs ipykernel's atexit hooks: the IOPub
       thread's stop (which drops the events that thread has not handled yet, that flush among
       them), then the app's close, which joins the control thread, still waiting for the flush.
       The kernel then never exits by itself and the grader signals it (about one kernel in five).
    2. After a shutdown_request, once every atexit hook has run (ipykernel's last one closes its
       sockets and terminates their zmq context, which sends what is queued), the process ends
       without the interpreter's own teardown of every module and object: a few hundred
       milliseconds of CPU per kernel with the lesson's libraries loaded, for nothing; the
       sandbox, with all it held, is thrown away."""
    import atexit

    from ipykernel.kernelapp import IPKernelApp

    start = IPKernelApp.start
    shut_down: list[bool] = []

    def start_and_let_control_finish(self) -> None:
        start(self)
        control = self.control_thread
        if control is not None and control.is_alive() and control is not threading.current_thread():
            control.stop()  # already asked by a shutdown_request; after its flush, in any case
            control.join(timeout=CONTROL_EXIT_WAIT)
        if getattr(self.kernel, "_shutdown_message", None) is not None:
            shut_down.append(True)

    def end_after_shutdown() -> None:  # registered first, so run last
        if shut_down:
            for stream in (sys.stdout, sys.stderr):
                with contextlib.suppress(Exception):
                    stream.flush()
            os._exit(0)

    IPKernelApp.start = start_and_let_control_finish
    atexit.register(end_after_shutdown)


# ---------------------------------------------------------------- the sandbox's init, the zygote

PRELOADED = ("ipykernel.kernelapp", "ipykernel.ipkernel", "ipykernel.zmqshell", "IPython.core.completerlib",
             "IPython.core.debugger", "IPython.core.oinspect", "IPython.extensions.storemagic",
             "tornado.platform.asyncio", "tornado.queues")
JOINED_NAMESPACES = ("ipc", "uts", "net", "cgroup", "pid", "mnt")  # mnt last: it changes what /proc/... means
NS_GET_PARENT = 0xB702         # ioctl(2) on a namespace file: the parent user namespace
PR_CAPBSET_DROP = 24           # prctl(2)
PR_SET_NO_NEW_PRIVS = 38
PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 22, 2
SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER = 1, 1 << 3
NOTIF_RECV, NOTIF_SEND = 0xC0502100, 0xC0182101  # SECCOMP_IOCTL_NOTIF_RECV / _SEND (linux/seccomp.h)
NOTIF_ID_VALID = 0x40082102  # SECCOMP_IOCTL_NOTIF_ID_VALID (SECCOMP_IOW(2, __u64))
NOTIF_SIZE, SECCOMP_USER_NOTIF_FLAG_CONTINUE = 80, 1
MAX_OBSERVED = 200  # distinct records the supervisor writes for one kernel
MAX_MESSAGES = 16   # headers of one sendmmsg whose addresses are read
MSGHDR, MMSGHDR, MSGHDR_SIZE = -2, -3, 56  # seccomp.WATCHED's markers; sizeof(struct msghdr), LP64
AT_FDCWD, AF_NETLINK, PIDFD_GETFD = -100, 16, 438
# Host secrets: recorded when read, even under a tree the sandbox allows (/etc, /proc, its home).
SECRET_PATHS = ("/etc/shadow", "/etc/shadow-", "/etc/gshadow", "/etc/gshadow-", "/etc/sudoers", "/etc/sudoers.d",
                "/etc/ssh", "/etc/ssl/private", "/etc/pki/tls/private", "/etc/security", "/etc/krb5.keytab",
                "/etc/credstore", "/etc/credstore.encrypted", "/root", "/run/secrets", "/var/run/secrets",
                "/proc/kcore", "/proc/keys", "/sys/firmware")
SECRET_NAMES = {".ssh", ".gnupg", ".aws", ".azure", ".kube", ".docker", ".netrc", ".pgpass", ".git-credentials",
                "gcloud"}
PROC_PRIVATE = {"environ", "mem", "root", "cwd", "fd", "fdinfo", "map_files", "maps", "smaps", "smaps_rollup",
                "pagemap", "auxv", "stack", "syscall"}
MAX_WATCHED = 100_000  # watched syscalls it answers; then it lets go, and the rest fail (ENOSYS)
CAPS_V3 = 0x20080522           # capset(2): _LINUX_CAPABILITY_VERSION_3
CAP_FIELDS = ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb")
# The sandbox's PID 1 (bwrap --as-pid-1, `python -I -S -c REAPER`): it only reaps what the kernel
# leaves behind. The kernel is put in by the zygote (`_enter`), whose child waits for it and then
# kills this init; with the namespace's init gone, every process left in the sandbox is killed too.
# SIGCHLD is blocked and taken with sigtimedwait, so none is lost between two waits.
REAPER = """
import contextlib, os, signal
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGCHLD})
while True:
    with contextlib.suppress(ChildProcessError):
        while os.waitpid(-1, os.WNOHANG)[0]:
            pass
    signal.sigtimedwait({signal.SIGCHLD}, 60)
"""


def _libc():
    import ctypes

    return ctypes, ctypes.CDLL(None, use_errno=True)


def _user_namespaces(proc: int) -> list[int]:
    """Open user namespaces from this process's (excluded) down to the sandbox's: bwrap nests one
    more inside the one that owns the sandbox's other namespaces (--disable-userns). Empty when
    the sandbox has none of its own (bwrap run as root)."""
    import fcntl

    own = os.readlink("/proc/self/ns/user")
    chain = [os.open("ns/user", os.O_RDONLY, dir_fd=proc)]
    while os.readlink(f"/proc/self/fd/{chain[0]}") != own:
        chain.insert(0, fcntl.ioctl(chain[0], NS_GET_PARENT))
    os.close(chain.pop(0))
    return chain


def _join(init: int, pid_namespace: str) -> int:
    """Join the namespaces and root of the sandbox whose init has host pid `init`; return a pidfd
    of that init. The PID namespace is checked against the grader's (it holds that namespace
    open, so its id is not reused): a recycled pid is refused, never joined."""
    ctypes, libc = _libc()
    init_fd = os.pidfd_open(init)
    proc = os.open(f"/proc/{init}", os.O_RDONLY | os.O_DIRECTORY)
    if os.readlink("ns/pid", dir_fd=proc) != pid_namespace:
        raise RuntimeError(f"process {init} is not the init of sandbox {pid_namespace}")
    with open(os.open("cmdline", os.O_RDONLY, dir_fd=proc), "rb") as f:
        if f.read().split(b"\0")[0] != os.fsencode(sys.executable):
            raise RuntimeError(f"sandbox {pid_namespace} is not ready (bwrap has not started its init)")
    signal.pidfd_send_signal(init_fd, 0)  # alive after that check: the pidfd is that init's
    users = _user_namespaces(proc)
    joined = [os.open(f"ns/{name}", os.O_RDONLY, dir_fd=proc) for name in JOINED_NAMESPACES
              if os.readlink(f"ns/{name}", dir_fd=proc) != os.readlink(f"/proc/self/ns/{name}")]
    root = os.open("root", os.O_RDONLY | os.O_DIRECTORY, dir_fd=proc)
    # the outer user namespace owns the others; the nested one, joined last, is the sandbox's own
    for fd in users[:1] + joined + users[1:]:
        if libc.setns(fd, 0) != 0:
            raise OSError(ctypes.get_errno(), f"setns: {os.strerror(ctypes.get_errno())}")
        os.close(fd)
    os.fchdir(root)
    os.chroot(".")
    for fd in (root, proc):
        os.close(fd)
    return init_fd


def _drop_privileges(uid: int | None) -> None:
    """Leave no capability at all (bounding set included), no way to gain one, and, when bwrap ran
    as root, the sandbox's own uid; checked in /proc/self/status, else the kernel does not start."""
    ctypes, libc = _libc()
    for cap in range(64):
        libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0)  # EINVAL past the last capability
    if uid is not None and os.getuid() == 0:
        os.setgroups([])
        os.setgid(uid)
        os.setuid(uid)
    header = (ctypes.c_uint32 * 2)(CAPS_V3, 0)
    if libc.capset(header, (ctypes.c_uint32 * 6)()) != 0:
        raise OSError(ctypes.get_errno(), "capset")
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "PR_SET_NO_NEW_PRIVS")
    with open("/proc/self/status", encoding="ascii") as f:
        status = dict(line.split(":", 1) for line in f.read().splitlines() if ":" in line)
    left = [k for k in CAP_FIELDS if int(status[k], 16)] + ([] if status["NoNewPrivs"].strip() == "1" else ["nnp"])
    if left or (uid is not None and os.getuid() != uid):
        raise RuntimeError(f"privileges left after dropping them: {left} uid {os.getuid()}")


def _load_filter(program: bytes, seccomp_nr: int, listener: bool = False) -> int:
    """Load a BPF program (struct sock_filter[]) as this thread's seccomp filter (inherited by every
    thread and process started later); with `listener`, return the notification fd of the filter."""
    ctypes, libc = _libc()
    buffer = ctypes.create_string_buffer(program, len(program))

    class Program(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    prog = Program(len(program) // 8, ctypes.cast(buffer, ctypes.c_void_p))
    if listener:
        result = libc.syscall(ctypes.c_long(seccomp_nr), ctypes.c_uint(SECCOMP_SET_MODE_FILTER),
                              ctypes.c_uint(SECCOMP_FILTER_FLAG_NEW_LISTENER), ctypes.byref(prog))
    else:
        result = libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(prog), 0, 0)
    if result < 0:
        raise OSError(ctypes.get_errno(), "seccomp filter not loaded")
    return result


def _read_string(mem: int, address: int) -> str:
    """A NUL-terminated string of the watched process (at most 4096 bytes), read through /proc/PID/mem."""
    try:
        data = os.pread(mem, 4096, address)
    except OSError:
        return "?"
    return os.fsdecode(data.split(b"\0", 1)[0])


def _sockaddr(mem: int, address: int, length: int) -> str | None:
    """The address a socket call names, as a record's detail; None: no address, or the kernel's own
    netlink (the C library asks it for the sandbox's interfaces)."""
    import struct

    if not address:
        return None
    try:
        data = os.pread(mem, min(max(length, 0), 128), address)
    except OSError:
        return "?"
    family = struct.unpack_from("=H", data)[0] if len(data) >= 2 else -1
    if family == socket.AF_INET and len(data) >= 8:
        return f"{socket.inet_ntop(socket.AF_INET, data[4:8])}:{struct.unpack_from('!H', data, 2)[0]}"
    if family == socket.AF_INET6 and len(data) >= 24:
        return f"{socket.inet_ntop(socket.AF_INET6, data[8:24])}:{struct.unpack_from('!H', data, 2)[0]}"
    if family == socket.AF_UNIX:
        return os.fsdecode(data[2:].split(b"\0", 1)[0]) or "unix socket"
    if family == AF_NETLINK and len(data) >= 8 and struct.unpack_from("=I", data, 4)[0] == 0:
        return None
    return f"family {family}"


def _addresses(mem: int, args: tuple, argument: int, extra: int) -> list[str | None]:
    """What a network syscall names: its address (connect, sendto), or those of its message headers
    (sendmsg; sendmmsg: the first MAX_MESSAGES of its vector)."""
    import struct

    if extra >= 0:
        return [_sockaddr(mem, args[argument], args[extra])]
    count = 1 if extra == MSGHDR else min(args[argument + 1], MAX_MESSAGES)
    stride = MSGHDR_SIZE if extra == MSGHDR else MSGHDR_SIZE + 8  # struct mmsghdr: msghdr + msg_len, padded
    found = []
    for n in range(count):
        try:
            header = os.pread(mem, 12, args[argument] + n * stride)
        except OSError:
            found.append("?")
            continue
        if len(header) == 12:
            name, length = struct.unpack("=QI", header)
            found.append(_sockaddr(mem, name, length))
    return found


def _int_argument(value: int) -> int:
    """A syscall's `int` argument from its 64-bit register (a folder handle: AT_FDCWD is -100)."""
    value &= 0xFFFFFFFF
    return value - (1 << 32) if value >= 1 << 31 else value


def _folder(host_proc: int, pid: int, args: tuple, folder_argument: int, path: str) -> str:
    """The folder a watched syscall's relative path is resolved in: the process's working folder,
    or the folder its directory handle (openat's dirfd, ...) names, read from /proc/PID/fd."""
    handle = _int_argument(args[folder_argument]) if folder_argument >= 0 else AT_FDCWD
    if handle == AT_FDCWD or path.startswith("/"):
        return os.readlink(f"{pid}/cwd", dir_fd=host_proc)
    try:
        return os.readlink(f"{pid}/fd/{handle}", dir_fd=host_proc)
    except OSError:
        return f"/?fd {handle}"  # no such handle: the call fails; still recorded (outside every tree)


def _under(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def _outside_all(path: str, allowed: list[str]) -> bool:
    return not any(_under(path, p) for p in allowed)


def _holds_mounts(full: str, trees: list[str]) -> bool:
    """Whether, in a sandbox showing `trees`, `full` is a folder bwrap made only to hold their mount
    points: "/" or a folder above one of them, itself outside all of them (see LAYOUT)."""
    return _outside_all(full, trees) and any(p.startswith(full.rstrip("/") + "/") for p in trees)


def _secret(full: str, own: tuple[str, ...]) -> bool:
    """Whether a path names a host secret, even under a tree the sandbox allows: credential files of
    the system (SECRET_PATHS), of a user (a SECRET_NAMES folder or file anywhere), and what another
    process holds (PROC_PRIVATE entries of /proc/<pid> other than the caller's own)."""
    if any(_under(full, p) for p in SECRET_PATHS):
        return True
    parts = full.split("/")
    if any(part in SECRET_NAMES for part in parts):
        return True
    if len(parts) >= 4 and parts[1] == "proc":
        entry = parts[3] if parts[3] != "task" else (parts[5] if len(parts) >= 6 else "")
        return parts[2] not in own and parts[2] not in ("self", "thread-self") and entry in PROC_PRIVATE
    return False


def _observed(kind: str, detail: str, python: list[str], allowed: list[str], scratch: list[str], cwd: str,
              own: tuple[str, ...] = (), imports: tuple[str, ...] = ()) -> str | None:
    """The record of one watched syscall, or None when it only touched what the sandbox gives Python
    (`python`: its environment, wherever installed, under /tmp or /root too; `imports`: the folders of
    the import path themselves, which importlib lists, e.g. an editable install's source folder, not
    in the sandbox; the `allowed` trees; the scratch folders). Recorded even under an allowed tree: a host secret
    (`_secret`). In a scratch folder, recorded: a path in a folder that does not exist there (a guess
    at the grader's files, /tmp/...), or in a folder bwrap made only to hold the environment's mount
    point (a checkout under /tmp: a guess at its other files). Such a folder itself (`/`, /home, the
    folders above the environment) is recorded as LAYOUT, whichever it is."""
    if kind in ("file", "network") and (kind == "file" or detail.startswith("/")):
        full = os.path.normpath(os.path.join(cwd, detail))
        if not _outside_all(full, python) or full in imports:
            return None
        if kind == "file" and _holds_mounts(full, allowed + scratch):
            return LAYOUT
        if kind == "file" and _secret(full, own):
            return full
        if _outside_all(full, allowed + scratch):
            return full
        if _outside_all(full, scratch) or full in scratch:  # a scratch folder itself (/tmp listed) is the kernel's
            return None
        folder = os.path.dirname(full)
        holds_environment = folder not in scratch and any(_under(p, folder) for p in python)
        if (not os.path.isdir(folder) or holds_environment) \
                and not full.startswith(os.path.join(scratch[0], "ipykernel_")):  # ipykernel's files of the cells
            return full
        return None
    if kind == "subprocess":
        return os.path.basename(detail)
    return detail


def _own_pids(host_proc: int, pid: int) -> tuple[str, ...]:
    """The caller's process and thread ids as the sandbox's /proc names them."""
    try:
        with open(os.open(f"{pid}/status", os.O_RDONLY, dir_fd=host_proc), encoding="ascii") as f:
            status = dict(line.split(":", 1) for line in f.read().splitlines() if ":" in line)
        return tuple(status[k].split()[-1] for k in ("NStgid", "NSpid") if k in status)
    except (OSError, ValueError):
        return ()


def _records(host_proc: int, pid: int, args: tuple, watched: list, python: list[str], allowed: list[str],
             scratch: list[str], imports: tuple[str, ...] = ()) -> list[str]:
    """The records of one watched syscall of process `pid` (its memory read through /proc/PID/mem)."""
    kind, argument, extra = watched
    mem = os.open(f"{pid}/mem", os.O_RDONLY, dir_fd=host_proc)
    try:
        if kind == "network":
            details = [d for d in _addresses(mem, args, argument, extra) if d is not None]
        else:
            details = [_read_string(mem, args[argument])]
    finally:
        os.close(mem)
    records = []
    for detail in details:
        folder = _folder(host_proc, pid, args, extra if kind != "network" else -1, detail)
        own = _own_pids(host_proc, pid) if detail.startswith("/proc") or folder.startswith("/proc") else ()
        record = _observed(kind, detail, python, allowed, scratch, folder, own, imports)
        if record is not None:
            records.append(record)
    return records


def _still_waiting(listener: int, notif_id: int) -> bool:
    """Whether the notified thread still waits for our answer (SECCOMP_IOCTL_NOTIF_ID_VALID), so that
    what was read from its memory was its syscall's arguments. A signal ends the wait at once (the
    syscall fails with EINTR, or restarts and notifies again), and the thread may reuse that memory
    before we read it: seccomp_unotify(2) checks the ID after reading /proc/PID/mem for this."""
    import fcntl
    import struct

    try:
        fcntl.ioctl(listener, NOTIF_ID_VALID, struct.pack("=Q", notif_id))
    except OSError:
        return False
    return True


def _take_listener(channel: socket.socket, kernel_fd: int) -> int | None:
    """The kernel's notification fd, copied out of it with pidfd_getfd(2): the kernel sends the number
    of its fd on `channel` (sendmsg, which passes fds, is a watched syscall, whose notification
    nobody could read yet), and waits for our answer before closing it."""
    ctypes, libc = _libc()
    channel.settimeout(60)
    try:
        number = int(channel.recv(32).decode() or "-1")
    except (OSError, ValueError):
        return None
    listener = libc.syscall(ctypes.c_long(PIDFD_GETFD), ctypes.c_int(kernel_fd), ctypes.c_int(number),
                            ctypes.c_uint(0)) if number >= 0 else -1
    with contextlib.suppress(OSError):
        channel.send(b"k")
    return listener if listener >= 0 else None


def _supervise(listener: int, done: int, observed: int, host_proc: int, request: dict) -> None:
    """Answer the watched syscalls of the kernel (and of its children) until it exits (`done`: its
    pidfd), writing one line per new record to `observed` (a file of the grader's, outside the sandbox)."""
    import fcntl
    import select
    import struct

    config = request["config"]
    watched = {int(k): v for k, v in config["seccomp"]["watched"].items()}  # nr -> [kind, argument, extra]
    python = config["python"]
    imports = tuple(p for p in sys.path if p.startswith("/"))
    # and /etc, which C libraries read for their settings (fonts, names, time zone): the sandbox has none of it
    allowed = config["allowed"] + [config.get("tmp", "/tmp"), "/etc"]
    scratch = [config.get("tmp", "/tmp"), request["cwd"]]
    seen: set[str] = set()
    answered = 0
    while True:
        ready, _, _ = select.select([listener, done] if listener is not None else [done], [], [])
        if listener is not None and answered >= MAX_WATCHED:  # its cost to the grader is bounded
            os.close(listener)
            listener = None
            with contextlib.suppress(OSError):
                os.write(observed, json.dumps(["budget", f"watched syscalls over {MAX_WATCHED}"]).encode() + b"\n")
            continue
        if listener is not None and listener in ready:
            answered += 1
            buffer = bytearray(NOTIF_SIZE)
            try:
                fcntl.ioctl(listener, NOTIF_RECV, buffer)
            except OSError:
                if done in ready:
                    break
                continue
            notif_id, pid = struct.unpack_from("=QI", buffer)
            nr = struct.unpack_from("=i", buffer, 16)[0]
            args = struct.unpack_from("=6Q", buffer, 32)
            kind = watched.get(nr, ["other", -1, -1])[0]
            try:
                records = _records(host_proc, pid, args, watched.get(nr, ["other", 0, -1]), python, allowed,
                                   scratch, imports)
            except (OSError, IndexError):
                records = []
            if records and not _still_waiting(listener, notif_id):
                records = []  # what was read is not that syscall's: a signal ended it (a restart notifies again)
            # written before the syscall goes on: a record is in the file before anything the syscall
            # lets the kernel do (reply, exit), so what the grader reads then does not depend on timing
            for record in records:
                line = json.dumps([kind, record[:200]]) + "\n"
                if line not in seen and len(seen) < MAX_OBSERVED:
                    seen.add(line)
                    with contextlib.suppress(OSError):
                        os.write(observed, line.encode())
            with contextlib.suppress(OSError):
                fcntl.ioctl(listener, NOTIF_SEND, struct.pack("=QqiI", notif_id, 0, 0,
                                                             SECCOMP_USER_NOTIF_FLAG_CONTINUE))
        elif done in ready:
            break
    if listener is not None:
        os.close(listener)


def _in_sandbox(request: dict, reply: int) -> None:
    """The kernel's process, just forked inside the sandbox: shed all the zygote gave it, then start."""
    config = request["config"]
    if request.get("cgroup_fd") is not None:  # the sandbox's memory cgroup, before anything is allocated
        os.write(request["cgroup_fd"], b"0")  # "0": the writing process
        os.close(request["cgroup_fd"])
    probe = bool(config.get("probe"))
    null = os.open("/dev/null", os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    keep = sorted({fd for fd in (reply if probe else None, request.get("supervisor")) if fd is not None})
    start = 3
    for fd in keep:  # the answer to the zygote (probe) and the socket to the supervisor
        os.closerange(start, fd)
        start = fd + 1
    os.closerange(start, os.sysconf("SC_OPEN_MAX"))
    os.setsid()
    os.chdir(request["cwd"])
    _drop_privileges(config.get("uid"))
    filters = config.get("seccomp")
    if filters:  # before any student code: nothing in this process can take a filter off again
        import base64

        _load_filter(base64.b64decode(filters["deny"]), filters["nr"])
        listener = _load_filter(base64.b64decode(filters["watch"]), filters["nr"], listener=True)
        os.write(request["supervisor"], str(listener).encode())  # the supervisor copies it (_take_listener)
        os.read(request["supervisor"], 1)
        os.close(listener)
        os.close(request["supervisor"])
    if probe:
        _probe(reply)
    _start_kernel(config, request["argv"])


def _probe(reply: int) -> None:
    """What grading needs of a sandboxed kernel, tested in one: a thread, the kernel's package."""
    worker = threading.Thread(target=lambda: None)
    worker.start()
    worker.join()
    found = importlib.util.find_spec("ipykernel_launcher") is not None and os.getpid() == 2
    os.write(reply, b"ok\n" if found else b"the kernel's package is not importable in the sandbox\n")
    os._exit(0)


def _enter(request: dict, reply: int) -> None:
    """In a child of the zygote: join the sandbox, fork the kernel into it (it is PID 2 there),
    answer the zygote, wait for the kernel, then kill the sandbox's init (see REAPER)."""
    watching = bool(request["config"].get("seccomp"))
    try:
        if request.get("cgroup"):  # opened on the host, written by the kernel itself (_in_sandbox)
            request["cgroup_fd"] = os.open(request["cgroup"], os.O_WRONLY | os.O_CLOEXEC)
        if watching:  # opened before joining: the grader's file and /proc, outside the sandbox
            observed = os.open(request["observed"], os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC)
            host_proc = os.open("/proc", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
            mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
            request["supervisor"] = theirs.fileno()
        init_fd = _join(request["init"], request["pid_namespace"])
        kernel = os.fork()
    except BaseException as exc:  # noqa: BLE001 - told to the grader in one line
        os.write(reply, f"{type(exc).__name__}: {exc}".replace("\n", " ").encode() + b"\n")
        os._exit(1)
    if kernel == 0:
        try:
            _in_sandbox(request, reply)
        finally:
            os._exit(1)
    if request.get("cgroup_fd") is not None:
        os.close(request["cgroup_fd"])
    listener = None
    if watching:
        theirs.close()
        done = os.pidfd_open(kernel)
        listener = _take_listener(mine, done)
        mine.close()
        if listener is None:  # the kernel could not load its filters: it never starts
            with contextlib.suppress(OSError):
                os.kill(kernel, signal.SIGKILL)
            os.write(reply, b"the kernel could not load its seccomp filters\n")
    if not request["config"].get("probe") and (listener is not None or not watching):
        os.write(reply, b"ok\n")
    os.close(reply)
    if listener is not None:
        _supervise(listener, done, observed, host_proc, request)
        os.close(done)
    _, status = os.waitpid(kernel, 0)
    with contextlib.suppress(OSError):
        signal.pidfd_send_signal(init_fd, signal.SIGKILL)
    os._exit(os.waitstatus_to_exitcode(status) & 0xFF)


def _zygote() -> None:
    """Import the kernel's libraries once, then fork one kernel per request line on stdin.

    A request is JSON: the sandbox's init (host pid and PID namespace), the kernel's config and
    arguments; the answer is one line, "ok" or why not. The zygote runs no student code and holds
    nothing of any student: only libraries, as a fresh kernel would import them. Each request gets
    its own child (`_enter`), which lives outside the sandbox until the kernel it waits for ends."""
    import gc

    _lighter_start(sandboxed=True)
    for name in PRELOADED:
        importlib.import_module(name)
    _tracebacks_ready()
    gc.freeze()  # the imported objects stay in pages shared with every kernel
    for line in sys.stdin:
        with contextlib.suppress(ChildProcessError):
            while os.waitpid(-1, os.WNOHANG)[0]:
                pass
        request = json.loads(line)
        read, write = os.pipe()
        child = os.fork()
        if child == 0:
            os.close(read)
            null = os.open("/dev/null", os.O_RDWR)
            for fd in (0, 1):  # the zygote's pipes: the grader sees them close when the zygote ends
                os.dup2(null, fd)
            os.close(null)
            try:
                _enter(request, write)
            finally:
                os._exit(1)
        os.close(write)
        with os.fdopen(read, "rb") as answer:
            text = answer.readline().decode(errors="replace").strip()
        print(text or "the kernel's process ended before it started", flush=True)
    with contextlib.suppress(ChildProcessError):
        while True:
            os.wait()  # their CPU time, and that of their kernels, is counted with this process's


def _start_kernel(config: dict, argv: list[str]) -> None:
    """Limits, the audit hook, then ipykernel in this process."""
    for name, value in config["limits"].items():
        resource.setrlimit(getattr(resource, name), (value, value))
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past RLIMIT_FSIZE raises OSError instead
    _state["allowed"] = config["allowed"]
    _state["sandboxed"] = bool(config.get("sandboxed"))
    _state["cell_prefix"] = os.path.join(config.get("tmp", "/tmp"), "ipykernel_")
    sys.modules["_coursekit_kernel"] = module = types.ModuleType("_coursekit_kernel")
    for helper in (arm, snapshot, calls, report, logged):
        setattr(module, helper.__name__, helper)
    sys.addaudithook(_audit)
    _errors_shown_by_python()
    _lighter_start(config.get("sandboxed", False))
    _answer_requests()
    _transform_once()
    _quick_cell_names()
    _small_messages()
    _one_traceback_per_error()
    _orderly_exit()
    sys.argv = ["ipykernel_launcher", *argv]
    runpy.run_module("ipykernel_launcher", run_name="__main__", alter_sys=True)


def main() -> None:
    """`zygote` (forks the sandboxed kernels), or else an unsandboxed kernel."""
    config = json.loads(sys.argv[1])
    if config.get("role") == "zygote":
        _zygote()
    else:
        _start_kernel(config, sys.argv[2:])


if __name__ == "__main__":
    main()
