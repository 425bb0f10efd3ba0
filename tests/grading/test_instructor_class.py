"""The instructor's tools on a graded class (tests/grading/instructor_class.py): copy flags in the CSV,
the class report and its mistakes CSV, manual grades and vetoes in the report, and the LMS export."""

from __future__ import annotations

import csv
import io
import re
import shutil
import subprocess
import sys

import nbformat
import pytest
from grading_support import REPO, read_rows
from instructor_class import EXPECTED_COPY_FLAGS
from nbgrader.api import Gradebook

from coursekit.cli import main
from coursekit.grading.course import Course
from coursekit.grading.records.classreport import mistakes_csv, report_html
from coursekit.grading.records.similarity import SHINGLE

pytestmark = pytest.mark.slow
COPY_FLAGS = {"copied_reference", "similar_answers"}


def flags(row):
    return [f for f in row["flags"].split(";") if f]


def test_the_copy_check_flags_exactly_the_planned_copies(instructor_class):
    rows = read_rows(instructor_class.report_csv.read_text(encoding="utf-8"))
    found = {sid: {f.split("(")[0] for f in flags(row)} & COPY_FLAGS for sid, row in rows.items()}
    assert {sid: names for sid, names in found.items() if names} == EXPECTED_COPY_FLAGS
    assert re.fullmatch(r"copied_reference\(q2 (0\.9\d|1\.00)\)", flags(rows["s01"])[-1])
    assert re.fullmatch(r"copied_reference\(q1 0\.[3-9]\d\)", flags(rows["s02"])[-1])
    for sid in ("s03", "s04"):
        assert re.fullmatch(r"similar_answers\(q3: s03, s04 0\.\d\d\)", flags(rows[sid])[-1])


def test_copy_flags_change_no_score(instructor_class):
    rows = read_rows(instructor_class.report_csv.read_text(encoding="utf-8"))
    assert (rows["s01"]["auto_total"], rows["s01"]["passed"]) == ("3", "pending")
    assert (rows["s02"]["auto_total"], rows["s02"]["passed"]) == ("3", "pending")


def read_mistakes(course: Course) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(mistakes_csv(course).read_text(encoding="utf-8"))))


def test_every_failed_check_is_one_mistake_named_by_its_diagnostic(instructor_class):
    course = instructor_class
    mistakes = read_mistakes(course)
    listed = sorted((m["check"], sid) for m in mistakes for sid in m["students"].split())
    with Gradebook(course.db_url) as gb:  # what the gradebook says failed
        failed = sorted((g.name, sid) for sid in [f"s0{k}" for k in range(1, 9)]
                        for g in gb.find_submission_notebook("lesson11", "lesson11", sid).grades
                        if g.name in course.rubric.checks and (g.score or 0) < g.max_score)
    assert listed == failed
    assert all(int(m["count"]) == len(m["students"].split()) for m in mistakes)
    for m in mistakes:  # the diagnostic is the error the cell shows (contract with the hidden checks)
        nb = nbformat.read(course.autograded_notebook(m["students"].split()[0]), as_version=4)
        cell = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == m["check"])
        error = next(o for o in cell.outputs if o.output_type == "error")
        assert " ".join(error.evalue.split()) in m["diagnostic"]


def test_the_planned_code_mistakes_are_common_mistakes(instructor_class):
    groups = {(m["check"], m["students"]) for m in read_mistakes(instructor_class)}
    assert {("test_normal", "s03 s04"), ("test_boundary", "s03 s04"), ("test_boundary", "s05 s06")} <= groups
    assert all(m["title"] in ("正常输入", "边界输入", "长度聚合与 GSPO") for m in read_mistakes(instructor_class))


def test_class_report_is_one_self_contained_page(instructor_class):
    page = report_html(instructor_class).read_text(encoding="utf-8")
    assert re.findall(r"""(?:src|href)\s*=\s*["'](?!#|data:)""", page) == []  # nothing to fetch
    assert "<script" not in page and "@import" not in page
    assert page.count("<svg") == 4 and 'id="NotoSansCJK' in page  # CJK labels drawn as glyph paths
    for heading in ("总分分布", "各检查通过率", "常见错误", "人工评分进度", "一票否决", "标记", "复制检查"):
        assert f">{heading}</h" in page
    assert "similar_answers(q3: s03, s04" in page and "copied_reference(q2" in page


