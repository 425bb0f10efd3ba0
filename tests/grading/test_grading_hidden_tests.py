"""The lesson's hidden tests, run the way `coursekit grade` runs them (coursekit.grading.judge.trusted):
each wrong implementation fails with its own message, which names the mistake it made (issue 13,
item 2), and the hidden tests catch what the visible asserts miss (issue 3, item 2).

`LocalKernel` stands in for the sandboxed kernel: the student's code runs in a namespace of this
process, but every value still goes through kernel_side's snapshot/call and the JSON protocol.
"""

from __future__ import annotations

import json
import types

import pytest
from submission_kinds import LESSON

from coursekit.grading.judge import trusted
from coursekit.grading.sandbox import kernel_side
from coursekit.lesson import parse_lesson, strip_answer_markers

HEADER = "import math\n\ndef group_advantages(rewards, eps=1e-8):\n"
EXERCISE = strip_answer_markers(parse_lesson(LESSON).exercise.body)
REFERENCE = EXERCISE.split("\nassert")[0]
BODY = REFERENCE.split("def group_advantages(rewards, eps=1e-8):\n", 1)[1]
SAMPLE = ("本课约定用总体方差（除以 G），不是样本方差（除以 G-1；"
     "verl 与 TRL 的 torch.std 是样本方差，换算见正文“本课的约定”）")

MUTANTS = {
    # name: (implementation, {test cell: its one diagnostic, None where the cell passes})
    "sample variance (n-1) guarded for G=1": (
        BODY.replace("/ len(rewards)\n    std", "/ max(len(rewards) - 1, 1)\n    std"),
        {"normal": SAMPLE, "boundary": SAMPLE}),
    "std == 0 instead of std < eps": (
        BODY.replace("if std < eps:", "if std == 0:"),
        {"normal": None, "boundary": "相同的非零奖励组：浮点误差让 std 略大于 0，组没有归零：要用 std < eps 判断，"
                                     "而不是 std == 0"}),
    "eps ignored": (
        BODY.replace("if std < eps:", "if std < 1e-8:"),
        {"normal": None, "boundary": "方差很小的组：eps 参数没有生效：判断零方差时要用传入的 eps"}),
    "integer zeros": (
        BODY.replace("[0.0] * len(rewards)", "[0] * len(rewards)"),
        {"normal": None, "boundary": "单元素组（G = 1）：零方差分支要返回浮点 0.0，而不是整数 0"}),
    "hard-coded visible outputs": ("""    if not rewards:
        raise ValueError("group cannot be empty")
    known = {(2., 2.): [0.0, 0.0], (1., 2., 3.): [-math.sqrt(1.5), 0., math.sqrt(1.5)],
             (1.,): [0.], (0., 1.): [-1., 1.]}
    return known.get(tuple(rewards), [0.0] * len(rewards))
""", {"normal": "只对题目给出的输入算对，其他输入都不对：不要按输入写死结果，要按公式计算",
      "boundary": "方差很小但高于 eps 的组：被当成了零方差组（返回了全零）；std 不小于 eps 时要标准化"}),
    "negative rewards clipped": (
        "    rewards = [max(r, 0.0) for r in rewards]\n" + BODY,
        {"normal": "含负奖励的组：结果不对；负奖励也要参与标准化（不要截断或取绝对值）", "boundary": None}),
    "small groups only": (
        "    if len(rewards) > 32:\n        return [0.0] * len(rewards)\n" + BODY,
        {"normal": "G = 64 的大组结果不对：代码要对任意大小的组成立", "boundary": None}),
    "input list mutated": (
        "    rewards.sort()\n" + BODY,
        {"normal": "普通的组：修改了传入的 rewards 列表（例如原地排序）；先复制，再计算", "boundary": None}),
    "integer rewards truncated": (
        BODY.replace("return [(r - mean) / std for r in rewards]", "return [(r - mean) / std if isinstance(r, float) "
                     "else int((r - mean) / std) for r in rewards]"),
        {"normal": "整数奖励组：整数奖励的优势要和浮点奖励一样，并且是 float", "boundary": None}),
    "empty group accepted": (
        BODY.replace('raise ValueError("group cannot be empty")', "return []"),
        {"normal": None, "boundary": "空组必须抛出 ValueError：不能返回空列表或零优势"}),
    "divide by the group mean": (
        BODY.replace(BODY[BODY.index("    var = "):BODY.index("\n    std =")], "    var = mean ** 2"),
        {"normal": "普通的组：优势与参考实现不一致（先减组均值，再除以总体标准差）",
         "boundary": "方差很小但高于 eps 的组：结果不对；std 不小于 eps 时要标准化"}),
    "tuple results": (
        BODY.replace("return [(r - mean) / std for r in rewards]", "return tuple((r - mean) / std for r in rewards)"),
        {"normal": "普通的组：要返回 list（普通列表），而不是其他类型的对象",
         "boundary": "方差很小但高于 eps 的组：要返回与组等长的 list（普通列表）"}),
}


