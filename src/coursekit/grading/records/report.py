"""`coursekit report`: the class CSV from the gradebook (manual grades and vetoes included), the
class report (reports/<id>.html, reports/<id>_mistakes.csv: coursekit.grading.records.classreport), per lesson.

Columns: student_id, one per test cell of the lesson (its test_id: lesson 11 has normal, boundary,
aggregation), auto_total, manual_total, total, max_score, passed, flags, final_total, note
(`report_columns`): total is auto_total + manual_total; final_total the points that leave the kit, which
a veto caps, and note says so (`Row.note`). The rubric
is the lesson's (`Course.rubric`). passed is `no` when a veto applies or the pass score (course.yml) is
out of reach, `pending` while a manual answer is ungraded, else `yes`/`no` by total >= pass score. The
copy check's flags
(copied_reference, similar_answers: coursekit.grading.records.similarity) never change a score.

Vetoes (一票否决), shown as `veto(reason)` in flags:
- an instructor comment in formgrader that starts with `一票否决:` / `一票否决：` / `VETO:` (any graded
  answer or the code cell), the rest of the comment being the reason;
- automatic: `deleted_asserts` (the seed's 删除边界检查: given checks removed from the fill-in).
A veto caps the points that leave the kit (`Row.final_total`: LMS export, the feedback page, which
also says why) at VETO_MARGIN below the pass score; the report CSV keeps the cells' own total beside
final_total and its note.
"""

from __future__ import annotations

import argparse
import csv
import json
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from nbgrader.api import (
    Assignment,
    Comment,
    Grade,
    Gradebook,
    Notebook,
    Student,
    SubmittedAssignment,
    SubmittedNotebook,
)
from sqlalchemy.orm import joinedload, selectinload, undefer
from tqdm import tqdm

from coursekit.course_file import resolve_lesson
from coursekit.errors import CourseError
from coursekit.grading.course import DEFAULT_ROOT, Course, Rubric, project_course
from coursekit.grading.judge import flags as F
from coursekit.grading.records.autograded import Graded, read_class, release_prompts
from coursekit.grading.records.feedback import FeedbackWriter
from coursekit.lesson import parse_lesson

TOTAL_COLUMNS = ("auto_total", "manual_total", "total", "max_score", "passed", "flags", "final_total", "note")
VETO_COMMENT = re.compile(r"^\s*(一票否决|VETO)\s*[:：]\s*(?P<reason>.*)", re.IGNORECASE | re.DOTALL)
AUTOMATIC_VETOES = {F.DELETED_ASSERTS: "删除边界检查"}
VETO_MARGIN = 1.0  # a vetoed notebook's exported points stay this far below the pass score (8 -> 7 of 10)


def report_columns(rubric: Rubric) -> tuple[str, ...]:
    """The report CSV's header: student_id, the lesson's checks, the totals."""
    return ("student_id", *rubric.columns, *TOTAL_COLUMNS)


@dataclass
class Row:
    student_id: str
    rubric: Rubric = field(repr=False)
    auto: dict[str, float] = field(default_factory=dict)  # check column -> score (every check, 0 until graded)
    auto_max: dict[str, float] = field(default_factory=dict)
    manual: dict[str, float | None] = field(default_factory=dict)  # answer -> score, None while ungraded
    by_hand: set[str] = field(default_factory=set)  # answers a person graded (not auto-zeroed as unanswered)
    manual_total: float = 0.0
    manual_pending: float = 0.0  # points of manual answers not graded yet
    flags: list[str] = field(default_factory=list)
    graded: bool = False

    def __post_init__(self) -> None:
        self.auto = {name: 0.0 for name in self.rubric.columns} | self.auto

    @property
    def auto_total(self) -> float:
        return sum(self.auto.values())

    @property
    def total(self) -> float:
        return self.auto_total + self.manual_total

    @property
    def vetoed(self) -> bool:
        return any(F.flag_name(f) == F.VETO for f in self.flags)

    @property
    def veto_reasons(self) -> tuple[str, ...]:
        return tuple(f[len(F.VETO) + 1:-1] for f in self.flags if F.flag_name(f) == F.VETO)

    @property
    def veto_cap(self) -> float:
        """The most points a vetoed notebook keeps: VETO_MARGIN below the pass score (a veto fails it)."""
        return max(0.0, self.rubric.pass_score - VETO_MARGIN)

    @property
    def final_total(self) -> float:
        """The points that leave the kit (LMS export, feedback page): the total, capped at veto_cap when
        a veto applies."""
        return min(self.total, self.veto_cap) if self.vetoed else self.total

    @property
    def capped(self) -> bool:
        return self.final_total < self.total

    @property
    def note(self) -> str:
        """Why final_total is not total (a veto capped it), or nothing."""
        if not self.capped:
            return ""
        return (f"一票否决：各项合计 {self.total:g} 分，计入 {self.final_total:g} 分"
                f"（封顶为通过线 {self.rubric.pass_score:g} 减 {VETO_MARGIN:g}）")

    @property
    def passed(self) -> str:
        pass_score = self.rubric.pass_score
        if not self.graded or self.vetoed or self.total + self.manual_pending < pass_score:
            return "no"
        if self.manual_pending:
            return "pending"
        return "yes" if self.total >= pass_score else "no"

    def as_csv(self) -> dict[str, str]:
        def num(x: float) -> str:
            return f"{round(x, 4):g}"
        return {"student_id": spreadsheet_safe(self.student_id), **{k: num(v) for k, v in self.auto.items()},
                "auto_total": num(self.auto_total), "manual_total": num(self.manual_total),
                "total": num(self.total), "max_score": num(self.rubric.max_score), "passed": self.passed,
                "flags": ";".join(self.flags), "final_total": num(self.final_total), "note": self.note}


