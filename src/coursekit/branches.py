"""Derive the exercise branch, the solution branch and the nbgrader source from one lesson source.

    lessons/<name>.qmd ──► exercises/<name>.qmd, exercises/<name>.ipynb      (blanks, no answers)
                       ├─► solutions/<name>.qmd, solutions/<name>.ipynb      (reference executed)
                       └─► autograder/source/<assignment>/<assignment>.ipynb (nbgrader metadata)

Every output is built in memory first; files are written only when all of them built, so a bad
source leaves the previous outputs untouched.
"""

from __future__ import annotations

import argparse
import base64
import mimetypes
import os
import re
import textwrap
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
from nbclient import NotebookClient

from coursekit.course_file import LessonEntry, load_course, resolve_lesson
from coursekit.errors import CourseError
from coursekit.lesson import HINT_LEVELS, TEST_PREFIX, Code, Div, Lesson, Node, Text, parse_lesson
from coursekit.nav import nav_outputs

KERNELSPEC = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}

_SPAN = re.compile(r"\[([^\]]*)\]\{[^}]*\}")
_IMAGE_WITH_WIDTH = re.compile(r'!\[([^\]]*)\]\(([^)]+)\)\{width="([^"]+)"(?: fig-alt="([^"]*)")?\}')
# The exercise branch's level 4: where the answer is (the solution branch has the answer there).
ANSWER_ELSEWHERE = ["完整答案（两处填空的写法）只在**参考答案版**里：",
                    "老师在作业截止后发布参考答案版的网站和 notebook。先用前三级提示自己完成，再用“检查”核对。"]
# The solution branch's answer areas: a reader of the reference answers has nothing to write, so instead of an
# empty box the question points to its reference answer.
SOLUTION_ANSWER_NOTE = "*本题的参考答案在本页末尾的“参考答案”中。*"
_BOLD = re.compile(r"\*\*([^*`\n]+?)\*\*")
_LOCAL_IMG = re.compile(r'<img src="(?!data:|[a-z]+://)([^"]+)"')


# ---------------------------------------------------------------- Quarto branches (.qmd)

def render_qmd(lesson: Lesson, branch: str) -> str:
    """The branch as Quarto markdown: profile blocks resolved, answers blanked or filled."""
    front = (f'---\ntitle: "{lesson.front_matter["title"]}"\njupyter: python3\n'
             # the page is one folder below the site root; MathJax is the site's own (see _quarto.yml)
             "html-math-method:\n  method: mathjax\n  url: ../assets/vendor/mathjax/tex-chtml.js\n---\n")
    body = "\n".join(_qmd_nodes(lesson, lesson.nodes, branch))
    return _tidy(front + body)


def _qmd_nodes(lesson: Lesson, nodes: list[Node], branch: str) -> list[str]:
    out: list[str] = []
    for node in nodes:
        if isinstance(node, Text):
            out.extend(node.lines)
        elif isinstance(node, Code):
            out.extend(_qmd_code(lesson, node, branch))
        elif _profile(node) is not None:
            if _profile(node) == branch:
                out.extend(_qmd_nodes(lesson, node.children, branch))
        elif node.has("hints"):
            out.extend(_qmd_hints(lesson, node, branch))
        elif node.has("reference-answer"):
            out.extend(_qmd_nodes(lesson, node.children, branch))
        elif node.has("answer") and branch == "solution":
            out.append(SOLUTION_ANSWER_NOTE)
        elif node.has("answer"):
            out.append(f'::: {{.course-answer data-answer-id="{node.attrs["id"]}"}}')
            out.extend(_qmd_nodes(lesson, node.children, branch))
            out.append(":::")
        else:
            out.append(f"::: {{{node.raw}}}")
            out.extend(_qmd_nodes(lesson, node.children, branch))
            out.append(":::")
    return out


