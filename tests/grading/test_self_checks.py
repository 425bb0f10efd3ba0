"""The student's self-checks predict the grade (issue 25, "Self-checks that predict the grade").

Each wrong `group_advantages` of the kit's catalogue (`WRONG_VARIANTS`: the hidden-test mutants of
test_grading_hidden_tests plus more) either fails a self-check, with a Chinese reason (never a bare
AssertionError), or gets full automatic marks from the grader's own test runner
(`coursekit.grading.judge.trusted.run_test_cell`). The self-checks run as the browser's Check runs them
(assets/runner/runner-worker.js `_course_check`: the student's cell, then each check in the same
namespace, then the given checks) and as `make check` does (one real kernel run below).
"""

from __future__ import annotations

import ast
import dataclasses
import math
import re

import nbformat
import pytest
from submission_kinds import EXERCISE, LESSON, solve
from test_grading_hidden_tests import BODY, HEADER, MUTANTS, REFERENCE, VALID, LocalKernel, cells
from test_grading_hidden_tests import EXERCISE as REFERENCE_CELL

from coursekit.grading.judge import trusted
from coursekit.grading.sandbox import check
from coursekit.lesson import SELF_CHECK_BLOCK, given_checks, missing_given_checks, parse_lesson, visible_test_code

LESSON_PARSED = parse_lesson(LESSON)
CHECKS = LESSON_PARSED.visible_checks()
GIVEN = given_checks(LESSON_PARSED.blank_code)
MISSING = object()
CJK = re.compile(r"[\u4e00-\u9fff]")
GUARD_CHANGED = BODY.replace("if not rewards:", "if len(rewards) == 0:")

# name: implementation (the body of `def group_advantages(rewards, eps=1e-8):`)
WRONG_VARIANTS = {name: implementation for name, (implementation, _) in MUTANTS.items()} | {
    "no eps at all (constant groups found by their set)": BODY.replace("if std < eps:", "if len(set(rewards)) == 1:"),
    "std + eps in the denominator, no zero branch": BODY.replace(
        "    if std < eps:\n        return [0.0] * len(rewards)\n", "").replace("/ std for", "/ (std + eps) for"),
    "eps inside the square root": BODY.replace("math.sqrt(var)", "math.sqrt(var + eps)"),
    "absolute values of the rewards": "    rewards = [abs(r) for r in rewards]\n" + BODY,
    "results sorted": BODY.replace("return [(r - mean) / std for r in rewards]",
                                   "return sorted((r - mean) / std for r in rewards)"),
    "results rounded to 6 places": BODY.replace("return [(r - mean) / std for r in rewards]",
                                                "return [round((r - mean) / std, 6) for r in rewards]"),
    "larger default eps": BODY.replace("if std < eps:", "if std < max(eps, 1e-3):"),
    "mean absolute deviation instead of std": BODY.replace("math.sqrt(var)",
                                                           "sum(abs(r - mean) for r in rewards) / len(rewards)"),
    "integer-divided variance": BODY.replace("/ len(rewards)\n    std", "// len(rewards)\n    std"),
    "empty group raises ZeroDivisionError": BODY.replace('raise ValueError("group cannot be empty")', "pass"),
    "guard rewritten (same behaviour, vetoed)": GUARD_CHANGED,
}


def student_cell(implementation: str) -> str:
    """The exercise cell as a student hands it in: the given asserts kept, the function replaced."""
    return HEADER + implementation + REFERENCE_CELL[len(REFERENCE):]


def compensated_sum(values, start=0):
    """sum() as Python 3.12+ (and so Pyodide, which runs the browser's Check) adds floats: Neumaier's
    compensated summation (CPython Python/bltinmodule.c, builtin_sum_impl), which this 3.11 lacks."""
    total, compensation, floats = start, 0.0, False
    for x in values:
        if isinstance(x, float) or (floats and isinstance(x, int)):
            if not floats:
                total, floats = float(total), True
            t = total + x
            compensation += (total - t) + x if abs(total) >= abs(x) else (x - t) + total
            total = t
        else:
            total = total + x
    return total + compensation if floats and compensation else total


def run_student_cell(code: str, namespace: dict | None = None) -> dict:
    """The names the student's cell leaves, as a kernel keeps them when the cell fails half-way."""
    namespace = {"__name__": "__main__", **(namespace or {})}
    try:
        exec(compile(code, "<你的代码>", "exec"), namespace)
    except Exception:  # noqa: BLE001 - the student's cell failing is reported, the checks still run
        pass
    return namespace


