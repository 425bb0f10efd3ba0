"""Feedback HTML per student (nbgrader generate_feedback; HideHiddenTests keeps hidden tests out)."""

from __future__ import annotations

from nbgrader.converters import GenerateFeedback
from traitlets.config import Config

from coursekit.grading.course import Course, run_converter


def write_feedback(course: Course, student_id: str) -> None:
    """feedback/<student_id>/lesson11/lesson11.html from the autograded notebook and the gradebook."""
    config = Config(course.config)
    config.HTMLExporter.template_name = "feedback"
    run_converter(course, GenerateFeedback, student_id, config, force=True)
