"""`coursekit grade` on a folder mixing good and bad submissions (see submission_kinds.py)."""

from __future__ import annotations

import html
import re
import shutil

import nbformat
import pytest
from grading_support import read_rows
from nbgrader.api import Gradebook
from submission_kinds import FILE_KINDS, NOTEBOOK_KINDS, expected
from test_grading_hidden_tests import NEGATIVE_VARIANCE, SAMPLE

from coursekit.cli import main
from coursekit.grading.course import Course
from coursekit.grading.records.feedback import FeedbackWriter
from coursekit.grading.records.record import lent_to_nbgrader_steps, modules_opening_gradebooks
from coursekit.grading.records.report import class_rows, find_lesson, report_columns

ALL_KINDS = [*NOTEBOOK_KINDS, *FILE_KINDS, "two_notebooks", "unknown_id"]
pytestmark = pytest.mark.slow


def flag_names(row: dict[str, str]) -> set[str]:
    return {f.split("(", 1)[0] for f in row["flags"].split(";") if f}


def test_grading_finishes_with_exit_status_zero(graded_class):
    assert graded_class.exit_code == 0


def test_every_student_gets_exactly_one_row(graded_class):
    lines = graded_class.csv.strip().split("\n")
    assert lines[0] == ("student_id,normal,boundary,aggregation,auto_total,manual_total,total,max_score,passed,flags,"
                        "final_total,note")
    assert tuple(lines[0].split(",")) == report_columns(graded_class.course.rubric)
    assert len(lines) - 1 == len(graded_class.students)
    assert set(graded_class.rows) == set(graded_class.students)


@pytest.mark.parametrize("kind", ALL_KINDS)
def test_each_kind_gets_its_expected_scores_and_flags(graded_class, kind):
    row = graded_class.row(kind)
    (normal, boundary, aggregation), flags = expected(kind)
    assert (float(row["normal"]), float(row["boundary"]), float(row["aggregation"])) == \
        (normal, boundary, aggregation), row
    assert float(row["auto_total"]) == normal + boundary + aggregation
    assert float(row["max_score"]) == 10
    assert flag_names(row) == flags, row["flags"]


def test_reference_solution_scores_full_automatic_points(graded_class):
    row = graded_class.row("correct")
    assert float(row["auto_total"]) == 3 and row["flags"] == ""
    assert row["passed"] == "pending"  # the written answers still need the instructor


@pytest.mark.parametrize("kind", ["deleted_asserts", "invalid_json", "unknown_id", "sample_variance"])
def test_vetoed_unreadable_and_hopeless_submissions_do_not_pass(graded_class, kind):
    assert graded_class.row(kind)["passed"] == "no"


def test_original_submissions_stay_byte_identical(graded_class):
    assert graded_class.after == graded_class.before


def test_memory_cap_is_named_in_the_flag(graded_class):
    assert "memory capped at 2 GiB" in graded_class.row("memory_hog")["flags"]


def test_huge_output_is_truncated_in_autograded_notebook_and_feedback(graded_class):
    sid = next(s for s, k in graded_class.students.items() if k == "prints_50mb")
    course = graded_class.course
    assert course.autograded_notebook(sid).stat().st_size < 1_000_000
    # the page's own part: it also carries MathJax (coursekit.grading.pages, the same ~2.5 MB on every page)
    from coursekit.grading.pages import inline_mathjax

    assert course.feedback_html(sid).stat().st_size - len(inline_mathjax().encode()) < 1_000_000


def test_every_graded_student_gets_feedback_html(graded_class):
    graded = [sid for sid, kind in graded_class.students.items()
              if kind not in FILE_KINDS and kind != "unknown_id"]
    assert all(graded_class.course.feedback_html(sid).is_file() for sid in graded)


def test_feedback_pages_are_the_ones_a_fresh_writer_makes(graded_class):
    """`coursekit grade` writes the pages with one writer warmed before the class ends (templates, the
    lesson's highlighted code and rendered Markdown, shared by the processes that write them) and keeps
    what it highlighted for the next pages: each page is byte for byte the one nbgrader's pipeline,
    built afresh for that student alone, makes."""
    course = graded_class.course
    rows = class_rows(course, find_lesson(course, None))[0]
    graded = [row for row in rows if row.graded]
    assert len(graded) > 20 and any(row.vetoed for row in graded)
    written = {row.student_id: course.feedback_html(row.student_id).read_bytes() for row in graded}
    for row in graded:
        writer = FeedbackWriter(course)  # nothing kept from another student's page
        page = course.feedback_html(row.student_id)
        try:
            with Gradebook(course.db_url) as gb, \
                    lent_to_nbgrader_steps(gb, course.db_url, modules_opening_gradebooks(writer.steps)):
                writer.write(row.student_id, vetoes=row.veto_reasons if row.vetoed else (),
                             cap=row.veto_cap if row.vetoed else 0.0)
            assert page.read_bytes() == written[row.student_id], row.student_id
        finally:
            page.parent.mkdir(parents=True, exist_ok=True)
            page.write_bytes(written[row.student_id])  # the class's page, for the other tests


def hidden_test_lines(source_notebook) -> list[str]:
    nb = nbformat.read(source_notebook, as_version=4)
    released = nbformat.read(str(source_notebook).replace("/source/", "/release/"), as_version=4)
    visible = "\n".join(c.source for c in released.cells)
    lines = []
    for cell in nb.cells:
        for block in re.findall(r"### BEGIN HIDDEN TESTS\n(.*?)### END HIDDEN TESTS", cell.source, re.S):
            lines += [" ".join(line.split()) for line in block.split("\n")
                      if len(line.strip()) > 10 and line.strip() not in visible]
    return lines