def _qmd_code(lesson: Lesson, cell: Code, branch: str) -> list[str]:
    if cell.role == "test":
        return []
    if cell.role == "exercise" and branch == "exercise":  # the runner (assets/runner) turns it into an editor
        return ["::: {.course-exercise}", "```{python}", "#| course_role: exercise", "#| eval: false",
                lesson.blank_code, "```", ":::"]
    if cell.role == "exercise":  # the solution page shows the task as posed, unexecuted, without the runner
        options, body = {"eval": "false"}, lesson.blank_code
    elif cell.role == "solution":
        options, body = {"course_role": "solution"}, lesson.reference_code
    else:
        options, body = cell.options, cell.body
    return [f"```{{{cell.lang}}}", *(f"#| {k}: {v}" for k, v in options.items()), body, "```"]


def _qmd_hints(lesson: Lesson, div: Div, branch: str) -> list[str]:
    """The same nested <details> as the notebooks (Pandoc keeps raw HTML blocks and reads the markdown
    between them), so both renderings have one hint widget that the runner (assets/runner) drives."""
    return ["", _details_html(_hint_bodies(lesson, div, branch), lambda line: line), ""]


def _hint_bodies(lesson: Lesson, div: Div, branch: str) -> list[tuple[str, list[str]]]:
    """Four levels: 1-3 from the lesson; 4 is the answer lines (solution) or where to find them (exercise)."""
    hints = [c for c in div.children if isinstance(c, Div) and c.has("hint")]
    bodies = [(h.attrs["title"], h.text_lines()) for h in hints[:-1]]
    if branch == "solution":
        answer = textwrap.dedent("\n".join(lesson.answer_lines))
        bodies.append((HINT_LEVELS[-1], ["填空处的参考代码：", "", "```python", answer, "```"]))
    else:
        bodies.append((HINT_LEVELS[-1], ANSWER_ELSEWHERE))
    return bodies


def _profile(div: Div) -> str | None:
    return div.attrs.get("when-profile") if div.has("content-visible") else None


def _tidy(text: str) -> str:
    return re.sub(r"\n{3,}", "\n\n", text).strip("\n") + "\n"


# ---------------------------------------------------------------- Jupyter notebooks (.ipynb)

