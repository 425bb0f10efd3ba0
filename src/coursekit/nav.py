"""The Quarto profiles' page list and navigation (`_quarto-exercise.yml`, `_quarto-solution.yml`), from course.yml.

`make branches` writes them and `make branches --check` (tests/branches) fails when they drift; each
profile renders the home page, every lesson's branch page and its demos, in course order.
"""

from __future__ import annotations

import json

import yaml

from coursekit.course_file import CourseFile, LessonEntry
from coursekit.lesson import parse_lesson

HOME = "index.qmd"
BRANCH_TEXT = {"exercise": "练习", "solution": "参考答案"}
PROFILES = {
    "exercise": ("_site", "Exercise profile (the default): blanks, hints up to level 3, answer areas; "
                          "no reference answers."),
    "solution": ("_site-solution", "Solution profile: executed reference code, outputs, the level-4 hint and "
                                   "the reference answers."),
}


def profile_path(branch: str) -> str:
    return f"_quarto-{branch}.yml"


def _text(value: str) -> str:
    """A YAML scalar: plain when it reads back unchanged, else a JSON (double-quoted) string."""
    return value if yaml.safe_load(value) == value and ": " not in value else json.dumps(value, ensure_ascii=False)


def _page(entry: LessonEntry, branch: str) -> str:
    return f"{branch}s/{entry.slug}.qmd"


def profile_text(course: CourseFile, branch: str) -> str:
    """One profile file's text (the lesson titles are read from the sources beside the course file)."""
    root = course.path.parent
    out_dir, what = PROFILES[branch]
    navbar, sidebar, render = [("首页", HOME)], [("首页", HOME)], [HOME]
    for entry in course.lessons:
        full = parse_lesson(root / entry.source, course.sections).front_matter["title"]
        navbar.append((f"{entry.title}（{BRANCH_TEXT[branch]}）", _page(entry, branch)))
        sidebar.append((f"{full}（{BRANCH_TEXT[branch]}）", _page(entry, branch)))
        render.append(_page(entry, branch))
        for demo in entry.demos:
            navbar.append((demo.title, demo.source.as_posix()))
            sidebar.append((demo.long_title, demo.source.as_posix()))
            render.append(demo.source.as_posix())
    lines = [f"# {what}", "# Generated from course.yml by `make branches` (coursekit.nav); edit course.yml instead.",
             "project:", f"  output-dir: {out_dir}", "  render:", *[f"    - {p}" for p in render], "", "website:"]
    if branch == "solution":
        lines.append(f"  title: {json.dumps(course.title + '（参考答案版）', ensure_ascii=False)}")
    lines += ["  navbar:", "    left:"]
    lines += [f"      {s}" for text, href in navbar for s in (f"- text: {_text(text)}", f"  href: {href}")]
    lines += ["  sidebar:", "    style: docked", "    contents:"]
    lines += [f"      {s}" for text, href in sidebar for s in (f"- text: {_text(text)}", f"  href: {href}")]
    return "\n".join(lines) + "\n"


def nav_outputs(course: CourseFile) -> dict[str, str]:
    """Both profile files' text, keyed by path relative to the project root."""
    return {profile_path(branch): profile_text(course, branch) for branch in PROFILES}
