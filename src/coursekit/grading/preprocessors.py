"""nbgrader preprocessors used by the lesson 11 course (configured in autograder/nbgrader_config.py).

- `BlankSolutions` (generate_assignment): the fill-in shows `var = ______` / `return ______` exactly
  as the exercise branch does, not nbgrader's `raise NotImplementedError()` stub.
- `SandboxExecute` (autograde) runs the kernels: see coursekit.grading.sandbox.executor.
- `CapOutput` (autograde): nbgrader's LimitOutput plus a cap on the characters of each output, so a
  submission that prints 50 MB leaves a small autograded notebook and feedback page.
- `SanitizeStudentContent` (autograde): student HTML, Markdown and outputs lose active content
  before the autograded notebook is stored (formgrader and feedback show that notebook).
- `ChineseAutoComments` (generate_feedback): "No response." reads 未作答。
- `HideHiddenTests` (generate_feedback): test cells show their visible asserts only, and failures
  show the diagnostic without the traceback (which would quote hidden test lines).
"""

from __future__ import annotations

import html
import re
import secrets
from html.parser import HTMLParser

import bleach
import nbformat
from mistune import HTMLRenderer
from nbconvert.filters.markdown_mistune import IPythonRenderer, MarkdownWithMath
from nbformat.notebooknode import NotebookNode
from nbgrader import utils
from nbgrader.preprocessors import ClearSolutions, LimitOutput, NbGraderPreprocessor
from traitlets import Integer

from coursekit.errors import CourseError
from coursekit.lesson import blank_answers, has_answer_markers, visible_test_code


class BlankSolutions(ClearSolutions):
    """ClearSolutions that blanks `# SOLUTION`-marked code lines with coursekit.lesson.blank_answers."""

    def preprocess_cell(self, cell, resources, cell_index):
        if cell.cell_type == "code" and utils.is_solution(cell):
            if not has_answer_markers(cell.source):
                grade_id = cell.metadata.nbgrader.get("grade_id", f"#{cell_index}")
                raise CourseError(f"source notebook, cell '{grade_id}': a code solution cell without "
                                  "answer markers; end each answer line with '# SOLUTION' "
                                  "(run 'make branches' to regenerate the source notebook)")
            cell.source = blank_answers(cell.source)
            return cell, resources
        return super().preprocess_cell(cell, resources, cell_index)



class CapOutput(LimitOutput):
    """LimitOutput that also caps the characters of every output (long single lines included)."""

    max_chars = Integer(20000, help="maximum characters kept per output").tag(config=True)

    def _cap(self, text: str) -> str:
        if len(text) <= self.max_chars:
            return text
        return text[: self.max_chars] + f"\n... output truncated ({len(text)} characters) ..."

    def preprocess_cell(self, cell, resources, cell_index):
        cell, resources = super().preprocess_cell(cell, resources, cell_index)
        if cell.cell_type != "code":
            return cell, resources
        for output in cell.outputs:
            if output.output_type == "stream":
                output.text = self._cap(output.text)
            elif output.output_type == "error":
                output.evalue = self._cap(output.evalue)
                output.traceback = [self._cap(line) for line in output.traceback]
            elif "data" in output:
                for mime, value in list(output.data.items()):
                    text = value if isinstance(value, str) else "".join(value)
                    if mime == "text/plain":
                        output.data[mime] = self._cap(text)
                    elif len(text) > self.max_chars:
                        del output.data[mime]
                        output.data.setdefault("text/plain", f"[{mime} output of {len(text)} "
                                               "characters removed]")
        return cell, resources


class HideHiddenTests(NbGraderPreprocessor):
    """Feedback shows test cells' visible lines and failures' messages, never hidden test source."""

    def preprocess_cell(self, cell, resources, cell_index):
        if cell.cell_type != "code" or not (utils.is_grade(cell) and utils.is_locked(cell)):
            return cell, resources
        visible = visible_test_code(cell.source)
        if visible != cell.source.strip("\n"):
            cell.source = visible + "\n# （另有隐藏测试，源代码不在反馈中显示）"
        for k, output in enumerate(cell.outputs):
            if output.output_type == "error":
                cell.outputs[k] = nbformat.v4.new_output("stream", name="stderr",
                                                         text=f"未通过：{output.evalue or output.ename}\n")
        return cell, resources


# nbgrader's automatic comments (nbgrader.preprocessors.SaveAutoGrades: an answer left as released), as the
# feedback page shows them
AUTO_COMMENTS = {"No response.": "未作答。"}


