"""Two lessons in one course (tests/fixtures/two_lessons: a PPO-clip lesson, then lesson 11): branches,
one nbgrader assignment each in one gradebook, a small class graded per lesson on its own rubric, the
preview site of both lessons (navigation, previous/next links, one runner config each), and no answer
of one lesson on any exercise page or runner config. Lesson 11's files stay byte-identical to the
committed ones."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import nbformat
import pytest
import yaml
from bs4 import BeautifulSoup
from nbgrader.api import Gradebook

from coursekit import preview, runner
from coursekit.cli import main
from coursekit.course_file import load_course
from coursekit.grading.course import Course
from coursekit.grading.records.report import report_columns
from coursekit.lesson import parse_lesson

REPO = Path(__file__).resolve().parents[2]
FIXTURE = REPO / "tests" / "fixtures" / "two_lessons"


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    """A project with the two-lesson course file, built with `coursekit branches` and released."""
    root = tmp_path_factory.mktemp("two_lessons")
    shutil.copytree(FIXTURE, root, dirs_exist_ok=True)
    for rel in ("lessons/lesson11_grpo.qmd", "lessons/lesson11_grpo_demo.ipynb", "index.qmd"):
        shutil.copyfile(REPO / rel, root / rel)
    (root / "assets").symlink_to(REPO / "assets")  # the figures the lessons embed, the runner
    (root / "node_modules").symlink_to(REPO / "node_modules")  # MathJax, Mermaid, Pyodide for the preview
    (root / "autograder").mkdir()
    shutil.copyfile(REPO / "autograder" / "nbgrader_config.py", root / "autograder" / "nbgrader_config.py")
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(root)
        assert main(["branches"]) == 0
        assert main(["release", "--to", str(root / "build")]) == 0
    return root


@pytest.fixture(scope="module")
def sites(project) -> dict[str, Path]:
    """Both preview sites of the two-lesson course, as `make site` builds them."""
    return {name: preview.build_preview(project, name) for name in preview.BRANCHES}


def test_lesson_11_builds_byte_identical_beside_another_lesson(project, released_course):
    for rel in ("exercises/lesson11_grpo.qmd", "exercises/lesson11_grpo.ipynb", "solutions/lesson11_grpo.qmd",
                "solutions/lesson11_grpo.ipynb", "autograder/source/lesson11/lesson11.ipynb"):
        assert (project / rel).read_bytes() == (REPO / rel).read_bytes(), rel
    release = project / "autograder" / "release" / "lesson11" / "lesson11.ipynb"
    assert release.read_bytes() == released_course.release_notebook.read_bytes()  # lesson 11 released alone


def test_each_lesson_has_its_own_rubric(project):
    ppo, grpo = (Course.at(project / "autograder", lesson).rubric for lesson in ("lesson10", "lesson11"))
    assert (ppo.code_cell, ppo.columns, ppo.answers) == (
        "clipped_surrogate", ("positive", "negative", "token_mean"), ("explanation", "q1", "q2", "q3"))
    assert (ppo.max_score, ppo.pass_score) == (10.0, 6.0)  # pass_score: 6 in its course.yml entry
    assert (grpo.code_cell, grpo.columns, grpo.max_score, grpo.pass_score) == (
        "group_advantages", ("normal", "boundary", "aggregation"), 10.0, 8.0)
    assert ",".join(report_columns(grpo)) == \
        "student_id,normal,boundary,aggregation,auto_total,manual_total,total,max_score,passed,flags,final_total,note"


def test_the_profiles_list_both_lessons_in_course_order(project):
    profile = yaml.safe_load((project / "_quarto-exercise.yml").read_text(encoding="utf-8"))
    assert profile["project"]["render"] == ["index.qmd", "exercises/lesson10_ppo_clip.qmd",
                                            "exercises/lesson11_grpo.qmd", "lessons/lesson11_grpo_demo.ipynb"]


def _secrets(lesson_path: Path) -> list[str]:
    lesson = parse_lesson(lesson_path)
    texts = [line.strip() for line in lesson.answer_lines]
    for div in lesson.reference_answers().values():
        texts += [line.strip("-*0123456789. ")[:40] for line in div.text_lines() if len(line.strip()) > 20]
    return texts + ["填空处的参考代码"]  # the solution's level-4 hint


def test_no_answer_of_either_lesson_reaches_an_exercise_page(project):
    secrets = _secrets(project / "lessons/lesson10_ppo_clip.qmd") + _secrets(project / "lessons/lesson11_grpo.qmd")
    for page in sorted((project / "exercises").iterdir()) + sorted((project / "build").iterdir()):
        text = page.read_text(encoding="utf-8")
        if page.suffix == ".ipynb":  # the notebook's text, not its JSON escaping
            text = "\n".join(cell.source for cell in nbformat.reads(text, 4).cells)
        leaked = [s for s in secrets if s in text]
        assert not leaked, f"{page.name} shows {leaked[0]!r}"


def test_each_lesson_is_one_assignment_in_one_gradebook(project):
    course = Course.at(project / "autograder", "lesson10")
    with Gradebook(course.db_url) as gb:
        assert sorted(a.name for a in gb.assignments) == ["lesson10", "lesson11"]
    for entry in load_course(project / "course.yml").lessons:
        assert (project / "autograder" / entry.release_notebook.relative_to("autograder")).is_file()


def _submission(project: Path, solved: bool) -> nbformat.NotebookNode:
    nb = nbformat.read(project / "exercises" / "lesson10_ppo_clip.ipynb", as_version=4)
    if solved:
        code = parse_lesson(project / "lessons" / "lesson10_ppo_clip.qmd").reference_code
        cell = next(c for c in nb.cells if "course-exercise" in c.metadata.get("tags", []))
        cell.source = code
    return nb


def test_a_small_class_of_the_second_lesson_is_graded_on_its_own_rubric(project, tmp_path):
    folder = tmp_path / "subs"
    folder.mkdir()
    nbformat.write(_submission(project, solved=True), folder / "s1.ipynb")
    nbformat.write(_submission(project, solved=False), folder / "s2.ipynb")
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(project)
        assert main(["grade", str(folder), "--lesson", "lesson10", "--course", "autograder", "--jobs", "1",
                     "--timeout", "5"]) == 0
    course = Course.at(project / "autograder", "lesson10")
    assert course.report_csv.name == "lesson10.csv"
    with course.report_csv.open(encoding="utf-8") as report:
        assert next(csv.reader(report)) == ["student_id", "positive", "negative", "token_mean", "auto_total",
                                            "manual_total", "total", "max_score", "passed", "flags",
                                            "final_total", "note"]
    rows = {r["student_id"]: r for r in csv.DictReader(course.report_csv.open(encoding="utf-8"))}
    assert [float(rows["s1"][k]) for k in ("positive", "negative", "token_mean")] == [2.0, 1.5, 0.5]
    assert [float(rows["s2"][k]) for k in ("positive", "negative", "token_mean")] == [0.0, 0.0, 0.0]
    # the blanks are found in its own exercise cell (grade id clipped_surrogate)
    assert "missing_answer(code," in rows["s2"]["flags"] and "code" not in rows["s1"]["flags"]
    assert {rows[s]["max_score"] for s in rows} == {"10"}
    assert not Course.at(project / "autograder", "lesson11").manifest.exists()


LESSON_PAGES = {branch: [f"{branch}s/lesson10_ppo_clip.html", f"{branch}s/lesson11_grpo.html"]
                for branch in preview.BRANCHES}


def _soup(site: Path, page: str) -> BeautifulSoup:
    return BeautifulSoup((site / page).read_text(encoding="utf-8"), "html.parser")


def test_the_preview_holds_both_lessons_and_links_them_in_course_order(sites):
    for branch, site in sites.items():
        pages = [*LESSON_PAGES[branch], "lessons/lesson11_grpo_demo.html"]
        for page in ["index.html", *pages]:
            nav = [a["href"] for a in _soup(site, page).select("header.course-nav nav a")]
            root = "../" * page.count("/")
            assert nav == [root + p for p in ["index.html", *pages]], f"{branch}: {page}"
        search = {e["href"].split("#")[0] for e in json.loads((site / "search.json").read_text("utf-8"))["sections"]}
        assert set(pages) <= search


def test_previous_and_next_link_a_neighbour_in_the_course_and_stay_text_otherwise(sites):
    for branch, site in sites.items():
        ppo, grpo = (_soup(site, page) for page in LESSON_PAGES[branch])
        (to_grpo,) = ppo.select("a.pagination-next")
        assert to_grpo["href"] == "../" + LESSON_PAGES[branch][1] and "第 11 课：GRPO 与组内相对优势" in to_grpo.text
        (to_ppo,) = grpo.select("a.pagination-prev")
        assert to_ppo["href"] == "../" + LESSON_PAGES[branch][0] and "第 10 课：PPO-clip 代理目标" in to_ppo.text
        assert not ppo.select("a.pagination-prev") and "第 9 课：策略梯度（不在本站点）" in ppo.text
        assert not grpo.select("a.pagination-next") and "第 12 课：大规模 RL 系统（不在本站点）" in grpo.text
        assert "第 10 课：RLHF/RLVR（不在本站点）" not in grpo.text


def _served_text(site: Path) -> str:
    """Every text the exercise site serves outside the vendored libraries (pages, JSON, scripts)."""
    parts = []
    for path in sorted(site.rglob("*")):
        rel = path.relative_to(site).as_posix()
        if not path.is_file() or rel.startswith(("assets/vendor", "assets/pyodide")):
            continue
        if path.suffix == ".html":
            parts.append(BeautifulSoup(path.read_text(encoding="utf-8"), "html.parser").get_text(""))
        elif path.suffix in (".json", ".js", ".css"):
            parts.append(path.read_text(encoding="utf-8"))
    return "\n".join(parts)


def test_no_answer_of_either_lesson_reaches_the_exercise_site_or_a_runner_config(project, sites):
    site = sites["exercise"]
    text = _served_text(site)
    for slug in ("lesson10_ppo_clip", "lesson11_grpo"):
        lesson = parse_lesson(project / "lessons" / f"{slug}.qmd")
        secrets = _secrets(project / "lessons" / f"{slug}.qmd") + runner.secret_snippets(lesson)
        leaked = [s for s in secrets if s in text or json.dumps(s, ensure_ascii=False)[1:-1] in text]
        assert not leaked, f"the exercise site shows {slug}'s {leaked[0]!r}"
        assert any(s in _served_text(sites["solution"]) for s in _secrets(project / "lessons" / f"{slug}.qmd"))


def test_each_lesson_page_runs_its_own_runner_config(sites):
    site = sites["exercise"]
    for page, lesson_id, grade_id in zip(LESSON_PAGES["exercise"], ("lesson10", "lesson11"),
                                         ("clipped_surrogate", "group_advantages"), strict=True):
        (tag,) = _soup(site, page).select("script[data-runner-config]")
        config_path = site / tag["data-runner-config"]  # runner.js reads it from the site root
        config = json.loads(config_path.read_text(encoding="utf-8"))
        assert config_path.name == runner.config_name(Path(page).stem)
        assert (config["lesson_id"], config["answer_grade_id"]) == (lesson_id, grade_id)
        checks = ["positive", "negative", "token_mean"] if lesson_id == "lesson10" else \
            ["normal", "boundary", "aggregation"]
        assert [c["id"] for c in config["checks"]] == checks
    assert not _soup(sites["solution"], LESSON_PAGES["solution"][0]).select("script[data-runner-config]")


def test_a_one_lesson_preview_links_no_neighbour_it_does_not_hold(project, tmp_path):
    site = preview.build_preview(project, "exercise", tmp_path / "_site", lesson="lesson10")
    assert not (site / LESSON_PAGES["exercise"][1]).exists()
    page = _soup(site, LESSON_PAGES["exercise"][0])
    assert [a["href"] for a in page.select("header.course-nav nav a")] == ["../index.html",
                                                                            "../exercises/lesson10_ppo_clip.html"]
    assert not page.select("a.pagination-next") and "第 11 课：GRPO（不在本站点）" in page.text
    assert (site / "assets" / "runner" / runner.config_name("lesson10_ppo_clip")).is_file()
    assert not (site / "assets" / "runner" / runner.config_name("lesson11_grpo")).exists()


QUARTO_PAGINATION = (  # what Pandoc makes of lesson 11's `.course-pagination` block
    '<html><body><main><div class="course-pagination">\n<p>'
    '<span class="pagination-link pagination-prev pagination-disabled">'
    "<strong>← 上一课</strong> 第 10 课：RLHF/RLVR（不在本站点）</span>\n"
    '<span class="pagination-link pagination-next pagination-disabled">'
    "<strong>下一课 →</strong> 第 12 课：大规模 RL 系统（不在本站点）</span></p>\n</div></main></body></html>")


def test_a_quarto_page_gets_the_same_neighbour_links(project, tmp_path):
    """The Quarto post-render hook runs `link_neighbours` on Quarto's HTML, where the source's spans survive."""
    page = tmp_path / "_site" / "exercises" / "lesson11_grpo.html"
    page.parent.mkdir(parents=True)
    page.write_text(QUARTO_PAGINATION, encoding="utf-8")
    preview.link_neighbours(preview.Build(project, preview.BRANCHES["exercise"], tmp_path / "_site"))
    soup = _soup(tmp_path / "_site", "exercises/lesson11_grpo.html")
    (link,) = soup.select("a.pagination-prev")
    assert link["href"] == "../exercises/lesson10_ppo_clip.html" and "第 10 课：PPO-clip 代理目标" in link.text
    assert "RLHF/RLVR" not in soup.text and soup.select("span.pagination-next.pagination-disabled")
