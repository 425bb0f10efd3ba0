"""Issue 30: a property-based fuzzer of submissions (mutations: tests/grading/notebook_mutations.py).

Two layers, both through the real grading code:
- the cheap layer: each mutant goes through `coursekit grade`'s own per-student path without a kernel —
  Ingest (reading, the boundary, prepare), then grade.tasks (journal key, nbgrader's real sanitising
  steps with the class's gradebook: ClearOutput, DeduplicateIds, OverwriteKernelspec, OverwriteCells,
  CheckCellMetadata). Invariants: nothing escapes the boundary; a student not sent to a worker has a
  one-line reason; a notebook sent to a worker is valid nbformat 4 whose graded cells are exactly the
  gradebook's (source, points, locked), with no other graded cell, no output, no hiding metadata.
- the expensive layer: a batch of mutants graded as one class between two honest students with
  `coursekit grade` itself (real nbgrader, real sandbox). Invariants: exit status 0 and a CSV row for
  everyone; the honest students keep full marks and no flags; a mutant scores no more than the blank
  submission unless its exercise code is the correct one unchanged; no student markup (MARKER) is an
  element or attribute of any feedback or report page; no process of the run is left.

Most of those mutants are not valid nbformat and stop at ingest; `valid_mutants` (notebook_mutations.py)
draws mutants that stay valid nbformat 4 (checked in the strategy), which reach nbgrader's steps and
the kernels: the cheap layer runs as many of them as of the others, and half of each expensive class is
made of them. Invariants are the same (and a valid mutant is never flagged invalid_notebook).

`make test` runs a bounded number (FUZZ_EXAMPLES mutants of each kind, FUZZ_BATCHES classes of FUZZ_BATCH mutants);
`make fuzz` a long run (FUZZ_EXAMPLES=20000). Findings are replayed by the `@example`s below.
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import sys
from pathlib import Path

import nbformat
import pytest
from bs4 import BeautifulSoup
from grading_support import CELL_TIMEOUT, fresh_copy, read_rows
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from notebook_mutations import MARKER, MUTANTS, apply_ops, apply_valid_ops, mutant_json, valid_mutants
from submission_kinds import _code, k_correct
from tqdm import tqdm
from traitlets.config import Config

from coursekit.cli import main
from coursekit.grading.grade import tasks
from coursekit.grading.intake.ingest import HIDING_TAG, KEPT_CELL_METADATA, Ingest
from coursekit.grading.records.record import Recorder

pytestmark = pytest.mark.slow
FUZZ_EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "120"))
FUZZ_BATCHES = int(os.environ.get("FUZZ_BATCHES", "1"))
FUZZ_BATCH = int(os.environ.get("FUZZ_BATCH", "4"))
LONG = FUZZ_EXAMPLES > 1000
HONEST = ("a00_honest", "z99_honest")
SLOW_OK = [HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large,
           HealthCheck.large_base_example]


def _graded_cells(nb) -> dict[str, list]:
    found: dict[str, list] = {}
    for cell in nb.cells:
        info = cell.metadata.get("nbgrader", {})
        if info.get("grade"):
            found.setdefault(info.get("grade_id"), []).append(cell)
    return found


class CheapLayer:
    """One course, one Recorder for every mutant; each mutant is its own one-student submissions folder."""

    def __init__(self, course):
        self.course = course
        self.recorder = Recorder(course, Config(course.config))
        self.source = _graded_cells(nbformat.read(course.source_notebook, as_version=4))
        release = nbformat.read(course.release_notebook, as_version=4)
        self.bases = {"blank": json.loads(nbformat.writes(release)),
                      "correct": json.loads(nbformat.writes(k_correct(copy.deepcopy(release))))}
        self.count = 0
        self.sent = 0  # mutants sent to a worker (past nbgrader's steps)
        self.valid = [0, 0]  # valid mutants graded, and sent to a worker

    def grade_without_kernel(self, mutant: tuple, valid: bool = False) -> None:
        base, ops = mutant
        folder = self.course.root / "fuzz-in"
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir()
        nb = (apply_valid_ops if valid else apply_ops)(self.bases[base], ops)
        (folder / "m0.ipynb").write_text(mutant_json(nb), encoding="utf-8")
        entries, running = [], {}
        bar = tqdm(disable=True)
        sent = list(tasks(self.recorder, Ingest(self.course, folder), entries, running, True, bar))
        self.count += 1
        if LONG and self.count % 1000 == 0:
            print(f"cheap layer: {self.count} mutants", file=sys.stderr, flush=True)
        [entry] = entries
        assert all("\n" not in f for f in entry.flags), entry.flags
        self.sent += bool(sent)
        if valid:
            assert not any(f.startswith("invalid_notebook") for f in entry.flags), entry.flags
            self.valid[0] += 1
            self.valid[1] += bool(sent)
        if not sent:
            assert not entry.gradable and entry.flags, entry  # its row says why
            return
        [(student_id, notebook)] = sent
        assert student_id == "m0" and entry.gradable
        self.check_sent(nbformat.reads(notebook, as_version=4))

    def check_sent(self, nb) -> None:
        """What a worker would run: valid, the gradebook's graded cells only, nothing hidden or left over."""
        nbformat.validate(nb)
        graded = _graded_cells(nb)
        assert set(graded) == set(self.source), set(graded)
        for grade_id, cells in graded.items():
            [cell] = cells
            [source] = self.source[grade_id]
            info, ref = cell.metadata.nbgrader, source.metadata.nbgrader
            assert (cell.cell_type, bool(info.get("locked")), bool(info.get("solution")), float(info.get("points"))) \
                == (source.cell_type, bool(ref.get("locked")), bool(ref.get("solution")), float(ref.points)), grade_id
            if ref.get("locked"):  # a test cell: the gradebook's source, hidden tests included
                assert cell.source == source.source, grade_id
        for cell in nb.cells:
            assert set(cell.metadata) <= KEPT_CELL_METADATA, cell.metadata
            assert not any(HIDING_TAG.fullmatch(t.strip()) for t in cell.metadata.get("tags", []))
            if cell.cell_type == "code":
                assert cell.outputs == []


