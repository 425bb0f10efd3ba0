"""`coursekit export`: the roster and the Canvas / Moodle / CSV files (coursekit.grading.records.export)."""

from __future__ import annotations

from pathlib import Path

import pytest

from coursekit.cli import main
from coursekit.errors import CourseError
from coursekit.grading.course import Rubric
from coursekit.grading.records.export import export_rows, read_roster
from coursekit.grading.records.report import Row

# lesson 11's rubric (10 points, pass at 8), from its committed nbgrader source notebook
RUBRIC = Rubric.of_notebook(Path(__file__).resolve().parents[2] / "autograder/source/lesson11/lesson11.ipynb", 8.0)

ROSTER = """student_id,name,canvas_id,sis_user_id,sis_login_id,section,email
s01,张三,101,S001,zhangsan,A,s01@example.edu
s02,李四,102,S002,lisi,A,s02@example.edu
s03,王五,103,,,B,s03@example.edu
"""


def write(tmp_path, text, name="roster.csv", encoding="utf-8"):
    path = tmp_path / name
    path.write_bytes(text.encode(encoding))
    return path


def graded(sid, auto, manual, pending=0.0, flags=()):
    row = Row(sid, RUBRIC, flags=list(flags), graded=True)
    row.auto = dict(zip(("normal", "boundary", "aggregation"), auto, strict=True))
    row.manual_total, row.manual_pending = manual, pending
    return row


ROWS = {"s01": graded("s01", (1.5, 1, 0.5), 7),
        "s02": graded("s02", (1.5, 1, 0.5), 3, pending=4),
        "s09": graded("s09", (1.5, 1, 0.5), 5, flags=["veto(q1: 结果碰巧正确但核心因果链错误)"])}


def test_canvas_file_has_the_gradebook_columns_and_points_possible(tmp_path):
    roster = read_roster(write(tmp_path, ROSTER), "canvas")
    rows = export_rows("canvas", roster, ROWS, "Lesson 11 (4711)", RUBRIC)
    assert rows == [
        ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", "Lesson 11 (4711)"],
        ["Points Possible", "", "", "", "", "10"],
        ["张三", "101", "S001", "zhangsan", "A", "10"],
        ["李四", "102", "S002", "lisi", "A", ""],   # manual grading pending: left empty
        ["王五", "103", "", "", "B", ""],            # no submission: left empty
    ]


def test_moodle_file_has_the_mapped_identifier_grade_and_feedback(tmp_path):
    roster_text = ROSTER + "s09,钱七,109,S009,qianqi,B,s09@example.edu\n"
    roster = read_roster(write(tmp_path, roster_text), "moodle", "email")
    rows = export_rows("moodle", roster, ROWS, "lesson11", RUBRIC, "email")
    assert rows[0] == ["Email address", "lesson11", "lesson11 feedback"]
    assert rows[1] == ["s01@example.edu", "10", "通过"]
    # a veto caps the points below the pass score (8 -> 7) and the feedback column says why
    assert rows[2] == ["s09@example.edu", "7", "未通过；一票否决：q1: 结果碰巧正确但核心因果链错误；"
                       "一票否决：各项合计 8 分，计入 7 分（封顶为通过线 8 减 1）"]


def test_moodle_file_leaves_out_every_student_without_a_grade(tmp_path):
    """Moodle's CSV import turns an empty grade cell into "no grade", clearing a grade already there
    (moodle/moodle grade/import/csv/classes/load_data.php, update_grade_item: `if ($value === '' or
    $value == '-') { $value = null; // No grade. }`): pending (s02) and missing (s03) students get no row."""
    roster = read_roster(write(tmp_path, ROSTER + "s09,钱七,109,S009,qianqi,B,s09@example.edu\n"), "moodle")
    rows = export_rows("moodle", roster, ROWS, "lesson11", RUBRIC, "email")
    assert [r[0] for r in rows[1:]] == ["s01@example.edu", "s09@example.edu"]
    assert all(r[1] != "" for r in rows)


def test_a_veto_caps_the_exported_points_in_every_format(tmp_path):
    roster = read_roster(write(tmp_path, ROSTER + "s09,钱七,109,S009,qianqi,B,s09@example.edu\n"), "canvas")
    canvas = export_rows("canvas", roster, ROWS, "lesson11", RUBRIC)
    assert canvas[-1] == ["钱七", "109", "S009", "qianqi", "B", "7"]
    table = export_rows("csv", roster, ROWS, "lesson11", RUBRIC)
    row = dict(zip(table[0], table[-1], strict=True))
    # issue 33: total beside auto_total + manual_total is their sum; final_total is the grade, and note says why
    assert (row["total"], row["auto_total"], row["manual_total"], row["passed"]) == ("8", "3", "5", "no")
    assert row["final_total"] == "7" and row["note"] == "一票否决：各项合计 8 分，计入 7 分（封顶为通过线 8 减 1）"
    assert dict(zip(table[0], table[1], strict=True))["note"] == ""  # no veto, nothing to explain
    assert ROWS["s09"].total == 8 and ROWS["s01"].final_total == 10  # the report keeps the cells' own total


