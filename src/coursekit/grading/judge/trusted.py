"""The trusted half of a test cell: its whole source (visible and hidden) runs here, in the grader.

The student's kernel only ever runs a test cell's visible lines. Here the cell's source runs with
`exec` in a fresh namespace holding the student's names that the source mentions, taken from the
kernel just before the kernel ran that cell:
- plain data (lists, floats, ints, str, bool, None, tuples, dicts) as values of the grader's own
  types; a subclass of one of them (numpy.float64, a list whose `==` is always True) as a grader
  type of the same base, so `==` and `type(x) is float` mean what they say; anything else as
  `Opaque`, which equals nothing;
- functions and classes as `Proxy`: a call sends plain data to the kernel, runs the student's
  function there and brings back the result (and each list or dict argument as the function left
  it, written back in place, for the mutation checks) as plain data; what it raised comes back as
  its builtin exception type only. The calls of a cell travel in batches, one request each
  (`Calls`): the source runs again with the replies until a run needs no reply it does not have.
No student code runs in this process and nothing the student wrote is evaluated here: replies are
JSON, decoded into the types above. Messages of failures never quote student text.

The test source never resolves a name through the student: builtins (`zip`, `max`, `globals`...)
and the names the cell binds itself (imports, functions, classes) come from this process, with the
builtins pinned when this module was imported (`PINNED_BUILTINS`, a copy: nothing that changes the
`builtins` module later reaches a test cell). Only the other names it reads are the student's.
"""

from __future__ import annotations

import ast
import builtins
import functools
import importlib
import json
import re
import traceback
import types
from dataclasses import dataclass
from typing import Any, Protocol

BLANK = "______"
FILENAME = "<test cell>"
HIDDEN_BLOCK = re.compile(r"^### BEGIN HIDDEN TESTS$(.*?)^### END HIDDEN TESTS$", re.M | re.S)
SAFE_MODULES = {"math", "cmath", "random", "statistics", "fractions", "decimal", "itertools", "functools",
                "operator", "collections", "string", "re", "json", "copy"}
# Budgets of one reply, checked before it is decoded: bytes (the socket's own cap, set by the
# executor, drops a bigger message while it is read), then its structure in one linear scan.
MAX_REPLY = 16 << 20      # bytes of one message from the kernel
MAX_ITEMS = 250_000       # values (numbers, strings, containers) of one reply; the kernel side sends <= 200_000
MAX_DEPTH = 40
MAX_SAME_HASH = 8         # keys of one dict with the same hash: more can only be a collision attack
# Budgets of all the replies received while one student is judged: counts, so the same student gets
# the same flag on any machine and under any load (the grader's CPU and memory limits, which depend on
# both, stay as backstops behind them). An honest student's replies use well under 1% of them.
JUDGE_VALUES = 300_000
JUDGE_BYTES = 8 << 20
PINNED_BUILTINS = dict(vars(builtins))  # captured at import, before any test cell or student value exists


# ---------------------------------------------------------------- what the kernel sends back

class Opaque:
    """A value of the student's kernel that is not plain data: equal to nothing, usable for nothing."""

    def __init__(self, type_name: str) -> None:
        self.type_name = type_name

    def __repr__(self) -> str:
        return f"<{self.type_name} from the student's kernel>"

    def __eq__(self, other: object) -> bool:
        return self is other

    __hash__ = object.__hash__


def _foreign(base: type) -> type:
    return type(f"Student{base.__name__.capitalize()}", (base,), {"type_name": "", "__module__": __name__})


FOREIGN = {base.__name__: _foreign(base) for base in (int, float, str, list, tuple, dict)}
BASES = {"int": int, "float": float, "str": str, "list": list, "tuple": tuple, "dict": dict}


class ReplyError(Exception):
    """The kernel's reply is not in the protocol's format."""


_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"')  # a JSON string, unrolled: linear
_BRACKETS = re.compile(r"[\[\]{}]")


