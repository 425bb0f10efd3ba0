"""The judge's plain-data half of a test cell's verdict: the error outputs it writes, the test
sources it trusts, the classes a reply names, and the metadata key of the findings."""

from __future__ import annotations

import nbformat
from nbformat.notebooknode import NotebookNode
from nbgrader import utils
from nbgrader.api import Gradebook

KERNEL_DIED = "DeadKernelError"
TIMED_OUT = "CellTimeoutError"
FINDINGS = "coursekit_findings"  # notebook metadata key of SandboxExecute.findings


def error_output(ename: str, evalue: str) -> NotebookNode:
    return nbformat.v4.new_output("error", ename=ename, evalue=evalue, traceback=[f"{ename}: {evalue}"])


def test_sources(resources: dict | None, nb: NotebookNode) -> dict[str, str]:
    """grade id -> source of each test cell (locked code cells) that the trusted runs execute, never a
    student's text: from the gradebook when this process has it, else from the notebook the trusted
    recorder sanitised (its OverwriteCells put the gradebook's locked cells back; ingest dropped
    nbgrader metadata of grade ids the release does not have)."""
    info = (resources or {}).get("nbgrader", {})
    if info.get("db_url"):
        with Gradebook(info["db_url"]) as gb:
            cells = gb.find_notebook(info["notebook"], info["assignment"]).source_cells
            return {c.name: c.source for c in cells if c.locked and c.cell_type == "code"}
    return {cell.metadata.nbgrader.grade_id: cell.source for cell in nb.cells
            if cell.cell_type == "code" and utils.is_grade(cell) and utils.is_locked(cell)
            and not utils.is_solution(cell)}


def own_classes(value, found: set[str], depth: int = 0) -> None:
    """Names of subclasses defined in the student's notebook (`__main__`) inside a call's result."""
    if depth > 40:
        return
    if isinstance(value, list):
        for item in value:
            own_classes(item, found, depth + 1)
    elif isinstance(value, dict):
        if value.get("$") == "sub" and str(value.get("type", "")).startswith("__main__."):
            found.add(f"{value.get('base')} subclass {str(value['type'])[9:49]}")
        for item in value.values():
            own_classes(item, found, depth + 1)


def as_stdout(output: NotebookNode) -> NotebookNode:
    if output.output_type == "stream" and output.name == "stderr":
        output.name = "stdout"
    return output

