"""`coursekit export --format canvas|moodle|csv --roster ROSTER.csv`: the grades in an LMS's gradebook
import format, course ids mapped to LMS users through a roster.

The roster is a CSV with a `student_id` column (the course id: the submission's file or folder name)
and the LMS identifiers, under these names or the LMS's own export headers:

    student_id, name (Student), canvas_id (ID), sis_user_id (SIS User ID), sis_login_id (SIS Login ID),
    section (Section), email (Email address), username (Username), idnumber (ID number)

Formats (one row per roster student, in roster order):
- canvas: Student, ID, SIS User ID, SIS Login ID, Section, then the assignment column (points, out of
  10), after a "Points Possible" row, as Canvas's gradebook export and import have them. Canvas
  matches a student by ID, SIS User ID or SIS Login ID, so each roster row needs one.
- moodle: the identifier column (--moodle-id: email, username or idnumber; map it under "Identify
  user by" in Moodle's CSV grade import), the grade column and a feedback column (passed, vetoes).
- csv: student_id, the roster's identifiers, every column of the report (total: the cells' sum;
  final_total: the grade; note: why they differ).

Grades are the report's totals (gradebook, manual grades included; 0 for an unreadable notebook); a
vetoed student's are capped below the pass score (report.Row.final_total), and the note column (csv),
the feedback column (moodle) and a line of the command (every format; Canvas's file has no room for it)
say so. A student still pending manual grading, or in the roster without a
submission, has no grade: an empty cell in Canvas and csv (Canvas's import leaves it alone), no row at
all in Moodle (Moodle's import clears a grade on an empty cell: grade/import/csv/classes/load_data.php,
update_grade_item, `$value === ''` -> null). Nobody is dropped silently: students missing from the
roster, from the class, or still pending are listed. A bad roster (a repeated student or LMS id, a
student_id that is no course id, a missing identifier column or cell) stops with one line naming its row.
"""

from __future__ import annotations

import argparse
import csv
import io
from dataclasses import dataclass
from pathlib import Path

from coursekit.course_file import resolve_lesson
from coursekit.errors import CourseError
from coursekit.grading.course import DEFAULT_ROOT, Course, Rubric
from coursekit.grading.intake.ingest import STUDENT_ID
from coursekit.grading.judge import flags as F
from coursekit.grading.records.report import Row, class_rows, find_lesson, report_columns

FORMATS = ("canvas", "moodle", "csv")
FIELDS = ("student_id", "name", "canvas_id", "sis_user_id", "sis_login_id", "section", "email", "username",
          "idnumber")
ALIASES = {"student": "name", "id": "canvas_id", "sis user id": "sis_user_id", "sis login id": "sis_login_id",
           "email address": "email", "id number": "idnumber"}
CANVAS_IDS = ("canvas_id", "sis_user_id", "sis_login_id")
LMS_IDS = (*CANVAS_IDS, "email", "username", "idnumber")  # one LMS user each: never repeated in a roster
MOODLE_IDS = {"email": "Email address", "username": "Username", "idnumber": "ID number"}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--format", choices=FORMATS, required=True, help="gradebook import format")
    parser.add_argument("--roster", type=Path, default=None, help="CSV mapping student_id to LMS users (required)")
    parser.add_argument("--course", type=Path, default=DEFAULT_ROOT, help="nbgrader course folder")
    parser.add_argument("--lesson", default=None,
                        help="lesson id of course.yml or its source .qmd (default: the first lesson)")
    parser.add_argument("--out", type=Path, default=None,
                        help="file to write (default: autograder/reports/<assignment>_<format>.csv)")
    parser.add_argument("--assignment", default=None,
                        help="grade column header; for an existing Canvas assignment use its export header, "
                        "e.g. 'Lesson 11 (12345)' (default: the lesson's id in course.yml)")
    parser.add_argument("--moodle-id", choices=tuple(MOODLE_IDS), default="email",
                        help="roster column Moodle identifies users by (default: email)")


@dataclass
class Student:
    """One roster row: the course id and the LMS identifiers."""

    line: int
    fields: dict[str, str]

    @property
    def student_id(self) -> str:
        return self.fields["student_id"]


def _field(header: str) -> str:
    key = " ".join(header.strip().lstrip("\ufeff").replace("_", " ").lower().split())
    return ALIASES.get(key, key.replace(" ", "_"))


