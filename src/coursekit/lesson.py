"""Parse a lesson `.qmd` into a tree of text, code cells and fenced divs, and check it.

The lesson source is Quarto markdown with a few course conventions (see README, "Adding a lesson"):

- code cells carry `#| course_role:` — `exercise` (the fill-in, written as the reference code with
  answer markers; `#| grade_id: name` is its nbgrader grade id, e.g. the function it asks for),
  `solution` (an empty placeholder the build fills with the reference code) or
  `test` (a grading cell: visible lines copied from the exercise cell, then hidden tests);
- a test cell's visible part may start with a `### BEGIN SELF-CHECKS` / `### END SELF-CHECKS` block:
  the course's own checks of the mistakes the hidden tests catch, on inputs of their own, with the
  hidden tests' Chinese reasons; they run in the student's checks and in the grader (`SELF_CHECK_BLOCK`);
- a test cell may carry `#| own_run: name name ...`: its points depend on the student's own run of
  the exercise cell (its hidden tests read these variables before the visible lines redefine them),
  so every student-side check (browser Check, `make check`) also requires each name to hold, after
  the student's code ran, the value the check's visible lines give it (see `VisibleCheck`);
- answer markers live only in the exercise cell: a trailing `# SOLUTION` on one line, or a
  `# BEGIN SOLUTION` / `# END SOLUTION` pair around several lines;
- divs: `.content-visible when-profile=...`, `.hints` with `.hint` levels, `.answer` areas and
  `.reference-answer` texts.

Every problem is a `LessonError` that names `file:line` and says what to do.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from coursekit.course_file import load_course
from coursekit.errors import CourseError

ROLES = ("exercise", "solution", "test")
HINT_LEVELS = ("概念区域", "具体方向", "关键局部", "完整答案")
LINE_MARKER = "# SOLUTION"
BEGIN_MARKER = "# BEGIN SOLUTION"
END_MARKER = "# END SOLUTION"
BLANK = "______"
TEST_PREFIX = "test_"  # a test cell's nbgrader grade id is test_<test_id>

_DIV_OPEN = re.compile(r"^(:{3,})\s*\{(?P<attrs>[^}]*)\}\s*$")
_DIV_CLOSE = re.compile(r"^:{3,}\s*$")
_FENCE = re.compile(r"^(?P<ticks>`{3,})\s*(?:\{(?P<lang>[A-Za-z]+)\}|(?P<plain>\S*))\s*$")
_ATTR = re.compile(r'\.(?P<cls>[\w-]+)|(?P<key>[\w-]+)="(?P<val>[^"]*)"|#(?P<id>[\w-]+)')
_ASSIGN = re.compile(r"^(?P<indent>\s*)(?P<lhs>[A-Za-z_][\w.\[\], ]*?)\s*=(?!=)")
_RETURN = re.compile(r"^(?P<indent>\s*)return\b")
_GRADE_ID = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")
SELF_CHECK_BLOCK = re.compile(r"^### BEGIN SELF-CHECKS$.*?^### END SELF-CHECKS$", re.M | re.S)


class LessonError(CourseError):
    """A problem in a lesson source, reported as `file:line: message`."""

    def __init__(self, path: Path | str, line: int, message: str):
        super().__init__(f"{path}:{line}: {message}")
        self.path, self.line, self.message = str(path), line, message


@dataclass
class Text:
    """Markdown lines outside any code fence."""

    lines: list[str]
    line: int


@dataclass
class Code:
    """A fenced cell: `lang` is `python`, `mermaid`, ...; `options` are its `#|` lines."""

    lang: str
    options: dict[str, str]
    body: str
    line: int

    @property
    def role(self) -> str | None:
        return self.options.get("course_role")


@dataclass
class Div:
    """A fenced div `::: {.cls key="val"}` and what it contains."""

    classes: list[str]
    attrs: dict[str, str]
    children: list[Text | Code | Div]
    line: int
    raw: str = ""

    def has(self, cls: str) -> bool:
        return cls in self.classes

    def text_lines(self) -> list[str]:
        """The markdown lines directly inside this div."""
        return [line for child in self.children if isinstance(child, Text) for line in child.lines]


Node = Text | Code | Div


@dataclass(frozen=True)
class VisibleCheck:
    """A test cell as the student's checks run it: the browser's Check and `make check` read these.

    `code` is the visible part (the exercise's own asserts). `own_run` (the cell option
    `#| own_run: a b c`) names variables the grader reads from the student's own run: the check
    passes only if, just before `code` runs, each name already holds the value `code` gives it —
    i.e. the student's exercise cell reached and computed those lines itself.
    """

    id: str
    title: str
    points: str
    code: str
    own_run: tuple[str, ...] = ()


@dataclass
class Lesson:
    """A parsed and checked lesson."""

    path: Path
    front_matter: dict
    nodes: list[Node]
    exercise: Code = field(repr=False)

    @property
    def exercise_id(self) -> str:
        """The exercise cell's nbgrader grade id (its `#| grade_id:` option)."""
        return self.exercise.options["grade_id"]

    @property
    def reference_code(self) -> str:
        """The exercise cell with its answer markers removed."""
        return strip_answer_markers(self.exercise.body)

    @property
    def blank_code(self) -> str:
        """The exercise cell as students get it: each answer replaced by `______`."""
        return blank_answers(self.exercise.body)

    @property
    def answer_lines(self) -> list[str]:
        """The reference lines that the blanks replace, markers removed."""
        return answer_lines(self.exercise.body)

    def walk(self, nodes: list[Node] | None = None):
        """Yield every node, depth first."""
        for node in self.nodes if nodes is None else nodes:
            yield node
            if isinstance(node, Div):
                yield from self.walk(node.children)

    def tests(self) -> list[Code]:
        return [n for n in self.walk() if isinstance(n, Code) and n.role == "test"]

    def visible_checks(self) -> list[VisibleCheck]:
        """One VisibleCheck per test cell, in order."""
        return [VisibleCheck(t.options["test_id"], t.options.get("title", t.options["test_id"]), t.options["points"],
                             visible_test_code(t.body), own_run_names(t)) for t in self.tests()]

    def answers(self) -> list[Div]:
        return [n for n in self.walk() if isinstance(n, Div) and n.has("answer")]

    def reference_answers(self) -> dict[str, Div]:
        return {n.attrs["for"]: n for n in self.walk() if isinstance(n, Div) and n.has("reference-answer")}


