"""The class report, written by `coursekit report` (and `coursekit grade`) beside the CSV:

- reports/<id>.html (e.g. lesson11.html) — one self-contained page (inline CSS, plots as inline SVG with the glyphs
  as paths, no script, no request): score distribution, passed / not passed / pending, pass rate
  per check, the class's common mistakes, flags (copy check included), manual grading progress per
  answer, vetoes, and every student's row. Opens from disk, offline.
- reports/<id>_mistakes.csv — every diagnostic per check with its count and its students.

A mistake is the diagnostic of a failed test cell (coursekit.grading.records.autograded): students are
grouped by (check, diagnostic); shared by COMMON or more students, it is a common mistake.
"""

from __future__ import annotations

import csv
import io
import re
import statistics
import warnings
from dataclasses import dataclass
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from jinja2 import Environment, FileSystemLoader, select_autoescape  # noqa: E402

from coursekit.fonts import FigureError, cjk_font  # noqa: E402
from coursekit.grading.course import Course, Rubric  # noqa: E402
from coursekit.grading.judge import flags as F  # noqa: E402
from coursekit.grading.records.autograded import Graded  # noqa: E402
from coursekit.grading.records.report import VETO_MARGIN  # noqa: E402
from coursekit.grading.records.similarity import SHINGLE  # noqa: E402
from coursekit.lesson import Lesson  # noqa: E402

COMMON = 2
MISTAKE_COLUMNS = ("check", "title", "diagnostic", "count", "students")
STATES = (("yes", "通过", "#2e7d32"), ("no", "未通过", "#c62828"), ("pending", "待人工评分", "#f9a825"))
TEMPLATES = Path(__file__).resolve().parents[2] / "templates"


def report_html(course: Course) -> Path:
    return course.report_csv.with_suffix(".html")


def mistakes_csv(course: Course) -> Path:
    return course.report_csv.with_name(f"{course.assignment}_mistakes.csv")


@dataclass
class Mistake:
    check: str
    title: str
    diagnostic: str
    students: list[str]


def check_titles(lesson: Lesson) -> dict[str, str]:
    """Test grade id -> the lesson's title for it (e.g. test_boundary -> 边界输入)."""
    return {f"test_{t.options['test_id']}": t.options.get("title", t.options["test_id"]) for t in lesson.tests()}


def answer_titles(lesson: Lesson) -> dict[str, str]:
    """Answer id -> the lesson's title for it (e.g. explanation -> 实现与边界解释)."""
    return {a.attrs["id"]: a.attrs.get("title", a.attrs["id"]) for a in lesson.answers()}


def find_mistakes(graded: dict[str, Graded], titles: dict[str, str], rubric: Rubric) -> list[Mistake]:
    """Students grouped by (check, diagnostic): checks in rubric order, then most students first."""
    groups: dict[tuple[str, str], list[str]] = {}
    for sid in sorted(graded):
        for check, diagnostic in graded[sid].diagnostics.items():
            groups.setdefault((check, diagnostic), []).append(sid)
    order = list(rubric.checks)
    found = [Mistake(c, titles.get(c, c), d, s) for (c, d), s in groups.items()]
    return sorted(found, key=lambda m: (order.index(m.check), -len(m.students), m.diagnostic))


def write_mistakes_csv(path: Path, mistakes: list[Mistake]) -> None:
    with open(path, "w", newline="", encoding="utf-8") as out:
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(MISTAKE_COLUMNS)
        for m in mistakes:
            writer.writerow([m.check, m.title, m.diagnostic, len(m.students), " ".join(m.students)])


def write_class_report(course: Course, rows: list, graded: dict[str, Graded], lesson: Lesson) -> None:
    """reports/<id>.html and reports/<id>_mistakes.csv (e.g. lesson11) from the report rows."""
    titles = check_titles(lesson)
    mistakes = find_mistakes(graded, titles, course.rubric)
    write_mistakes_csv(mistakes_csv(course), mistakes)
    env = Environment(loader=FileSystemLoader(TEMPLATES), autoescape=select_autoescape(["html", "j2"]))
    _style()
    context = report_context(rows, mistakes, titles, answer_titles(lesson), course.rubric)
    page = env.get_template("classreport.html.j2").render(
        **context, title=lesson.front_matter.get("title", course.assignment), assignment=course.assignment)
    report_html(course).write_text(page, encoding="utf-8")


