"""Issue 30, item 1: one student's failure is that student's row, never the class's.

One class: two honest students around crafted ones. Three change a test cell's nbgrader metadata, which
on cb8ce7d stopped the class inside nbgrader's OverwriteCells (nbgrader/preprocessors/overwritecells.py,
preprocess_cell: "Inconsistent checksums" when nbgrader.utils.compute_checksum, which hashes the source
AND the solution/grade/points flags, cannot be restored; float() of a text `points`) or its schema check
(MetadataValidator.validate_cell, SchemaTooNewError): ingest now puts the release's metadata back and
grades their code. The judge's OverBudget (a BaseException) decoding a student's value whose dict keys
collide is the failure of the check that reads it and that student's over_budget flag. Grading workers
that die or send bytes that do not unpickle in the middle of a student fail behind the boundary.
`coursekit grade` exits 0 with a CSV, the honest students keep their scores, each failing student has
its own row with a one-line reason. (The boundary around nbgrader's own steps is driven by the fuzzer's
cheap layer, test_notebook_fuzz.py.)
"""

from __future__ import annotations

import copy
import html
import json
import multiprocessing
import os
import re
import time

import nbformat
import pytest
from attack_kinds import RAW
from bs4 import BeautifulSoup
from grading_support import CELL_TIMEOUT, fresh_copy, read_rows
from submission_kinds import _code, _extra, k_correct, solve

from coursekit.cli import main
from coursekit.grading.boundary import MAX_REASON, StudentStep
from coursekit.grading.sandbox import pool

pytestmark = pytest.mark.slow
HONEST = ("a00_honest", "z99_honest")
KILLED, GARBLED = "b02_worker_killed", "b01_worker_garbled"  # on the two forked workers (ids sort)
COLLIDING = "m04_colliding_keys"


def _test_cell(nb, grade_id: str):
    return next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id)


def solution_flag_on_test_cell(nb):
    k_correct(nb)
    _test_cell(nb, "test_normal").metadata.nbgrader["solution"] = True  # checksum no longer restorable
    return nb


def points_as_text(nb):
    k_correct(nb)
    _test_cell(nb, "test_boundary").metadata.nbgrader["points"] = "lots"  # float("lots") in OverwriteCells
    return nb


def schema_too_new(nb):
    k_correct(nb)
    _test_cell(nb, "test_aggregation").metadata.nbgrader["schema_version"] = 99
    return nb


def colliding_keys(nb):
    """`ratios` (a name test_aggregation reads from the student's answer cell, as that cell left it) sent
    raw as a dict whose keys share a hash: set at the end of the answer cell itself, since the judge
    takes plain data from the answer cell's run (a later cell's value never reaches it)."""
    solve(nb)
    _code(nb).source += "\n" + RAW + "ratios = Raw([{'$': 'dict', 'v': [[i * (2 ** 61 - 1) + 7, 0.0] " \
                                     "for i in range(8000)]}])\n"
    return nb


CRAFTED = {"m01_solution_test": solution_flag_on_test_cell, "m02_points_text": points_as_text,
           "m03_schema_too_new": schema_too_new, COLLIDING: colliding_keys,
           KILLED: k_correct, GARBLED: k_correct}
REPAIRED = ("m01_solution_test", "m02_points_text", "m03_schema_too_new")  # put back at ingest, graded
EXPECTED = {  # student: text in the one flag that says why it has no points
    KILLED: "error(grader could not run the notebook: the grading worker ",  # died, or its pipe broke
    GARBLED: "error(grader could not run the notebook: the grading worker disconnected (UnpicklingError",
}


HIDDEN_CODE, IMAGE_MARKUP = "m07_hidden_code", "m08_image_markup"
CODE_LINE = "var = sum((r - mean) ** 2 for r in rewards) / len(rewards)"
PNG = ("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==")
IMAGE_METADATA = {"width": '1" onerror="window.__ck=1', "unconfined": True, "needs_background": "light",
                  "image/png": {"width": "1 onerror=window.__ck=1", "height": "1 style=position:fixed;inset:0"},
                  "filenames": {"image/png": "x onerror=window.__ck=1"}}