def read_roster(path: Path | None, fmt: str, moodle_id: str = "email") -> list[Student]:
    """The roster's rows, checked for `fmt`; CourseError `path:line: problem` on the first bad row."""
    if path is None or not str(path).strip():
        raise CourseError("no roster given; give ROSTER=path/to/roster.csv (make export ROSTER=... FORMAT=...): "
                          "the LMS gradebook export with a student_id column")
    if path.is_dir():
        raise CourseError(f"{path}: a folder; give ROSTER=path/to/roster.csv, the roster file itself")
    if not path.is_file():
        raise CourseError(f"{path}: no such roster file; give ROSTER=path/to/roster.csv")
    try:
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError:
        raise CourseError(f"{path}: not UTF-8 text; save the roster as CSV UTF-8") from None
    reader = csv.reader(io.StringIO(text, newline=""))
    header = next(reader, None)
    if not header or not any(h.strip() for h in header):
        raise CourseError(f"{path}:1: no header row; the first row names the columns (student_id, ...)")
    names = [_field(h) for h in header]
    if "student_id" not in names:
        raise CourseError(f"{path}:1: no student_id column (the course id: the submission's file name); "
                          f"columns found: {', '.join(h.strip() for h in header)}")
    if fmt == "canvas" and not set(CANVAS_IDS) & set(names):
        raise CourseError(f"{path}:1: no ID, SIS User ID or SIS Login ID column; Canvas matches students by one "
                          "of them")
    if fmt == "moodle" and moodle_id not in names:
        raise CourseError(f"{path}:1: no {moodle_id} column; Moodle identifies users by it "
                          "(--moodle-id email|username|idnumber)")
    students: list[Student] = []
    seen: dict[str, int] = {}
    lms_seen: dict[tuple[str, str], int] = {}
    for values in reader:
        line = reader.line_num
        if not any(v.strip() for v in values):
            continue
        if len(values) != len(names):
            raise CourseError(f"{path}:{line}: {len(values)} fields, the header has {len(names)}")
        row = {n: v.strip() for n, v in zip(names, values, strict=True) if n in FIELDS}
        student = Student(line, row)
        sid = student.student_id
        if not sid:
            raise CourseError(f"{path}:{line}: empty student_id")
        if sid in seen:
            raise CourseError(f"{path}:{line}: student_id '{sid}' repeats row {seen[sid]}")
        if not STUDENT_ID.fullmatch(sid):
            raise CourseError(f"{path}:{line}: student_id '{sid[:60]}' is not a course id (letters, digits, _ . -: "
                              "the submission's file or folder name)")
        seen[sid] = line
        for key in LMS_IDS:
            value = row.get(key, "").casefold()
            if value and (key, value) in lms_seen:
                raise CourseError(f"{path}:{line}: {key} '{row[key]}' repeats row {lms_seen[key, value]} "
                                  "(one LMS user for two students)")
            lms_seen.setdefault((key, value), line)
        if fmt == "canvas" and not any(row.get(k) for k in CANVAS_IDS):
            raise CourseError(f"{path}:{line}: '{sid}' has no ID, SIS User ID or SIS Login ID; Canvas matches "
                              "students by one of them")
        if fmt == "moodle" and not row.get(moodle_id):
            raise CourseError(f"{path}:{line}: '{sid}' has no {moodle_id}; Moodle identifies users by it "
                              "(--moodle-id email|username|idnumber)")
        students.append(student)
    if not students:
        raise CourseError(f"{path}: no students after the header row")
    return students


def _points(row: Row | None) -> str:
    """The grade cell: the report's total (0 for an unreadable notebook); empty without a submission or
    while manual answers are pending."""
    if row is None or row.manual_pending:  # even if 8 is out of reach, the points are not final yet
        return ""
    return f"{round(row.final_total, 4):g}"


def _feedback(row: Row | None) -> str:
    if row is None:
        return ""
    vetoes = [f[len(F.VETO) + 1:-1] for f in row.flags if F.flag_name(f) == F.VETO]
    passed = {"yes": "通过", "no": "未通过", "pending": "待人工评分"}[row.passed]
    return passed + "".join(f"；一票否决：{v}" for v in vetoes) + (f"；{row.note}" if row.note else "")


def export_rows(fmt: str, roster: list[Student], rows: dict[str, Row], assignment: str, rubric: Rubric,
                moodle_id: str = "email") -> list[list[str]]:
    """The file's rows, header first (`rubric`: the lesson's, for its columns and full marks)."""
    columns = report_columns(rubric)[1:]
    if fmt == "canvas":
        out = [["Student", "ID", "SIS User ID", "SIS Login ID", "Section", assignment],
               ["Points Possible", "", "", "", "", f"{rubric.max_score:g}"]]
        out += [[s.fields.get(k, "") for k in ("name", *CANVAS_IDS, "section")] + [_points(rows.get(s.student_id))]
                for s in roster]
    elif fmt == "moodle":  # rows without a grade are left out: Moodle's import clears a grade on an empty cell
        out = [[MOODLE_IDS[moodle_id], assignment, f"{assignment} feedback"]]
        out += [[s.fields[moodle_id], points, _feedback(rows.get(s.student_id))]
                for s in roster if (points := _points(rows.get(s.student_id)))]
    else:
        ids = [k for k in FIELDS[1:] if any(s.fields.get(k) for s in roster)]
        out = [["student_id", *ids, *columns]]
        for s in roster:
            row = rows.get(s.student_id)
            scores = row.as_csv() if row else {}
            out.append([s.student_id, *(s.fields.get(k, "") for k in ids), *(scores.get(c, "") for c in columns)])
    return out


def run(args: argparse.Namespace) -> int:
    entry = resolve_lesson(args.lesson) if args.lesson else None
    course = Course.at(args.course, entry.id if entry else None)
    roster = read_roster(args.roster, args.format, args.moodle_id)  # a bad roster fails before any work
    rows = {r.student_id: r for r in class_rows(course, find_lesson(course, entry.source if entry else None))[0]}
    out = args.out or course.report_csv.with_name(f"{course.assignment}_{args.format}.csv")
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out, "w", newline="", encoding="utf-8") as handle:
        csv.writer(handle, lineterminator="\n").writerows(
            export_rows(args.format, roster, rows, args.assignment or course.assignment, course.rubric,
                        args.moodle_id))
    listed = [s.student_id for s in roster]
    print(f"{args.format}: {len(roster)} roster students -> {out}")
    for label, ids in (
            ("in the class but not in the roster (not exported; add them to the roster)",
             sorted(set(rows) - set(listed))),
            ("in the roster without a submission (empty grade)", [sid for sid in listed if sid not in rows]),
            ("pending manual grading (empty grade; finish in formgrader, then export again)",
             [sid for sid in listed if sid in rows and rows[sid].manual_pending]),
            ("capped by a veto (the grade is the cap, not the cells' sum)",
             [f"{sid} ({rows[sid].total:g} -> {rows[sid].final_total:g})" for sid in listed
              if sid in rows and rows[sid].capped and not rows[sid].manual_pending])):
        if ids:
            print(f"  {len(ids)} {label}: {', '.join(ids)}")
    return 0
