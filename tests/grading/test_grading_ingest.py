"""Finding and reading submissions: layouts, student ids, several notebooks, broken files, zips."""

from __future__ import annotations

import copy
import json
import os
import zipfile

import nbformat
import pytest
from grading_support import make_course

from coursekit.errors import CourseError
from coursekit.grading.intake.ingest import find_candidates, read_notebook, restore_missing_cells, select_notebook
from coursekit.grading.judge import flags as F
from coursekit.grading.records.report import Row


@pytest.fixture
def course(tmp_path):
    return make_course(tmp_path / "course")


def write(path, data: bytes = b"{}", mtime: int | None = None):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    if mtime:
        os.utime(path, (mtime, mtime))
    return path


def test_flat_nested_and_mixed_layouts_map_to_student_ids(course, tmp_path):
    subs = tmp_path / "subs"
    write(subs / "alice.ipynb")
    write(subs / "bob" / "whatever.ipynb")
    write(subs / "bob" / ".ipynb_checkpoints" / "whatever-checkpoint.ipynb")
    write(subs / "carol.IPYNB")
    write(subs / "notes.txt")
    write(subs / "__MACOSX" / "._alice.ipynb")
    found = find_candidates(course, subs)
    assert sorted(found) == ["alice", "bob", "carol", "notes"]  # notes.txt: a row saying why it is not graded
    assert [c.label for c in found["bob"]] == ["bob/whatever.ipynb"]


NOTEBOOK = json.dumps(nbformat.v4.new_notebook()).encode()


def test_the_newest_of_several_notebooks_is_graded_and_flagged(tmp_path, course):
    subs = tmp_path / "subs"
    write(subs / "dave" / "b_old.ipynb", NOTEBOOK, mtime=1_600_000_000)
    write(subs / "dave" / "a_new.ipynb", NOTEBOOK, mtime=1_700_000_000)
    entry = select_notebook("dave", find_candidates(course, subs)["dave"])
    assert entry.source == "dave/a_new.ipynb"
    assert F.flag_name(entry.flags[0]) == F.MULTIPLE_NOTEBOOKS


def test_an_unreadable_newer_upload_loses_to_the_readable_older_one_with_a_note(tmp_path, course):
    subs = tmp_path / "subs"
    write(subs / "dave" / "first.ipynb", NOTEBOOK, mtime=1_600_000_000)
    write(subs / "dave" / "second.ipynb", b'{"cells": [', mtime=1_700_000_000)
    entry = select_notebook("dave", find_candidates(course, subs)["dave"])
    assert entry.source == "dave/first.ipynb" and entry.original is not None
    assert entry.flags == [F.flag(F.MULTIPLE_NOTEBOOKS, "2 found, graded the newest readable dave/first.ipynb, "
                                  "dave/second.ipynb: not valid JSON (line 1)")]


@pytest.mark.parametrize("name, data, reason", [
    ("erin.py", b"def group_advantages(r):\n    return r\n", "erin.py: not a notebook (.py file)"),
    ("erin.pdf", b"%PDF-1.7\n%\xe2\xe3\n", "erin.pdf: not a notebook (.pdf file)"),
    ("erin.txt", NOTEBOOK, "erin.txt: a notebook saved as .txt, rename it to .ipynb to grade it"),
    ("erin.ipynb.txt", NOTEBOOK, "erin.ipynb.txt: a notebook saved as .txt"),
    ("erin/hw.py", b"x = 1\n", "erin/hw.py: not a notebook (.py file)"),
    ("erin/hw.ipynb.txt", NOTEBOOK, "erin/hw.ipynb.txt: a notebook saved as .txt"),
])
def test_a_foreign_upload_is_a_row_with_the_reason(tmp_path, course, name, data, reason):
    subs = tmp_path / "subs"
    write(subs / "frank.ipynb", NOTEBOOK)
    write(subs / name, data)
    found = find_candidates(course, subs)
    assert sorted(found) == ["erin", "frank"]
    entry = select_notebook("erin", found["erin"])
    assert not entry.original and F.flag_name(entry.flags[0]) == F.INVALID_NOTEBOOK and reason in entry.flags[0]