def test_feedback_html_contains_no_hidden_test_source(graded_class):
    hidden = hidden_test_lines(graded_class.course.source_notebook)
    assert len(hidden) > 20
    pages = sorted((graded_class.course.root / "feedback").rglob("*.html"))
    assert pages
    for page in pages:
        text = " ".join(re.sub(r"<[^>]+>", "", html.unescape(page.read_text(encoding="utf-8"))).split())
        leaked = [line for line in hidden if line in text]
        assert not leaked, f"{page}: {leaked[:2]}"


def test_manual_grades_and_veto_comments_decide_passed(graded_class, tmp_path):
    course = Course.at(shutil.copytree(graded_class.course.root, tmp_path / "course"))
    correct = next(s for s, k in graded_class.students.items() if k == "correct")
    vetoed = next(s for s, k in graded_class.students.items() if k == "deleted_test_cell")
    partial = next(s for s, k in graded_class.students.items() if k == "std_eq_zero")
    with Gradebook(course.db_url) as gb:
        for sid, scores in ((correct, (1, 2, 2, 2)), (vetoed, (1, 2, 2, 2)), (partial, (1, 2, 2, None))):
            for name, score in zip(("explanation", "q1", "q2", "q3"), scores, strict=True):
                grade = gb.find_grade(name, "lesson11", "lesson11", sid)
                if score is not None:
                    grade.manual_score = score
                    grade.needs_manual_grade = False
        gb.find_comment("q1", "lesson11", "lesson11", vetoed).manual_comment = \
            "一票否决：结果碰巧正确但核心因果链错误"
        gb.db.commit()
    assert main(["report", "--course", str(course.root)]) == 0
    rows = read_rows(course.report_csv.read_text(encoding="utf-8"))
    assert (rows[correct]["manual_total"], rows[correct]["total"], rows[correct]["passed"]) == ("7", "10", "yes")
    assert rows[vetoed]["passed"] == "no"
    assert "veto(q1: 结果碰巧正确但核心因果链错误)" in rows[vetoed]["flags"].split(";")
    assert (rows[partial]["total"], rows[partial]["passed"]) == ("7", "pending")  # 2 auto + 5 manual, q3 open
    feedback = course.feedback_html(correct).read_text(encoding="utf-8")
    assert "lesson11（得分：10.0 / 10.0）" in feedback  # make report rewrites feedback with manual grades
    # nbgrader's feedback template in Chinese (issue 33): its labels, the header, the table of contents
    assert '<html lang="zh-CN">' in feedback and "学生的答案" in feedback and "（回到顶部）" in feedback
    english = ("Student's answer", "(Top)", "(Score:", "Score:", "Comments:", ">Test cell<", ">Written response<")
    assert not [words for words in english if words in feedback]


DIAGNOSTICS = {
    # kind: {test cell: the evalue of its one error output in the autograded notebook}
    "sample_variance": {"test_normal": SAMPLE, "test_boundary": SAMPLE,
                        "test_aggregation": "练习单元格没有运行到长度聚合断言（前面的断言失败），或改动了三个配方"},
    "std_eq_zero": {"test_boundary": "相同的非零奖励组：浮点误差让 std 略大于 0，组没有归零：要用 std < eps 判断，"
                                     "而不是 std == 0"},
    "hard_coded": {"test_normal": "只对题目给出的输入算对，其他输入都不对：不要按输入写死结果，要按公式计算",
                   "test_boundary": "方差很小但高于 eps 的组：被当成了零方差组（返回了全零）；"
                                    "std 不小于 eps 时要标准化"},
    "deleted_asserts": {"test_aggregation": "练习单元格没有运行到长度聚合断言（前面的断言失败），或改动了三个配方"},
    "infinite_loop": {"test_boundary": "运行超过 3 秒 CPU 时间，已中断（死循环？）",
                      "test_aggregation": "练习单元格没有运行到长度聚合断言（前面的断言失败），或改动了三个配方"},
    "correct": {},
    # other ways to fill the blanks (test_grading_hidden_tests.VALID): the clamped one-pass variance is right,
    # the unclamped one crashes on a constant group and is told why
    "one_pass_clamped": {},
    "one_pass": {"test_boundary": NEGATIVE_VARIANCE},
    "divide_by_mean": {"test_normal": "普通的组：优势与参考实现不一致（先减组均值，再除以总体标准差）",
                       "test_boundary": "方差很小但高于 eps 的组：结果不对；std 不小于 eps 时要标准化",
                       "test_aggregation": "练习单元格没有运行到长度聚合断言（前面的断言失败），或改动了三个配方"},
}


@pytest.mark.parametrize("kind", DIAGNOSTICS)
def test_a_failing_test_cell_carries_one_error_whose_evalue_is_the_diagnostic(graded_class, kind):
    sid = next(s for s, k in graded_class.students.items() if k == kind)
    nb = nbformat.read(graded_class.course.autograded_notebook(sid), as_version=4)
    errors = {c.metadata.nbgrader.grade_id: [o.evalue for o in c.outputs if o.output_type == "error"]
              for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id", "").startswith("test_")}
    assert {cell: found for cell, found in errors.items() if found} == \
        {cell: [message] for cell, message in DIAGNOSTICS[kind].items()}