@pytest.fixture(scope="module")
def cheap(released_course, tmp_path_factory):
    layer = CheapLayer(fresh_copy(released_course, tmp_path_factory.mktemp("fuzz-cheap") / "course"))
    yield layer
    layer.recorder.close()
    print(f"\ncheap layer: {layer.count} mutants graded without a kernel, {layer.sent} sent to a worker; "
          f"{layer.valid[0]} valid nbformat, {layer.valid[1]} of them sent to a worker", file=sys.stderr)


@settings(max_examples=FUZZ_EXAMPLES, deadline=None, suppress_health_check=SLOW_OK, derandomize=not LONG,
          database=None)
@given(mutant=MUTANTS)
@example(mutant=("correct", [("nbgrader", 11, "solution", True)]))  # issue 30: Inconsistent checksums
@example(mutant=("correct", [("nbgrader", 12, "points", "lots")]))
@example(mutant=("blank", [("cell_meta", 10, ("transient", "remove_source"), True)]))
# found by the long run (a graded answer lost to another cell, a locked answer cell): ingest now puts the
# release's nbgrader metadata back
@example(mutant=("correct", [("nbgrader", 18, "grade_id", "explanation")]))
@example(mutant=("correct", [("nbgrader", 17, "locked", True)]))
def test_cheap_layer_every_mutant_gets_a_row_and_only_the_gradebooks_tests(cheap, mutant):
    cheap.grade_without_kernel(mutant)


@settings(max_examples=FUZZ_EXAMPLES, deadline=None, suppress_health_check=SLOW_OK, derandomize=not LONG,
          database=None)
@given(data=st.data())
def test_cheap_layer_valid_mutants_pass_ingest_and_keep_only_the_gradebooks_tests(cheap, data):
    cheap.grade_without_kernel(data.draw(valid_mutants(cheap.bases), label="mutant"), valid=True)


# ---------------------------------------------------------------- the expensive layer: whole classes


def descendants() -> list[str]:
    """Processes whose parent chain leads to this one (grading workers, bwrap, kernels)."""
    parents = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            continue
        parents[int(pid)] = int(stat.rsplit(")", 1)[1].split()[1])
    mine = []
    for pid in parents:
        seen, up = set(), parents.get(pid)
        while up and up not in seen:
            if up == os.getpid():
                state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] \
                    if Path(f"/proc/{pid}").exists() else "?"
                if state != "Z":
                    try:
                        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")[:80]
                    except OSError:
                        cmdline = b"?"
                    mine.append(f"{pid} ({state}, parent {parents[pid]}): {cmdline.decode(errors='replace')}")
                break
            seen.add(up)
            up = parents.get(up)
    return mine