ONE_PASS = "    var = sum(r * r for r in rewards) / len(rewards) - mean ** 2"
NEGATIVE_VARIANCE = ("相同的非零奖励组：group_advantages 抛出 ValueError；"
                     "方差按 E[r²] − mean² 计算时会因舍入成为很小的负数，"
                     "math.sqrt 随即报错：先减均值再平方，或把方差截断到 0")
VALID = {
    # name: (implementation, {test cell: its one diagnostic, None where the cell passes}): other ways to
    # fill the blanks. A constant group's advantages count as 0.0 up to rounding (|A| <= 1e-6): the one-pass
    # variance leaves std ~1e-8 there (0.7 * 3: 1.29e-8 >= eps), so it standardises rounding noise to ~1e-8.
    "one-pass variance E[r^2] - mean^2, clamped at 0": (
        BODY.replace(BODY[BODY.index("    var = "):BODY.index("\n    std =")], f"    var = max({ONE_PASS[10:]}, 0.0)"),
        {"normal": None, "boundary": None}),
    "one-pass variance E[r^2] - mean^2, not clamped (negative on 0.1 * 3)": (
        BODY.replace(BODY[BODY.index("    var = "):BODY.index("\n    std =")], ONE_PASS),
        {"normal": None, "boundary": NEGATIVE_VARIANCE}),
    "statistics.pvariance": (
        "    import statistics\n" + BODY.replace(BODY[BODY.index("    var = "):BODY.index("\n    std =")],
                                                "    var = statistics.pvariance(rewards)"),
        {"normal": None, "boundary": None}),
    "numpy var": (
        "    import numpy\n" + BODY.replace(BODY[BODY.index("    var = "):BODY.index("\n    std =")],
                                           "    var = numpy.var(rewards)"),
        {"normal": None, "boundary": None}),
    "zero branch (r - mean) / (std + eps)": (
        BODY.replace("return [0.0] * len(rewards)", "return [(r - mean) / (std + eps) for r in rewards]"),
        {"normal": None, "boundary": "方差很小的组：std < eps 时整组要返回 0.0：零方差分支返回了非零值（例如仍在计算 "
                                     "(r − mean)/(std + eps)）"}),
}


class LocalKernel:
    """trusted.Kernel over a namespace of this process, through kernel_side's snapshot and calls."""

    def __init__(self, namespace: dict) -> None:
        self.namespace = namespace

    def snapshot(self, log: bool = False) -> dict:
        kernel_side._state.update(shell=types.SimpleNamespace(user_ns=self.namespace), refs=[], log=[], snapshots=0)
        return json.loads(kernel_side.snapshot(log).text)

    def calls(self, batch: list[tuple[int, str]]) -> list:
        return [reply.text for reply in kernel_side.calls(10.0, [list(call) for call in batch])]

    def checked(self, reply) -> None:
        pass


def cells() -> dict[str, object]:
    return {t.options["test_id"]: t for t in parse_lesson(LESSON).tests()}


def judge(code: str, show_inputs: bool = False) -> dict[str, trusted.Failure | None]:
    """Run the student's code, then every test cell of the lesson the way the grader does."""
    namespace: dict = {}
    exec(compile(code, "<student>", "exec"), namespace)
    kernel = LocalKernel(namespace)
    return {test_id: trusted.run_test_cell(t.body, t.options["title"], kernel.snapshot(), kernel,
                                           {"_SHOW_HIDDEN_INPUTS": show_inputs})
            for test_id, t in cells().items()}


@pytest.mark.parametrize("name", MUTANTS)
def test_each_wrong_implementation_gets_its_own_diagnostic(name):
    implementation, expected = MUTANTS[name]
    verdicts = judge(HEADER + implementation)
    assert {cell: f and f.evalue for cell, f in verdicts.items() if cell != "aggregation"} == expected


@pytest.mark.parametrize("name", VALID)
def test_each_other_way_to_fill_the_blanks_gets_its_one_verdict(name):
    implementation, expected = VALID[name]
    verdicts = judge(HEADER + implementation)
    assert {cell: f and f.evalue for cell, f in verdicts.items() if cell != "aggregation"} == expected


