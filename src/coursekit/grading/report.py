"""`coursekit report`: the class CSV from the gradebook (manual grades and vetoes included).

Columns: student_id, normal, boundary, aggregation, auto_total, manual_total, total, max_score,
passed, flags. passed is `no` when a veto applies or 8 points are out of reach, `pending` while a
manual answer is ungraded, else `yes`/`no` by total >= 8.

Vetoes (一票否决), shown as `veto(reason)` in flags:
- an instructor comment in formgrader that starts with `一票否决:` / `一票否决：` / `VETO:` (any graded
  answer or the code cell), the rest of the comment being the reason;
- automatic: `deleted_asserts` (the seed's 删除边界检查: given checks removed from the fill-in).
"""

from __future__ import annotations

import argparse
import csv
import json
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

from nbgrader.api import Gradebook, MissingEntry
from tqdm import tqdm

from coursekit.errors import CourseError
from coursekit.grading import flags as F
from coursekit.grading.course import (
    ASSIGNMENT,
    AUTO_CELLS,
    DEFAULT_ROOT,
    MANUAL_CELLS,
    MAX_SCORE,
    NOTEBOOK,
    PASS_SCORE,
    Course,
)
from coursekit.grading.feedback import FeedbackWriter

COLUMNS = ("student_id", "normal", "boundary", "aggregation", "auto_total", "manual_total", "total",
           "max_score", "passed", "flags")
VETO_COMMENT = re.compile(r"^\s*(一票否决|VETO)\s*[:：]\s*(?P<reason>.*)", re.IGNORECASE | re.DOTALL)
AUTOMATIC_VETOES = {F.DELETED_ASSERTS: "删除边界检查"}


@dataclass
class Row:
    student_id: str
    auto: dict[str, float] = field(default_factory=lambda: {name: 0.0 for name in AUTO_CELLS.values()})
    manual_total: float = 0.0
    manual_pending: float = 0.0  # points of manual answers not graded yet
    flags: list[str] = field(default_factory=list)
    graded: bool = False

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
    def passed(self) -> str:
        if not self.graded or self.vetoed or self.total + self.manual_pending < PASS_SCORE:
            return "no"
        if self.manual_pending:
            return "pending"
        return "yes" if self.total >= PASS_SCORE else "no"

    def as_csv(self) -> dict[str, str]:
        def num(x: float) -> str:
            return f"{round(x, 4):g}"
        return {"student_id": spreadsheet_safe(self.student_id), **{k: num(v) for k, v in self.auto.items()},
                "auto_total": num(self.auto_total), "manual_total": num(self.manual_total),
                "total": num(self.total), "max_score": num(MAX_SCORE), "passed": self.passed,
                "flags": ";".join(self.flags)}


def spreadsheet_safe(text: str) -> str:
    """Rejected file names go into the CSV as found; keep spreadsheets from reading them as formulas."""
    return "'" + text if text.startswith(("=", "+", "-", "@")) else text


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--course", type=Path, default=DEFAULT_ROOT, help="nbgrader course folder")
    parser.add_argument("--no-feedback", action="store_true",
                        help="do not regenerate the feedback HTML (by default it is rewritten so "
                        "students see the manual grades and comments)")


def run(args: argparse.Namespace) -> int:
    course = Course.at(args.course)
    rows = write_report(course)
    if not args.no_feedback:
        writer = FeedbackWriter(course)
        for row in tqdm([r for r in rows if r.graded], desc="feedback", unit="nb", file=sys.stderr):
            writer.write(row.student_id)
    print(summary_line(rows, course.report_csv))
    return 0


def write_report(course: Course) -> list[Row]:
    rows = build_rows(course)
    course.report_csv.parent.mkdir(parents=True, exist_ok=True)
    with open(course.report_csv, "w", newline="", encoding="utf-8") as out:
        writer = csv.DictWriter(out, fieldnames=COLUMNS, lineterminator="\n")
        writer.writeheader()
        writer.writerows(row.as_csv() for row in rows)
    return rows


def build_rows(course: Course) -> list[Row]:
    if not course.manifest.is_file():
        raise CourseError(f"{course.manifest}: no graded class yet; run 'make grade SUBMISSIONS=...' first")
    manifest = json.loads(course.manifest.read_text(encoding="utf-8"))
    rows = []
    with Gradebook(course.db_url) as gb:
        for student in manifest["students"]:
            row = Row(student["student_id"], flags=list(student["flags"]))
            if student["graded"]:
                fill_scores(gb, row)
            row.flags.extend(F.flag(F.VETO, reason) for name, reason in AUTOMATIC_VETOES.items()
                             if any(F.flag_name(f) == name for f in row.flags))
            rows.append(row)
    return rows


def fill_scores(gb: Gradebook, row: Row) -> None:
    try:
        submission = gb.find_submission_notebook(NOTEBOOK, ASSIGNMENT, row.student_id)
    except MissingEntry:
        row.flags.append(F.flag(F.ERROR, "not in the gradebook, run make grade again"))
        return
    row.graded = True
    for grade in submission.grades:
        score = grade.score or 0.0
        if grade.name in AUTO_CELLS:
            row.auto[AUTO_CELLS[grade.name]] = score
        elif grade.name in MANUAL_CELLS:
            if grade.needs_manual_grade or (grade.manual_score is None and grade.auto_score is None):
                row.manual_pending += grade.max_score
            else:
                row.manual_total += score
    for comment in sorted(submission.comments, key=lambda c: c.name):
        match = VETO_COMMENT.match(comment.manual_comment or "")
        if match:
            row.flags.append(F.flag(F.VETO, f"{comment.name}: {match['reason'].strip()}"))


def summary_line(rows: list[Row], csv_path: Path) -> str:
    counts = {state: sum(r.passed == state for r in rows) for state in ("yes", "no", "pending")}
    flagged = sum(bool(r.flags) for r in rows)
    return (f"{len(rows)} students: {counts['yes']} passed, {counts['no']} not passed, "
            f"{counts['pending']} pending manual grading; {flagged} flagged -> {csv_path}")