def student_markup(page: Path) -> list[str]:
    """Elements of a page that the student's MARKER made: a script, style, frame, svg, object or embed
    holding it, or an attribute carrying it (its text may appear, escaped, as text only)."""
    soup = BeautifulSoup(page.read_text(encoding="utf-8"), "html.parser")
    live = []
    for element in soup.find_all(True):
        if element.name in ("script", "style", "iframe", "svg", "object", "embed") and MARKER in str(element):
            live.append(str(element)[:120])
        elif any(MARKER in str(value) or name.lower().startswith("on") and MARKER in str(value)
                 for name, value in element.attrs.items()):
            live.append(str(element)[:120])
    return live


@settings(max_examples=FUZZ_BATCHES, deadline=None, suppress_health_check=SLOW_OK, derandomize=not LONG,
          database=None)
@given(data=st.data())
def test_a_class_of_mutants_is_graded_and_honest_students_keep_their_scores(released_course, tmp_path_factory,
                                                                            data):
    root = tmp_path_factory.mktemp("fuzz-class")
    course = fresh_copy(released_course, root / "course")
    release = nbformat.read(course.release_notebook, as_version=4)
    correct = k_correct(copy.deepcopy(release))
    bases = {"blank": json.loads(nbformat.writes(release)), "correct": json.loads(nbformat.writes(correct))}
    valid = FUZZ_BATCH // 2  # mutants that stay valid nbformat: they run in kernels
    batch = data.draw(st.lists(MUTANTS, min_size=FUZZ_BATCH - valid, max_size=FUZZ_BATCH - valid), label="batch")
    batch += data.draw(st.lists(valid_mutants(bases), min_size=valid, max_size=valid), label="valid")
    folder = root / "lms"
    folder.mkdir()
    for sid in HONEST:
        nbformat.write(correct, folder / f"{sid}.ipynb")
    mutants = {f"m{k:02d}": mutant for k, mutant in enumerate(batch)}
    for k, (sid, (base, ops)) in enumerate(mutants.items()):
        mutate = apply_valid_ops if k >= FUZZ_BATCH - valid else apply_ops
        (folder / f"{sid}.ipynb").write_text(mutant_json(mutate(bases[base], ops)), encoding="utf-8")
    running = {line.split()[0] for line in descendants()}  # the session's own (a browser of earlier tests)
    code = main(["grade", str(folder), "--course", str(course.root), "--timeout", CELL_TIMEOUT, "--jobs", "2"])
    assert code == 0
    assert [line for line in descendants() if line.split()[0] not in running] == []  # grading left nothing
    rows = read_rows(course.report_csv.read_text(encoding="utf-8"))
    assert set(rows) == {*HONEST, *mutants}
    for sid in HONEST:
        assert (rows[sid]["normal"], rows[sid]["boundary"], rows[sid]["aggregation"], rows[sid]["flags"]) == \
            ("1.5", "1", "0.5", ""), rows[sid]
    right = _code(correct).source
    for sid in mutants:
        submitted = course.submitted_notebook(sid)
        kept = submitted.is_file() and any(c.cell_type == "code" and c.source == right
                                           for c in nbformat.read(submitted, as_version=4).cells)
        most = (1.5, 1, 0.5) if kept else (0, 0, 0)  # the blank submission scores (0, 0, 0)
        got = (float(rows[sid]["normal"]), float(rows[sid]["boundary"]), float(rows[sid]["aggregation"]))
        assert all(g <= m for g, m in zip(got, most, strict=True)), (sid, mutants[sid], rows[sid])
    pages = [*(course.root / "feedback").rglob("*.html"), *(course.root / "reports").glob("*.html")]
    assert pages
    for page in pages:
        assert student_markup(page) == [], page


def test_the_markup_check_sees_an_attribute_or_a_script_but_not_escaped_text(tmp_path):
    page = tmp_path / "p.html"
    page.write_text(f"<pre>&lt;img onerror={MARKER}()&gt;</pre><img src=x alt=ok>", encoding="utf-8")
    assert student_markup(page) == []
    for live in (f"<img src=x onerror={MARKER}()>", f"<script>{MARKER}</script>",
                 f"<a href='javascript:{MARKER}'>x</a>"):
        page.write_text(live, encoding="utf-8")
        assert student_markup(page) != [], live
