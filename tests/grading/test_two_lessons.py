"""Two lessons in one course (tests/fixtures/two_lessons: a PPO-clip lesson, then lesson 11): branches,
one nbgrader assignment each in one gradebook, a small class graded per lesson, and no answer of one
lesson on the other's exercise pages. Lesson 11's files stay byte-identical to the committed ones."""

from __future__ import annotations

import csv
import shutil
from pathlib import Path

import nbformat
import pytest
import yaml
from nbgrader.api import Gradebook

from coursekit.cli import main
from coursekit.course_file import load_course
from coursekit.grading.course import Course
from coursekit.lesson import parse_lesson

REPO = Path(__file__).resolve().parents[2]
FIXTURE = REPO / "tests" / "fixtures" / "two_lessons"


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    """A project with the two-lesson course file, built with `coursekit branches` and released."""
    root = tmp_path_factory.mktemp("two_lessons")
    shutil.copytree(FIXTURE, root, dirs_exist_ok=True)
    for rel in ("lessons/lesson11_grpo.qmd", "lessons/lesson11_grpo_demo.ipynb"):
        shutil.copyfile(REPO / rel, root / rel)
    (root / "assets").symlink_to(REPO / "assets")  # the figures the lessons embed
    (root / "autograder").mkdir()
    shutil.copyfile(REPO / "autograder" / "nbgrader_config.py", root / "autograder" / "nbgrader_config.py")
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(root)
        assert main(["branches"]) == 0
        assert main(["release", "--to", str(root / "build")]) == 0
    return root


def test_lesson_11_builds_byte_identical_beside_another_lesson(project):
    for rel in ("exercises/lesson11_grpo.qmd", "exercises/lesson11_grpo.ipynb", "solutions/lesson11_grpo.qmd",
                "solutions/lesson11_grpo.ipynb", "autograder/source/lesson11/lesson11.ipynb"):
        assert (project / rel).read_bytes() == (REPO / rel).read_bytes(), rel


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
    rows = {r["student_id"]: r for r in csv.DictReader(course.report_csv.open(encoding="utf-8"))}
    assert [float(rows["s1"][k]) for k in ("normal", "boundary", "aggregation")] == [1.5, 1.0, 0.5]
    assert [float(rows["s2"][k]) for k in ("normal", "boundary", "aggregation")] == [0.0, 0.0, 0.0]
    assert not Course.at(project / "autograder", "lesson11").manifest.exists()
