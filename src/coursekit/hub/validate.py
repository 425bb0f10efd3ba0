"""nbgrader's Validate for the hub's servers, reason first: the server extension that answers the lab
extension's Validate button (POST /assignments/validate, GET /nbgrader_version) in place of
nbgrader.server_extensions.validate_assignment.

nbgrader's dialog (@jupyter/nbgrader's validate plugin) shows, for each failed test cell, the cell's source
and then its error: here, the whole ~60-line self-check cell with the reason at the bottom of a traceback.
`ReasonFirstValidator` is nbgrader's Validator with one more step after the run, on the validated copy
only (nbgrader never saves it): each failed test cell's source becomes the reason - the same words the
page's Check and `python check.py` give (assets/runner/runner-worker.js `_course_summary`): an
assertion's own message, else the exception's type and message - and its error becomes where in the
student's own code it failed ("（出错位置：第 3 个代码格第 7 行：…）", the student's cell as JupyterLab shows
it), or nothing. A bare assertion of the visible check lines is quoted instead, and nbgrader's own
words for a written answer left empty say 未作答。 (IN_CHINESE). The run itself is nbgrader's, in the
student's own kernel; this step reads the run's outputs as text and executes nothing.

The student's server runs in a sandbox where the kit is not installed: this file imports nothing of
coursekit, and the spawner binds it, alone, as the module `coursekit_hub_validate`
(coursekit.hub.spawner.VALIDATE_MODULE); the instructor's server loads it as `coursekit.hub.validate`.
"""

from __future__ import annotations

import os
import re
import traceback
from pathlib import Path

from jupyter_server.utils import url_path_join
from nbconvert.filters import strip_ansi
from nbformat import NotebookNode
from nbgrader import utils
from nbgrader.server_extensions.validate_assignment.handlers import NbGraderVersionHandler, ValidateAssignmentHandler
from nbgrader.validator import Validator
from tornado import web

# nbgrader's own words in a failed cell's error (nbgrader/validator.py `_extract_error`), as the student reads them
IN_CHINESE = {"You did not provide a response.": "未作答。",
              "Partial credit; passed some but not all of the tests": "部分得分：只通过了部分检查。"}
FRAME = re.compile(r"Cell In\[(\d+)\], line (\d+)")  # IPython's traceback header of a notebook cell's frame
MAX_TRACEBACK = 200_000  # characters of a traceback read for its frames (a student's kernel writes it)


def _failed_summary(error: NotebookNode) -> str:
    """An error output's reason, as the page's Check words it: the assertion's message, else type: message."""
    message = str(error.get("evalue", ""))
    name = str(error.get("ename", "Error"))
    if name == "AssertionError" and message:
        return message
    return name + (f": {message}" if message else "")


def _frames(error: NotebookNode) -> list[tuple[int, int]]:
    """(execution count, line) of each notebook cell's frame in the error's traceback, outermost first."""
    text = strip_ansi("\n".join(str(line) for line in error.get("traceback", [])))[:MAX_TRACEBACK]
    return [(int(count), int(line)) for count, line in FRAME.findall(text)]


def _line(cell: NotebookNode, number: int) -> str:
    lines = cell.source.split("\n")
    return lines[number - 1].strip() if 1 <= number <= len(lines) else ""


def reason_and_place(nb: NotebookNode, cell: NotebookNode) -> tuple[str, str]:
    """Why the executed test `cell` of `nb` failed, and where in the student's own code (or "")."""
    outputs = cell.get("outputs", [])
    errors = [o for o in outputs if o.get("output_type") == "error"]
    if not errors:  # nbgrader fails a test cell that wrote to stderr too
        written = "".join(str(o.get("text", "")) for o in outputs if o.get("name") == "stderr").strip()
        return f"检查单元格向标准错误输出写了内容（nbgrader 因此判为未通过）：\n{written[:2000]}", ""
    error = errors[0]
    reason = _failed_summary(error)
    code_cells = [c for c in nb.cells if c.cell_type == "code"]
    by_count = {c.get("execution_count"): (number, c) for number, c in enumerate(code_cells, 1)
                if c.get("execution_count") is not None}
    frames = [(by_count[count], line) for count, line in _frames(error) if count in by_count]
    mine = [((number, c), line) for (number, c), line in frames
            if not (utils.is_grade(c) and not utils.is_solution(c))]  # not a locked test cell
    if mine:
        (number, student), line = mine[-1]
        return reason, f"（出错位置：第 {number} 个代码格第 {line} 行：{_line(student, line)}）"
    here = [line for (_, c), line in frames if c is cell]
    if error.get("ename") == "AssertionError" and not error.get("evalue") and here:
        reason += f"\n（不成立的检查：{_line(cell, here[-1])}）"
    return reason, ""


def reasons_first(nb: NotebookNode) -> NotebookNode:
    """The executed notebook with each failed test cell shown as its reason and the student's line.

    Only test cells the student left as released (their checksum still matches) are rewritten, with the
    checksum recomputed: a test cell the student changed is reported by nbgrader as changed, unaltered."""
    for cell in nb.cells:
        if cell.cell_type != "code" or not utils.is_grade(cell) or not utils.has_failed(cell):
            continue
        stored = cell.metadata.get("nbgrader", {}).get("checksum")
        if stored is not None and stored != utils.compute_checksum(cell):
            continue
        reason, place = reason_and_place(nb, cell)
        cell.source = reason
        # an error output whose traceback is the place: nbgrader's dialog shows it under the reason
        cell.outputs = [NotebookNode(output_type="error", ename="", evalue="", traceback=[place] if place else [])]
        if stored is not None:
            cell.metadata.nbgrader["checksum"] = utils.compute_checksum(cell)
    return nb


class ReasonFirstValidator(Validator):
    """nbgrader's Validator whose results show each failed test cell's reason first (`reasons_first`)."""

    def _preprocess(self, nb: NotebookNode) -> NotebookNode:
        return reasons_first(super()._preprocess(nb))

    def _extract_error(self, cell: NotebookNode) -> str:
        error = super()._extract_error(cell)
        return IN_CHINESE.get(error, error)


class ReasonFirstHandler(ValidateAssignmentHandler):
    """nbgrader's POST /assignments/validate (same request, same answer's shape) with ReasonFirstValidator."""

    def validate_notebook(self, path: str) -> dict:
        root = Path(self.root_dir).resolve()
        target = (root / path).resolve()
        if not target.is_relative_to(root):
            raise web.HTTPError(403, "Access denied: path outside allowed directory")
        try:
            result = ReasonFirstValidator(config=self.load_config()).validate(str(target))
        except Exception:  # noqa: BLE001 - as nbgrader's handler: the dialog shows what went wrong
            self.log.error(traceback.format_exc())
            return {"success": False, "value": traceback.format_exc()}
        return {"success": True, "value": result}


def _jupyter_server_extension_points() -> list[dict]:
    return [{"module": __name__}]


def _load_jupyter_server_extension(serverapp) -> None:  # noqa: ANN001 - jupyter_server's ServerApp
    """Route nbgrader's two validate URLs (the lab extension's) to the handlers above."""
    webapp = serverapp.web_app
    webapp.settings["root_dir"] = serverapp.root_dir
    base = webapp.settings["base_url"]
    webapp.add_handlers(".*$", [(url_path_join(base, "assignments/validate"), ReasonFirstHandler),
                                (url_path_join(base, "nbgrader_version"), NbGraderVersionHandler)])
    serverapp.log.info("coursekit: nbgrader's Validate, reasons first (%s)", os.path.basename(__file__))
