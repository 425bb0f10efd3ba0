"""coursekit.runner: the runner's config (check groups, hints, answers, hand-in notebook) and its site files."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from coursekit import runner
from coursekit.errors import CourseError
from coursekit.grading.course import Course
from coursekit.lesson import parse_lesson, visible_test_code

ROOT = Path(__file__).resolve().parents[2]
LESSON_11 = parse_lesson(ROOT / runner.LESSON)


@pytest.fixture(scope="module")
def release_notebook(course: Course) -> dict:
    return json.loads(course.release_notebook.read_text(encoding="utf-8"))


def test_check_groups_are_the_visible_test_cells_with_their_titles(release_notebook) -> None:
    config = runner.build_config(LESSON_11, release_notebook, "exercise")
    assert [(g["id"], g["title"]) for g in config["checks"]] == [
        ("normal", "正常输入"), ("boundary", "边界输入"), ("aggregation", "长度聚合与 GSPO")]
    assert [g["code"] for g in config["checks"]] == [visible_test_code(t.body) for t in LESSON_11.tests()]
    assert config["starter_code"] == LESSON_11.blank_code


def test_only_the_exercise_site_preloads_pyodide(release_notebook) -> None:
    assert runner.build_config(LESSON_11, release_notebook, "exercise")["preload"] is True
    assert runner.build_config(LESSON_11, release_notebook, "solution")["preload"] is False


def test_exercise_hints_stop_at_level_three_and_solution_adds_the_answer(release_notebook) -> None:
    exercise = runner.build_config(LESSON_11, release_notebook, "exercise")["hints"]
    solution = runner.build_config(LESSON_11, release_notebook, "solution")["hints"]
    assert [(h["level"], h["title"]) for h in exercise] == [(1, "概念区域"), (2, "具体方向"), (3, "关键局部")]
    assert "<strong>总体方差</strong>" in exercise[0]["html"]
    assert [h["level"] for h in solution] == [1, 2, 3, 4]
    assert all(line.strip() in solution[3]["html"] for line in LESSON_11.answer_lines)


def test_answer_areas_come_from_the_release_cells_in_notebook_order(release_notebook) -> None:
    answers = runner.build_config(LESSON_11, release_notebook, "exercise")["answers"]
    assert [(a["grade_id"], a["title"]) for a in answers] == [
        ("explanation", "实现与边界解释"), ("q1", "Q1"), ("q2", "Q2"), ("q3", "Q3")]
    assert answers[1]["prompt"] == "**你的答案：**"


def test_written_exercise_config_holds_no_answer_or_hidden_test(tmp_path: Path, course: Course) -> None:
    path = runner.write_config(tmp_path, "exercise", lesson_path=ROOT / runner.LESSON,
                               release_path=course.release_notebook)
    text = path.read_text(encoding="utf-8")
    config = json.loads(text)
    assert runner.find_leaks(config, LESSON_11) == []
    for secret in ("BEGIN HIDDEN TESTS", "_population_reference", "[0.0] * len(rewards)", "(r - mean) ** 2 for r"):
        assert secret not in text
    assert sorted(p.name for p in path.parent.iterdir()) == sorted([*runner.RUNNER_FILES, runner.CONFIG_NAME])


def test_a_release_notebook_with_solutions_is_refused(tmp_path: Path) -> None:
    source = Course(ROOT / "autograder").source_notebook  # holds the answers and the hidden tests
    with pytest.raises(CourseError, match=r"lesson11\.ipynb: the exercise site would show .*make release"):
        runner.write_config(tmp_path, "exercise", lesson_path=ROOT / runner.LESSON, release_path=source)
    assert not (tmp_path / "assets").exists()


def test_missing_release_notebook_says_to_run_make_release(tmp_path: Path) -> None:
    with pytest.raises(CourseError, match=r"nope\.ipynb: release notebook not found; run 'make release'"):
        runner.write_config(tmp_path, "exercise", lesson_path=ROOT / runner.LESSON,
                            release_path=tmp_path / "nope.ipynb")


def test_release_notebook_without_the_answer_cell_is_refused(tmp_path: Path, release_notebook) -> None:
    broken = json.loads(json.dumps(release_notebook))
    broken["cells"] = [c for c in broken["cells"]
                       if c["metadata"].get("nbgrader", {}).get("grade_id") != runner.ANSWER_GRADE_ID]
    path = tmp_path / "release.ipynb"
    path.write_text(json.dumps(broken), encoding="utf-8")
    with pytest.raises(CourseError, match=r"release\.ipynb: expected one cell with nbgrader grade_id "
                                          r"'group_advantages', found 0"):
        runner.read_release_notebook(path)


def test_unknown_branch_lists_the_valid_ones(release_notebook) -> None:
    with pytest.raises(CourseError, match="unknown branch 'draft'; use one of: exercise, solution"):
        runner.build_config(LESSON_11, release_notebook, "draft")


def test_pyodide_url_option_reaches_the_config(release_notebook) -> None:
    cdn = "https://cdn.jsdelivr.net/pyodide/v314.0.8/full/"
    assert runner.build_config(LESSON_11, release_notebook, "exercise", pyodide_url=cdn)["pyodide_url"] == cdn
    assert runner.build_config(LESSON_11, release_notebook, "exercise")["pyodide_url"] is None


def test_copy_pyodide_copies_exactly_the_files_the_worker_loads(tmp_path: Path) -> None:
    out = runner.copy_pyodide(tmp_path, source=ROOT / runner.PYODIDE_SOURCE)
    assert sorted(p.name for p in out.iterdir()) == sorted(runner.PYODIDE_FILES)
    partial = tmp_path / "partial"
    partial.mkdir()
    shutil.copyfile(ROOT / runner.PYODIDE_SOURCE / "pyodide.mjs", partial / "pyodide.mjs")
    with pytest.raises(CourseError, match=r"pyodide\.asm\.mjs: Pyodide file missing; run 'npm ci'"):
        runner.copy_pyodide(tmp_path / "site", source=partial)


def test_head_tags_point_at_the_site_root() -> None:
    tags = runner.head_tags("../")
    assert '<script async src="../assets/runner/runner.js" data-runner-root="../"></script>' in tags
    assert 'href="../assets/runner/runner.css"' in tags
