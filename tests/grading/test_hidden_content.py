"""Issue 30, item 3: graded code is always shown. Metadata that hides a cell's source or outputs is
removed at ingest (intake/ingest.py, show_everything) and the row flagged hidden_content.

Stands in for nbconvert's own behaviour, exported with the real HTMLExporter: its templates drop the
input of a cell whose metadata has `transient.remove_source` (share/jupyter/nbconvert/templates/base/
null.j2, block `any_cell`), which TagRemovePreprocessor sets for `remove_input_tags`
(nbconvert/preprocessors/tagremove.py, preprocess_cell) and whose `remove_cell_tags` drop the whole
cell (check_cell_conditions); formgrader and the feedback pages are nbconvert HTML exports.
"""

from __future__ import annotations

import copy
import html
import re

import nbformat
import pytest
from nbconvert import HTMLExporter
from submission_kinds import _code, k_correct
from traitlets.config import Config

from coursekit.grading.intake.ingest import KEPT_CELL_METADATA, Entry, prepare

CODE_LINE = "var = sum((r - mean) ** 2 for r in rewards) / len(rewards)"  # the exercise cell's answer
HIDING = {  # variant: (cell metadata, hidden by a plain nbconvert export, by Jupyter Book's tag config)
    "transient.remove_source": ({"transient": {"remove_source": True}}, True, True),
    "tag remove-input": ({"tags": ["course-exercise", "remove-input"]}, False, True),
    "tag remove_cell": ({"tags": ["course-exercise", "remove_cell"]}, False, True),
    "tag hide-cell": ({"tags": ["course-exercise", "hide-cell"]}, False, False),
    "jupyter.source_hidden": ({"jupyter": {"source_hidden": True, "outputs_hidden": True}}, False, False),
    "collapsed": ({"collapsed": True, "hide_input": True}, False, False),
}
BOOK_TAGS = Config({"TagRemovePreprocessor": {"enabled": True, "remove_input_tags": {"remove-input", "remove_input"},
                                              "remove_cell_tags": {"remove-cell", "remove_cell"}}})


def exported_text(nb, config: Config | None = None) -> str:
    body, _ = HTMLExporter(config=config or Config()).from_notebook_node(copy.deepcopy(nb))
    return " ".join(html.unescape(re.sub(r"<[^>]+>", "", body)).split())


@pytest.fixture(scope="module")
def solved(released_course):
    return released_course, k_correct(nbformat.read(released_course.release_notebook, as_version=4))


@pytest.mark.parametrize("variant", HIDING)
def test_hiding_metadata_is_removed_at_ingest_and_flagged(solved, variant):
    course, base = solved
    meta, hidden_plain, hidden_book = HIDING[variant]
    nb = copy.deepcopy(base)
    cell = _code(nb)
    cell.metadata.update(copy.deepcopy(meta))
    if "tags" in meta:
        cell.metadata["tags"] = list(meta["tags"])
    # the metadata really hides the code in nbconvert's export, where the variant says it does
    assert (CODE_LINE not in exported_text(nb)) == hidden_plain
    assert (CODE_LINE not in exported_text(nb, BOOK_TAGS)) == hidden_book
    entry = Entry("s1", original=nb)
    prepared = prepare(entry, nbformat.read(course.release_notebook, as_version=4), course.rubric)
    assert CODE_LINE in exported_text(prepared)
    assert CODE_LINE in exported_text(prepared, BOOK_TAGS)
    [flag] = [f for f in entry.flags if f.startswith("hidden_content(")]
    assert variant.split(" ")[-1].split(".")[0] in flag, flag
    kept = _code(prepared).metadata
    assert set(kept) <= KEPT_CELL_METADATA and "course-exercise" in kept.get("tags", [])


def test_an_honest_notebook_is_not_flagged_and_keeps_its_grading_metadata(solved):
    course, base = solved
    nb = copy.deepcopy(base)
    _code(nb).metadata["collapsed"] = False  # old notebooks carry it: not hiding anything
    _code(nb).metadata["scrolled"] = True
    entry = Entry("s1", original=nb)
    prepared = prepare(entry, nbformat.read(course.release_notebook, as_version=4), course.rubric)
    assert not [f for f in entry.flags if f.startswith("hidden_content")]
    assert [c.metadata.get("nbgrader") for c in prepared.cells] == [c.metadata.get("nbgrader") for c in base.cells]


def test_notebook_level_hiding_and_unknown_metadata_are_dropped(solved):
    course, base = solved
    nb = copy.deepcopy(base)
    nb.metadata["hide_input"] = True
    nb.metadata["title"] = "<b>x</b>"
    entry = Entry("s1", original=nb)
    prepared = prepare(entry, nbformat.read(course.release_notebook, as_version=4), course.rubric)
    assert set(prepared.metadata) <= {"kernelspec", "language_info"}
    assert any(f.startswith("hidden_content(notebook: hide_input") for f in entry.flags), entry.flags