def spreadsheet_safe(text: str) -> str:
    """Rejected file names go into the CSV as found; keep spreadsheets from reading them as formulas."""
    return "'" + text if text.startswith(("=", "+", "-", "@")) else text


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--course", type=Path, default=DEFAULT_ROOT, help="nbgrader course folder")
    parser.add_argument("--lesson", default=None,
                        help="lesson id of course.yml or its source .qmd (default: every lesson graded so far)")
    parser.add_argument("--no-feedback", action="store_true",
                        help="do not regenerate the feedback HTML (by default it is rewritten so "
                        "students see the manual grades and comments)")


def run(args: argparse.Namespace) -> int:
    if args.lesson:
        entry = resolve_lesson(args.lesson)
        courses = [(Course.at(args.course, entry.id), entry.source)]
    else:  # every lesson graded so far; none graded: the first lesson's error
        courses = [(Course.at(args.course, e.id), None) for e in project_course(args.course).lessons]
        courses = [c for c in courses if c[0].manifest.is_file()] or courses[:1]
    for course, source in courses:
        rows = write_report(course, source)
        if not args.no_feedback:
            writer = FeedbackWriter(course)
            for row in tqdm([r for r in rows if r.graded], desc="feedback", unit="nb", file=sys.stderr):
                writer.write(row.student_id, vetoes=row.veto_reasons, cap=row.veto_cap)
        print(summary_line(rows, course.report_csv))
    return 0


# matplotlib, datasketch
WRITER_MODULES = ("coursekit.grading.records.classreport", "coursekit.grading.records.similarity")


def write_report(course: Course, lesson: Path | None = None) -> list[Row]:
    """reports/<assignment>.csv and the class report; return the rows."""
    rows, class_report = write_rows(course, lesson)
    class_report()
    return rows


def write_rows(course: Course, lesson: Path | None = None) -> tuple[list[Row], Callable[[], None]]:
    """reports/<assignment>.csv now; return the rows, and what writes the class report (its figures are
    most of the report's time: `coursekit grade` draws them while the feedback pages are written)."""
    from coursekit.grading.records.classreport import write_class_report

    lesson = find_lesson(course, lesson)
    rows, graded = class_rows(course, lesson)
    course.report_csv.parent.mkdir(parents=True, exist_ok=True)
    with open(course.report_csv, "w", newline="", encoding="utf-8") as out:
        writer = csv.DictWriter(out, fieldnames=report_columns(course.rubric), lineterminator="\n")
        writer.writeheader()
        writer.writerows(row.as_csv() for row in rows)
    return rows, lambda: write_class_report(course, rows, graded, parse_lesson(lesson))


def find_lesson(course: Course, lesson: Path | None) -> Path:
    """The lesson source: as given, else the assignment's (course.yml) here or beside the course folder."""
    default = course.lesson.source
    for candidate in [lesson] if lesson else [default, course.root.parent / default]:
        if candidate.is_file():
            return candidate
    raise CourseError(f"{lesson or default}: lesson source not found (the report reads its reference "
                      "answers and check titles); run from the repository root or pass --lesson")


