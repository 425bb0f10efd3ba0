"""What the instructor's reports read from a graded notebook: the written answers and, per failed
test cell, its diagnostic (the `evalue` of the cell's error output, which names the mistake).

Only outputs and markdown are read (plain JSON); nothing in a student notebook is executed here.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from coursekit.grading.course import Course, Rubric

NO_MESSAGE = "断言失败（没有说明）"
STDERR = "单元格写入了 stderr（nbgrader 规则：记 0 分）"
MAX_DIAGNOSTIC = 300  # characters


@dataclass
class Graded:
    """One student's autograded notebook, as the reports need it."""

    answers: dict[str, str] = field(default_factory=dict)      # manual grade id -> answer text
    diagnostics: dict[str, str] = field(default_factory=dict)  # failed test grade id -> diagnostic


def _grade_id(cell: dict) -> str | None:
    return cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")


def _text(source: str | list[str]) -> str:
    return source if isinstance(source, str) else "".join(source)


def diagnostic(outputs: list[dict]) -> str | None:
    """The one message that says why a test cell failed, or None when it did not fail."""
    for out in outputs:
        if out.get("output_type") == "error":
            name, value = out.get("ename", "Error"), " ".join(_text(out.get("evalue", "")).split())
            text = (value or NO_MESSAGE) if name == "AssertionError" else f"{name}: {value}".rstrip(": ")
            return text[:MAX_DIAGNOSTIC]
    if any(o.get("output_type") == "stream" and o.get("name") == "stderr" for o in outputs):
        return STDERR
    return None


def read_graded(path: Path, rubric: Rubric) -> Graded:
    """Answers and diagnostics of one autograded notebook (the last copy of a grade id wins)."""
    nb = json.loads(path.read_text(encoding="utf-8"))
    graded = Graded()
    for cell in nb.get("cells", []):
        gid = _grade_id(cell)
        if gid in rubric.answers:
            graded.answers[gid] = _text(cell.get("source", ""))
        elif gid in rubric.checks and cell.get("cell_type") == "code":
            found = diagnostic(cell.get("outputs", []))
            if found:
                graded.diagnostics[gid] = found
            else:
                graded.diagnostics.pop(gid, None)
    return graded


def read_class(course: Course, student_ids: list[str]) -> dict[str, Graded]:
    """read_graded for each student whose autograded notebook exists."""
    out = {}
    for sid in student_ids:
        path = course.autograded_notebook(sid)
        if path.is_file():
            out[sid] = read_graded(path, course.rubric)
    return out


def release_prompts(course: Course) -> tuple[dict[str, str], dict[str, str]]:
    """From the release: each answer cell's stub (e.g. `**你的答案：**`) and its question, the locked
    markdown cell just above it."""
    nb = json.loads(course.release_notebook.read_text(encoding="utf-8"))
    stubs, questions = {}, {}
    cells = nb.get("cells", [])
    for k, cell in enumerate(cells):
        gid = _grade_id(cell)
        if gid in course.rubric.answers:
            stubs[gid] = _text(cell.get("source", ""))
            questions[gid] = _text(cells[k - 1].get("source", "")) if k else ""
    return stubs, questions