# ---------------------------------------------------------------- answer markers

def _marker_kind(line: str) -> str | None:
    stripped = line.rstrip()
    if stripped.lstrip() == BEGIN_MARKER:
        return "begin"
    if stripped.lstrip() == END_MARKER:
        return "end"
    if stripped.endswith(LINE_MARKER) and stripped.lstrip() != LINE_MARKER:
        return "line"
    if "SOLUTION" in line and "#" in line:
        return "misplaced"
    return None


def _blank_line(code_line: str) -> str:
    """`    var = expr` -> `    var = ______`; `return expr` -> `return ______`; else `______`."""
    if m := _RETURN.match(code_line):
        return f"{m['indent']}return {BLANK}"
    if m := _ASSIGN.match(code_line):
        return f"{m['indent']}{m['lhs']} = {BLANK}"
    indent = code_line[: len(code_line) - len(code_line.lstrip())]
    return f"{indent}{BLANK}"


def _without_marker(line: str) -> str:
    return line.rstrip()[: -len(LINE_MARKER)].rstrip()


def _scan_answers(code: str) -> list[tuple[str, list[str]]]:
    """Split code into ("keep", lines) and ("answer", lines) runs; raises ValueError on bad markers."""
    runs: list[tuple[str, list[str]]] = []
    block: list[str] | None = None
    for number, line in enumerate(code.split("\n"), start=1):
        kind = _marker_kind(line)
        if kind == "misplaced":
            raise ValueError(f"{number}: answer marker must end the line as '{LINE_MARKER}' "
                             f"or stand alone as '{BEGIN_MARKER}' / '{END_MARKER}'")
        if kind == "begin":
            if block is not None:
                raise ValueError(f"{number}: '{BEGIN_MARKER}' inside another answer block")
            block = []
        elif kind == "end":
            if block is None:
                raise ValueError(f"{number}: '{END_MARKER}' without '{BEGIN_MARKER}'")
            if not block:
                raise ValueError(f"{number}: empty answer block")
            runs.append(("answer", block))
            block = None
        elif block is not None:
            if kind == "line":
                raise ValueError(f"{number}: '{LINE_MARKER}' inside an answer block")
            block.append(line)
        elif kind == "line":
            runs.append(("answer", [_without_marker(line)]))
        else:
            runs.append(("keep", [line]))
    if block is not None:
        raise ValueError(f"end of cell: '{BEGIN_MARKER}' is never closed; add '{END_MARKER}'")
    return runs