def test_csv_file_keeps_every_report_column(tmp_path):
    roster = read_roster(write(tmp_path, ROSTER), "csv")
    rows = export_rows("csv", roster, ROWS, "lesson11", RUBRIC)
    assert rows[0][:8] == ["student_id", "name", "canvas_id", "sis_user_id", "sis_login_id", "section", "email",
                           "normal"]
    assert rows[0][-5:] == ["max_score", "passed", "flags", "final_total", "note"]
    assert rows[1][0] == "s01" and rows[1][-4] == "yes" and rows[3][-4] == ""


def test_lms_export_headers_are_accepted_as_roster_columns(tmp_path):
    text = "\ufeffStudent,ID,SIS User ID,SIS Login ID,Section,Student_ID,Email Address\n张三,101,S001,zs,A,s01,a@b.c\n"
    (student,) = read_roster(write(tmp_path, text), "canvas")
    assert student.fields == {"name": "张三", "canvas_id": "101", "sis_user_id": "S001", "sis_login_id": "zs",
                              "section": "A", "student_id": "s01", "email": "a@b.c"}


BAD_ROSTERS = {
    "duplicate id": (ROSTER + "s02,重复,199,S199,dup,A,x@y.z\n", "canvas", ":5: student_id 's02' repeats row 3"),
    "empty id": (ROSTER + ",无名,199,S199,anon,A,x@y.z\n", "canvas", ":5: empty student_id"),
    "short row": (ROSTER + "s04,赵六\n", "canvas", ":5: 2 fields, the header has 7"),
    "no student_id column": ("name,email\n张三,a@b.c\n", "csv", ":1: no student_id column"),
    "no canvas id": (ROSTER + "s04,赵六,,,,A,s04@example.edu\n", "canvas",
                     ":5: 's04' has no ID, SIS User ID or SIS Login ID"),
    "no canvas id column": ("student_id,name\ns01,张三\n", "canvas", ":1: no ID, SIS User ID or SIS Login ID column"),
    "no moodle id column": ("student_id,name\ns01,张三\n", "moodle", ":1: no email column"),
    "duplicate canvas id": (ROSTER + "s04,赵六,101,S004,zhaoliu,A,s04@example.edu\n", "canvas",
                            ":5: canvas_id '101' repeats row 2 (one LMS user for two students)"),
    "duplicate sis login": (ROSTER + "s04,赵六,104,S004,LiSi,A,s04@example.edu\n", "csv",
                            ":5: sis_login_id 'LiSi' repeats row 3"),
    "duplicate email": (ROSTER + "s04,赵六,104,S004,zl,A,S01@Example.edu\n", "moodle",
                        ":5: email 'S01@Example.edu' repeats row 2"),
    "not a course id": (ROSTER + "Zhao Liu,赵六,104,S004,zl,A,s04@example.edu\n", "canvas",
                        ":5: student_id 'Zhao Liu' is not a course id"),
    "no moodle id": ("student_id,email\ns01,\n", "moodle", ":2: 's01' has no email"),
    "only a header": ("student_id,email\n", "csv", ": no students after the header row"),
    "empty file": ("", "csv", ":1: no header row"),
}


@pytest.mark.parametrize("case", sorted(BAD_ROSTERS))
def test_a_bad_roster_is_one_line_naming_the_row(case, tmp_path):
    text, fmt, message = BAD_ROSTERS[case]
    path = write(tmp_path, text)
    with pytest.raises(CourseError) as info:
        read_roster(path, fmt)
    assert str(info.value).startswith(f"{path}") and message in str(info.value), str(info.value)
    assert "\n" not in str(info.value)


def test_a_roster_that_is_not_utf8_is_rejected(tmp_path):
    path = write(tmp_path, ROSTER, encoding="gbk")
    with pytest.raises(CourseError, match="not UTF-8 text"):
        read_roster(path, "csv")


def test_bad_roster_through_the_cli_exits_1_with_one_line(tmp_path, capsys):
    course = tmp_path / "course"
    course.mkdir()
    (course / "nbgrader_config.py").write_text("")
    path = write(tmp_path, ROSTER + "s01,again,1,2,3,A,z@z.z\n")
    assert main(["export", "--format", "canvas", "--roster", str(path), "--course", str(course)]) == 1
    err = capsys.readouterr().err.strip()
    assert err == f"error: {path}:5: student_id 's01' repeats row 2"
