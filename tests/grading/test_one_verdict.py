"""One verdict per check: the browser's Check, `make check` and the grader give the same pass/fail.

Every kind of submission in submission_kinds.py goes through all three:

- the grader, through its public result only (`coursekit grade`, the report's per-check scores):
  the class graded with the real course (`graded_class`) and again with a course whose test cells
  keep only their visible part — the lesson with its hidden blocks removed, except the block of a
  check scored on the student's own run (`#| own_run:`), which *is* that check. A check's grader
  verdict is "score > 0";
- `make check` (coursekit.grading.sandbox.check.check_notebook) on the same notebook file;
- the browser's Check (assets/runner) in headless Chromium, with the notebook's exercise cell in
  the editor.

They must agree exactly with the visible-only grader; the real grader may fail a check more often
(hidden tests), never less, and agrees exactly on own-run checks. Files that are not notebooks are
refused by `make check` with a one-line error and score 0 (there is no code for the browser).
"""

from __future__ import annotations

import re
import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import nbformat
import pytest
from grading_support import CELL_TIMEOUT, REPO, GradedClass, make_course, read_rows
from submission_kinds import FILE_KINDS, NOTEBOOK_KINDS, write_class

from coursekit import branches, runner
from coursekit.cli import main
from coursekit.errors import CourseError
from coursekit.grading.intake.ingest import read_notebook
from coursekit.grading.intake.release import release
from coursekit.grading.sandbox import check
from coursekit.lesson import parse_lesson

pytestmark = [pytest.mark.browser, pytest.mark.slow]

LESSON = REPO / "lessons" / "lesson11_grpo.qmd"
CHECKS = parse_lesson(LESSON).visible_checks()
IDS = [c.id for c in CHECKS]
TIMEOUT = int(CELL_TIMEOUT)
PAGE = (REPO / "tests" / "runner" / "fixtures" / "preview_page.html").read_text(encoding="utf-8")
_HIDDEN = re.compile(r"### BEGIN HIDDEN TESTS\n.*?### END HIDDEN TESTS\n", re.S)


def visible_only_lesson(text: str) -> str:
    """The lesson with the hidden block of every test cell removed, except in own-run cells."""
    def cell(match: re.Match[str]) -> str:
        body = match[0]
        return body if "#| own_run:" in body else _HIDDEN.sub("", body)
    return re.sub(r"```\{python\}\n#\| course_role: test\n.*?```", cell, text, flags=re.S)


def exercise_code(nb: nbformat.NotebookNode) -> str:
    """What a student would have in the browser's editor: the (last) exercise cell of the notebook."""
    cells = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == parse_lesson(LESSON).exercise_id
             or "course-exercise" in c.metadata.get("tags", [])]
    return cells[-1].source


def verdicts(row: dict[str, str]) -> dict[str, bool]:
    return {i: float(row[i]) > 0 for i in IDS}


@pytest.fixture(scope="module")
def kinds(graded_class: GradedClass) -> dict[str, Path]:
    """{kind: the submission file graded for it} (each layout: <id>.ipynb or <id>/作业.ipynb)."""
    files = {}
    for sid, kind in graded_class.students.items():
        if kind in NOTEBOOK_KINDS or kind in FILE_KINDS:
            path = graded_class.folder / f"{sid}.ipynb"
            files[kind] = path if path.is_file() else graded_class.folder / sid / "作业.ipynb"
    return files


@pytest.fixture(scope="module")
def visible_grader(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, str]]:
    """{kind: report row} from `coursekit grade` with a course whose tests keep only their visible part."""
    root = tmp_path_factory.mktemp("visible")
    lesson_path = root / "lessons" / "lesson11_grpo.qmd"  # its figure at ../assets/figs, as in the repository
    lesson_path.parent.mkdir()
    shutil.copytree(REPO / "assets" / "figs", root / "assets" / "figs")
    lesson_path.write_text(visible_only_lesson(LESSON.read_text(encoding="utf-8")), encoding="utf-8")
    course = make_course(root / "course")
    source = branches.build_notebook(parse_lesson(lesson_path), "autograder")
    assert "BEGIN HIDDEN TESTS" in nbformat.writes(source)  # the own-run block stays
    nbformat.write(source, course.source_notebook)
    release(course)
    folder = root / "download"
    students = write_class(course.release_notebook, folder, [*NOTEBOOK_KINDS, *FILE_KINDS])
    assert main(["grade", str(folder), "--course", str(course.root), "--timeout", CELL_TIMEOUT]) == 0
    rows = read_rows(course.report_csv.read_text(encoding="utf-8"))
    return {kind: rows[sid] for sid, kind in students.items() if kind in NOTEBOOK_KINDS or kind in FILE_KINDS}