def has_answer_markers(code: str) -> bool:
    return any(_marker_kind(line) for line in code.split("\n"))


def blank_answers(code: str) -> str:
    """Replace each marked answer by `______`, keeping the line's assignment or `return`."""
    out: list[str] = []
    for kind, lines in _scan_answers(code):
        if kind == "keep":
            out.extend(lines)
        elif len(lines) == 1:
            out.append(_blank_line(lines[0]))
        else:
            indent = lines[0][: len(lines[0]) - len(lines[0].lstrip())]
            out.append(f"{indent}{BLANK}")
    return "\n".join(out)


def strip_answer_markers(code: str) -> str:
    """The reference code: answers kept, markers removed."""
    return "\n".join(line for _, lines in _scan_answers(code) for line in lines)


def answer_lines(code: str) -> list[str]:
    return [line for kind, lines in _scan_answers(code) if kind == "answer" for line in lines]


# ---------------------------------------------------------------- parsing

def _parse_attrs(text: str) -> tuple[list[str], dict[str, str]]:
    classes, attrs = [], {}
    for m in _ATTR.finditer(text):
        if m["cls"]:
            classes.append(m["cls"])
        elif m["key"]:
            attrs[m["key"]] = m["val"]
        elif m["id"]:
            attrs["id"] = m["id"]
    return classes, attrs


def _split_front_matter(path: Path, lines: list[str]) -> tuple[dict, int]:
    if not lines or lines[0].strip() != "---":
        raise LessonError(path, 1, "the lesson must start with a YAML front matter block ('---')")
    for i in range(1, len(lines)):
        if lines[i].strip() == "---":
            try:
                meta = yaml.safe_load("\n".join(lines[1:i])) or {}
            except yaml.YAMLError as exc:
                raise LessonError(path, 2, f"front matter is not valid YAML: {exc}") from None
            if "title" not in meta:
                raise LessonError(path, 2, "front matter has no 'title'")
            return meta, i + 1
    raise LessonError(path, 1, "front matter is never closed; add a '---' line after it")