def hidden_code(nb):
    """Right code whose exercise cell hides its source in nbconvert's export and in JupyterLab."""
    k_correct(nb)
    _code(nb).metadata.update({"transient": {"remove_source": True}, "jupyter": {"source_hidden": True}})
    _code(nb).metadata["tags"] = [*_code(nb).metadata.get("tags", []), "remove-input"]
    return nb


def image_markup(nb):
    """Right code that displays an image whose metadata carries attributes for the page."""
    k_correct(nb)
    _extra(nb, _code(nb), "from IPython.display import display\n"
                          f"display({{'image/png': {PNG!r}}}, raw=True, metadata={IMAGE_METADATA!r})\n")
    return nb


SHOWN = {HIDDEN_CODE: hidden_code, IMAGE_MARKUP: image_markup}


class _Pipe:
    """A worker's end of its pipe that, for the chosen students, kills the worker or garbles its reply as
    it starts them. A worker reads tasks as they come, while it runs one (pool._serve), so a chosen
    student read while another runs acts once the running student's result is sent."""

    def __init__(self, conn):
        self.conn = conn
        self.running = False  # a task was read whose result has not been sent
        self.chosen: str | None = None  # a chosen student read ahead

    def _act(self, sid: str) -> None:
        if sid == KILLED:
            os._exit(9)  # a worker that dies in the middle of a student
        self.conn.send_bytes(b"\x80\x04not a pickle")  # a reply the grader cannot read, from a live worker
        time.sleep(600)  # the grader stops it

    def recv(self):
        task = self.conn.recv()
        if task and task[0] in (KILLED, GARBLED):
            if not self.running:
                self._act(task[0])
            self.chosen = task[0]
        self.running = self.running or bool(task)
        return task

    def send(self, item):
        self.conn.send(item)
        if self.chosen:
            self._act(self.chosen)


@pytest.fixture(scope="module")
def bounded_class(released_course, tmp_path_factory, request):
    course = fresh_copy(released_course, tmp_path_factory.mktemp("boundary") / "course")
    folder = tmp_path_factory.mktemp("boundary-lms")
    base = nbformat.read(course.release_notebook, as_version=4)
    for sid in HONEST:
        (folder / f"{sid}.ipynb").write_text(json.dumps(k_correct(copy.deepcopy(base))), encoding="utf-8")
    for sid, build in {**CRAFTED, **SHOWN}.items():
        (folder / f"{sid}.ipynb").write_text(json.dumps(build(copy.deepcopy(base))), encoding="utf-8")
    serve, start = pool._serve, pool.LocalWorkers._start

    def forked_with_pipe(self, method):
        """The first workers (forked) read through _Pipe; those the pool spawns after a loss are real."""
        if method != "fork":
            return start(self, method)
        pool._serve = lambda conn, *args: serve(_Pipe(conn), *args)
        try:
            return start(self, method)
        finally:
            pool._serve = serve

    monkey = pytest.MonkeyPatch()
    monkey.setattr(pool.LocalWorkers, "_start", forked_with_pipe)
    try:
        code = main(["grade", str(folder), "--course", str(course.root), "--timeout", CELL_TIMEOUT, "--jobs", "2"])
    finally:
        monkey.undo()
    pages = {sid: course.feedback_html(sid).read_text(encoding="utf-8") for sid in SHOWN}
    return code, read_rows(course.report_csv.read_text(encoding="utf-8")), multiprocessing.active_children(), pages


def test_the_class_gets_its_csv_and_exit_status_zero(bounded_class):
    code, rows, *_ = bounded_class
    assert code == 0
    assert set(rows) == {*HONEST, *CRAFTED, *SHOWN}