def test_no_two_mistakes_share_a_diagnostic():
    first = [next(m for m in expected.values() if m) for _, expected in MUTANTS.values()]
    assert len(set(first)) == len(first)


def test_reference_implementation_passes_every_test_cell():
    assert judge(EXERCISE) == {"normal": None, "boundary": None, "aggregation": None}


def test_aggregation_points_need_the_students_cell_to_reach_its_asserts():
    verdicts = judge(HEADER + BODY)  # the function alone: the cell's own asserts never ran
    assert verdicts["aggregation"].evalue.startswith("练习单元格没有运行到长度聚合断言")


def test_hidden_inputs_are_described_by_kind_and_quoted_only_with_the_course_option():
    implementation = "    rewards = [max(r, 0.0) for r in rewards]\n" + BODY
    quiet = judge(HEADER + implementation)["normal"].evalue
    shown = judge(HEADER + implementation, show_inputs=True)["normal"].evalue
    assert quiet == MUTANTS["negative rewards clipped"][1]["normal"] and "[" not in quiet
    assert shown.startswith("含负奖励的组（输入 [-3.0, -1.0, -2.0]）")


def test_what_the_students_code_raised_is_named_by_type_never_by_its_message():
    code = HEADER + "    raise RuntimeError(f'leaked {rewards}')\n"
    verdicts = judge(code)
    assert (verdicts["normal"].ename, verdicts["normal"].evalue) == (
        "RuntimeError", "普通的组：group_advantages 抛出 RuntimeError")
    assert "leaked" not in verdicts["boundary"].evalue
    blank = judge(HEADER + "    return ______\n")["normal"]
    assert blank.ename == "NameError" and "______" in blank.evalue


def test_a_failure_without_its_own_message_names_the_check():
    kernel = LocalKernel({"f": lambda x: x})
    visible = trusted.run_test_cell("assert f(1) == 2", "正常输入", kernel.snapshot(), kernel)
    assert visible == trusted.Failure("AssertionError", "可见检查 `assert f(1) == 2`：不成立")
    hidden = "### BEGIN HIDDEN TESTS\nassert f(3) == 4\n### END HIDDEN TESTS\nassert f(1) == 1"
    assert trusted.run_test_cell(hidden, "正常输入", kernel.snapshot(), kernel) == \
        trusted.Failure("AssertionError", "正常输入：未通过一项隐藏检查")
    missing = trusted.run_test_cell("assert g(1) == 1", "正常输入", kernel.snapshot(), kernel)
    assert missing.ename == "NameError" and missing.evalue.startswith("g 没有定义")


# ---------------------------------------------------------------- the protocol's values

def test_the_students_list_subclass_is_compared_as_a_plain_list():
    code = "class Always(list):\n    __eq__ = lambda self, other: True\nvalue = Always([1.0, 2.0])\nx = 0.5\n"
    namespace: dict = {}
    exec(code, namespace)
    kernel = LocalKernel(namespace)
    names = trusted.student_names("value == [9.0]; x; Always", kernel.snapshot(), kernel)
    assert names["value"] != [9.0] and names["value"] == [1.0, 2.0] and type(names["value"]) is not list
    assert names["x"] == 0.5 and type(names["x"]) is float
    assert isinstance(names["Always"], trusted.Proxy)


def test_arguments_come_back_as_the_function_left_them():
    kernel = LocalKernel({"f": lambda xs: xs.append(4) or len(xs)})
    source = "mine = [1, 2, 3]\nassert f(mine) == 4 and mine == [1, 2, 3, 4]\nassert f(mine) == 5"
    assert trusted.run_test_cell(source, "t", kernel.snapshot(), kernel) is None


class CountingKernel(LocalKernel):
    """LocalKernel that counts its requests and the calls the student's functions see."""

    def __init__(self, namespace: dict) -> None:
        super().__init__(namespace)
        self.requests: list[int] = []

    def calls(self, batch: list[tuple[int, str]]) -> list:
        self.requests.append(len(batch))
        return super().calls(batch)


def test_a_test_cells_calls_go_to_the_kernel_in_batches_each_call_once():
    seen: list = []
    kernel = CountingKernel({"f": lambda x: seen.append(x) or x * 2})
    source = "results = [f(x) for x in range(40)]\nassert results == [2 * x for x in range(40)]\n" \
             "assert f(100) == 200\nassert all(f(x) == 2 * x for x in range(3))"
    assert trusted.run_test_cell(source, "t", kernel.snapshot(), kernel) is None
    assert kernel.requests == [42, 1, 1]  # all but the calls waiting on an earlier result in one request
    assert seen == [*range(40), 100, 0, 1, 2]  # each call of the source once, in its order