# ---------------------------------------------------------------- what the page shows

def _detail(flag_text: str) -> str:
    return flag_text.split("(", 1)[1][:-1] if "(" in flag_text else ""


def report_context(rows: list, mistakes: list[Mistake], titles: dict[str, str], answers: dict[str, str],
                   rubric: Rubric) -> dict:
    graded = [r for r in rows if r.graded]
    counts = {state: sum(r.passed == state for r in rows) for state, _, _ in STATES}
    totals = [r.total for r in graded]
    checks = []
    for gid, column in rubric.checks.items():
        full = [r for r in graded if column in r.auto_max and r.auto[column] >= r.auto_max[column]]
        points = next((r.auto_max[column] for r in graded if column in r.auto_max), 0.0)
        checks.append({"check": gid, "column": column, "title": titles.get(gid, gid), "points": points,
                       "passed": len(full), "failed": len(graded) - len(full),
                       "rate": len(full) / len(graded) if graded else 0.0})
    manual = []
    for qid in rubric.answers:
        asked = [r for r in graded if qid in r.manual]
        done = [r.manual[qid] for r in asked if qid in r.by_hand]  # graded by a person
        pending = sum(r.manual[qid] is None for r in asked)
        manual.append({"question": qid, "title": answers.get(qid, qid), "graded": len(done), "pending": pending,
                       "unanswered": len(asked) - len(done) - pending,  # no answer: nbgrader's automatic 0
                       "mean": statistics.fmean(done) if done else None})
    flag_students: dict[str, list[str]] = {}
    for r in rows:
        for name in dict.fromkeys(F.flag_name(f) for f in r.flags):
            flag_students.setdefault(name, []).append(r.student_id)
    copies = [(r.student_id, f) for r in rows for f in r.flags
              if F.flag_name(f) in (F.COPIED_REFERENCE, F.SIMILAR_ANSWERS)]
    vetoes = [(r.student_id, _detail(f), r) for r in rows for f in r.flags if F.flag_name(f) == F.VETO]
    common = [m for m in mistakes if len(m.students) >= COMMON]
    return {
        "rows": rows, "counts": counts, "n_graded": len(graded), "flagged": sum(bool(r.flags) for r in rows),
        "vetoed": len({sid for sid, _, _ in vetoes}),
        "stats": {"mean": statistics.fmean(totals), "median": statistics.median(totals), "min": min(totals),
                  "max": max(totals)} if totals else None,
        "checks": checks, "manual": manual, "common": common,
        "rare": [m for m in mistakes if len(m.students) < COMMON],
        "flags": sorted(flag_students.items(), key=lambda kv: (-len(kv[1]), kv[0])),
        "copies": copies, "vetoes": vetoes, "pass_score": rubric.pass_score, "states": STATES,
        "veto_cap": max(0.0, rubric.pass_score - VETO_MARGIN), "capped": [r for r in rows if r.capped],
        "shingle": SHINGLE,
        "plots": {"scores": score_plot(rows, rubric), "checks": checks_plot(checks), "mistakes": mistakes_plot(common),
                  "manual": manual_plot(manual)},
    }


# ---------------------------------------------------------------- plots (inline SVG)

def _style() -> None:
    """Matplotlib settings for the report's plots: a CJK font, glyphs as SVG paths, stable SVG ids."""
    try:
        family = cjk_font()  # the kit's one font set-up (coursekit.fonts): survives a stale font cache
    except FigureError:
        family = None
        warnings.warn("no CJK font found (install fonts-noto-cjk): the report's plot labels will show boxes",
                      stacklevel=2)
    plt.rcParams.update({
        "font.family": [family, "DejaVu Sans"] if family else ["DejaVu Sans"],
        "axes.unicode_minus": False, "font.size": 10, "svg.fonttype": "path", "svg.hashsalt": "coursekit",
        "axes.spines.top": False, "axes.spines.right": False,
    })