def test_the_class_report_draws_chinese_from_a_font_cache_older_than_the_font(instructor_class, tmp_path,
                                                                             stale_font_cache):
    """The report's charts share grpolab's figures' font set-up (coursekit.fonts), which rescans the
    system fonts when matplotlib's cached list (MPLCONFIGDIR) predates fonts-noto-cjk."""
    course = Course.at(shutil.copytree(instructor_class.root, tmp_path / "course"))
    report_html(course).unlink()
    done = subprocess.run([sys.executable, "-m", "coursekit", "report", "--course", str(course.root), "--no-feedback"],
                          cwd=REPO, env=stale_font_cache, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    page = report_html(course).read_text(encoding="utf-8")
    assert page.count("<svg") == 4 and 'id="NotoSansCJK' in page and "missing from font" not in done.stderr


def test_manual_grades_and_a_veto_reach_the_report(instructor_class, tmp_path):
    course = Course.at(shutil.copytree(instructor_class.root, tmp_path / "course"))
    with Gradebook(course.db_url) as gb:
        for sid, scores in (("s01", (1, 2, 2, 2)), ("s02", (1, 1, None, None))):
            for name, score in zip(("explanation", "q1", "q2", "q3"), scores, strict=True):
                if score is not None:
                    grade = gb.find_grade(name, "lesson11", "lesson11", sid)
                    grade.manual_score, grade.needs_manual_grade = score, False
        veto = "一票否决：照抄参考答案，未给出自己的因果链"
        gb.find_comment("q2", "lesson11", "lesson11", "s01").manual_comment = veto
        gb.db.commit()
    assert main(["report", "--course", str(course.root), "--no-feedback"]) == 0
    rows = read_rows(course.report_csv.read_text(encoding="utf-8"))
    assert (rows["s01"]["total"], rows["s01"]["passed"]) == ("10", "no")
    page = report_html(course).read_text(encoding="utf-8")
    vetoes = page[page.index('id="veto-table"'):page.index("</table>", page.index('id="veto-table"'))]
    assert "<td>s01</td><td>q2: 照抄参考答案，未给出自己的因果链</td>" in vetoes
    # issue 33: the report says what a veto does to the grade: the cells' 10, counted as 7
    assert re.search(r'<td class="num">10</td>\s*<td class="num">7（封顶）</td>', vetoes), vetoes
    students = page[page.index('id="student-table"'):]
    assert re.search(r'<td class="num">10</td>\s*<td class="num" title="一票否决：各项合计 10 分，计入 7 分[^"]*">'
                     r'7（一票否决封顶）</td>', students)
    assert "只作标记：" not in page and "封顶为 7 分" in page
    assert "字符二元组" not in page and f"{SHINGLE} 字符片段" in page
    manual = page[page.index('id="manual-table"'):page.index("</table>", page.index('id="manual-table"'))]
    cells = re.findall(r"<code>(\w+)</code></td><td class=\"num\">(\d+)</td><td class=\"num\">(\d+)</td>"
                       r"\s*<td class=\"num\">(\d+)</td>\s*<td class=\"num\">([\d.]+|—)</td>", manual)
    # issue 33: s08's untouched answers, scored 0 by nbgrader itself, are "未作答", not graded (nor averaged);
    # s01 all, s02 two of four by hand
    assert cells == [("explanation", "2", "5", "1", "1.00"), ("q1", "2", "5", "1", "1.50"),
                     ("q2", "1", "6", "1", "2.00"), ("q3", "1", "6", "1", "2.00")]


def test_a_vetoed_student_s_feedback_and_export_show_the_capped_score_and_why(instructor_class, tmp_path):
    course = Course.at(shutil.copytree(instructor_class.root, tmp_path / "course"))
    with Gradebook(course.db_url) as gb:
        for name, score in zip(("explanation", "q1", "q2", "q3"), (1, 2, 2, 2), strict=True):
            grade = gb.find_grade(name, "lesson11", "lesson11", "s01")
            grade.manual_score, grade.needs_manual_grade = score, False
        gb.find_comment("q2", "lesson11", "lesson11", "s01").manual_comment = "一票否决：照抄参考答案"
        gb.db.commit()
    assert main(["report", "--course", str(course.root)]) == 0
    page = course.feedback_html("s01").read_text(encoding="utf-8")
    assert "（得分：7.0 / 10.0）" in page and "（得分：10.0 / 10.0）" not in page  # the page header, capped
    assert "一票否决（veto）" in page and "q2: 照抄参考答案" in page and "各单元得分合计 10 分" in page
    assert "一票否决（veto）" not in course.feedback_html("s02").read_text(encoding="utf-8")
    roster = tmp_path / "roster.csv"
    roster.write_text("student_id,sis_login_id\ns01,login1\n", encoding="utf-8")
    out = tmp_path / "canvas.csv"
    assert main(["export", "--format", "canvas", "--roster", str(roster), "--course", str(course.root),
                 "--out", str(out)]) == 0
    assert out.read_text(encoding="utf-8").splitlines()[-1] == ",,,login1,,7"


def test_export_lists_who_is_missing_from_the_roster_and_the_class(instructor_class, tmp_path, capsys):
    roster = tmp_path / "roster.csv"
    lines = ["student_id,name,sis_login_id,email"] + [f"s0{k},学生{k},login{k},s0{k}@example.edu" for k in range(1, 8)]
    roster.write_text("\n".join([*lines, "s99,旁听生,login99,s99@example.edu"]) + "\n", encoding="utf-8")
    out = tmp_path / "canvas.csv"
    assert main(["export", "--format", "canvas", "--roster", str(roster), "--course", str(instructor_class.root),
                 "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "1 in the class but not in the roster (not exported; add them to the roster): s08" in printed
    assert "1 in the roster without a submission (empty grade): s99" in printed
    assert "7 pending manual grading" in printed  # s08 is not in the roster
    rows = list(csv.reader(io.StringIO(out.read_text(encoding="utf-8"))))
    assert rows[0] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", "lesson11"]
    assert rows[1][0] == "Points Possible" and len(rows) == 2 + 8
    assert rows[2] == ["学生1", "", "", "login1", "", ""]  # pending: empty, so Canvas keeps its cell
