"""coursekit.runner: the runner's config (check groups, id rule, answers, hand-in notebook) and its site files."""

from __future__ import annotations

import ast
import builtins
import json
import re
import shutil
from pathlib import Path

import pytest

from coursekit import runner
from coursekit.course_file import load_course
from coursekit.errors import CourseError
from coursekit.grading.course import Course
from coursekit.grading.intake.ingest import STUDENT_ID
from coursekit.lesson import parse_lesson, visible_test_code

ROOT = Path(__file__).resolve().parents[2]
ENTRY = load_course(ROOT / "course.yml").lesson("lesson11")
LESSON_11 = parse_lesson(ROOT / ENTRY.source)


@pytest.fixture(scope="module")
def release_notebook(course: Course) -> dict:
    return json.loads(course.release_notebook.read_text(encoding="utf-8"))


def test_check_groups_are_the_visible_test_cells_with_their_titles(release_notebook) -> None:
    config = runner.build_config(LESSON_11, release_notebook, "exercise")
    assert [(g["id"], g["title"]) for g in config["checks"]] == [
        ("normal", "正常输入"), ("boundary", "边界输入"), ("aggregation", "长度聚合与 GSPO")]
    assert [g["code"] for g in config["checks"]] == [visible_test_code(t.body) for t in LESSON_11.tests()]
    assert config["starter_code"] == LESSON_11.blank_code


def test_the_aggregation_check_is_scored_on_the_students_own_run(release_notebook) -> None:
    checks = {g["id"]: g for g in runner.build_config(LESSON_11, release_notebook, "exercise")["checks"]}
    assert checks["aggregation"]["own_run"] == ["response_mean", "token_mean", "fixed_length_mean", "ratios"]
    assert checks["normal"]["own_run"] == checks["boundary"]["own_run"] == []
    assert [checks[k]["points"] for k in ("normal", "boundary", "aggregation")] == ["1.5", "1", "0.5"]