@pytest.mark.parametrize("layout", [{}, {"a/notes.txt": b"x"}, {"a.pdf": b"%PDF"}, {"a/b/": None}])
def test_a_folder_without_any_notebook_is_a_one_line_error(tmp_path, course, layout):
    subs = tmp_path / "subs"
    subs.mkdir()
    for name, data in layout.items():
        (subs / name).mkdir(parents=True) if data is None else write(subs / name, data)
    with pytest.raises(CourseError, match=r"subs: no \.ipynb file in it .*nothing was graded or overwritten"):
        find_candidates(course, subs)


@pytest.mark.parametrize("name", ["Bad Name!", "../etc", ".hidden", "名字", "a" * 65])
def test_names_outside_the_student_id_rule_are_flagged_not_graded(name):
    entry = select_notebook(name, [])
    assert [F.flag_name(f) for f in entry.flags] == [F.UNKNOWN_STUDENT_ID] and not entry.gradable


@pytest.mark.parametrize("data, problem", [
    (b"", "empty file"),
    (b"   \n", "empty file"),
    (b'{"cells": [', "not valid JSON"),
    (b"\xff\xfe\x00", "not UTF-8"),
    (b'{"hello": 1}', "not a Jupyter notebook"),
    (b'{"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [{"cell_type": "code"}]}',
     "not a valid notebook"),
])
def test_broken_files_are_reported_with_the_reason(tmp_path, data, problem):
    notebook, reason = read_notebook(write(tmp_path / "x.ipynb", data))
    assert notebook is None and problem in reason


def test_duplicate_cell_ids_are_made_unique_the_same_way_every_time(tmp_path):
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("1"), nbformat.v4.new_code_cell("2")])
    nb.cells[1].id = nb.cells[0].id
    path = tmp_path / "dup.ipynb"
    path.write_text(json.dumps(nb))
    first, _ = read_notebook(path)
    second, _ = read_notebook(path)
    assert len({c.id for c in first.cells}) == 2
    assert [c.id for c in first.cells] == [c.id for c in second.cells]


def test_deleted_test_cells_go_back_after_the_cell_before_them(released_course):
    release = nbformat.read(released_course.release_notebook, as_version=4)
    nb = copy.deepcopy(release)
    ids = [c.metadata.get("nbgrader", {}).get("grade_id") for c in nb.cells]
    nb.cells = [c for c, gid in zip(nb.cells, ids, strict=True) if gid not in ("test_normal", "test_boundary")]
    assert restore_missing_cells(nb, release) == ["test_normal", "test_boundary"]
    assert [c.metadata.get("nbgrader", {}).get("grade_id") for c in nb.cells] == ids


def test_zip_members_outside_the_archive_are_skipped(course, tmp_path):
    archive = tmp_path / "class.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("erin.ipynb", "{}")
        zf.writestr("../evil.ipynb", "{}")
        zf.writestr("frank/hw.ipynb", "{}")
    found = find_candidates(course, archive)
    assert sorted(found) == ["../evil.ipynb", "erin", "frank"]  # the unsafe member: a row naming it
    assert found["frank"][0].label == "class.zip:frank/hw.ipynb"
    assert found["../evil.ipynb"][0].path is None
    assert not (tmp_path / "evil.ipynb").exists() and not (course.ingest_dir / "evil.ipynb").exists()


def test_a_path_that_is_neither_folder_nor_zip_is_a_one_line_error(course, tmp_path):
    with pytest.raises(CourseError, match="not a folder or a .zip"):
        find_candidates(course, write(tmp_path / "x.ipynb"))
    with pytest.raises(CourseError, match="no such file"):
        find_candidates(course, tmp_path / "missing")


def test_a_zip_of_a_folder_is_read_inside_that_folder(course, tmp_path):
    archive = tmp_path / "subs.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("subs/jane.ipynb", "{}")
        zf.writestr("subs/kyle/hw.ipynb", "{}")
        zf.writestr("__MACOSX/subs/._jane.ipynb", "")
    found = find_candidates(course, archive)
    assert sorted(found) == ["jane", "kyle"]
    assert found["kyle"][0].label == "subs.zip:subs/kyle/hw.ipynb"


def test_a_rejected_name_cannot_become_a_spreadsheet_formula(course):
    entry = select_notebook("=HYPERLINK(x)", [])
    row = Row(entry.student_id, course.rubric, flags=entry.flags)
    assert row.as_csv()["student_id"] == "'=HYPERLINK(x)" and row.passed == "no"
