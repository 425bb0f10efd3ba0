"""course.yml: the lessons in order and the lesson template; bad course files fail with one line."""
from pathlib import Path

import pytest
import yaml

from coursekit.cli import main
from coursekit.course_file import load_course, resolve_lesson
from coursekit.errors import CourseError
from coursekit.lesson import parse_lesson
from coursekit.nav import nav_outputs

ROOT = Path(__file__).resolve().parents[2]
GOOD = """title: 课程
template:
  sections: [目标]
  pass_score: 8
lessons:
  - {id: lesson10, slug: lesson10_x, source: lessons/lesson10_x.qmd, title: 第 10 课, pass_score: 6.5}
  - id: lesson11
    slug: lesson11_y
    source: lessons/lesson11_y.qmd
    title: 第 11 课
    demos: [{source: lessons/demo.ipynb, title: 演示}]
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "course.yml"
    path.write_text(text, encoding="utf-8")
    return path


def test_the_course_file_lists_lesson_11_with_its_paths():
    course = load_course(ROOT / "course.yml")
    entry = course.lesson("lesson11")
    assert entry.source == Path("lessons/lesson11_grpo.qmd")
    assert entry.source_notebook == Path("autograder/source/lesson11/lesson11.ipynb")
    assert entry.release_notebook == Path("autograder/release/lesson11/lesson11.ipynb")
    assert entry.branch_notebook("exercise") == Path("exercises/lesson11_grpo.ipynb")
    assert [d.target for d in entry.demos] == ["lessons/lesson11_grpo_demo.html"]
    assert course.lesson("lesson11_grpo") is entry


def test_lessons_keep_their_order_and_know_their_neighbours(tmp_path):
    course = load_course(write(tmp_path, GOOD))
    first, second = course.lessons
    assert course.neighbours(first) == (None, second)
    assert course.neighbours(second) == (first, None)
    assert course.select(None) == course.lessons and course.select("lesson11") == (second,)


def test_the_pass_score_is_the_templates_unless_the_lesson_sets_its_own(tmp_path):
    first, second = load_course(write(tmp_path, GOOD)).lessons
    assert (first.pass_score, second.pass_score) == (6.5, 8.0)


@pytest.mark.parametrize(("text", "message"), [
    ("title: x\nlessons: []\n", "needs a non-empty 'lessons' list"),
    (GOOD.replace("title: 课程", "name: 课程"), "needs a 'title'"),
    ("lessons: [\n", "not valid YAML"),
    (GOOD.replace("sections: [目标]", "sections: 目标"), "'template: sections:' must be a list"),
    (GOOD.replace("title: 第 10 课", "titel: 第 10 课"), "lesson 1: missing or non-text 'title'"),
    (GOOD.replace("lesson10_x.qmd", "other.qmd"), "lesson 1: source must be <folder>/lesson10_x.qmd"),
    (GOOD.replace("id: lesson10", "id: lesson11"), "lesson id 'lesson11' is used twice"),
    (GOOD.replace("title: 演示", "name: 演示"), "lesson 2: each demo needs 'source'"),
    (GOOD.replace("  pass_score: 8\n", ""), "template: 'pass_score' must be a positive number of points, got None"),
    (GOOD.replace("pass_score: 6.5", "pass_score: eight"), "lesson 1: 'pass_score' must be a positive number"),
    (GOOD.replace("pass_score: 6.5", "pass_score: 0"), "lesson 1: 'pass_score' must be a positive number"),
])
def test_a_bad_course_file_fails_with_one_line_naming_it(tmp_path, text, message):
    path = write(tmp_path, text)
    with pytest.raises(CourseError) as info:
        load_course(path)
    assert str(info.value).startswith(str(path)) and message in str(info.value)
    assert "\n" not in str(info.value)


def test_an_unknown_lesson_names_the_known_ones(tmp_path):
    with pytest.raises(CourseError, match=r"no lesson 'lesson12'; the lessons are lesson10, lesson11"):
        load_course(write(tmp_path, GOOD)).lesson("lesson12")
    assert main(["branches", "--lesson", "lesson12", "--check"]) == 1


def test_a_source_outside_the_course_is_named_after_its_file(tmp_path):
    entry = resolve_lesson(tmp_path / "draft.qmd")
    assert (entry.id, entry.slug) == ("draft", "draft")
    assert resolve_lesson(ROOT / "lessons" / "lesson11_grpo.qmd").id == "lesson11"


def test_the_required_sections_come_from_the_template():
    source = ROOT / "lessons" / "lesson11_grpo.qmd"
    parse_lesson(source, sections=("本课目标与完成标准",))
    with pytest.raises(CourseError, match="missing section '不存在的一节'"):
        parse_lesson(source, sections=("不存在的一节",))


def test_the_committed_quarto_profiles_are_what_the_course_file_generates():
    course = load_course(ROOT / "course.yml")
    for rel, text in nav_outputs(course).items():
        assert (ROOT / rel).read_text(encoding="utf-8") == text, f"{rel}: run `make branches` and commit"


def test_the_profiles_list_every_lesson_and_demo_in_course_order(tmp_path):
    lessons = tmp_path / "lessons"
    lessons.mkdir()
    source = (ROOT / "lessons" / "lesson11_grpo.qmd").read_text(encoding="utf-8")
    for slug in ("lesson10_x", "lesson11_y"):
        (lessons / f"{slug}.qmd").write_text(source, encoding="utf-8")
    course = load_course(write(tmp_path, GOOD.replace("sections: [目标]", "sections: [Q1]")))
    profile = yaml.safe_load(nav_outputs(course)["_quarto-exercise.yml"])
    assert profile["project"]["render"] == ["index.qmd", "exercises/lesson10_x.qmd", "exercises/lesson11_y.qmd",
                                            "lessons/demo.ipynb"]
    navbar = [i["text"] for i in profile["website"]["navbar"]["left"]]
    assert navbar == ["首页", "第 10 课（练习）", "第 11 课（练习）", "演示"]


@pytest.mark.parametrize("argv", [
    ["branches", "--lesson", "lesson12", "--check"],
    ["release", "--lesson", "lesson12"],
    ["grade", "subs", "--lesson", "lesson12"],
    ["report", "--lesson", "lesson12"],
    ["lab", "--lesson", "lesson12", "--no-browser"],
    ["site", "--preview", "--lesson", "lesson12"],
])
def test_every_command_refuses_a_lesson_not_in_the_course(argv, capsys):
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert "no lesson 'lesson12'; the lessons are lesson11" in err and err.count("\n") == 1