class ChineseAutoComments(NbGraderPreprocessor):
    """generate_feedback, after GetGrades: nbgrader's automatic comments in the page's language (the
    gradebook keeps nbgrader's own, which formgrader shows the instructor)."""

    def preprocess_cell(self, cell, resources, cell_index):
        info = cell.metadata.get("nbgrader", {})
        if info.get("comment") in AUTO_COMMENTS:
            info["comment"] = AUTO_COMMENTS[info["comment"]]
        return cell, resources


def _instructors(cell: NotebookNode) -> bool:
    """A locked, non-solution cell with a grade id: nbgrader restored its source from the gradebook."""
    info = cell.metadata.get("nbgrader", {})
    return bool(info.get("grade_id") and info.get("locked") and not info.get("solution"))


def has_active_content(cell: NotebookNode) -> bool:
    """Scripts, event handlers, javascript: links or frames in student text or outputs."""
    if cell.cell_type in ("markdown", "raw"):
        return not _instructors(cell) and _is_active(cell.source)
    for output in cell.get("outputs", []):
        data = output.get("data", {})
        if any(mime not in SAFE_MIME | SANITIZED_MIME for mime in data):
            return True
        if any(_is_active(v if isinstance(v, str) else "".join(v)) for m, v in data.items() if m in SANITIZED_MIME):
            return True
        if _is_active(repr(output.get("metadata", {}))):  # e.g. an image's width: '1 onerror=...'
            return True
    return False


def _is_active(text: str) -> bool:
    return bool(ACTIVE.search(text) or TEX_ACTIVE.search(_plain_refs(text)))


class SanitizeStudentContent(NbGraderPreprocessor):
    """Nothing a student wrote or printed can run in the instructor's (or a student's) browser.

    Code outputs keep text, images and sanitised HTML/Markdown (bleach: no scripts, event
    handlers, javascript: links, iframes, styles; clean_tex: no TeX macro that makes a link, a class,
    a style, an id or a definition); every other type (JavaScript, SVG, LaTeX, widgets) becomes a
    line of text. Markdown and raw cells are sanitised unless they are the
    instructor's (a locked, non-solution cell that nbgrader restored from the gradebook), and
    widget state is dropped from the notebook metadata.
    """

    def preprocess(self, nb, resources):
        nb.metadata.pop("widgets", None)
        return super().preprocess(nb, resources)

    def preprocess_cell(self, cell, resources, cell_index):
        if cell.cell_type in ("markdown", "raw") and not _instructors(cell):
            cell.source = clean_markdown(cell.source)
        elif cell.cell_type == "code":
            cell.outputs = [sanitize_output(o) for o in cell.outputs]
        return cell, resources


SAFE_TAGS = {"a", "abbr", "acronym", "b", "blockquote", "br", "code", "dd", "del", "div", "dl", "dt", "em",
             "h1", "h2", "h3", "h4", "h5", "h6", "hr", "i", "kbd", "li", "ol", "p", "pre", "q", "s", "samp",
             "small", "span", "strong", "sub", "sup", "table", "tbody", "td", "tfoot", "th", "thead", "tr",
             "tt", "u", "ul", "var"}
SAFE_ATTRIBUTES = {"*": ["class", "title"], "a": ["href"], "td": ["colspan", "rowspan", "align"],
                   "th": ["colspan", "rowspan", "align"]}
SAFE_SCHEMES = {"http", "https", "mailto"}
SAFE_MIME = {"text/plain", "image/png", "image/jpeg", "image/gif"}
SANITIZED_MIME = {"text/html", "text/markdown"}
ACTIVE = re.compile(r"<\s*(script|iframe|object|embed)\b|\bon[a-z]+\s*=|javascript:", re.I)
# TeX macros that MathJax 3 turns into attributes or definitions (\href, \class, \style, \cssId, \data: its
# html extension; \unicode: a font; \mmlToken: any attribute; \require: an extension; the rest define macros
# that could rebuild them). Student TeX loses them, whatever the delimiters; the pages' MathJax also loads
# the `safe` extension (templates/static/safe_mathjax.js). Case matters, as in TeX.
TEX_ACTIVE = re.compile(r"\\(href|url|class|style|cssId|data|unicode|mmlToken|require|def|gdef|edef|xdef|let|"
                        r"newcommand|renewcommand|newenvironment|renewenvironment|DeclareMathOperator|"
                        r"Newextarrow|toggle|mathtip|texttip)(?![A-Za-z])")