def _svg(fig) -> str:
    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight", metadata={"Date": None, "Creator": None})
    plt.close(fig)
    text = buf.getvalue()
    return text[text.index("<svg"):]


def score_plot(rows: list, rubric: Rubric) -> str:
    """Totals of the graded students (half-point bins), stacked by passed state, with the pass line."""
    fig, ax = plt.subplots(figsize=(7, 3))
    edges = [k / 2 for k in range(0, int(2 * rubric.max_score) + 2)]
    data = [[r.total for r in rows if r.graded and r.passed == state] for state, _, _ in STATES]
    ax.hist(data, bins=edges, stacked=True, color=[c for _, _, c in STATES],
            label=[f"{label}（{len(d)} 人）" for (_, label, _), d in zip(STATES, data, strict=True)])
    ax.axvline(rubric.pass_score, color="#333", linestyle="--", linewidth=1)
    ax.text(rubric.pass_score + 0.1, ax.get_ylim()[1] * 0.9, f"通过线 {rubric.pass_score:g} 分", fontsize=9)
    ax.set(xlabel=f"总分（满分 {rubric.max_score:g}）", ylabel="人数", xlim=(0, rubric.max_score + 0.5),
           title="总分分布")
    ax.yaxis.get_major_locator().set_params(integer=True)
    ax.legend(frameon=False, fontsize=9)
    return _svg(fig)


def checks_plot(checks: list[dict]) -> str:
    fig, ax = plt.subplots(figsize=(7, 0.5 + 0.5 * len(checks)))
    labels = [f"{c['title']}（{c['points']:g} 分）" for c in checks]
    rates = [100 * c["rate"] for c in checks]
    ax.barh(labels, rates, color="#1565c0")
    for k, c in enumerate(checks):
        ax.text(min(rates[k] + 1, 88), k, f"{rates[k]:.0f}%（{c['passed']}/{c['passed'] + c['failed']}）",
                va="center", fontsize=9)
    ax.set(xlim=(0, 100), xlabel="满分通过的学生（%）", title="各检查通过率")
    ax.invert_yaxis()
    return _svg(fig)


def _short(text: str, width: int = 34) -> str:
    text = re.sub(r"\s+", " ", text)
    return text if len(text) <= width else text[:width - 1] + "…"


def mistakes_plot(common: list[Mistake]) -> str | None:
    if not common:
        return None
    top = sorted(common, key=lambda m: -len(m.students))[:12]
    fig, ax = plt.subplots(figsize=(8, 0.6 + 0.45 * len(top)))
    ax.barh([f"{m.title}：{_short(m.diagnostic)}" for m in top], [len(m.students) for m in top], color="#6a1b9a")
    for k, m in enumerate(top):
        ax.text(len(m.students) + 0.05, k, f"{len(m.students)} 人", va="center", fontsize=9)
    ax.set(xlabel="人数", title="常见错误")
    ax.xaxis.get_major_locator().set_params(integer=True)
    ax.invert_yaxis()
    return _svg(fig)


def manual_plot(manual: list[dict]) -> str:
    fig, ax = plt.subplots(figsize=(7, 0.5 + 0.5 * len(manual)))
    labels = [m["title"] for m in manual]
    done = [m["graded"] for m in manual]
    ax.barh(labels, done, color="#2e7d32", label="已评分")
    ax.barh(labels, [m["pending"] for m in manual], left=done, color="#f9a825", label="待评分")
    ax.set(xlabel="人数", title="人工评分进度")
    ax.xaxis.get_major_locator().set_params(integer=True)
    ax.invert_yaxis()
    ax.legend(frameon=False, fontsize=9, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return _svg(fig)