def _skeleton(text: str) -> str:
    if len(text) > MAX_REPLY:
        raise OverBudget(f"reply bytes over {MAX_REPLY >> 20} MB")
    return _STRING.sub("0", text)


def _items(skeleton: str) -> int:
    return skeleton.count(",") + skeleton.count("[") + skeleton.count("{")


def reply_cost(text: str) -> tuple[int, int]:
    """(values, characters) of a reply's JSON text, for the judge's budgets in all (JUDGE_VALUES,
    JUDGE_BYTES); one linear scan. Raises OverBudget for a reply over MAX_REPLY or MAX_ITEMS alone."""
    items = _items(_skeleton(text))
    if items > MAX_ITEMS:
        raise OverBudget(f"reply items over {MAX_ITEMS}")
    return items, len(text)


def read_reply(text: str) -> Any:
    """JSON text of the kernel -> data, within the budgets: MAX_REPLY characters, MAX_ITEMS values and
    MAX_DEPTH levels, counted on the text (strings blanked, then commas and brackets) before any of it
    is decoded; every step is linear in the text. Raises OverBudget or ReplyError."""
    if not isinstance(text, str):
        raise ReplyError("not a reply")
    skeleton = _skeleton(text)
    if _items(skeleton) > MAX_ITEMS:
        raise OverBudget(f"reply items over {MAX_ITEMS}")
    depth = 0
    for match in _BRACKETS.finditer(skeleton):
        depth += 1 if match.group(0) in "[{" else -1
        if depth > MAX_DEPTH:
            raise OverBudget(f"reply depth over {MAX_DEPTH}")
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        raise ReplyError("not JSON") from None


def _dict_of(pairs: list) -> dict | Opaque:
    """The pairs as a dict, unless their keys cannot be hashed (Opaque) or too many share a hash
    (OverBudget: a dict of keys with one hash is built in quadratic time)."""
    seen: dict[int, int] = {}
    try:
        for key, _ in pairs:
            h = hash(key)
            seen[h] = seen.get(h, 0) + 1
            if seen[h] > MAX_SAME_HASH:
                raise OverBudget(f"reply dict keys colliding over {MAX_SAME_HASH} per hash")
    except TypeError:
        return Opaque("dict")
    return {k: v for k, v in pairs}


def decode(value: Any, depth: int = 0) -> Any:
    """A reply value as grader-side data (see kernel_side.encode for the format)."""
    if depth > 40:
        raise ReplyError("nested too deeply")
    kind = type(value)
    if value is None or kind in (bool, int, float, str):
        return value
    if kind is list:
        return [decode(v, depth + 1) for v in value]
    if kind is not dict:
        raise ReplyError(f"unexpected {kind.__name__}")
    tag = value.get("$")
    if tag == "tuple" and type(value.get("v")) is list:
        return tuple(decode(v, depth + 1) for v in value["v"])
    if tag == "dict" and type(value.get("v")) is list:
        pairs = [decode(pair, depth + 1) for pair in value["v"]]
        if not all(type(p) is list and len(p) == 2 for p in pairs):
            raise ReplyError("bad dict")
        return _dict_of(pairs)
    if tag == "float" and value.get("v") in ("nan", "inf", "-inf"):
        return float(value["v"])
    if tag == "sub" and value.get("base") in BASES:
        inner = decode(value.get("v"), depth + 1)
        base = BASES[value["base"]]
        if type(inner) is not base:
            raise ReplyError("bad subclass value")
        out = FOREIGN[value["base"]](inner)
        out.type_name = str(value.get("type", ""))[:80]
        return out
    if tag in ("opaque", "module"):
        return Opaque(str(value.get("type") or value.get("name") or "object")[:80])
    raise ReplyError(f"unknown value {str(tag)[:20]!r}")