def test_the_lessons_checks_take_at_most_three_requests_each_whatever_the_code():
    for name, (body, _) in {"reference": (BODY, None), **MUTANTS}.items():
        namespace: dict = {}
        exec(compile(HEADER + body, "<student>", "exec"), namespace)
        kernel = CountingKernel(namespace)
        for test_id in ("normal", "boundary"):
            kernel.requests.clear()
            trusted.run_test_cell(cells()[test_id].body, test_id, kernel.snapshot(), kernel)
            # one pass gathers the independent calls; a check whose input is an earlier reply adds one
            # (the normal cell's: two), never one per call
            assert sum(kernel.requests) > 20 and len(kernel.requests) <= 3, (name, test_id, kernel.requests)


def test_calls_the_kernels_own_run_made_are_taken_from_its_log_never_run_again():
    from coursekit.lesson import visible_test_code

    namespace: dict = {}
    exec(compile(REFERENCE, "<student>", "exec"), namespace)
    reference = namespace["group_advantages"]
    seen: list = []

    def group_advantages(rewards, eps=1e-8):
        seen.append(list(rewards))
        return reference(rewards, eps)

    namespace["group_advantages"] = group_advantages
    kernel = CountingKernel(namespace)
    for test_id in ("normal", "boundary"):
        body = cells()[test_id].body
        seen.clear()
        snapshot = kernel.snapshot(log=True)
        exec(compile(visible_test_code(body), "<visible>", "exec"), namespace)  # the kernel's run of the cell
        kernel_side._end_logging()
        assert namespace["group_advantages"] is group_advantages  # back in its place after the cell
        in_kernel = len(seen)
        known: dict = {}
        for _, ref, payload, text in json.loads(kernel_side.logged().text):
            known.setdefault((ref, payload), []).append(text)
        assert sum(map(len, known.values())) == in_kernel > 10
        seen.clear()
        kernel.requests.clear()
        assert trusted.run_test_cell(body, test_id, snapshot, kernel, known=known) is None
        hidden = "### END HIDDEN TESTS" in body and len(seen)
        assert sum(kernel.requests) == len(seen) == hidden  # the judge called only what the kernel had not
        assert len(kernel.requests) <= 2


def test_a_stateful_function_sees_the_calls_of_the_source_and_no_other():
    seen: list = []
    kernel = CountingKernel({"f": lambda x: seen.append(x) or len(seen)})
    assert trusted.run_test_cell("assert [f(1), f(1), f(2)] == [1, 2, 3]", "t", kernel.snapshot(), kernel) is None
    assert seen == [1, 1, 2] and kernel.requests == [3]


def test_an_unanswered_or_timed_out_call_fails_the_cell_never_passes_it():
    class Short(LocalKernel):
        def calls(self, batch):
            return super().calls(batch)[:-1]

    short = Short({"f": lambda x: x})
    failure = trusted.run_test_cell("assert f(1) == 1\nassert f(2) == 2", "t", short.snapshot(), short)
    assert failure is not None and failure.ename == "InvalidReply"

    class Slow(LocalKernel):
        def calls(self, batch):
            return [trusted.KernelTimeout("运行超时")]

    slow = Slow({"f": lambda x: x})
    failure = trusted.run_test_cell("x = f(1)\nassert True", "t", slow.snapshot(), slow)
    assert failure == trusted.Failure("CellTimeoutError", "可见检查 `x = f(1)`：运行超时")


def test_a_looping_function_is_stopped_by_the_kernel_side_limit():
    kernel = LocalKernel({"spin": lambda: [None for _ in iter(int, 1)]})
    calls = kernel_side.calls(0.2, [[kernel.snapshot()["spin"]["ref"], '{"args": [], "kwargs": {}}']] * 2)
    assert [json.loads(reply.text) for reply in calls] == [{"timeout": True}]  # and the second call never runs


@pytest.mark.parametrize("reply", [{"$": "nonsense"}, {"$": "sub", "base": "float", "v": "1"}, {"$": "dict", "v": 3},
                                   object()])
def test_a_malformed_reply_is_rejected(reply):
    with pytest.raises(trusted.ReplyError):
        trusted.decode(reply)


def test_opaque_values_equal_nothing():
    value = trusted.decode({"$": "opaque", "type": "numpy.ndarray"})
    assert value != value.__class__("numpy.ndarray") and value != [] and repr(value).startswith("<numpy.ndarray")


# ---------------------------------------------------------------- names the student could bind (issue 23)