def test_hidden_code_is_shown_in_the_feedback_and_flagged(bounded_class):
    _, rows, _, pages = bounded_class
    assert (rows[HIDDEN_CODE]["auto_total"], rows[HIDDEN_CODE]["flags"].split("(")[0]) == ("3", "hidden_content")
    text = " ".join(html.unescape(re.sub(r"<[^>]+>", "", pages[HIDDEN_CODE])).split())
    assert CODE_LINE in text


def test_image_metadata_gives_the_feedback_page_no_attribute(bounded_class):
    _, rows, _, pages = bounded_class
    assert rows[IMAGE_MARKUP]["auto_total"] == "3"
    images = [img for img in BeautifulSoup(pages[IMAGE_MARKUP], "html.parser").find_all("img")
              if PNG[:40] in img.get("src", "")]
    assert len(images) == 1, pages[IMAGE_MARKUP][:2000]
    assert set(images[0].attrs) <= {"src", "class", "alt"}, images[0].attrs  # alt: nbconvert's own
    assert images[0].get("class", []) == []
    live = [str(e)[:120] for e in BeautifulSoup(pages[IMAGE_MARKUP], "html.parser").find_all(True)
            if any(name.startswith("on") or "__ck" in str(value) for name, value in e.attrs.items())]
    assert live == []  # the code that displayed it is shown as text, never as an attribute


def test_honest_students_keep_their_scores_and_no_flags(bounded_class):
    _, rows, *_ = bounded_class
    for sid in HONEST:
        assert (rows[sid]["normal"], rows[sid]["boundary"], rows[sid]["aggregation"], rows[sid]["flags"]) == \
            ("1.5", "1", "0.5", ""), rows[sid]


@pytest.mark.parametrize("sid", REPAIRED)
def test_changed_nbgrader_metadata_is_put_back_at_ingest_and_the_code_graded(bounded_class, sid):
    """Before ingest put the release's metadata back, nbgrader stopped the class on these (cb8ce7d)."""
    _, rows, *_ = bounded_class
    row = rows[sid]
    assert (row["normal"], row["boundary"], row["aggregation"]) == ("1.5", "1", "0.5"), row
    assert row["flags"].startswith("suspicious_code(nbgrader metadata changed, the release's put back: test_"), row


@pytest.mark.parametrize("sid", EXPECTED)
def test_each_crafted_student_has_its_own_row_with_a_one_line_reason(bounded_class, sid):
    _, rows, *_ = bounded_class
    row = rows[sid]
    assert float(row["auto_total"]) == 0, row
    assert EXPECTED[sid] in row["flags"], row["flags"]
    assert "\n" not in row["flags"] and "Traceback" not in row["flags"]


def test_a_reply_over_budget_scores_0_in_the_check_reading_it_and_is_flagged(bounded_class):
    """The judge's OverBudget (a BaseException), raised decoding `ratios` for test_aggregation, is that
    check's failure and the student's over_budget flag; the checks that never read it keep their points."""
    _, rows, *_ = bounded_class
    row = rows[COLLIDING]
    assert (row["normal"], row["boundary"], row["aggregation"]) == ("1.5", "1", "0"), row
    assert row["flags"] == "over_budget(reply dict keys colliding over 8 per hash)", row["flags"]


def test_no_worker_outlives_the_run(bounded_class):
    assert bounded_class[2] == []


def test_the_boundary_catches_base_exceptions_but_not_ctrl_c():
    class Budget(BaseException):
        pass

    flags: list[str] = []
    with StudentStep(flags, "judging") as step:
        raise Budget("line one\nline two " + "x" * 500)
    assert step.failed and len(flags) == 1
    assert flags[0].startswith("error(judging: Budget: line one line two xxx") and "\n" not in flags[0]
    assert len(flags[0]) <= len("error(judging: )") + MAX_REASON
    with pytest.raises(KeyboardInterrupt), StudentStep(flags, "judging"):
        raise KeyboardInterrupt
    assert len(flags) == 1