def parse_lesson(path: Path | str, sections: tuple[str, ...] | None = None) -> Lesson:
    """Read, parse and check a lesson source; raise LessonError naming file:line on any problem.

    `sections`: the headings the lesson must have (default: the course file's lesson template).
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise LessonError(path, 1, f"cannot read the lesson: {exc}") from None
    lines = text.split("\n")
    meta, start = _split_front_matter(path, lines)

    root: list[Node] = []
    stack: list[Div] = []
    i = start
    while i < len(lines):
        line, number = lines[i], i + 1
        container = stack[-1].children if stack else root
        if fence := _FENCE.match(line):
            end = next((j for j in range(i + 1, len(lines))
                        if lines[j].startswith(fence["ticks"]) and not lines[j].strip("`")), None)
            if end is None:
                raise LessonError(path, number, "code fence is never closed; add a closing ``` line")
            if fence["lang"]:
                container.append(_code_cell(path, fence["lang"], lines[i + 1:end], number))
            else:
                _append_text(container, lines[i:end + 1], number)
            i = end + 1
            continue
        if m := _DIV_OPEN.match(line):
            classes, attrs = _parse_attrs(m["attrs"])
            div = Div(classes, attrs, [], number, raw=m["attrs"])
            container.append(div)
            stack.append(div)
        elif _DIV_CLOSE.match(line):
            if not stack:
                raise LessonError(path, number, "':::' closes a div that was never opened")
            stack.pop()
        else:
            if _marker_kind(line) in ("line", "begin", "end", "misplaced") and "SOLUTION" in line:
                raise LessonError(path, number, "answer marker outside a code cell; put it in the "
                                  "exercise cell, e.g. '# SOLUTION' at the end of a code line")
            _append_text(container, [line], number)
        i += 1
    if stack:
        raise LessonError(path, stack[-1].line, "div is never closed; add a ':::' line")

    lesson = Lesson(path, meta, root, exercise=None)  # type: ignore[arg-type]
    _check(lesson, load_course().sections if sections is None else sections)
    return lesson


def _append_text(container: list[Node], lines: list[str], number: int) -> None:
    if container and isinstance(container[-1], Text):
        container[-1].lines.extend(lines)
    else:
        container.append(Text(list(lines), number))


def _code_cell(path: Path, lang: str, lines: list[str], number: int) -> Code:
    options: dict[str, str] = {}
    body_start = 0
    for k, line in enumerate(lines):
        if not line.startswith("#|"):
            break
        key, sep, value = line[2:].partition(":")
        if not sep:
            raise LessonError(path, number + 1 + k, "cell option must read '#| key: value'")
        options[key.strip()] = value.strip()
        body_start = k + 1
    code = Code(lang, options, "\n".join(lines[body_start:]), number)
    if code.role is not None and code.role not in ROLES:
        raise LessonError(path, number + 1, f"unknown course_role '{code.role}'; use one of: "
                          + ", ".join(ROLES))
    if code.role != "exercise" and has_answer_markers(code.body):
        marker_line = next(k for k, line in enumerate(lines) if "SOLUTION" in line and "#" in line
                           and "HIDDEN" not in line)
        raise LessonError(path, number + 1 + marker_line, "answer marker outside the exercise cell; "
                          "only the cell with '#| course_role: exercise' may carry answer markers")
    return code


# ---------------------------------------------------------------- checks

def _check(lesson: Lesson, sections: tuple[str, ...]) -> None:
    path = lesson.path
    codes = [n for n in lesson.walk() if isinstance(n, Code)]
    exercises = [c for c in codes if c.role == "exercise"]
    if len(exercises) != 1:
        where = exercises[1].line if len(exercises) > 1 else 1
        raise LessonError(path, where, f"expected exactly one '#| course_role: exercise' cell, "
                          f"found {len(exercises)}")
    exercise = lesson.exercise = exercises[0]
    if not _GRADE_ID.match(exercise.options.get("grade_id", "")):
        raise LessonError(path, exercise.line, "the exercise cell needs '#| grade_id: name' (its nbgrader grade "
                          "id: letters, digits and _, e.g. the function it asks for)")
    try:
        answers = answer_lines(exercise.body)
    except ValueError as exc:
        rel, _, msg = str(exc).partition(": ")
        offset = int(rel) if rel.isdigit() else len(exercise.body.split("\n"))
        raise LessonError(path, exercise.line + len(exercise.options) + offset, msg) from None
    if not answers:
        raise LessonError(path, exercise.line, f"the exercise cell has no answer; mark each answer "
                          f"line with a trailing '{LINE_MARKER}'")

    for cell in codes:
        if cell.role == "solution" and cell.body.strip():
            raise LessonError(path, cell.line, "the solution cell is generated from the exercise cell; "
                              "leave its body empty")
        if cell.role == "test":
            _check_test(lesson, cell)

    covered = {line.strip() for t in lesson.tests() for line in visible_test_code(t.body).split("\n")}
    body_start = exercise.line + len(exercise.options) + 1
    for k, line in enumerate(exercise.body.split("\n")):
        if line.lstrip().startswith("assert") and line.strip() not in covered:
            raise LessonError(path, body_start + k, "this assert of the exercise cell is in no test cell; "
                              "copy it into the visible part of a '#| course_role: test' cell")

    headings = {re.sub(r"^#+\s*", "", line).strip(): n.line + k
                for n in lesson.walk() if isinstance(n, Text)
                for k, line in enumerate(n.lines) if line.startswith("#")}
    for section in sections:
        if not any(h == section or h.startswith(section + "：") or h.startswith(section + ":")
                   for h in headings):
            raise LessonError(path, 1, f"missing section '{section}'; the lesson must keep every "
                              "section of the course's lesson template (course.yml), in order")

    _check_grade_ids(lesson)
    refs = lesson.reference_answers()
    for div in lesson.answers():
        if "id" not in div.attrs or "points" not in div.attrs:
            raise LessonError(path, div.line, 'an .answer div needs id="..." and points="..."')
        if div.attrs["id"] not in refs:
            raise LessonError(path, div.line, f"answer '{div.attrs['id']}' has no "
                              f'.reference-answer for="{div.attrs["id"]}"')
    _check_answers_follow_questions(lesson, lesson.nodes)
    for div in (n for n in lesson.walk() if isinstance(n, Div) and n.has("hints")):
        hints = [c for c in div.children if isinstance(c, Div) and c.has("hint")]
        titles = tuple(h.attrs.get("title", "") for h in hints)
        if titles != HINT_LEVELS:
            raise LessonError(path, div.line, "hints must be four .hint divs titled "
                              + " → ".join(HINT_LEVELS))
        if any(isinstance(c, Text) and "".join(c.lines).strip() for c in hints[-1].children):
            raise LessonError(path, hints[-1].line, "the last hint (完整答案) is generated from the "
                              "answer lines; leave it empty")


def _check_grade_ids(lesson: Lesson) -> None:
    """The exercise, each test cell (test_<test_id>) and each answer area get distinct grade ids."""
    seen = {lesson.exercise_id: lesson.exercise.line}
    named = [(f"{TEST_PREFIX}{t.options['test_id']}", t.line) for t in lesson.tests()]
    named += [(a.attrs["id"], a.line) for a in lesson.answers() if "id" in a.attrs]
    for grade_id, line in named:
        if not _GRADE_ID.match(grade_id):
            raise LessonError(lesson.path, line, f"grade id '{grade_id}' must be letters, digits and _")
        if grade_id in seen:
            raise LessonError(lesson.path, line, f"grade id '{grade_id}' is already used on line {seen[grade_id]}; "
                              "test ids and answer ids must be unique")
        seen[grade_id] = line


def _check_answers_follow_questions(lesson: Lesson, nodes: list[Node]) -> None:
    """Each .answer div comes right after its question's text, so in the notebooks the question sits
    in the (locked) markdown cell just above the answer cell, with no hints or code in between."""
    for k, node in enumerate(nodes):
        if not isinstance(node, Div):
            continue
        before = nodes[k - 1] if k else None
        if node.has("answer") and not (isinstance(before, Text) and "".join(before.lines).strip()):
            raise LessonError(lesson.path, node.line, "an .answer div must directly follow the text of its "
                              "question (move hints, code or other blocks above the question)")
        _check_answers_follow_questions(lesson, node.children)


def own_run_names(cell: Code) -> tuple[str, ...]:
    """The names of a test cell's `#| own_run:` option (none when it has no such option)."""
    return tuple(cell.options.get("own_run", "").replace(",", " ").split())