@dataclass
class _NotebookBuilder:
    """Collects cells: markdown text accumulates until a code cell or a special block flushes it."""

    lesson: Lesson
    target: str  # "exercise" | "solution" | "autograder"
    cells: list = field(default_factory=list)
    text: list[str] = field(default_factory=list)

    @property
    def branch(self) -> str:
        return "solution" if self.target == "solution" else "exercise"

    def flush(self) -> None:
        chunk = _tidy("\n".join(self.text)).strip("\n") if self.text else ""
        self.text = []
        for part in _split_at_headings(chunk):
            self.add_markdown(part)

    def add_markdown(self, source: str, **metadata) -> None:
        if source.strip():
            self.cells.append(nbformat.v4.new_markdown_cell(source, metadata=metadata))

    def add_code(self, source: str, **metadata) -> None:
        self.flush()
        self.cells.append(nbformat.v4.new_code_cell(source, metadata=metadata))

    def nodes(self, nodes: list[Node]) -> None:
        for node in nodes:
            if isinstance(node, Text):
                self.text.extend(_jupyter_markdown(line) for line in node.lines)
            elif isinstance(node, Code):
                self.code(node)
            else:
                self.div(node)

    def code(self, cell: Code) -> None:
        if cell.lang != "python":
            self.text += ["", f"```{cell.lang}", cell.body, "```", ""]
        elif cell.role == "exercise":
            self.exercise(cell)
        elif cell.role == "solution":
            self.add_code(self.lesson.reference_code, tags=["course-solution"])
        elif cell.role == "test":
            if self.target == "autograder":
                points = float(cell.options["points"])
                self.add_code(cell.body, nbgrader=_nbgrader(f"{TEST_PREFIX}{cell.options['test_id']}", grade=True,
                                                             locked=True, points=points))
        else:
            self.add_code(cell.body)

    def exercise(self, cell: Code) -> None:
        if self.target == "exercise":
            self.add_code(self.lesson.blank_code, tags=["course-exercise"])
        elif self.target == "autograder":
            self.add_code(cell.body, tags=["course-exercise"],
                          nbgrader=_nbgrader(self.lesson.exercise_id, solution=True))
        else:  # the solution branch shows the task as posed; the filled-in code runs further down
            self.flush()
            self.add_markdown(f"```python\n{self.lesson.blank_code}\n```", tags=["course-exercise-text"])

    def div(self, div: Div) -> None:
        if _profile(div) is not None:
            if _profile(div) == self.branch:
                self.nodes(div.children)
        elif div.has("hints"):
            self.flush()
            self.add_markdown(_details_html(_hint_bodies(self.lesson, div, self.branch), _jupyter_markdown),
                              tags=["course-hints"])
        elif div.has("answer"):
            self.answer(div)
        elif any(c.startswith("callout") for c in div.classes):
            self.callout(div)
        else:  # reference answers, figure cards, pagination: their content reads as plain markdown
            self.nodes(div.children)

    def answer(self, div: Div) -> None:
        if self.target == "solution":
            self.text.extend(["", SOLUTION_ANSWER_NOTE, ""])
            return
        self.flush()
        answer_id = div.attrs["id"]
        prompt = _tidy("\n".join(div.text_lines()))
        if self.target != "autograder":
            self.add_markdown(prompt.strip() + "\n\n", tags=["course-answer"], course_answer_id=answer_id)
            return
        reference = self.lesson.reference_answers()[answer_id]
        solution = _tidy("\n".join(reference.text_lines()))
        source = f"{prompt.strip()}\n\n### BEGIN SOLUTION\n{solution.strip()}\n### END SOLUTION"
        self.add_markdown(source, tags=["course-answer"], course_answer_id=answer_id,
                          nbgrader=_nbgrader(answer_id, solution=True, grade=True, points=float(div.attrs["points"])))

    def callout(self, div: Div) -> None:
        holds_code = any(isinstance(n, Code) for n in self.lesson.walk(div.children))
        title = div.attrs.get("title")
        if holds_code:  # code cannot live inside a quote block: give it a heading instead
            self.flush()
            self.text += [f"## {title}", ""] if title else []
            self.nodes(div.children)
            return
        inner = _NotebookBuilder(self.lesson, self.target)
        inner.nodes(div.children)
        body = _tidy("\n".join(inner.text)).strip("\n").split("\n")
        quote = ([f"> **{title}**", ">"] if title else []) + [f"> {line}".rstrip() for line in body]
        self.text += ["", *quote, ""]


def _nbgrader(grade_id: str, *, grade: bool = False, solution: bool = False, locked: bool = False,
              points: float | None = None) -> dict:
    meta = {"grade": grade, "grade_id": grade_id, "locked": locked, "schema_version": 3, "solution": solution}
    if points is not None:
        meta["points"] = points
    return meta


def _details_html(levels: list[tuple[str, list[str]]], markdown: Callable[[str], str]) -> str:
    """Nested <details>: a level's summary shows only once the level above is open. `markdown`
    adapts each body line to the rendering (notebooks: `_jupyter_markdown`)."""
    parts: list[str] = []
    for level, (title, body) in enumerate(levels, start=1):
        text = _tidy("\n".join(markdown(line) for line in body)).strip("\n")
        parts.append(f'<details class="course-hint" data-level="{level}">\n'
                     f"<summary>提示 {level}：{title}</summary>\n\n{text}\n")
    return "\n".join(parts) + "\n" + "\n".join("</details>" for _ in levels)


