"""kernel_side.transform_cell_quickly: a grading kernel skips IPython's tokenizer pass on cells in which no
token transformer can find anything, and otherwise gives exactly what IPython's own
TransformerManager.transform_cell gives (the real IPython of this environment, called side by side)."""

from __future__ import annotations

import glob

import nbformat
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from IPython.core import inputtransformer2 as it
from IPython.core.inputtransformer2 import TransformerManager

from coursekit.grading.sandbox.kernel_side import transform_cell_quickly

REPO_NOTEBOOKS = ["autograder/source/*/*.ipynb", "autograder/release/*/*.ipynb", "solutions/*.ipynb",
                  "exercises/*.ipynb"]
# pieces of Python and of IPython's syntax, joined at random: magics, shell escapes, help, autocall escapes,
# prompts, continuations, strings, brackets
PIECES = ["x", " = ", "==", "!=", "!", "%", "%%time\n", "%time ", "?", "??", ",", ";", "/", "\\\n", "\n", "    ",
          "(", ")", "[", "]", '"', "'", '"""', "#", ">>> ", "... ", "In [1]: ", "print(x)", "a", "1", ":", "\t",
          "if x:\n", "ls", "f a b", "=!", "= %"]


def both(cell: str) -> tuple[object, object]:
    """(IPython's result, the quick one's) for `cell`; an exception stands for its type."""
    results = []
    for run in (lambda m: TransformerManager.transform_cell(m, cell),
                lambda m: transform_cell_quickly(m, cell, TransformerManager.transform_cell)):
        try:
            results.append(run(TransformerManager()))
        except Exception as exc:  # noqa: BLE001 - compared by type
            results.append(type(exc))
    return results[0], results[1]


def lesson_cells() -> list[str]:
    cells = []
    for pattern in REPO_NOTEBOOKS:
        for path in sorted(glob.glob(pattern)):
            cells += [c.source for c in nbformat.read(path, as_version=4).cells if c.cell_type == "code"]
    return cells


def test_the_lessons_cells_are_transformed_as_ipython_does_without_the_tokenizer(monkeypatch) -> None:
    cells = lesson_cells()
    assert len(cells) >= 10, "the generated notebooks are missing: run make"
    for cell in cells:
        expected, quick = both(cell)
        assert quick == expected, cell[:200]
    tokenized = []
    make_tokens = it.make_tokens_by_line
    monkeypatch.setattr(it, "make_tokens_by_line", lambda lines: tokenized.append(lines) or make_tokens(lines))
    for cell in cells:
        transform_cell_quickly(TransformerManager(), cell, TransformerManager.transform_cell)
    assert tokenized == [], f"{len(tokenized)} of the lesson's {len(cells)} code cells were tokenized"


@pytest.mark.parametrize("cell", ["x = %time 1", "x = !ls", "%ls", "!ls", "x?", "?x", ",f a b", ";f a b", "/f a b",
                                  "%%time\nx = 1", "x = \\\n  %time 1", "if x:\n    %ls\n", "y = (x !=\n 1)\n!ls",
                                  ">>> x = 1", "In [1]: x = %time 1"])
def test_ipython_syntax_is_transformed_as_ipython_does(cell: str) -> None:
    expected, quick = both(cell)
    assert quick == expected
    assert expected != cell + "\n" or cell.startswith((">>>", "In ["))


def test_a_manager_with_other_token_transformers_gets_ipythons_whole_path() -> None:
    class Upper(it.TokenTransformBase):
        @classmethod
        def find(cls, tokens_by_line):
            return cls((1, 0)) if tokens_by_line and tokens_by_line[0] and tokens_by_line[0][0].string == "x" \
                else None

        def transform(self, lines):
            return [lines[0].upper(), *lines[1:]]

    manager = TransformerManager()
    manager.token_transformers.append(Upper)
    assert transform_cell_quickly(manager, "x = 1", TransformerManager.transform_cell) == "X = 1\n"


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(PIECES), max_size=14).map("".join))
@example("x = 1 % 2\ny = x != 3\n")
@example("s = '''\n/ not a line start\n'''")
def test_any_text_is_transformed_as_ipython_does(cell: str) -> None:
    expected, quick = both(cell)
    assert quick == expected, repr(cell)