TEX_BACKSLASH = "\u29f5"  # REVERSE SOLIDUS OPERATOR: shows as a backslash, starts no macro
CHAR_REF = re.compile(r"&(?:#[0-9]+|#[xX][0-9a-fA-F]+|[A-Za-z][A-Za-z0-9]*);?")


def clean_html(text: str) -> str:
    """Escape every tag and attribute outside a small safe list (links: http, https, mailto only)."""
    return bleach.clean(text, tags=SAFE_TAGS, attributes=SAFE_ATTRIBUTES, protocols=SAFE_SCHEMES,
                        strip=False, strip_comments=True)


def clean_html_and_tex(text: str) -> str:
    return clean_tex(clean_html(text))


def _plain_refs(text: str) -> str:
    """Character references that stand for a letter, a digit or a backslash written as that character
    (the browser decodes `&#92;h&#x72;ef` to `\\href` before MathJax reads it); the others are kept."""
    def plain(match: re.Match) -> str:
        char = html.unescape(match.group(0))
        return char if len(char) == 1 and char.isascii() and (char.isalnum() or char == "\\") else match.group(0)
    return CHAR_REF.sub(plain, text)


def clean_tex(text: str) -> str:
    """The backslash of every TEX_ACTIVE macro becomes TEX_BACKSLASH, in HTML that bleach has already
    cleaned (its comments are gone, so `\\h<!---->ref` is already `\\href` here)."""
    return TEX_ACTIVE.sub(lambda m: TEX_BACKSLASH + m.group(1), _plain_refs(text))


def clean_markdown(text: str) -> str:
    """Student Markdown without active content, its math and code kept exactly as written.

    clean_html, and Markdown links and link definitions whose target is not http(s), mailto or a relative
    path are broken (`](` becomes `]\\(`), so `[x](javascript:...)` renders as text. The pages' Markdown
    renderer (nbconvert's, mistune) escapes `<`, `>` and `&` in math, code spans and code blocks itself,
    and MathJax reads the decoded text, so escaping them here too showed `std &lt; eps` and made
    `$a<b$` a "Misplaced &": math and code (literal_spans) are set aside while bleach cleans the rest,
    then put back, and clean_tex and the link guard run on the whole. If that text, rendered as the pages
    render it, has any markup the fully escaped text has not (a span the renderer does not read as math
    or code after all, e.g. one inside an HTML block), the fully escaped text is returned instead."""
    escaped = _guard_links(clean_tex(clean_html(text)))
    spans = literal_spans(text)
    if not spans:
        return escaped
    marks = [f"ck{secrets.token_hex(8)}x{i}y" for i in range(len(spans))]
    prose, last = [], 0
    for mark, (start, end) in zip(marks, spans, strict=True):
        prose += [text[last:start], mark]
        last = end
    cleaned = clean_html("".join(prose) + text[last:])
    kept, last = [], 0
    for mark, (start, end) in zip(marks, spans, strict=True):
        at = cleaned.find(mark, last)
        if at < 0 or cleaned.count(mark) != 1 or cleaned.rfind("<", 0, at) > cleaned.rfind(">", 0, at):
            return escaped  # bleach dropped or moved it, or it sits inside a tag
        kept += [cleaned[last:at], text[start:end]]
        last = at + len(mark)
    kept_text = _guard_links(clean_tex("".join(kept) + cleaned[last:]))
    return kept_text if rendered_markup(kept_text) == rendered_markup(escaped) else escaped


def _guard_links(text: str) -> str:
    def guard(match: re.Match) -> str:
        target = re.sub(r"[\x00-\x20<>]", "", html.unescape(match.group(2))).lower()
        scheme = re.match(r"[a-z][a-z0-9+.-]*:", target)
        if scheme and scheme.group(0)[:-1] not in SAFE_SCHEMES:
            return match.group(1) + "\\" + match.group(0)[len(match.group(1)):]
        return match.group(0)
    text = re.sub(r"(\])\(\s*([^)\s]*)", guard, text)
    return re.sub(r"(?m)^( {0,3}\[[^\]]+\]):\s*(\S*)", guard, text)


IMAGE_MIME = {"image/png", "image/jpeg", "image/gif"}
SIZE_KEYS = ("width", "height")
MAX_SIZE = 100_000  # pixels: an image's width or height a page may be asked for