def judge(code: str) -> dict[str, trusted.Failure | None]:
    """Every test cell (hidden tests, self-checks, given asserts) the way `coursekit grade` runs it."""
    kernel = LocalKernel(run_student_cell(code))
    return {test_id: trusted.run_test_cell(t.body, t.options["title"], kernel.snapshot(), kernel)
            for test_id, t in cells().items()}


def judge_without_self_checks(code: str) -> dict[str, trusted.Failure | None]:
    """As `judge`, with the test cells' SELF-CHECKS blocks left out (the hidden tests and given asserts only)."""
    kernel = LocalKernel(run_student_cell(code))
    return {test_id: trusted.run_test_cell(SELF_CHECK_BLOCK.sub("", t.body), t.options["title"], kernel.snapshot(),
                                           kernel) for test_id, t in cells().items()}


def self_check(code: str, namespace: dict | None = None) -> dict[str, str | None]:
    """{check id: None if it passed, else its message} as the browser's Check computes them."""
    namespace = run_student_cell(code, namespace)
    out: dict[str, str | None] = {}
    for c in CHECKS:
        before = {name: namespace.get(name, MISSING) for name in c.own_run}
        try:
            exec(compile(c.code, f"<检查：{c.title}>", "exec"), namespace)
        except Exception as exc:  # noqa: BLE001
            out[c.id] = str(exc) or type(exc).__name__
            continue
        wrong = [name for name, value in before.items() if value is MISSING or value != namespace[name]]
        out[c.id] = f"此项按你自己代码的运行结果计分：{'、'.join(wrong)}" if wrong else None
    gone = missing_given_checks(GIVEN, code)
    out["given_checks"] = "、".join(gone) if gone else None
    return out


def reason(message: str) -> str:
    """A diagnostic without the kind of input it names: the text after the first '：'."""
    return message.split("：", 1)[-1]


def test_the_reference_passes_every_self_check():
    assert self_check(REFERENCE_CELL) == {"normal": None, "boundary": None, "aggregation": None, "given_checks": None}


@pytest.mark.parametrize("name", WRONG_VARIANTS)
def test_each_wrong_variant_fails_a_self_check_or_gets_full_marks(name):
    code = student_cell(WRONG_VARIANTS[name])
    mine = self_check(code)
    failed = {cid: message for cid, message in mine.items() if message}
    if not failed:
        assert all(f is None for f in judge(code).values()), f"{name}: passes every self-check but loses marks"
        return
    for cid, message in failed.items():
        assert CJK.search(message) or cid == "given_checks", f"{name}: {cid} fails without a Chinese reason: {message}"


CATALOGUE = WRONG_VARIANTS | {name: implementation for name, (implementation, _) in VALID.items()}


@pytest.mark.parametrize("name", CATALOGUE)
def test_a_self_check_gives_the_hidden_tests_reason(name):
    """Each test cell fails in Check exactly where the grader fails it, with the same words (the kind of
    input may differ; the reason after it may not) - for every wrong variant and every other way to fill
    the blanks in the catalogue."""
    code = student_cell(CATALOGUE[name])
    hidden = {cid: f and f.evalue for cid, f in judge(code).items()}
    mine = self_check(code)
    for cid, message in hidden.items():
        assert bool(mine[cid]) == bool(message), (cid, mine[cid], message)
        if message and cid != "aggregation":  # scored on the student's own run: the self-check says so in its own words
            assert reason(mine[cid]) == reason(message), (cid, mine[cid], message)


@pytest.mark.parametrize("name", VALID)
def test_other_ways_to_fill_the_blanks_get_one_verdict_from_check_and_grader(name):
    """The catalogue's verdict (test_grading_hidden_tests.VALID) is what Check says and what the grader scores."""
    code = student_cell(VALID[name][0])
    mine = self_check(code)
    assert {cid: mine[cid] and reason(mine[cid]) for cid in VALID[name][1]} == {
        cid: message and reason(message) for cid, message in VALID[name][1].items()}


def test_the_vetoed_guard_change_is_named_by_a_self_check_and_by_the_grader():
    code = student_cell(GUARD_CHANGED)
    assert all(f is None for f in judge(code).values())  # full automatic marks, yet the rubric vetoes it
    assert self_check(code)["given_checks"] == "if not rewards:"
    nb = solve(nbformat.read(EXERCISE, as_version=4), answers=False)
    cell = next(c for c in nb.cells if c.cell_type == "code" and "def group_advantages" in c.source)
    cell.source = cell.source.replace("if not rewards:", "if len(rewards) == 0:")
    report = check.check_notebook(nb, CHECKS, 20, GIVEN)
    assert not report.ok and all(report.passed.values())
    line = next(line for line in report.lines if "题目给出的检查" in line)
    assert "`if not rewards:`" in line and "一票否决" in line