def to_plain(value: Any, depth: int = 0) -> Any:
    """The grader's argument in the protocol's format (grader-side types only)."""
    if depth > 40:
        raise ValueError("nested too deeply")
    if value is None or type(value) in (bool, int, str):
        return value
    if isinstance(value, float):
        value = float(value)
        return value if value == value and abs(value) != float("inf") else {"$": "float", "v": repr(value)}
    if isinstance(value, (int, str)) and not isinstance(value, bool):
        return (int if isinstance(value, int) else str)(value)
    if isinstance(value, list):
        return [to_plain(v, depth + 1) for v in value]
    if isinstance(value, tuple):
        return {"$": "tuple", "v": [to_plain(v, depth + 1) for v in value]}
    if isinstance(value, dict):
        return {"$": "dict", "v": [[to_plain(k, depth + 1), to_plain(v, depth + 1)] for k, v in value.items()]}
    raise TypeError(f"{type(value).__name__} cannot be sent to the student's kernel")


# ---------------------------------------------------------------- calling into the kernel

class Kernel(Protocol):
    def calls(self, batch: list[tuple[int, str]]) -> list[Any]:
        """Run kernel_side.calls on the batch [(ref, payload)...] in the student's kernel, in order; return
        one reply per call: its JSON text (read by the Proxy, within read_reply's budgets), or a
        GraderAbort instance for a call that ended the grading of the cell (a timeout, a budget); a
        call left unanswered gets no reply (the list is shorter). Raises GraderAbort when the batch as
        a whole failed (the kernel died, a budget)."""

    def checked(self, reply: Any) -> None:
        """Called with each reply just read, before it is used: raises GraderAbort (OverBudget) when a
        budget of the judge is over; notes what the reply says of the student's code."""


class GraderAbort(BaseException):
    """Ends a test cell's run; not an Exception, so the test's own `except Exception` cannot catch it."""

    ename = "GraderError"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class KernelTimeout(GraderAbort):
    ename = "CellTimeoutError"


class KernelDied(GraderAbort):
    ename = "DeadKernelError"


class InvalidReply(GraderAbort):
    ename = "InvalidReply"


class OverBudget(GraderAbort):
    """A budget of this student's grading was exceeded; the message names it (flag over_budget)."""

    ename = "OverBudget"


class _Unresolved(BaseException):
    """A speculative pass used a result the kernel has not given yet: the pass ends here."""


def _unresolved(*args: Any, **kwargs: Any) -> Any:
    raise _Unresolved


class Pending:
    """The result of a call not answered yet, in a speculative pass of a test cell: any use of it
    (comparing, reading, printing, truth) ends the pass; the calls made so far are then sent."""

    __slots__ = ()

    for _name in ("eq", "ne", "lt", "le", "gt", "ge", "hash", "bool", "len", "iter", "reversed", "contains",
                  "getitem", "setitem", "delitem", "getattr", "call", "str", "repr", "format", "bytes",
                  "int", "float", "complex", "index", "round", "trunc", "floor", "ceil", "neg", "pos", "abs",
                  "invert", "enter", "add", "radd", "sub", "rsub", "mul", "rmul", "truediv", "rtruediv",
                  "floordiv", "rfloordiv", "mod", "rmod", "divmod", "rdivmod", "pow", "rpow", "lshift",
                  "rlshift", "rshift", "rrshift", "and", "rand", "or", "ror", "xor", "rxor", "matmul", "rmatmul"):
        locals()[f"__{_name}__"] = _unresolved
    del _name