def _jupyter_markdown(line: str) -> str:
    """Quarto-only inline syntax to what JupyterLab renders: sized images, attributed spans, and bold
    that CommonMark would not close."""
    line = _IMAGE_WITH_WIDTH.sub(lambda m: f'<img src="{m[2]}" alt="{m[4] or m[1]}" width="{m[3]}">', line)
    line = _BOLD.sub(lambda m: _commonmark_bold(m, line), line)
    return _SPAN.sub(r"\1", line)


def _commonmark_bold(match: re.Match, line: str) -> str:
    """`**…）**由` is bold to Pandoc but not to CommonMark (JupyterLab, nbconvert): a delimiter next to
    punctuation on its inner side needs space or punctuation on its outer side. Such runs become <strong>."""
    def is_punct(ch: str) -> bool:
        return unicodedata.category(ch).startswith(("P", "S"))

    def outer_ok(ch: str) -> bool:
        return ch == "" or ch.isspace() or is_punct(ch)

    text, before, after = match[1], line[match.start() - 1:match.start()], line[match.end():match.end() + 1]
    if (is_punct(text[0]) and not outer_ok(before)) or (is_punct(text[-1]) and not outer_ok(after)):
        return f"<strong>{text}</strong>"
    return match[0]


def _split_at_headings(markdown: str) -> list[str]:
    parts, current, in_fence = [], [], False
    for line in markdown.split("\n"):
        if line.startswith("```"):
            in_fence = not in_fence
        if not in_fence and re.match(r"#{1,3} ", line) and current:
            parts.append("\n".join(current).strip("\n"))
            current = []
        current.append(line)
    parts.append("\n".join(current).strip("\n"))
    return [p for p in parts if p.strip()]


def build_notebook(lesson: Lesson, target: str) -> nbformat.NotebookNode:
    """The lesson as a notebook for `target` ("exercise", "solution" or "autograder"), unexecuted."""
    builder = _NotebookBuilder(lesson, target)
    builder.text += [f"# {lesson.front_matter['title']}", ""]
    builder.nodes(lesson.nodes)
    builder.flush()
    cells = builder.cells
    for index, cell in enumerate(cells):
        cell["id"] = _cell_id(cell, index)
        if target == "autograder" and cell.cell_type == "markdown":
            cell.source = _embed_images(cell.source, lesson.path)
            if "nbgrader" not in cell.metadata:
                cell.metadata["nbgrader"] = _nbgrader(f"text-{index:02d}", locked=True)
    nb = nbformat.v4.new_notebook(cells=cells)
    nb.metadata = {"kernelspec": KERNELSPEC, "language_info": {"name": "python"}}
    return nb


def _embed_images(source: str, lesson_path: Path) -> str:
    """Local figures as data URIs. The nbgrader notebook is read where paths relative to the lesson
    break: autograder/source/, the release, formgrader's /formgrader/submissions/<id>/, feedback/."""
    def data_uri(match: re.Match) -> str:
        image = lesson_path.parent / match[1]
        if not image.is_file():
            raise CourseError(f"{lesson_path}: figure {match[1]} not found; run `make figures`")
        mime = mimetypes.guess_type(image.name)[0] or "application/octet-stream"
        return f'<img src="data:{mime};base64,{base64.b64encode(image.read_bytes()).decode("ascii")}"'
    return _LOCAL_IMG.sub(data_uri, source)


def _cell_id(cell: nbformat.NotebookNode, index: int) -> str:
    grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
    answer_id = cell.metadata.get("course_answer_id")
    name = grade_id or (f"answer-{answer_id}" if answer_id else None) or f"cell-{index:02d}"
    return name.replace("_", "-")


