"""The hub's Validate, reason first (issue 33): nbgrader's Validator with coursekit.hub.validate's last step,
run for real (nbgrader's Execute, a real kernel) on the released notebook filled in the lesson's wrong ways.

Each failed test cell comes back as its reason - the words the page's Check gives for that check (the
runner's own Python helpers, `coursekit.bundle.worker_helpers`, run here as `python check.py` runs them) -
then the student's own line or nothing; never the self-check code. The hub's Chromium loop
(test_class_loop.py) clicks the same Validate through the real handler on a student's server.
"""

from __future__ import annotations

import json
from pathlib import Path

import nbformat
import pytest
from exercise_fill import fill_blanks
from traitlets.config import Config

from coursekit import runner
from coursekit.bundle import worker_helpers
from coursekit.hub.validate import IN_CHINESE, ReasonFirstValidator
from coursekit.lesson import given_checks, parse_lesson

ROOT = Path(__file__).resolve().parents[2]
LESSON = parse_lesson(ROOT / "lessons" / "lesson11_grpo.qmd")
RIGHT = "var = sum((r - mean) ** 2 for r in rewards) / len(rewards)"
VARIANTS = {  # the exercise's `var = ______` line, filled in a wrong way
    "sample variance": "var = sum((r - mean) ** 2 for r in rewards) / (len(rewards) - 1)",
    "raises in the student's code": "var = sum((r - mean) ** 2 for r in rewards) / len(rewards[0])",
    "mean absolute deviation squared": "var = (sum(abs(r - mean) for r in rewards) / len(rewards)) ** 2",
}
NO_RESPONSE = IN_CHINESE["You did not provide a response."]  # a written answer left empty
SELF_CHECK_CODE = ("### BEGIN SELF-CHECKS", "_check_group", "_standardised", "import random")


def filled(release: Path, var_line: str) -> nbformat.NotebookNode:
    """The released notebook with the exercise's blanks filled: `var_line` and the zero-variance return."""
    nb = nbformat.read(release, as_version=4)
    cell = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "group_advantages")
    cell.source = fill_blanks(cell.source, var_line)
    return nb


def page_check(code: str) -> dict[str, str]:
    """{grade id: message} of each check the page's Check fails on the student's code (its real helpers).
    Not the checks scored on the student's own run (`own_run`): Validate runs the release's test cells,
    whose visible lines set those names again, so it cannot see them (docs/hub.md)."""
    namespace = {"__name__": "page_check"}
    exec(compile(worker_helpers(ROOT), "<helpers>", "exec"), namespace)  # noqa: S102 - the kit's own helpers
    given = {"title": "", "lines": given_checks(LESSON.blank_code), "veto": ""}
    result = json.loads(namespace["_course_check"](code, runner.check_groups(LESSON), 20, given))
    return {f"test_{item['id']}": item["message"] for item in result["results"]
            if not item["passed"] and not item["own_run"]}


@pytest.fixture(scope="module")
def release(release_template) -> Path:  # noqa: ANN001 - tests/conftest.py's released course
    return release_template.release_notebook


def validate(nb: nbformat.NotebookNode, folder: Path) -> dict:
    path = folder / "lesson11.ipynb"
    nbformat.write(nb, path)
    return ReasonFirstValidator(config=Config()).validate(str(path))


@pytest.mark.parametrize("name", VARIANTS)
def test_a_failed_check_shows_the_page_checks_reason_then_the_students_line(name, release, tmp_path):
    nb = filled(release, VARIANTS[name])
    failed = validate(nb, tmp_path)["failed"]
    tests = [cell for cell in failed if cell["error"] != NO_RESPONSE]  # not the written answers
    code_cells = [c for c in nb.cells if c.cell_type == "code"]
    exercise = next(c.source for c in code_cells if c.metadata["nbgrader"].get("grade_id") == "group_advantages")
    page = page_check(exercise)
    assert page, f"{name}: the page's Check passes it; pick a variant it fails"
    reasons = [cell["source"] for cell in tests]
    assert sorted(reasons) == sorted(message.split("\n（")[0] for message in page.values()), (reasons, page)
    for cell in failed:
        assert not any(code in cell["source"] + cell["error"] for code in SELF_CHECK_CODE), cell
    if name == "raises in the student's code":
        number = 1 + next(k for k, c in enumerate(code_cells) if c.source == exercise)
        line = 1 + exercise.split("\n").index(next(s for s in exercise.split("\n") if "len(rewards[0])" in s))
        for cell in tests:
            assert cell["source"].startswith("TypeError: "), cell
            assert cell["error"] == (f"（出错位置：第 {number} 个代码格第 {line} 行：{VARIANTS[name]}）"), cell
    else:
        assert all(cell["error"] == "" for cell in tests), tests


def test_the_right_code_fails_no_test_cell(release, tmp_path):
    nb = filled(release, RIGHT)
    failed = validate(nb, tmp_path).get("failed", [])
    assert all(cell["error"] == NO_RESPONSE for cell in failed), failed  # only the written answers


def test_a_test_cell_the_student_changed_is_reported_as_changed_not_rewritten(release, tmp_path):
    nb = filled(release, VARIANTS["sample variance"])
    cell = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "test_normal")
    cell.source += "\n# mine"
    result = validate(nb, tmp_path)
    assert [c["source"] for c in result["changed"]] == [cell.source.strip()], result