class Calls:
    """The calls of one test cell's trusted run, sent to the kernel in batches (see run_test_cell).

    A call whose reply is known (from an earlier batch, or from the kernel's own run of the cell's
    visible lines) gets it; any other is noted and returns `Pending` (any use of which ends a pass);
    `send` sends the calls noted in one request, and the source runs again with their replies. Only
    a run in which every call was answered decides the cell. A call is matched by its function, its
    arguments (their JSON text) and how many times that same call came before, so the student's
    function sees the calls in the order of the cell's own run; it may see a call that the deciding
    run does not make (one after a check that fails), never one the test source does not make. After
    MAX_PASSES passes, each call is sent alone, as it comes."""

    MAX_PASSES = 16
    MAX_PENDING = 1000  # unanswered calls of one pass (a loop over an unknown result ends there)

    def __init__(self, kernel: Kernel, known: dict[tuple[int, str], list] | None = None) -> None:
        self.kernel = kernel
        self.known: dict[tuple[int, str], list] = {key: list(v) for key, v in (known or {}).items()}
        self.passes = 0
        self.start_pass()

    def start_pass(self) -> None:
        self.passes += 1
        self.seen: dict[tuple[int, str], int] = {}
        self.pending: list[tuple[int, str]] = []

    def reply(self, ref: int, payload: str) -> Any:
        """The reply of this call, or None (not known yet: the call is now pending)."""
        key = (ref, payload)
        count = self.seen.get(key, 0)
        self.seen[key] = count + 1
        answers = self.known.get(key, ())
        if count < len(answers):
            return answers[count]
        if self.passes > self.MAX_PASSES and not self.pending:  # alone, now
            self.pending.append(key)
            self.send()
            return self.known[key][count]
        if len(self.pending) >= self.MAX_PENDING:
            raise _Unresolved
        self.pending.append(key)
        return None

    def send(self) -> None:
        """Send the pending calls in one request; their replies become known, in order."""
        batch, self.pending = self.pending, []
        try:
            replies = list(self.kernel.calls(batch))[: len(batch)]
        except GraderAbort as abort:  # the first call of the batch ends the cell with it
            replies = [abort]
        # calls left unanswered: after one that ended the batch (a timeout, a budget), the same; else
        # the protocol was broken
        missing = replies[-1] if replies and isinstance(replies[-1], GraderAbort) else \
            InvalidReply("内核没有按协议回答（评分辅助代码被改动？）")
        replies += [missing] * (len(batch) - len(replies))
        for index, key in enumerate(batch):
            self.known.setdefault(key, []).append(replies[index])


def student_exception(base_name: str, function: str, blank: bool) -> Exception:
    """What the student's function raised, as an instance of its builtin exception type."""
    base = PINNED_BUILTINS.get(str(base_name))
    if not (isinstance(base, type) and issubclass(base, Exception)):
        base = Exception  # SystemExit, KeyboardInterrupt and unknown names: an ordinary error here
    for kind in base.__mro__:
        try:
            exc = kind()
            break
        except TypeError:  # e.g. UnicodeDecodeError needs arguments
            continue
    exc.student_function = function
    exc.student_blank = bool(blank)
    return exc


class Proxy:
    """A function (or class) of the student's kernel, called with plain data (see Calls)."""

    def __init__(self, calls: Calls, ref: int, name: str) -> None:
        self._calls, self._ref, self.__name__ = calls, ref, name

    def __repr__(self) -> str:
        return f"<{self.__name__} in the student's kernel>"

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        payload = json.dumps({"args": [to_plain(a) for a in args],
                              "kwargs": {str(k): to_plain(v) for k, v in kwargs.items()}}, allow_nan=False)
        reply = self._calls.reply(self._ref, payload)
        if reply is None:
            return Pending()
        if isinstance(reply, GraderAbort):
            raise type(reply)(reply.message)  # a fresh one: raised here, in this pass
        try:
            reply = read_reply(reply)
        except OverBudget as over:
            raise OverBudget(f"超出评分预算：{over.message}") from None
        except ReplyError:
            raise InvalidReply(f"{self.__name__} 的结果无法读取（ReplyError）") from None
        self._calls.kernel.checked(reply)
        try:
            after = [decode(a) for a in reply["args"]]
            after_kw = {k: decode(reply["kwargs"][k]) for k in kwargs}
            for sent, now in [*zip(args, after, strict=True), *((kwargs[k], after_kw[k]) for k in kwargs)]:
                _write_back(sent, now)
            if reply["ok"] is True:
                return decode(reply["value"])
            exc = student_exception(reply["raised"], self.__name__, reply.get("blank") is True)
        except (KeyError, TypeError, ValueError, ReplyError) as exc:
            raise InvalidReply(f"{self.__name__} 的结果无法读取（{type(exc).__name__}）") from None
        raise exc


