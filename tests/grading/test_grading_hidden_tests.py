"""The lesson's hidden tests catch what its visible asserts miss (issue 3, item 2).

Each wrong implementation fails the hidden part of its test cell on its own; all but the sample
variance one also pass every visible check (the seed's [1, 2, 3] example already exposes n-1).
"""

from __future__ import annotations

import pytest
from submission_kinds import LESSON

from coursekit.lesson import parse_lesson, strip_answer_markers, visible_test_code

HEADER = "import math\n\ndef group_advantages(rewards, eps=1e-8):\n"
REFERENCE = strip_answer_markers(parse_lesson(LESSON).exercise.body).split("\nassert")[0]
BODY = REFERENCE.split("def group_advantages(rewards, eps=1e-8):\n", 1)[1]

MUTANTS = {
    # name: (test cell whose hidden part must fail, implementation)
    "sample variance (n-1) guarded for G=1": ("normal", BODY.replace(
        "/ len(rewards)\n    std", "/ max(len(rewards) - 1, 1)\n    std")),
    "std == 0 instead of std < eps": ("boundary", BODY.replace("if std < eps:", "if std == 0:")),
    "eps ignored": ("boundary", BODY.replace("if std < eps:", "if std < 1e-8:")),
    "integer zeros": ("boundary", BODY.replace("[0.0] * len(rewards)", "[0] * len(rewards)")),
    "hard-coded visible outputs": ("normal", """    if not rewards:
        raise ValueError("group cannot be empty")
    known = {(2., 2.): [0.0, 0.0], (1., 2., 3.): [-math.sqrt(1.5), 0., math.sqrt(1.5)],
             (1.,): [0.], (0., 1.): [-1., 1.]}
    return known.get(tuple(rewards), [0.0] * len(rewards))
"""),
    "negative rewards clipped": ("normal", "    rewards = [max(r, 0.0) for r in rewards]\n" + BODY),
    "small groups only": ("normal", "    if len(rewards) > 32:\n        return [0.0] * len(rewards)\n" + BODY),
    "input list mutated": ("normal", "    rewards.sort()\n" + BODY),
    "integer rewards truncated": ("normal", BODY.replace(
        "return [(r - mean) / std for r in rewards]", "return [(r - mean) / std if isinstance(r, float) "
        "else int((r - mean) / std) for r in rewards]")),
}


VISIBLE_CATCHES = {"sample variance (n-1) guarded for G=1"}


def cells_by_id() -> dict[str, str]:
    return {t.options["test_id"]: t.body for t in parse_lesson(LESSON).tests()}


def hidden_part(body: str) -> str:
    return "import math\n" + body.split("### BEGIN HIDDEN TESTS\n", 1)[1].split("### END HIDDEN TESTS")[0]


def run(code: str, implementation: str) -> None:
    exec(compile(HEADER + implementation + "\n" + code, "<test>", "exec"), {})


@pytest.mark.parametrize("name", MUTANTS)
def test_hidden_tests_catch_what_the_visible_ones_miss(name):
    cell, implementation = MUTANTS[name]
    body = cells_by_id()[cell]
    if name not in VISIBLE_CATCHES:
        run(visible_test_code(body), implementation)  # the visible asserts pass ...
    with pytest.raises(AssertionError):  # ... the hidden ones fail
        run(hidden_part(body), implementation)


def test_reference_implementation_passes_every_test_cell():
    namespace: dict = {}
    exec(compile(strip_answer_markers(parse_lesson(LESSON).exercise.body), "<exercise>", "exec"), namespace)
    for body in cells_by_id().values():  # in the kernel the test cells run after the student's cell
        exec(compile(body, "<test>", "exec"), namespace)


def test_aggregation_points_need_the_students_cell_to_reach_its_asserts():
    with pytest.raises(AssertionError, match="没有运行到长度聚合断言"):
        run(cells_by_id()["aggregation"], BODY)  # function defined, but the cell's asserts never ran