def execute_notebook(nb: nbformat.NotebookNode, cwd: Path, source: Path) -> nbformat.NotebookNode:
    """Run every cell (stopping at the first error) without timing metadata, so outputs are stable."""
    client = NotebookClient(nb, timeout=120, kernel_name="python3", record_timing=False,
                            resources={"metadata": {"path": str(cwd)}})
    try:
        client.execute()
    except Exception as exc:  # nbclient raises CellExecutionError, DeadKernelError, TimeoutError...
        first = str(exc).strip().splitlines()[-1] if str(exc).strip() else type(exc).__name__
        raise CourseError(f"{source}: the solution notebook fails to execute: {first}") from None
    nb.metadata["language_info"] = {k: v for k, v in nb.metadata.get("language_info", {}).items()
                                    if k in ("name", "version", "file_extension", "mimetype")}
    return nb


# ---------------------------------------------------------------- the step list

def _notebook_text(nb: nbformat.NotebookNode) -> str:
    return nbformat.writes(nb) + "\n"


def _outputs_for(entry: LessonEntry) -> list[tuple[str, Callable[[Lesson], str]]]:
    """One generator per generated file. The solution notebook runs beside the source: lessons/ and
    solutions/ sit at the same depth, so relative paths (figures) resolve the same way."""
    stem, lesson_path = entry.slug, entry.source
    return [
        (f"exercises/{stem}.qmd", lambda lesson: render_qmd(lesson, "exercise")),
        (f"exercises/{stem}.ipynb", lambda lesson: _notebook_text(build_notebook(lesson, "exercise"))),
        (f"solutions/{stem}.qmd", lambda lesson: render_qmd(lesson, "solution")),
        (f"solutions/{stem}.ipynb", lambda lesson: _notebook_text(
            execute_notebook(build_notebook(lesson, "solution"), lesson_path.parent, lesson_path))),
        (entry.source_notebook.as_posix(),
         lambda lesson: _notebook_text(build_notebook(lesson, "autograder"))),
    ]


def build_outputs(lesson: Path | LessonEntry) -> dict[str, str]:
    """Every generated file's text, keyed by path relative to the project root.

    `lesson`: a course lesson, or a source path (its id comes from the course file, else its name).
    """
    entry = lesson if isinstance(lesson, LessonEntry) else resolve_lesson(lesson)
    parsed = parse_lesson(entry.source)
    return {path: make(parsed) for path, make in _outputs_for(entry)}


def write_outputs(outputs: dict[str, str], root: Path) -> list[str]:
    """Write the files whose text changed (atomically each); return the paths written."""
    written = []
    for rel, text in outputs.items():
        target = root / rel
        if target.exists() and target.read_text(encoding="utf-8") == text:
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f".{target.name}.tmp")
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, target)
        written.append(rel)
    return written


def stale_outputs(outputs: dict[str, str], root: Path) -> list[str]:
    """Paths whose committed text differs from what the build makes."""
    return [rel for rel, text in outputs.items()
            if not (root / rel).exists() or (root / rel).read_text(encoding="utf-8") != text]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--lesson", default=None,
                        help="a lesson id of course.yml or a lesson source .qmd (default: every lesson)")
    parser.add_argument("--root", type=Path, default=Path("."), help="project root to write into")
    parser.add_argument("--check", action="store_true",
                        help="write nothing; exit 1 if any generated file differs from the build")


def run(args: argparse.Namespace) -> int:
    course = load_course()
    entries = course.lessons if args.lesson is None else (resolve_lesson(args.lesson),)
    # every lesson builds before anything is written, so one bad lesson writes nothing
    built = [(str(entry.source), build_outputs(entry)) for entry in entries]
    if all(e.id in {c.id for c in course.lessons} for e in entries):  # not for a draft outside the course
        built.append((str(course.path), nav_outputs(course)))
    outputs = {rel: text for _, each in built for rel, text in each.items()}
    if args.check:
        stale = stale_outputs(outputs, args.root)
        for rel in stale:
            print(f"{rel}: differs from what `make branches` generates; run `make branches` and commit")
        return 1 if stale else 0
    for source, each in built:
        written = write_outputs(each, args.root)
        print(f"branches: {len(each)} files from {source} ({len(written)} updated)")
    return 0