def _assigned(code: str, name: str) -> bool:
    return re.search(rf"^\s*{re.escape(name)}\s*=(?!=)", code, re.M) is not None


def _check_test(lesson: Lesson, cell: Code) -> None:
    for key in ("test_id", "points"):
        if key not in cell.options:
            raise LessonError(lesson.path, cell.line, f"test cell needs '#| {key}: ...'")
    exercise_lines = {line.strip() for line in lesson.exercise.body.split("\n")}
    visible = visible_test_code(cell.body)
    for name in own_run_names(cell):
        if not name.isidentifier() or not (_assigned(visible, name) and _assigned(lesson.exercise.body, name)):
            raise LessonError(lesson.path, cell.line, f"own_run name '{name}' must be a variable that both the "
                              "exercise cell and this test cell's visible lines assign")
    author_lines = SELF_CHECK_BLOCK.sub(lambda m: "\n" * m.group(0).count("\n"), visible)
    for k, line in enumerate(author_lines.split("\n")):
        if line.strip() and line.strip() not in exercise_lines:
            raise LessonError(lesson.path, cell.line + len(cell.options) + 1 + k,
                              "visible test line is not in the exercise cell; visible checks are the "
                              "exercise's own asserts (put new checks between HIDDEN TESTS markers, or "
                              "the student's own checks between SELF-CHECKS markers)")


def given_checks(code: str) -> list[str]:
    """The checks a fill-in cell gives the student (stripped): its assert and raise lines, and each
    `if` line whose next line raises (the guard). Removing or changing one is the rubric's veto
    (删除边界检查): `coursekit grade` flags it, and every student-side check names it."""
    lines = [line.strip() for line in code.split("\n") if line.strip()]
    return [line for k, line in enumerate(lines) if line.startswith(("assert ", "raise "))
            or (line.startswith("if ") and k + 1 < len(lines) and lines[k + 1].startswith("raise "))]


def missing_given_checks(given: list[str], code: str) -> list[str]:
    """The lines of `given` that no line of `code` still holds (whitespace inside a line ignored)."""
    mine = {"".join(line.split()) for line in code.split("\n")}
    return [line for line in given if "".join(line.split()) not in mine]


GIVEN_CHECKS_TITLE = "题目给出的检查"
GIVEN_CHECKS_VETO = "评分时删除或改动题目给出的断言、raise 或它前面的 if 判断是一票否决（删除边界检查）"


def visible_test_code(body: str) -> str:
    """A test cell's body without its `### BEGIN/END HIDDEN TESTS` block."""
    return re.sub(r"\n?### BEGIN HIDDEN TESTS.*?### END HIDDEN TESTS\n?", "\n", body, flags=re.S).strip("\n")