def test_exit_in_the_last_cell_leaves_every_check_its_verdict():
    """`exit()` in the student's last cell (submission kind exit_at_end): IPython stops the kernel's loop
    0.1 s after it, so which checks still ran used to depend on how fast they came. Each check here first
    waits longer than that in the kernel, which made the second check meet a kernel that had exited; the
    grader judges before such a cell, so every check must run and pass."""
    nb = solve(nbformat.read(EXERCISE, as_version=4), answers=False)
    nb.cells.append(nbformat.v4.new_code_cell("exit()"))
    slow = [dataclasses.replace(c, code="__import__('time').sleep(0.3)\n" + c.code) for c in CHECKS]
    report = check.check_notebook(nb, slow, 20, GIVEN)
    assert report.passed == dict.fromkeys((c.id for c in CHECKS), True), report.lines
    assert report.ok, report.lines


def _literal_groups(code: str) -> set[str]:
    """Every group of rewards written in `code` (a list of numbers, also as `[x] * n`; not an expected
    result, compared with `==` or zipped with one), evaluated and repr'd."""
    tree = ast.parse(code)
    skip = {id(n) for node in ast.walk(tree) if isinstance(node, ast.BinOp) for n in (node.left, node.right)}
    skip |= {id(n) for node in ast.walk(tree) if isinstance(node, ast.Compare) for n in node.comparators}
    skip |= {id(n) for node in ast.walk(tree) if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "zip"
             for n in node.args}  # expected results, not inputs
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.List | ast.BinOp) and id(node) not in skip:
            try:
                value = eval(compile(ast.Expression(node), "<groups>", "eval"), {"__builtins__": {}})  # noqa: S307
            except Exception:  # noqa: BLE001 - not a literal group
                continue
            if isinstance(value, list) and value and all(isinstance(v, int | float) for v in value):
                found.add(repr([float(v) for v in value]))
    return found


def test_self_checks_use_inputs_of_their_own():
    """Same kinds as the hidden tests, other inputs: no literal group of a self-check is a hidden one."""
    for cell in LESSON_PARSED.tests():
        hidden = cell.body.split("### BEGIN HIDDEN TESTS", 1)[-1].split("### END HIDDEN TESTS", 1)[0]
        block = SELF_CHECK_BLOCK.search(visible_test_code(cell.body))
        if block is None:
            continue
        visible = _literal_groups(LESSON_PARSED.exercise.body)  # the seed's own asserts: public inputs
        shared = (_literal_groups(hidden) & _literal_groups(block.group(0))) - visible
        assert not shared, (cell.options["test_id"], shared)
        code = {line.strip() for line in hidden.split("\n") if len(line.strip()) > 20
                and not line.strip().startswith(('"', 'f"', "'", "#"))}  # as test_grading_attacks reads them
        assert not [line for line in code if line in block.group(0)], "a hidden test's code line is shown"
        assert "random.Random(11)" not in block.group(0)  # the hidden tests' seed


@pytest.mark.parametrize("name", WRONG_VARIANTS)
def test_the_self_checks_cost_no_point_the_hidden_tests_would_give(name):
    """The self-check blocks also run in the grader: they fail a cell only where its hidden tests do."""
    code = student_cell(WRONG_VARIANTS[name])
    with_self_checks = {cid: f is None for cid, f in judge(code).items()}
    assert with_self_checks == {cid: f is None for cid, f in judge_without_self_checks(code).items()}


@pytest.mark.parametrize("name", CATALOGUE)
def test_check_says_the_same_whichever_way_sum_adds_floats(name):
    """The browser's Check runs in Pyodide, whose sum() compensates (Python 3.12+); the grader's Python may
    add plainly. Every self-check input gives the same verdict and reason either way (a constant group
    whose one-pass variance is negative only under plain addition made the two disagree)."""
    code = student_cell(CATALOGUE[name])
    assert self_check(code, {"sum": compensated_sum}) == self_check(code)


def test_compensated_sum_is_the_exact_sum_where_plain_addition_rounds():
    assert compensated_sum([0.1] * 10) == 1.0 != sum([0.1] * 10)
    assert compensated_sum([0.35] * 6) == math.fsum([0.35] * 6) != sum([0.35] * 6)
    assert compensated_sum([1, 2, 3]) == 6 and type(compensated_sum([1, 2, 3])) is int and compensated_sum([]) == 0