def clean_output_metadata(output: NotebookNode) -> None:
    """An output's metadata keeps only numeric image sizes: nbconvert writes `width=` and `height=`
    unquoted into the <img> tag (templates lab/base.html.j2, classic/base.html.j2: `get_metadata`,
    which reads metadata[mime][key], then metadata[key]), and turns `unconfined`, `needs_background`
    and `filenames` into classes and the image's src. Everything else a student's code put there
    (`width: '1 onerror=...'`, `style=`, any other key) is dropped."""
    if "metadata" not in output:
        return
    old = output.metadata if isinstance(output.metadata, dict) else {}
    kept = NotebookNode()
    for key in SIZE_KEYS:
        if _pixels(old.get(key)) is not None:
            kept[key] = _pixels(old[key])
    for mime in IMAGE_MIME & set(output.get("data", {})):
        sizes = old.get(mime)
        sizes = {key: _pixels(sizes.get(key)) for key in SIZE_KEYS} if isinstance(sizes, dict) else {}
        if any(v is not None for v in sizes.values()):
            kept[mime] = NotebookNode({k: v for k, v in sizes.items() if v is not None})
    output.metadata = kept


def _pixels(value: object) -> int | float | None:
    """A finite, positive number of pixels (not a bool, not text), else None."""
    if type(value) in (int, float) and 0 < value <= MAX_SIZE:
        return value
    return None


# What the pages' Markdown renderer escapes itself: math as nbconvert finds it
# (nbconvert.filters.markdown_mistune.MathInlineParser: $$..$$, \\[..\\], $..$, \\(..\\), \begin{env}..\end{env}),
# code spans (a run of backticks to the next run as long) and fenced code blocks but Mermaid's (CommonMark).
LITERAL = re.compile("|".join(f"(?:{p})" for p in (
    r"^ {0,3}(?P<fence>`{3,}|~{3,})(?![ \t]*mermaid)[^\n]*\n.*?^ {0,3}(?P=fence)[`~]*[ \t]*$",
    r"(?<!`)(?P<ticks>`+)(?!`).+?(?<!`)(?P=ticks)(?!`)",
    r"(?<!\\)\$\$.*?(?<!\\)\$\$", r"(?<!\\)\\\\\[.*?(?<!\\)\\\\\]", r"(?<![$\\])\$.+?(?<![$\\])\$",
    r"(?<!\\)\\\\\(.*?(?<!\\)\\\\\)", r"\\begin\{(?P<env>[a-z]*\*?)\}.*?\\end\{(?P=env)\}")), re.S | re.M)


def literal_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) of the math, code spans and fenced code blocks of Markdown `text`, left to right."""
    return [m.span() for m in LITERAL.finditer(text)]


class _PlainCodeRenderer(IPythonRenderer):
    """nbconvert's renderer with code blocks escaped by mistune instead of highlighted by Pygments (which
    escapes them too, but splits them into tokens that depend on the text): the markup of a page."""

    def block_code(self, code: str, info: str | None = None) -> str:
        if info and info.startswith("mermaid"):
            return super().block_code(code, info)
        return HTMLRenderer.block_code(self, code)


class _Markup(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.events: list[tuple[str, ...]] = []

    def handle_starttag(self, tag, attrs):
        self.events.append((tag, *sorted(name for name, _ in attrs)))

    def handle_endtag(self, tag):
        self.events.append(("/" + tag,))

    def handle_comment(self, data):
        self.events.append(("!--",))

    def handle_decl(self, decl):
        self.events.append(("!",))

    def handle_pi(self, data):
        self.events.append(("?",))

    def unknown_decl(self, data):
        self.events.append(("!",))


def rendered_markup(markdown: str) -> tuple[tuple[tuple[str, ...], ...], int]:
    """The tags (with their attribute names), comments and declarations of `markdown` as the pages render
    it, and how many `<` start markup there (which a lenient parser might not report)."""
    page = MarkdownWithMath(renderer=_PlainCodeRenderer(escape=False)).render(markdown)
    parser = _Markup()
    parser.feed(page)
    parser.close()
    return tuple(parser.events), len(re.findall(r"<[A-Za-z/!?]", page))


def sanitize_output(output: NotebookNode) -> NotebookNode:
    clean_output_metadata(output)
    if "data" not in output:
        return output
    removed = []
    for mime in list(output.data):
        value = output.data[mime]
        if mime in SANITIZED_MIME:
            clean = clean_markdown if mime == "text/markdown" else clean_html_and_tex
            output.data[mime] = clean(value if isinstance(value, str) else "".join(value))
        elif mime not in SAFE_MIME:
            removed.append(mime)
            del output.data[mime]
    if removed and "text/plain" not in output.data:
        output.data["text/plain"] = f"[{', '.join(removed)} output removed: only text, images and HTML are kept]"
    return output