def _write_back(sent: Any, now: Any) -> None:
    """Apply the kernel's changes to a list or dict argument to the grader's own object."""
    if isinstance(sent, list) and isinstance(now, list):
        sent[:] = now
    elif isinstance(sent, dict) and isinstance(now, dict):
        sent.clear()
        sent.update(now)


# ---------------------------------------------------------------- running one test cell

@dataclass(frozen=True)
class Failure:
    """A failed test cell: the error output's ename and its one diagnostic message."""

    ename: str
    evalue: str


def mentioned_names(source: str) -> set[str]:
    return {node.id for node in ast.walk(ast.parse(source)) if isinstance(node, ast.Name)}


def own_names(source: str) -> set[str]:
    """Names the test source binds with import, def or class (anywhere in it): never the student's."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
    return names


@functools.lru_cache(maxsize=64)
def wanted_names(source: str) -> tuple[str, ...]:
    """The names a test cell may take from the student: what it mentions, less the builtins and its own.
    Worked out once per test source (the judge asks for them at every pass of every student's cell)."""
    return tuple(sorted(mentioned_names(source) - set(PINNED_BUILTINS) - own_names(source)))


def student_names(source: str, snapshot: dict, calls: Calls) -> dict[str, Any]:
    """The snapshot's public names that the source wants (wanted_names), as values and proxies."""
    names: dict[str, Any] = {}
    for name in wanted_names(source):
        entry = snapshot.get(name)
        if name.startswith("_") or entry is None and name not in snapshot:
            continue
        if type(entry) is dict and entry.get("$") == "callable" and type(entry.get("ref")) is int:
            names[name] = Proxy(calls, entry["ref"], name)
        elif type(entry) is dict and entry.get("$") == "module":
            module = str(entry.get("name"))
            names[name] = importlib.import_module(module) if module in SAFE_MODULES else Opaque(module)
        else:
            try:
                names[name] = decode(entry)
            except ReplyError:
                names[name] = Opaque("unreadable")
    return names


def hidden_lines(source: str) -> set[int]:
    """1-based numbers of the lines inside `### BEGIN/END HIDDEN TESTS` (markers included)."""
    lines: set[int] = set()
    for match in HIDDEN_BLOCK.finditer(source):
        first = source.count("\n", 0, match.start()) + 1
        lines.update(range(first, first + match.group(0).count("\n") + 1))
    return lines


TOLERATE = "__coursekit_tolerate__"   # names of the gathering pass's helpers in the test's namespace
UNRESOLVED = "__coursekit_unresolved__"
MAX_TOLERATED = 10_000  # failures one gathering pass steps over (a loop waiting on an unknown result)


class _Tolerant(ast.NodeTransformer):
    """Every statement of the source (in every block) wrapped in `try: ... except (Exception,
    _Unresolved): step over`: the gathering pass goes on past a check that failed on an unknown result."""

    def generic_visit(self, node: ast.AST) -> ast.AST:
        super().generic_visit(node)
        for field in ("body", "orelse", "finalbody"):
            block = getattr(node, field, None)
            if isinstance(block, list) and block and all(isinstance(s, ast.stmt) for s in block):
                setattr(node, field, [self._guarded(s) for s in block])
        return node

    @staticmethod
    def _guarded(statement: ast.stmt) -> ast.stmt:
        if isinstance(statement, (ast.Global, ast.Nonlocal)):
            return statement
        handler = ast.ExceptHandler(
            type=ast.Tuple([ast.Name("Exception", ast.Load()), ast.Name(UNRESOLVED, ast.Load())], ast.Load()),
            name=None, body=[ast.Expr(ast.Call(ast.Name(TOLERATE, ast.Load()), [], []))])
        return ast.copy_location(ast.Try(body=[statement], handlers=[handler], orelse=[], finalbody=[]), statement)


@functools.lru_cache(maxsize=64)
def _compiled(source: str) -> tuple[types.CodeType, types.CodeType]:
    """The test source as it runs (deciding the cell) and as the gathering pass runs it."""
    tree = ast.parse(source, FILENAME)
    tolerant = ast.fix_missing_locations(_Tolerant().visit(tree))
    return compile(source, FILENAME, "exec"), compile(tolerant, FILENAME, "exec")


class _TooManyFailures(BaseException):
    pass


def _tolerate_counter() -> Any:
    count = [0]

    def tolerate() -> None:
        count[0] += 1
        if count[0] > MAX_TOLERATED:
            raise _TooManyFailures
    return tolerate


def run_test_cell(source: str, title: str, snapshot: dict, kernel: Kernel, options: dict | None = None,
                  known: dict[tuple[int, str], list] | None = None) -> Failure | None:
    """Run a test cell's whole source here; None if it passed, else the failure to show.

    Its calls of the student's functions go to the kernel in batches (see Calls): a gathering pass
    runs the source stepping over every statement that fails (mostly on a result not known yet) and
    sends all the calls it made in one request; then the source runs as it is, with those replies.
    That run decides the cell when it needed no reply it did not have; else the two passes repeat.
    `known` holds replies already given for this cell's calls."""
    code, tolerant = _compiled(source)
    calls = Calls(kernel, known)

    def namespace() -> dict:
        return {**student_names(source, snapshot, calls), **(options or {}), "__name__": "__main__",
                "__builtins__": dict(PINNED_BUILTINS), TOLERATE: _tolerate_counter(), UNRESOLVED: _Unresolved}

    while True:
        if calls.passes <= Calls.MAX_PASSES:
            try:
                exec(tolerant, namespace())  # noqa: S102 - the instructor's test source, gathering calls
            except (_Unresolved, _TooManyFailures, GraderAbort, Exception):  # noqa: BLE001 - only gathers
                pass
            if calls.pending:
                calls.send()
            calls.start_pass()
        try:
            exec(code, namespace())  # noqa: S102 - the instructor's test source
            outcome = None
        except _Unresolved:  # ends a speculative pass, whose outcome is never taken
            outcome = Failure(GraderAbort.ename, "内核没有按协议回答")
        except GraderAbort as abort:
            outcome = Failure(abort.ename, f"{_where(source, abort)}{abort.message}")
        except Exception as exc:  # noqa: BLE001 - any failure of the test is the student's 0
            outcome = Failure(type(exc).__name__, _message(source, title, exc))
        if not calls.pending:
            return outcome
        calls.send()
        calls.start_pass()


def _line(source: str, exc: BaseException) -> int | None:
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == FILENAME]
    return frames[-1].lineno if frames else None


