"""Issue 30, item 4: an output's metadata gives a page no attribute. Exported with nbconvert's real
HTMLExporter, whose templates write an image's `width`/`height` metadata unquoted into the <img> tag and
turn `unconfined` / `needs_background` into classes and `filenames` into its src (templates
lab/base.html.j2 and classic/base.html.j2, blocks data_png / data_jpg, through the `get_metadata`
filter, nbconvert/filters/metadata.py, which reads metadata[mime][key] before metadata[key])."""

from __future__ import annotations

import copy

import nbformat
import pytest
from bs4 import BeautifulSoup
from nbconvert import HTMLExporter

from coursekit.grading.preprocessors import has_active_content, sanitize_output

PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
HOSTILE = {
    "unquoted width": {"image/png": {"width": "1 onerror=alert(1)"}},
    "quoted width": {"width": '1" onerror="alert(1)'},
    "style height": {"height": "1 style=position:fixed;inset:0;z-index:9"},
    "unconfined": {"unconfined": True, "needs_background": "dark"},
    "filenames": {"filenames": {"image/png": "x onerror=alert(1)"}},
    "nested junk": {"image/png": {"width": [1], "height": {"a": 1}, "onload": "x"}, "jupyter": {"x": 1}},
}
TEMPLATES = ("lab", "classic")


def page(metadata: dict, template: str) -> BeautifulSoup:
    cell = nbformat.v4.new_code_cell("x")
    cell.outputs = [nbformat.v4.new_output("display_data", data={"image/png": PNG}, metadata=copy.deepcopy(metadata))]
    nb = nbformat.v4.new_notebook(cells=[cell])
    for output in cell.outputs:
        sanitize_output(output)
    body, _ = HTMLExporter(template_name=template).from_notebook_node(nb)
    return BeautifulSoup(body, "html.parser")


def raw_page(metadata: dict, template: str) -> BeautifulSoup:
    cell = nbformat.v4.new_code_cell("x")
    cell.outputs = [nbformat.v4.new_output("display_data", data={"image/png": PNG}, metadata=copy.deepcopy(metadata))]
    body, _ = HTMLExporter(template_name=template).from_notebook_node(nbformat.v4.new_notebook(cells=[cell]))
    return BeautifulSoup(body, "html.parser")


def the_image(soup: BeautifulSoup):
    [img] = [i for i in soup.find_all("img") if PNG[:30] in i.get("src", "") or "onerror" in str(i)
             or i.get("src", "").startswith("x")]
    return img


@pytest.mark.parametrize("template", TEMPLATES)
@pytest.mark.parametrize("kind", HOSTILE)
def test_hostile_image_metadata_leaves_no_attribute(kind, template):
    before = the_image(raw_page(HOSTILE[kind], template))
    assert set(before.attrs) - {"src", "alt"} or before.get("class") or not before["src"].startswith("data:") \
        or kind == "nested junk"  # the metadata does reach the tag when not sanitised
    img = the_image(page(HOSTILE[kind], template))
    assert img["src"] == f"data:image/png;base64,{PNG}"
    assert set(img.attrs) <= {"src", "class", "alt"} and not img.get("class"), img.attrs  # alt: nbconvert's own


@pytest.mark.parametrize("template", TEMPLATES)
def test_numeric_sizes_are_kept(template):
    img = the_image(page({"image/png": {"width": 320, "height": 200.5}, "width": 10}, template))
    assert (img["width"], img["height"]) == ("320", "200.5")


@pytest.mark.parametrize("value", [True, 0, -5, float("nan"), float("inf"), 10**9, "320", None])
def test_only_finite_positive_numbers_are_sizes(value):
    output = nbformat.v4.new_output("display_data", data={"image/png": PNG},
                                    metadata={"width": value, "image/png": {"height": value}})
    assert sanitize_output(output).metadata == {}


def test_hostile_metadata_counts_as_active_content():
    cell = nbformat.v4.new_code_cell("x")
    cell.outputs = [nbformat.v4.new_output("display_data", data={"image/png": PNG},
                                           metadata=HOSTILE["unquoted width"])]
    assert has_active_content(cell)
    cell.outputs[0].metadata = {"image/png": {"width": 3}}
    assert not has_active_content(cell)
