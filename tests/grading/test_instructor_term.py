"""An instructor's term with one course folder: the class graded, a wrong SUBMISSIONS, a dry run, then
a folder of late submissions (issue 27, items 6, 9 and 10). Nothing of the term's grades may be lost
or overwritten by a mistake or a trial."""

from __future__ import annotations

import copy
import io
import json
from contextlib import redirect_stderr
from dataclasses import dataclass
from pathlib import Path

import nbformat
import pytest
from grading_support import CELL_TIMEOUT, digests, fresh_copy, read_rows
from submission_kinds import k_correct

from coursekit.cli import main
from coursekit.grading.course import Course


@dataclass
class Term:
    course: Course
    csv_class: str              # after grading the class
    state_class: dict[str, str]  # digests of the course's gradebook, reports, manifest after that
    mistakes: dict[str, tuple[int, str]]  # SUBMISSIONS given by mistake -> (exit code, stderr)
    state_after_mistakes: dict[str, str]
    dry_run: tuple[int, str]    # exit code, the scratch report
    state_after_dry_run: dict[str, str]
    csv_after_late: str


def state(course: Course) -> dict[str, str]:
    kept = {k: v for k, v in digests(course.root).items()
            if k.startswith(("reports/", "feedback/", "autograded/", ".ingest/lesson11", "gradebook.db"))}
    assert "gradebook.db" in kept and "reports/lesson11.csv" in kept
    return kept


@pytest.fixture(scope="module")
def term(release_template, tmp_path_factory) -> Term:
    course = fresh_copy(release_template, tmp_path_factory.mktemp("term") / "course")
    base = nbformat.read(course.release_notebook, as_version=4)
    solved = k_correct(copy.deepcopy(base))
    lms = tmp_path_factory.mktemp("term-lms")
    on_time, late = lms / "on_time", lms / "late"
    on_time.mkdir()
    for sid in ("s01", "s02"):
        nbformat.write(solved, on_time / f"{sid}.ipynb")
    late.mkdir()
    nbformat.write(solved, late / "s03.ipynb")
    (late / "s01.ipynb").write_text('{"cells": [', encoding="utf-8")  # a late re-upload that is broken
    args = ["--course", str(course.root), "--timeout", CELL_TIMEOUT]

    assert main(["grade", str(on_time), *args]) == 0
    csv_class, state_class = course.report_csv.read_text(encoding="utf-8"), state(course)
    (lms / "empty").mkdir()
    (lms / "wrong").mkdir()
    (lms / "wrong" / "readme.txt").write_text("not the download", encoding="utf-8")
    mistakes = {}
    for name in ("empty", "wrong", "on_tiem"):
        with redirect_stderr(io.StringIO()) as err:
            mistakes[name] = main(["grade", str(lms / name), *args]), err.getvalue()
    state_after_mistakes = state(course)
    code = main(["grade", str(late), "--dry-run", *args])
    scratch = course.root.parent / ".course-dry-run" / "reports" / "lesson11.csv"
    dry_run = code, scratch.read_text(encoding="utf-8")
    state_after_dry_run = state(course)
    assert main(["grade", str(late), *args]) == 0
    return Term(course, csv_class, state_class, mistakes, state_after_mistakes, dry_run, state_after_dry_run,
                course.report_csv.read_text(encoding="utf-8"))


def test_an_empty_or_wrong_submissions_folder_is_one_line_and_exits_nonzero(term):
    for name, (code, err) in term.mistakes.items():
        lines = [line for line in err.splitlines() if line.strip()]
        assert code == 1 and len(lines) == 1 and lines[0].startswith("error: ") and name in lines[0], (name, err)


def test_a_mistaken_submissions_folder_overwrites_nothing(term):
    assert term.state_after_mistakes == term.state_class


def test_a_dry_run_grades_into_a_scratch_course_and_leaves_the_terms_grades_alone(term):
    code, scratch_csv = term.dry_run
    assert code == 0 and list(read_rows(scratch_csv)) == ["s01", "s03"]
    assert term.state_after_dry_run == term.state_class
    config = (Path(term.course.root).parent / ".course-dry-run" / "nbgrader_config.py").read_text(encoding="utf-8")
    assert config.rstrip().endswith(repr("sqlite:///" + str(term.course.root.parent / ".course-dry-run"
                                                              / "gradebook.db")))


def test_grading_a_folder_of_late_submissions_adds_to_the_class(term):
    before, after = read_rows(term.csv_class), read_rows(term.csv_after_late)
    assert list(before) == ["s01", "s02"] and list(after) == ["s01", "s02", "s03"]
    assert after["s02"] == before["s02"] and after["s03"]["total"] == "3"


def test_a_broken_late_upload_keeps_the_graded_earlier_notebook_with_a_note(term):
    s01 = read_rows(term.csv_after_late)["s01"]
    assert s01["total"] == "3" and s01["passed"] == read_rows(term.csv_class)["s01"]["passed"]
    assert s01["flags"].startswith("rejected_file(later upload s01.ipynb not graded (invalid_notebook(")
    assert s01["flags"].endswith("kept s01.ipynb)")
    manifest = json.loads(term.course.manifest.read_text(encoding="utf-8"))
    assert [s["student_id"] for s in manifest["students"]] == ["s01", "s02", "s03"]
