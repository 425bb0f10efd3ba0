"""The Jupyter server extension `coursekit formgrader` loads (formgrader's Content-Security-Policy), and
each student's flags and vetoes for formgrader's submission page.

- CONTENT_SECURITY_POLICY goes on every page and API reply of formgrader (FormgraderPolicy, a tornado
  output transform; JupyterLab's own pages need eval and inline config, and sanitise notebooks
  themselves): scripts only from the server itself, no inline script, no inline event handler, no
  plugin, no <base>, no framing by other sites. The submission page, where student text is shown, has
  no inline script left (templates/formgrade/: nbgrader's are moved to templates/static/). nbgrader's
  other pages (manage assignments, gradebook, students) pass their ids in inline scripts of the form
  `var name = "value";` only (`FormgraderPolicy` allows exactly those, by hash, page by page) and their
  scripts write three fixed onclick handlers (allowed by hash: 'unsafe-hashes', NBGRADER_HANDLERS).
- `page_flags`, a template filter for the submission page (templates/formgrade/formgrade_macros.html.j2):
  the student's flags from the last report (copy check included) and the vetoes of now: instructor
  comments read from the gradebook as `coursekit report` reads them, and the automatic ones.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import re
from pathlib import Path

from nbgrader.api import Gradebook, MissingEntry
from tornado.web import OutputTransform

from coursekit.grading.course import Course
from coursekit.grading.judge import flags as F

INLINE_SCRIPT = re.compile(rb"<script(?:\s+type=\"text/javascript\")?\s*>(.*?)</script>", re.S)
VARIABLES_ONLY = re.compile(rb"\s*(?:var [A-Za-z_]\w* = \"[^\"\\<>]*\";\s*)+")
# nbgrader 0.9's onclick attributes (manage_assignments.js, manage_students.js,
# gradebook_notebook_submissions.tpl): opening its own dialogs, showing names
NBGRADER_HANDLERS = (b"createAssignmentModal();", b"createStudentModal();", b"toggleAllNames()")


def csp_hash(code: bytes) -> str:
    return f"'sha256-{base64.b64encode(hashlib.sha256(code).digest()).decode()}'"


CONTENT_SECURITY_POLICY = "; ".join([
    "default-src 'self'",
    "script-src 'self' 'unsafe-hashes' " + " ".join(map(csp_hash, NBGRADER_HANDLERS)),
    "style-src 'self' 'unsafe-inline'",  # MathJax's CHTML output and nbconvert's page styles are inline
    "img-src 'self' data:",              # plots are embedded as data: PNGs
    "font-src 'self' data:",
    "object-src 'none'",
    "base-uri 'none'",
    "form-action 'self'",
    "frame-ancestors 'self'",
])


def allowed_inline_scripts(page: bytes) -> list[str]:
    """CSP hashes of the page's inline scripts that only set string variables (nbgrader's ids)."""
    return [csp_hash(body) for body in INLINE_SCRIPT.findall(page) if VARIABLES_ONLY.fullmatch(body)]


class FormgraderPolicy(OutputTransform):
    """CONTENT_SECURITY_POLICY on formgrader's pages and API (not on JupyterLab's, whose settings plugin
    evaluates strings and whose page sets its config inline), with the hashes of an HTML page's
    variables-only inline scripts added."""

    def __init__(self, request) -> None:  # noqa: ANN001 - tornado's HTTPServerRequest
        super().__init__(request)
        self.formgrader = "/formgrader" in request.path

    def transform_first_chunk(self, status_code, headers, chunk, finishing):
        if not self.formgrader:
            return status_code, headers, chunk
        policy = CONTENT_SECURITY_POLICY
        if finishing and headers.get("Content-Type", "").startswith("text/html"):
            hashes = allowed_inline_scripts(chunk)
            if hashes:
                policy = policy.replace("script-src 'self'", "script-src 'self' " + " ".join(hashes), 1)
        headers["Content-Security-Policy"] = policy
        return status_code, headers, chunk


def student_flags(course: Course, student_id: str) -> list[dict[str, object]]:
    """[{"flag": "name(detail)", "veto": bool}]: vetoes first, then the report's other flags."""
    found: list[str] = []
    if course.report_csv.is_file():
        with course.report_csv.open(encoding="utf-8", newline="") as f:
            for row in csv.DictReader(f):
                if row.get("student_id") == student_id and row.get("flags"):
                    found = [x for x in row["flags"].split(";") if F.flag_name(x) != F.VETO]
    from coursekit.grading.records.report import AUTOMATIC_VETOES, VETO_COMMENT

    vetoes = [F.flag(F.VETO, reason) for name, reason in AUTOMATIC_VETOES.items()
              if any(F.flag_name(x) == name for x in found)]
    with Gradebook(course.db_url) as gb:
        try:
            submission = gb.find_submission_notebook(course.assignment, course.notebook, student_id)
        except MissingEntry:
            submission = None
        for comment in sorted(submission.comments if submission else [], key=lambda c: c.name):
            match = VETO_COMMENT.match(comment.manual_comment or "")
            if match:
                vetoes.append(F.flag(F.VETO, f"{comment.name}: {match['reason'].strip()}"))
    return [{"flag": x, "veto": F.flag_name(x) == F.VETO} for x in vetoes + found]


def page_flags(student_id: str, lesson: str) -> list[dict[str, object]]:
    """Jinja filter `coursekit_flags` (HTMLExporter.filters in nbgrader_config.py) for formgrader's
    submission page, rendered in the server, whose folder is the course (`coursekit formgrader`). The page
    is shown whatever happens here: a failure becomes the one flag it shows."""
    try:
        return student_flags(Course.at(Path.cwd(), lesson), student_id)
    except Exception as exc:  # grading by hand must go on
        return [{"flag": f"flags unavailable: {type(exc).__name__}: {exc}"[:300], "veto": False}]


def _jupyter_server_extension_points() -> list[dict[str, str]]:
    return [{"module": "coursekit.grading.formgrader_extension"}]


def _load_jupyter_server_extension(serverapp) -> None:
    web_app = serverapp.web_app
    web_app.transforms.insert(0, FormgraderPolicy)