def class_rows(course: Course, lesson: Path) -> tuple[list[Row], dict[str, Graded]]:
    """The rows with the copy check's flags, and what the graded notebooks hold."""
    from coursekit.grading.records.similarity import copy_flags

    rows = build_rows(course)
    graded = read_class(course, [r.student_id for r in rows if r.graded])
    stubs, questions = release_prompts(course)
    references = {qid: "\n".join(div.text_lines()) for qid, div in parse_lesson(lesson).reference_answers().items()
                  if qid in course.rubric.answers}
    answers = {sid: {qid: _without_stub(text, stubs.get(qid, "")) for qid, text in g.answers.items()}
               for sid, g in graded.items()}
    found = copy_flags(answers, references, questions)
    for row in rows:
        row.flags.extend(found.get(row.student_id, []))
    return rows, graded


def _without_stub(answer: str, stub: str) -> str:
    """The student's own text: the release's prompt line (e.g. **你的答案：**) removed."""
    answer = answer.strip()
    return answer[len(stub.strip()):] if stub.strip() and answer.startswith(stub.strip()) else answer


def build_rows(course: Course) -> list[Row]:
    if not course.manifest.is_file():
        raise CourseError(f"{course.manifest}: no graded class yet; run 'make grade SUBMISSIONS=...' first")
    manifest = json.loads(course.manifest.read_text(encoding="utf-8"))
    rows = []
    with Gradebook(course.db_url) as gb:
        submissions = submitted_notebooks(gb, course)
        for student in manifest["students"]:
            row = Row(student["student_id"], course.rubric, flags=list(student["flags"]))
            if student["graded"]:
                fill_scores(submissions.get(row.student_id), row, course)
            row.flags.extend(F.flag(F.VETO, reason) for name, reason in AUTOMATIC_VETOES.items()
                             if any(F.flag_name(f) == name for f in row.flags))
            rows.append(row)
    return rows


def submitted_notebooks(gb: Gradebook, course: Course) -> dict[str, SubmittedNotebook]:
    """Every student's submitted notebook of the lesson with its grades (their cells and full marks) and
    comments, in a few queries for the whole class (per student and per grade, the ORM's lazy loads
    made a thousand queries for 60 students)."""
    query = (gb.db.query(Student.id, SubmittedNotebook)
             .join(SubmittedAssignment, SubmittedAssignment.student_id == Student.id)
             .join(Assignment, Assignment.id == SubmittedAssignment.assignment_id)
             .join(SubmittedNotebook, SubmittedNotebook.assignment_id == SubmittedAssignment.id)
             .join(Notebook, Notebook.id == SubmittedNotebook.notebook_id)
             .filter(Notebook.name == course.notebook, Assignment.name == course.assignment)
             .options(selectinload(SubmittedNotebook.grades).options(joinedload(Grade.cell), undefer(Grade.max_score)),
                      selectinload(SubmittedNotebook.comments).joinedload(Comment.cell)))
    return dict(query.all())


def fill_scores(submission: SubmittedNotebook | None, row: Row, course: Course) -> None:
    if submission is None:
        row.flags.append(F.flag(F.ERROR, "not in the gradebook, run make grade again"))
        return
    row.graded = True
    checks, answers = course.rubric.checks, course.rubric.answers
    for grade in submission.grades:
        score = grade.score or 0.0
        if grade.name in checks:
            row.auto[checks[grade.name]] = score
            row.auto_max[checks[grade.name]] = grade.max_score
        elif grade.name in answers:
            if grade.needs_manual_grade or (grade.manual_score is None and grade.auto_score is None):
                row.manual_pending += grade.max_score
                row.manual[grade.name] = None
            else:
                row.manual_total += score
                row.manual[grade.name] = score
                if grade.manual_score is not None:
                    row.by_hand.add(grade.name)
    for comment in sorted(submission.comments, key=lambda c: c.name):
        match = VETO_COMMENT.match(comment.manual_comment or "")
        if match:
            row.flags.append(F.flag(F.VETO, f"{comment.name}: {match['reason'].strip()}"))


def summary_line(rows: list[Row], csv_path: Path) -> str:
    counts = {state: sum(r.passed == state for r in rows) for state in ("yes", "no", "pending")}
    flagged = sum(bool(r.flags) for r in rows)
    return (f"{len(rows)} students: {counts['yes']} passed, {counts['no']} not passed, "
            f"{counts['pending']} pending manual grading; {flagged} flagged -> {csv_path}, "
            f"class report {csv_path.with_suffix('.html')}")
