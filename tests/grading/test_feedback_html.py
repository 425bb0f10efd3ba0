"""Feedback pages skip nbconvert's BeautifulSoup pass only where it would change nothing but the serialization."""

from __future__ import annotations

import copy

import nbformat
import pytest
from bs4 import BeautifulSoup
from nbconvert.filters.highlight import Highlight2HTML
from nbgrader.converters import GenerateFeedback
from traitlets.config import Config

from coursekit.grading.records.feedback import NO_ALT_TEXT, HighlightOnce, SoupOnlyWhenNeeded, images_have_alt

PNG = "iVBORw0KGgo="


def resources() -> dict:
    return {"nbgrader": {"notebook": "lesson11", "score": 1.0, "max_score": 2.0, "late_penalty": 0}}


def notebook(*extra_cells) -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell(f'Figure: <img src="data:image/png;base64,{PNG}" alt="the curve"> '
                                              "and `x < y` & ![a chart](data:image/png;base64,AAAA)"),
                nbformat.v4.new_code_cell("print('<b>&nbsp;</b>')", outputs=[
                    nbformat.v4.new_output("stream", name="stdout", text="<b>&nbsp;</b> é\n")]),
                *extra_cells]
    return nb


@pytest.fixture(scope="module")
def exporters():
    converter = GenerateFeedback(config=Config())
    plain = converter.exporter_class(config=converter.config)
    ours = type("Ours", (SoupOnlyWhenNeeded, converter.exporter_class), {})(config=converter.config)
    return plain, ours


def test_a_page_whose_images_all_have_alt_text_is_the_same_document_without_the_soup_pass(exporters):
    plain, ours = exporters
    nb = notebook()
    theirs, _ = plain.from_notebook_node(copy.deepcopy(nb), resources=resources())
    mine, _ = ours.from_notebook_node(copy.deepcopy(nb), resources=resources())
    assert mine != theirs  # not re-serialized ...
    assert str(BeautifulSoup(mine, features="html.parser")) == theirs  # ... but the same document
    assert images_have_alt(mine) and NO_ALT_TEXT not in mine


@pytest.mark.parametrize("cell", [
    nbformat.v4.new_code_cell("plot()", outputs=[nbformat.v4.new_output("display_data", data={"image/png": PNG})]),
    nbformat.v4.new_markdown_cell('<img src="data:image/png;base64,AAAA" title="a > b" alt="x">'),
    nbformat.v4.new_markdown_cell("<IMG SRC='data:image/png;base64,AAAA'>"),
], ids=["output image", "'>' in a value", "upper-case tag"])
def test_a_page_with_an_image_that_may_lack_alt_text_gets_nbconverts_own_pass(exporters, cell):
    plain, ours = exporters
    nb = notebook(cell)
    theirs, _ = plain.from_notebook_node(copy.deepcopy(nb), resources=resources())
    mine, _ = ours.from_notebook_node(copy.deepcopy(nb), resources=resources())
    assert mine == theirs


def test_images_have_alt_reads_attributes_not_text():
    assert images_have_alt('<p>no images</p>')
    assert images_have_alt('<img src="a.png" alt="">')
    assert not images_have_alt('<img src="a.png" data-x="alt=1">')
    assert not images_have_alt('<img src="a.png" alt="x"><img src="b.png">')


def test_the_highlighter_kept_for_a_class_gives_nbconverts_html_for_every_call():
    """HighlightOnce (one per class) hands out what it made for an earlier page: each call's HTML is what
    a fresh nbconvert highlighter makes for it, whatever the cell's language and metadata."""
    ours = HighlightOnce(pygments_lexer="ipython3")
    calls = [("x = 1\n%time y = x\n", None, {}), ("x = 1\n%time y = x\n", None, {}),
             ("echo <b>", None, {"magics_language": "bash"}), ("echo <b>", None, {}),
             ("echo <b>", "python", {"magics_language": "bash"}), ("", None, None), ("", None, None),
             ("print(1)", None, ["magics_language"]), ("print(1)", None, {"magics_language": ["bash"]})]
    def outcome(highlight, source, language, metadata):
        try:
            return highlight(source, language, copy.deepcopy(metadata))
        except Exception as exc:  # noqa: BLE001 - a metadata nbconvert cannot read: the same error
            return type(exc)

    for source, language, metadata in [*calls, *calls]:
        fresh = outcome(Highlight2HTML(pygments_lexer="ipython3"), source, language, metadata)
        assert outcome(ours, source, language, metadata) == fresh, (source, language, metadata)
    assert len(ours._html) == 5  # the calls it could keep, each made once
