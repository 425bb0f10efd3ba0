"""The lesson parser: answer markers, blanks and the errors a bad source gets."""

import re
from pathlib import Path

import pytest

from coursekit.cli import main
from coursekit.lesson import BLANK, LessonError, answer_lines, blank_answers, parse_lesson, strip_answer_markers

ROOT = Path(__file__).resolve().parents[2]
LESSON = ROOT / "lessons" / "lesson11_grpo.qmd"


def test_line_marker_keeps_assignment_and_return():
    code = "def f(x):\n    y = x * 2  # SOLUTION\n    return y + 1  # SOLUTION\n"
    assert blank_answers(code) == f"def f(x):\n    y = {BLANK}\n    return {BLANK}\n"
    assert strip_answer_markers(code) == "def f(x):\n    y = x * 2\n    return y + 1\n"
    assert answer_lines(code) == ["    y = x * 2", "    return y + 1"]


def test_block_marker_becomes_one_blank_at_its_indent():
    code = "def f():\n    # BEGIN SOLUTION\n    a = 1\n    b = 2\n    # END SOLUTION\n    return a"
    assert blank_answers(code) == f"def f():\n    {BLANK}\n    return a"
    assert strip_answer_markers(code) == "def f():\n    a = 1\n    b = 2\n    return a"


@pytest.mark.parametrize("code, message", [
    ("# BEGIN SOLUTION\nx = 1\n", "never closed"),
    ("x = 1\n# END SOLUTION\n", "without"),
    ("x = 1  # SOLUTION please\n", "must end the line"),
    ("# BEGIN SOLUTION\n# BEGIN SOLUTION\nx = 1\n# END SOLUTION\n", "inside another"),
])
def test_bad_markers_are_rejected(code, message):
    with pytest.raises(ValueError, match=message):
        blank_answers(code)


def test_lesson_blanks_equal_the_seed_exercise_cell(seed_exercise_cell):
    lesson = parse_lesson(LESSON)
    assert lesson.blank_code + "\n" == seed_exercise_cell
    assert [line.strip() for line in lesson.answer_lines] == [
        "var = sum((r - mean) ** 2 for r in rewards) / len(rewards)", "return [0.0] * len(rewards)"]


def _broken(tmp_path: Path, old: str, new: str, count: int = 1) -> Path:
    text = LESSON.read_text(encoding="utf-8")
    assert old in text, old
    bad = tmp_path / "lessons" / "lesson11_grpo.qmd"
    bad.parent.mkdir(parents=True)
    bad.write_text(text.replace(old, new, count), encoding="utf-8")
    return bad


BROKEN_SOURCES = {
    "unclosed block marker": ("    return [(r - mean) / std for r in rewards]\n",
                              "    # BEGIN SOLUTION\n    return [(r - mean) / std for r in rewards]\n", "never closed"),
    "marker not at line end": ("len(rewards)  # SOLUTION", "len(rewards)  # SOLUTION here", "must end the line"),
    "marker in markdown": ("补齐组内优势的方差与零方差分支。", "补齐组内优势的方差与零方差分支。 # SOLUTION",
                           "outside a code cell"),
    "marker in another cell": ("print(\"mean =\", mean)", "print(\"mean =\", mean)  # SOLUTION",
                               "outside the exercise cell"),
    "unknown role": ("#| course_role: solution", "#| course_role: answer", "unknown course_role 'answer'"),
    "missing section": ("## 前置关系", "## 先修", "missing section '前置关系'"),
    "unclosed div": (":::\n\n::: {.answer id=\"q1\"", ":::\n\n::: {.answer id=\"q1\"", "never closed"),
    "no answer marked": ("  # SOLUTION\n", "\n", "has no answer", 2),
    "block between question and answer": ("\n::: {.answer id=\"q2\"",
                                          "\n```{python}\nprint(1)\n```\n\n::: {.answer id=\"q2\"",
                                          "must directly follow the text of its question"),
    "assert missing from tests": ("assert group_advantages([1.]) == [0.]\ntry", "assert 1 == 1\ntry",
                                  "not in the exercise cell"),
    "exercise without grade id": ("#| grade_id: group_advantages\n", "", "the exercise cell needs '#| grade_id: name'"),
    "two test cells share a test id": ("#| test_id: boundary", "#| test_id: normal",
                                       "grade id 'test_normal' is already used on line"),
    "answer id like the exercise's": ('::: {.answer id="q3"', '::: {.answer id="group_advantages"',
                                      "grade id 'group_advantages' is already used on line"),
}


@pytest.mark.parametrize("case", sorted(BROKEN_SOURCES))
def test_bad_source_fails_with_file_line_and_writes_nothing(case, tmp_path, capsys):
    old, new, message, *count = BROKEN_SOURCES[case]
    if case == "unclosed div":  # drop the closing fence of the Q1 answer div
        text = LESSON.read_text(encoding="utf-8")
        start = text.index('::: {.answer id="q1"')
        end = text.index(":::", start + 5)
        bad = tmp_path / "lessons" / "lesson11_grpo.qmd"
        bad.parent.mkdir(parents=True)
        bad.write_text(text[:end] + text[end + 4:], encoding="utf-8")
    else:
        bad = _broken(tmp_path, old, new, *count)
    before = bad.read_bytes()
    out_root = tmp_path / "out"
    out_root.mkdir()

    assert main(["branches", "--lesson", str(bad), "--root", str(out_root)]) == 1

    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert re.match(rf"error: {re.escape(str(bad))}:\d+: ", err), err
    assert message in err
    assert list(out_root.iterdir()) == [], "a failed build must write nothing"
    assert bad.read_bytes() == before, "the source is never modified"


def test_error_line_points_at_the_marker(tmp_path):
    bad = _broken(tmp_path, "补齐组内优势的方差与零方差分支。", "补齐组内优势的方差与零方差分支。 # SOLUTION")
    with pytest.raises(LessonError) as info:
        parse_lesson(bad)
    line = bad.read_text(encoding="utf-8").split("\n")[info.value.line - 1]
    assert "# SOLUTION" in line