@pytest.fixture(scope="module")
def make_check(kinds: dict[str, Path]) -> dict[str, dict[str, bool]]:
    """{kind: {check id: passed}} from `make check` (two kernels at a time)."""
    def one(path: Path) -> dict[str, bool]:
        nb, problem = read_notebook(path)
        assert not problem, (path, problem)
        return check.check_notebook(nb, CHECKS, TIMEOUT).passed

    names = [k for k in kinds if k in NOTEBOOK_KINDS]
    with ThreadPoolExecutor(max_workers=2) as pool:
        return dict(zip(names, pool.map(lambda k: one(kinds[k]), names), strict=True))


@pytest.fixture(scope="module")
def browser_check(kinds: dict[str, Path], graded_class: GradedClass, browser, serve_directory,
                  tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, bool]]:
    """{kind: {check id: passed}} from the runner's Check on one page, the editor holding each kind's code."""
    site = tmp_path_factory.mktemp("verdict-site")
    runner.write_config(site, "exercise", lesson_path=LESSON, release_path=graded_class.course.release_notebook,
                        time_limit_s=TIMEOUT)
    runner.copy_pyodide(site, source=REPO / runner.PYODIDE_SOURCE)
    (site / "exercises").mkdir()
    (site / "exercises" / "lesson11_grpo.html").write_text(PAGE.replace("{head}", runner.head_tags("../")),
                                                           encoding="utf-8")
    context = browser.new_context()
    page = context.new_page()
    page.goto(serve_directory(site) + "exercises/lesson11_grpo.html")
    page.wait_for_selector(".cr-widget[data-state=ready]", timeout=120_000)
    found = {}
    for kind in (k for k in kinds if k in NOTEBOOK_KINDS):
        code = exercise_code(nbformat.read(kinds[kind], as_version=4))
        before = int(page.get_attribute(".cr-widget", "data-completed") or 0)
        page.evaluate("code => { document.querySelector('.cr-host').courseRunner.code = code; }", code)
        page.click("button[data-action=check]")
        page.wait_for_function(f"() => Number(document.querySelector('.cr-widget').dataset.completed) > {before}",
                               timeout=120_000)
        found[kind] = {li.get_attribute("data-check-id"): li.get_attribute("data-status") == "pass"
                       for li in page.query_selector_all(".cr-check")}
    context.close()
    return found


def test_every_notebook_kind_gets_one_verdict_from_browser_make_check_and_the_graders_visible_part(
        browser_check, make_check, visible_grader) -> None:
    table = {kind: (browser_check[kind], make_check[kind], verdicts(visible_grader[kind])) for kind in NOTEBOOK_KINDS}
    differ = {kind: t for kind, t in table.items() if not t[0] == t[1] == t[2]}
    assert not differ, f"(browser, make check, grader visible part) disagree: {differ}"
    # not a comparison of constants: the kinds cover passing and failing verdicts of every check
    for check_id in IDS:
        assert {t[2][check_id] for t in table.values()} == {True, False}, check_id


def test_the_real_grader_fails_a_check_only_where_a_hidden_test_adds_to_it(graded_class, visible_grader) -> None:
    for kind in NOTEBOOK_KINDS:
        real, visible = verdicts(graded_class.row(kind)), verdicts(visible_grader[kind])
        for c in CHECKS:
            if c.own_run:
                assert real[c.id] == visible[c.id], (kind, c.id)  # the own-run check is the same check
            else:
                assert visible[c.id] or not real[c.id], (kind, c.id)  # all of it passes => the visible part does


def test_check_shows_a_pass_for_the_own_run_check_exactly_when_the_grader_scores_it(graded_class,
                                                                                    browser_check) -> None:
    own = [c.id for c in CHECKS if c.own_run]
    assert own == ["aggregation"]
    for kind in NOTEBOOK_KINDS:
        scored = float(graded_class.row(kind)["aggregation"]) > 0
        assert browser_check[kind]["aggregation"] == scored, kind
    assert browser_check["untouched"]["aggregation"] is False  # the stumble of issue 12: it said 通过


def test_files_that_are_not_notebooks_are_refused_by_make_check_and_score_zero(kinds, graded_class,
                                                                               tmp_path: Path) -> None:
    for kind in FILE_KINDS:
        assert {i: float(graded_class.row(kind)[i]) for i in IDS} == dict.fromkeys(IDS, 0.0)
        copy_path = tmp_path / f"{kind}.ipynb"
        shutil.copyfile(kinds[kind], copy_path)
        with pytest.raises(CourseError, match=re.escape(str(copy_path)) + r": .*; save the notebook"):
            check.run(_args(copy_path))


def _args(path: Path):
    import argparse

    parser = argparse.ArgumentParser()
    check.add_arguments(parser)
    return parser.parse_args([str(path), "--lesson", str(LESSON), "--timeout", CELL_TIMEOUT])
