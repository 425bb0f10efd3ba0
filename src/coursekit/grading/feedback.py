"""Feedback HTML per student: nbgrader's generate_feedback, with one exporter kept warm for the class.

Same pipeline and template as `nbgrader generate_feedback` (GenerateFeedback.preprocessors from
nbgrader_config.py: GetGrades, HideHiddenTests so no hidden test source reaches students, the CSS
header; nbgrader's `feedback` template), but the exporter and its compiled templates are built once
instead of once per student.
"""

from __future__ import annotations

import os
import shutil

import nbformat
from jinja2 import pass_context
from nbconvert.writers import FilesWriter
from nbformat.notebooknode import NotebookNode
from nbgrader.converters import GenerateFeedback
from traitlets.config import Config

from coursekit.grading.course import Course


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


class FeedbackWriter:
    """Writes feedback/<student_id>/lesson11/lesson11.html from the autograded notebook and the gradebook."""

    def __init__(self, course: Course):
        self.course = course
        # GenerateFeedback sets the template and its folders in __init__; take its config from there.
        converter = GenerateFeedback(coursedir=course.coursedir(), config=Config(course.config))
        exporter_class = type(f"MarkdownOnce{converter.exporter_class.__name__}",
                              (MarkdownOnce, converter.exporter_class), {})
        self.exporter = exporter_class(config=converter.config)
        for step in converter.preprocessors:
            self.exporter.register_preprocessor(step)
        self.writer = FilesWriter(config=converter.config)
        self.permissions = int(str(converter.permissions), 8)

    def write(self, student_id: str, autograded: NotebookNode | None = None) -> None:
        """Write one student's page; `autograded` (changed here) saves reading the file again."""
        nb = autograded or nbformat.read(self.course.autograded_notebook(student_id), as_version=4)
        resources = {"unique_key": self.course.notebook, "output_files_dir": f"{self.course.notebook}_files",
                     "nbgrader": {"student": student_id, "assignment": self.course.assignment,
                                  "notebook": self.course.notebook,
                                  "db_url": self.course.db_url}}
        html, resources = self.exporter.from_notebook_node(nb, resources=resources)
        target = self.course.feedback_html(student_id).parent
        shutil.rmtree(target, ignore_errors=True)
        target.mkdir(parents=True)
        self.writer.build_directory = str(target)
        path = self.writer.write(html, resources, notebook_name=self.course.notebook)
        os.chmod(path, self.permissions)
