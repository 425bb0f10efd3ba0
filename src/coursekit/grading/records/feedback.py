"""Feedback HTML per student: nbgrader's generate_feedback, with one exporter kept warm for the class.

Same pipeline and template as `nbgrader generate_feedback` (GenerateFeedback.preprocessors from
nbgrader_config.py: GetGrades, HideHiddenTests so no hidden test source reaches students, the CSS
header; nbgrader's `feedback` template), but the exporter and its compiled templates are built once
instead of once per student, and nbconvert's BeautifulSoup pass runs only on pages it changes.
"""

from __future__ import annotations

import contextlib
import functools
import html
import os
import re
import shutil
from html.parser import HTMLParser

import nbformat
from jinja2 import meta, pass_context
from nbconvert.exporters import TemplateExporter
from nbconvert.filters.highlight import Highlight2HTML
from nbconvert.filters.widgetsdatatypefilter import WidgetsDataTypeFilter
from nbconvert.preprocessors import Preprocessor
from nbconvert.writers import FilesWriter
from nbformat.notebooknode import NotebookNode
from nbgrader.converters import GenerateFeedback
from nbgrader.preprocessors import GetGrades
from traitlets.config import Config

from coursekit.grading.course import Course
from coursekit.grading.formgrader import TEMPLATE_PATHS
from coursekit.grading.pages import inline_mathjax


class MarkdownOnce:
    """HTMLExporter mixin: each distinct Markdown text is rendered once per class, not once per student
    (the locked text cells are the same in every notebook). Cells with attachments are rendered anew."""

    cache_size = 512

    @pass_context
    def markdown2html(self, context, source):
        if context.get("cell", {}).get("attachments"):
            return super().markdown2html(context, source)
        key = (source, context.get("resources", {}).get("metadata", {}).get("path", ""))
        cache = self.__dict__.setdefault("_markdown_html", {})
        if key not in cache:
            if len(cache) >= self.cache_size:
                cache.clear()
            cache[key] = super().markdown2html(context, source)
        return cache[key]


class HighlightOnce(Highlight2HTML):
    """nbconvert's code highlighter, remembering the HTML it made: a code cell that is the same in every
    student's notebook (locked cells, the visible lines of the test cells) is highlighted once per class.
    The HTML depends only on the source, the language and a cell's magics language (nbconvert's
    _pygments_highlight); the formatter options are this instance's."""

    cache_size = 512

    def __call__(self, source, language=None, metadata=None):
        magics = metadata.get("magics_language") if isinstance(metadata, dict) else metadata
        key = (source, language or self.pygments_lexer, magics)
        if not all(isinstance(part, (str, type(None))) for part in key):  # not the usual kinds: not kept
            return super().__call__(source, language, metadata)
        html = self._html.get(key)
        if html is None:
            if len(self._html) >= self.cache_size:
                self._html.clear()
            html = self._html[key] = super().__call__(source, language, metadata)
        return html

    @property
    def _html(self) -> dict:
        return self.__dict__.setdefault("_html_cache", {})


IMG_TAG = re.compile(r"<img\b[^>]*>", re.IGNORECASE)
NO_ALT_TEXT = "No description has been provided for this image"  # nbconvert's placeholder