def test_own_run_names_are_what_the_hidden_block_reads() -> None:
    """The lesson's option and the grader's hidden text name the same variables (defined once, checked here)."""
    (cell,) = [t for t in LESSON_11.tests() if t.options.get("own_run")]
    hidden = cell.body.split("### BEGIN HIDDEN TESTS", 1)[1].split("### END HIDDEN TESTS", 1)[0]
    loads = {n.id for n in ast.walk(ast.parse(hidden)) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    read = {name for name in loads if not name.startswith("_") and not hasattr(builtins, name)}
    assert set(LESSON_11.visible_checks()[2].own_run) == read


def test_the_student_id_rule_is_the_graders(release_notebook) -> None:
    rule = runner.build_config(LESSON_11, release_notebook, "exercise")["student_id"]
    assert rule["pattern"] == STUDENT_ID.pattern
    assert "字母" in rule["rule"] and "数字" in rule["rule"]


def test_the_config_carries_no_hints(release_notebook) -> None:
    """The page's own hint widget is the only one (see the browser tests)."""
    for branch in runner.BRANCHES:
        assert "hints" not in runner.build_config(LESSON_11, release_notebook, branch)


def test_answer_areas_come_from_the_release_cells_in_notebook_order(release_notebook) -> None:
    answers = runner.build_config(LESSON_11, release_notebook, "exercise")["answers"]
    assert [(a["grade_id"], a["title"]) for a in answers] == [
        ("explanation", "实现与边界解释"), ("q1", "Q1"), ("q2", "Q2"), ("q3", "Q3")]
    assert answers[1]["prompt"] == "**你的答案：**"


def test_written_exercise_config_holds_no_answer_or_hidden_test(tmp_path: Path, course: Course) -> None:
    path = runner.write_config(tmp_path, "exercise", lesson_path=ROOT / ENTRY.source,
                               release_path=course.release_notebook)
    text = path.read_text(encoding="utf-8")
    config = json.loads(text)
    assert runner.find_leaks(config, LESSON_11) == []
    for secret in ("BEGIN HIDDEN TESTS", "_population_reference", "[0.0] * len(rewards)", "(r - mean) ** 2 for r"):
        assert secret not in text
    assert sorted(p.name for p in path.parent.iterdir()) == sorted([*runner.RUNNER_FILES, runner.CONFIG_NAME])


def test_a_release_notebook_with_solutions_is_refused(tmp_path: Path) -> None:
    source = Course(ROOT / "autograder", ENTRY.id).source_notebook  # holds the answers and the hidden tests
    with pytest.raises(CourseError, match=r"lesson11\.ipynb: the exercise site would show .*make release"):
        runner.write_config(tmp_path, "exercise", lesson_path=ROOT / ENTRY.source, release_path=source)
    assert not (tmp_path / "assets").exists()


def test_missing_release_notebook_says_to_run_make_release(tmp_path: Path) -> None:
    with pytest.raises(CourseError, match=r"nope\.ipynb: release notebook not found; run 'make release'"):
        runner.write_config(tmp_path, "exercise", lesson_path=ROOT / ENTRY.source,
                            release_path=tmp_path / "nope.ipynb")


def test_release_notebook_without_the_answer_cell_is_refused(tmp_path: Path, release_notebook) -> None:
    broken = json.loads(json.dumps(release_notebook))
    broken["cells"] = [c for c in broken["cells"]
                       if c["metadata"].get("nbgrader", {}).get("grade_id") != LESSON_11.exercise_id]
    path = tmp_path / "release.ipynb"
    path.write_text(json.dumps(broken), encoding="utf-8")
    with pytest.raises(CourseError, match=r"release\.ipynb: expected one cell with nbgrader grade_id "
                                          r"'group_advantages', found 0"):
        runner.read_release_notebook(path, LESSON_11.exercise_id)


def test_unknown_branch_lists_the_valid_ones(release_notebook) -> None:
    with pytest.raises(CourseError, match="unknown branch 'draft'; use one of: exercise, solution"):
        runner.build_config(LESSON_11, release_notebook, "draft")


def test_pyodide_url_option_reaches_the_script_tag() -> None:
    cdn = "https://cdn.jsdelivr.net/pyodide/v314.0.8/full/"
    assert f'data-pyodide-url="{cdn}"' in runner.head_tags("../", pyodide_url=cdn)
    assert "data-pyodide-url" not in runner.head_tags("../")


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
    start, rest = tags.split("</script>\n", 1)
    assert start.startswith("<script>") and "new Worker(" in start, "an inline script starts the worker first"
    assert 'at("../assets/runner/runner-worker.js")' in start
    assert 'configURL: at("../assets/runner/runner-config.json")' in start
    assert 'indexURL: at("../assets/pyodide/")' in start
    assert rest.startswith('<script src="../assets/runner/runner.js" data-runner-root="../"></script>')
    assert 'href="../assets/runner/runner.css"' in tags


def test_head_tags_start_the_worker_with_the_pages_config_and_pyodide() -> None:
    cdn = "https://cdn.jsdelivr.net/pyodide/v314.0.8/full/"
    start = runner.head_tags("../../", pyodide_url=cdn, config="runner-config-x.json").split("</script>")[0]
    assert 'configURL: at("../../assets/runner/runner-config-x.json")' in start
    assert f'indexURL: at("{cdn}")' in start


def test_the_quarto_filter_ships_every_runner_file() -> None:
    """runner.lua's HTML dependency must carry what write_config copies (the editor bundle included)."""
    lua = (ROOT / "assets" / "runner" / "runner.lua").read_text(encoding="utf-8")
    shipped = set(re.findall(r'path = "([\w.-]+)"', lua)) | set(re.findall(r'stylesheets = \{ "([\w.-]+)" \}', lua))
    assert shipped == set(runner.RUNNER_FILES)


def test_the_quarto_filter_loads_the_runner_blocking() -> None:
    """runner.js must start the worker before the body is parsed: no async or defer on its tag."""
    lua = (ROOT / "assets" / "runner" / "runner.lua").read_text(encoding="utf-8")
    code = "\n".join(line.split("--")[0] for line in lua.splitlines())  # without Lua comments
    assert "local attribs = {}" in code
    assert not re.search(r"\b(async|defer)\b", code)


def test_the_quarto_filter_boots_the_worker_first_exactly_as_the_preview_does() -> None:
    """runner.lua, run (tests/runner/quarto_filter.py), adds the boot as a dependency of its own before
    runner.js's, since Quarto injects each dependency's scripts before its `head` HTML
    (pandoc-dependencies-html.ts, processHtmlDependencies). The script is head_tags' with the worker URL
    runner.js computes on a Quarto page (runner-worker.js beside runner.js in site_libs/quarto-contrib/)."""
    import quarto_filter

    page = "exercises/lesson11_grpo.html"
    boot, runner_dep = quarto_filter.runner_dependencies(page)
    assert set(boot) == {"name", "version", "head"} and runner_dep["name"] == "course-runner"
    folder = f"site_libs/quarto-contrib/{runner_dep['name']}-{runner_dep['version']}/"
    preview_boot = runner.head_tags("../", config=runner.config_name("lesson11_grpo")).split("</script>")[0]
    assert boot["head"] == preview_boot.replace('"../assets/runner/runner-worker.js"',
                                                f'"../{folder}runner-worker.js"') + "</script>"
    head = quarto_filter.head_html(page)
    assert head.index("new Worker(") < head.index(f'<script src="../{folder}runner.js"')