HARD_CODED_BODY = MUTANTS["hard-coded visible outputs"][0]
SHADOWS = {
    "zip": "def zip(*args):\n    return []",
    "zip pairs": "def zip(*args):\n    return [(0.0, 0.0)]",
    "abs": "def abs(x):\n    return 0.0",
    "max": "def max(*args, **kwargs):\n    return float('inf')",
    "all": "def all(xs):\n    return True",
    "sum and len": "def sum(xs, start=0):\n    return 0.0\n\ndef len(x):\n    return 0",
    "type": "def type(x):\n    return 'list'",
    "range": "def range(*args):\n    return [0, 1]",
    "float": "def float(x=0.0):\n    return 0.0",
}


@pytest.mark.parametrize("name", SHADOWS)
def test_builtins_defined_by_the_student_are_never_the_judges(name):
    """The judge takes builtins (and the names a cell binds itself) from the grader, pinned at import
    (trusted.PINNED_BUILTINS): hard-coded answers fail whatever the student defines at top level."""
    verdicts = judge(HEADER + HARD_CODED_BODY + "\n\n" + SHADOWS[name] + "\n")
    assert verdicts["normal"] is not None and verdicts["boundary"] is not None
    assert name.split()[0] not in trusted.wanted_names(cells()["normal"].body)


def test_a_patched_builtins_module_in_the_grader_changes_no_verdict(monkeypatch):
    import builtins

    monkeypatch.setattr(builtins, "zip", lambda *args: [])
    monkeypatch.setattr(builtins, "abs", lambda x: 0.0)
    verdicts = judge(HEADER + HARD_CODED_BODY)
    assert verdicts["normal"] is not None and verdicts["boundary"] is not None


def test_globals_of_the_student_never_turn_the_hidden_inputs_on():
    wrong_for_five = HEADER + "    if len(rewards) == 5:\n        return [0.0] * 5\n" + BODY
    verdicts = judge(wrong_for_five + "\n\ndef globals():\n    return {'_SHOW_HIDDEN_INPUTS': True}\n")
    assert verdicts["normal"] is not None and "0.2, 0.9" not in verdicts["normal"].evalue


HOSTILE_VALUES = {
    "float subclass": "type('F', (float,), {'__eq__': lambda s, o: True, '__repr__': lambda s: 'LEAK' + repr(rs),"
                      " '__float__': lambda s: 0.0})(0.0)",
    "list subclass": "type('L', (list,), {'__eq__': lambda s, o: True, '__iter__': lambda s: iter(rs),"
                     " '__repr__': lambda s: 'LEAK' + repr(rs)})(rs)",
    "nan": "[float('nan')] * len(rs)",
    "inf": "[float('inf')] * len(rs)",
    "ndarray": "__import__('numpy').zeros(len(rs))",
    "ndarray subclass": "type('A', (__import__('numpy').ndarray,), {'__eq__': lambda s, o: True})(len(rs))",
}


@pytest.mark.parametrize("name", HOSTILE_VALUES)
def test_hostile_values_pass_nothing_and_quote_nothing(name):
    """Returned values are plain data of the grader's own types: no dunder of the student's ever runs here."""
    code = (HEADER + "    rs = list(rewards)\n    if not rs:\n        raise ValueError('empty')\n"
            f"    return {HOSTILE_VALUES[name]}\n")
    verdicts = judge(code, show_inputs=False)
    assert verdicts["normal"] is not None and verdicts["boundary"] is not None
    assert all("LEAK" not in v.evalue and "0.2, 0.9" not in v.evalue for v in verdicts.values() if v)


# ---------------------------------------------------------------- reply budgets (issue 23)

@pytest.mark.parametrize(("text", "budget"), [
    (json.dumps({"$": "dict", "v": [[i * (2 ** 61 - 1) + 7, 0.0] for i in range(50_000)]}), "colliding"),
    (json.dumps(list(range(trusted.MAX_ITEMS + 1))), "reply items"),
    ("[" * 50 + "]" * 50, "reply depth"),
    (json.dumps("x" * (trusted.MAX_REPLY + 1)), "reply bytes"),
])
def test_a_reply_over_a_budget_is_refused_before_it_costs(text, budget):
    """Each budget is checked in linear time: the 1.5 MB dict of colliding keys (quadratic to build,
    issue 23's 27-56 s reply) is refused after one pass over its hashes."""
    with pytest.raises(trusted.OverBudget, match=budget):
        trusted.decode(trusted.read_reply(text))


def test_brackets_and_commas_inside_strings_are_not_structure():
    text = json.dumps(["[{," * 100_000])
    assert trusted.read_reply(text) == ["[{," * 100_000]