class _ImageAttributes(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.attributes: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.attributes = [name for name, _ in attrs]

    handle_startendtag = handle_starttag


def images_have_alt(html: str) -> bool:
    """Whether every <img> tag of `html` has an alt attribute. Tags are found by a pattern, not a
    parser, so anything unusual (a '>' inside a value, a tag inside a comment) counts as missing."""
    for tag in IMG_TAG.findall(html):
        parser = _ImageAttributes()
        parser.feed(tag)
        parser.close()
        if "alt" not in parser.attributes:
            return False
    return True


class SoupOnlyWhenNeeded:
    """HTMLExporter mixin: nbconvert re-parses every page with BeautifulSoup to give images without
    alt text its placeholder and, in the lab templates, cells a tabindex. Pages where that changes
    nothing (every image has alt text, no lab cells: the feedback template is classic) are left as
    the template wrote them instead of re-serialized; the others get nbconvert's own pass."""

    def from_notebook_node(self, nb, resources=None, **kw):
        # HTMLExporter.from_notebook_node up to its BeautifulSoup pass (nbconvert 7.17)
        langinfo = nb.metadata.get("language_info", {})
        lexer = langinfo.get("pygments_lexer", langinfo.get("name", None))
        highlight_code = self.filters.get("highlight_code", self.highlighter(lexer))
        resources = self._init_resources(resources)
        filter_data_type = WidgetsDataTypeFilter(notebook_metadata=self._nb_metadata, parent=self,
                                                 resources=resources)
        self.register_filter("highlight_code", highlight_code)
        self.register_filter("filter_data_type", filter_data_type)
        html, resources = TemplateExporter.from_notebook_node(self, nb, resources, **kw)
        if "jp-Notebook" in html or not images_have_alt(html):
            html = self._soup_pass(html)
        return html, resources

    def highlighter(self, lexer: object) -> Highlight2HTML:
        """The code highlighter for a notebook's lexer: one HighlightOnce per lexer, kept for the class."""
        if not isinstance(lexer, (str, type(None))):  # not a lexer's name: nbconvert's own, as it does
            return Highlight2HTML(pygments_lexer=lexer, parent=self)
        highlighters = self.__dict__.setdefault("_highlighters", {})
        if lexer not in highlighters:
            highlighters[lexer] = HighlightOnce(pygments_lexer=lexer, parent=self)
        return highlighters[lexer]

    def _soup_pass(self, html: str) -> str:
        """nbconvert's HTMLExporter pass (nbconvert 7.17), for pages that need it."""
        from bs4 import BeautifulSoup

        soup = BeautifulSoup(html, features="html.parser")
        missing_alt = 0
        for elem in soup.select("img:not([alt])"):
            elem.attrs["alt"] = NO_ALT_TEXT
            missing_alt += 1
        if missing_alt:
            self.log.warning("Alternative text is missing on %s image(s).", missing_alt)
        for elem in soup.select(".jp-Notebook div.jp-Cell-inputWrapper"):
            elem.attrs["tabindex"] = "0"
        for elem in soup.select(".jp-Notebook div.jp-OutputArea-output"):
            elem.attrs["tabindex"] = "0"
        return str(soup)


# The feedback template's MathJax (its filter `coursekit_inline_mathjax`) while a page is made: the page is then
# made, checked and written without the ~2.3 MB of MathJax's scripts in its text, which are put in its place
# as bytes encoded once for the class (FeedbackWriter.write); the page is the same, byte for byte.
MATHJAX_SLOT = "<!-- coursekit: the inlined MathJax of coursekit.grading.pages goes here -->"


def mathjax_slot(_url: object = None) -> str:
    """The `coursekit_inline_mathjax` filter of the FeedbackWriter's exporter: MATHJAX_SLOT."""
    return MATHJAX_SLOT


class _Owned(NotebookNode):
    """A notebook the page's steps may change in place: nbconvert's exporter deep-copies the notebook it
    is given two or three times per page (Exporter.from_notebook_node, _preprocess, nbformat's normalize),
    to leave its caller's untouched; FeedbackWriter.write reads it for that page alone."""

    def __deepcopy__(self, memo: dict) -> _Owned:
        return self


class VetoNote(Preprocessor):
    """After GetGrades: on a vetoed student's page the score is the capped one (as exported to the LMS)
    and a first cell says why. Set `reasons` and `cap` before each page; no reasons, no change."""

    reasons: list[str] = []
    cap: float = 0.0

    def preprocess(self, nb: NotebookNode, resources: dict) -> tuple[NotebookNode, dict]:
        if self.reasons:
            grades = resources["nbgrader"]
            total = float(grades.get("score") or 0.0)
            grades["score"] = min(total, self.cap)
            items = "\n".join(f"- {html.escape(reason)}" for reason in self.reasons)
            nb.cells.insert(0, nbformat.v4.new_markdown_cell(
                f"**一票否决（veto）**：本次作业记为未通过，成绩按 {grades['score']:g} 分计"
                f"（各单元得分合计 {total:g} 分）。原因：\n\n{items}", id="coursekit-veto"))
        return nb, resources


class FeedbackWriter:
    """Writes feedback/<student_id>/lesson11/lesson11.html from the autograded notebook and the gradebook."""

    def __init__(self, course: Course):
        self.course = course
        # GenerateFeedback sets the template and its folders in __init__; take its config from there.
        converter = GenerateFeedback(coursedir=course.coursedir(), config=Config(course.config))
        # feedback/mathjax.html.j2 inlines MathJax's safe set-up from templates/static (GenerateFeedback has
        # just set HTMLExporter.extra_template_paths to nbgrader's static folder: add ours)
        paths = converter.config.HTMLExporter.extra_template_paths
        converter.config.HTMLExporter.extra_template_paths = [*paths, *TEMPLATE_PATHS]
        converter.config.HTMLExporter.filters = {**converter.config.HTMLExporter.filters,
                                                 "coursekit_inline_mathjax": f"{__name__}.mathjax_slot"}
        exporter_class = type(f"MarkdownOnce{converter.exporter_class.__name__}",
                              (MarkdownOnce, SoupOnlyWhenNeeded, converter.exporter_class), {})
        self.exporter = exporter_class(config=converter.config)
        # the notebook validated once, after the last step, instead of after each of the exporter's seven
        # (most do nothing here): an invalid one still fails its page, with nbconvert's ValidationError
        self.exporter.optimistic_validation = True
        self.steps = list(converter.preprocessors)
        self.veto_note = VetoNote(enabled=True)
        for step in self.steps:
            self.exporter.register_preprocessor(step)
            if step is GetGrades:
                self.exporter.register_preprocessor(self.veto_note)
        self.writer = FilesWriter(config=converter.config)
        self.permissions = int(str(converter.permissions), 8)

    def warm(self, lexer: str = "ipython3") -> None:
        """Do once, before the first page, what every page needs: compile the templates, make the MathJax
        head, highlight the code and render the Markdown of the lesson's notebook as the pages show it
        (its source through the page's steps but the gradebook's: most cells are the same on every
        page). Forked processes that write pages then start with all of it; a step that fails here
        (it wanted a student's grades) is skipped."""
        highlight = self.exporter.highlighter(lexer)
        self.exporter.register_filter("highlight_code", highlight)  # the page's filters (from_notebook_node)
        self.exporter.register_filter("filter_data_type", WidgetsDataTypeFilter(notebook_metadata={},
                                                                                parent=self.exporter))
        environment = self.exporter.environment
        names = [self.exporter.template.name]
        for name in names:  # the template and every one it extends, imports or includes by name
            source = environment.loader.get_source(environment, name)[0]
            environment.get_template(name)
            names += [n for n in meta.find_referenced_templates(environment.parse(source)) if n and n not in names]
        self.mathjax  # noqa: B018 - made now, for the forked processes to share
        nb = nbformat.read(self.course.source_notebook, as_version=4)
        nbformat.validate(nb, relax_add_props=True)  # the exporter's validator, built once
        resources = self.exporter._init_resources({"nbgrader": {}})
        for step in self.exporter._preprocessors:
            if not isinstance(step, GetGrades):
                with contextlib.suppress(Exception):
                    nb, resources = step(nb, resources)
        for cell in nb.cells:
            if cell.cell_type == "code":
                highlight(cell.source, metadata=cell.metadata)
            elif cell.cell_type == "markdown":
                self.exporter.markdown2html({"cell": cell, "resources": resources}, cell.source)

    def write(self, student_id: str, autograded: NotebookNode | None = None, vetoes: tuple[str, ...] = (),
              cap: float = 0.0) -> None:
        """Write one student's page; `autograded` (changed here) saves reading the file again. `vetoes`:
        the reasons of the student's vetoes; the page's score is then at most `cap`."""
        self.veto_note.reasons, self.veto_note.cap = list(vetoes), cap
        nb = _Owned(autograded or nbformat.read(self.course.autograded_notebook(student_id), as_version=4))
        resources = {"unique_key": self.course.notebook, "output_files_dir": f"{self.course.notebook}_files",
                     "nbgrader": {"student": student_id, "assignment": self.course.assignment,
                                  "notebook": self.course.notebook,
                                  "db_url": self.course.db_url}}
        html, resources = self.exporter.from_notebook_node(nb, resources=resources)
        head, slot, body = html.partition(MATHJAX_SLOT)  # the first: the <head>'s, before any student text
        page = head.encode("utf-8") + (self.mathjax if slot else b"") + body.encode("utf-8")
        target = self.course.feedback_html(student_id).parent
        shutil.rmtree(target, ignore_errors=True)
        target.mkdir(parents=True)
        self.writer.build_directory = str(target)
        path = self.writer.write(page, resources, notebook_name=self.course.notebook)
        os.chmod(path, self.permissions)

    @functools.cached_property
    def mathjax(self) -> bytes:
        """What the template's MathJax filter gives a page (coursekit.grading.pages.inline_mathjax), encoded."""
        return inline_mathjax().encode("utf-8")