def _where(source: str, exc: BaseException) -> str:
    number = _line(source, exc)
    if number is None:
        return ""
    if number in hidden_lines(source):
        return "隐藏检查："
    return f"可见检查 `{source.split(chr(10))[number - 1].strip()}`："


def _message(source: str, title: str, exc: Exception) -> str:
    """The one diagnostic: the test's own message, else which check failed and how."""
    text = str(exc).strip()
    function = getattr(exc, "student_function", None)
    if function is not None:  # raised by the student's code: its message is never shown
        if getattr(exc, "student_blank", False):
            return f"{_where(source, exc)}代码里还有 {BLANK} 没有填写（{function} 抛出 NameError）"
        if text and text != type(exc).__name__:  # the test replaced the message (exc.args = ...)
            return text
        return f"{_where(source, exc)}{function} 抛出 {type(exc).__name__}"
    if isinstance(exc, AssertionError):
        if text:
            return text
        number = _line(source, exc)
        if number is not None and number not in hidden_lines(source):
            return f"{_where(source, exc)}不成立"
        return f"{title}：未通过一项隐藏检查"
    if isinstance(exc, NameError) and getattr(exc, "name", None):
        return f"{exc.name} 没有定义：练习单元格没有运行到定义它的地方（前面出错了？）"
    return f"{_where(source, exc)}{type(exc).__name__}（返回值的类型或结构不对？）"
