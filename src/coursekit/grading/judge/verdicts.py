"""The judge's plain-data half of a test cell's verdict: the error outputs it writes, the test
sources it trusts, the classes a reply names, and the records (findings) a run leaves.

Records are built here from plain data only. Every string in them that the student's code could
choose (a path, a program, an address) is made printable, stripped of the CSV's separators and cut
to MAX_DETAIL characters, and at most MAX_RECORDS are kept of each kind. Records taken while the
hidden checks ran name a kind only (`during hidden checks: file`), never a detail: the student's
code had the hidden inputs then, and a file name can spell them.
"""

from __future__ import annotations

import json
import re

import nbformat
from nbformat.notebooknode import NotebookNode
from nbgrader import utils
from nbgrader.api import Gradebook

KERNEL_DIED = "DeadKernelError"
TIMED_OUT = "CellTimeoutError"
FINDINGS = "coursekit_findings"  # notebook metadata key of SandboxExecute.findings
OVER_BUDGET = "over_budget"
MAX_DETAIL = 80       # characters of one student-chosen string in a record
MAX_RECORDS = 20      # records of each kind
MAX_OBSERVED_BYTES = 1 << 20
RUNTIME_KINDS = ("frames", "trace", "ctypes")  # audit records of tampering with the interpreter
_UNPRINTABLE = re.compile(r"[^\x20-\x7e\u00a0-\uffff]|[;,\\]")


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
    """Subclasses defined in the student's notebook (`__main__`) inside a call's result, by their builtin
    base only: their names were chosen by code that had the hidden inputs."""
    if depth > 40:
        return
    if isinstance(value, list):
        for item in value:
            own_classes(item, found, depth + 1)
    elif isinstance(value, dict):
        base = value.get("base")
        if value.get("$") == "sub" and str(value.get("type", "")).startswith("__main__.") and \
                base in ("int", "float", "str", "list", "tuple", "dict"):
            found.add(f"{base} subclass")
        for item in value.values():
            own_classes(item, found, depth + 1)


def detail(text: object) -> str:
    """A student-chosen string as it may appear in a record: printable, no separators, short."""
    cleaned = _UNPRINTABLE.sub("?", str(text))
    return cleaned if len(cleaned) <= MAX_DETAIL else cleaned[: MAX_DETAIL - 1] + "…"


def read_observed(path: str, start: int = 0, end: int | None = None) -> list[tuple[str, str]]:
    """The supervisor's records (kernel_side._supervise: one JSON [kind, detail] per line) from byte
    `start` of its file to byte `end` (default: its end); a line that is not such a record is skipped."""
    try:
        with open(path, "rb") as f:
            f.seek(start)
            data = f.read(MAX_OBSERVED_BYTES if end is None else max(0, min(MAX_OBSERVED_BYTES, end - start)))
    except OSError:
        return []
    records = []
    for line in data.splitlines():
        try:
            kind, what = json.loads(line)
        except (ValueError, TypeError):
            continue
        if isinstance(kind, str) and isinstance(what, str):
            records.append((kind[:20], what))
    return records


PROCESSES_COUNTED = 10  # processes left beyond it are "10 or more": the same on any machine


def findings_from(*, observed: list, report: dict, tampered: bool, processes_left: int, active_content: bool,
                  kernel_errors: list, during_checks: list | None = None, own_classes: list | None = None,
                  over_budget: list | None = None) -> dict[str, list]:
    """sandbox_violation, suspicious_code, over_budget and kernel_errors details of one run."""
    # a flood's count is where the process limit stopped it, which the kernel's own threads share
    left = f"{processes_left}" if processes_left < PROCESSES_COUNTED else f"{PROCESSES_COUNTED} or more"
    violations, patched = [f"processes left: {left}"] if processes_left > 0 else [], []
    events = []
    if isinstance(report, dict) and isinstance(report.get("events"), list):
        events += [(str(e[0]), e[1]) for e in report["events"][:40] if isinstance(e, list) and len(e) == 2]
    events += [(str(k), v) for k, v in observed]
    over = list(over_budget or [])
    for kind, what in events:
        if kind == "budget":  # the supervisor's own budget (kernel_side.MAX_WATCHED)
            over.append(what)
            continue
        (patched if kind in RUNTIME_KINDS else violations).append(f"{detail(kind)[:20]}: {detail(what)}")
    if isinstance(report, dict) and isinstance(report.get("patched"), list):
        patched += [detail(name) for name in report["patched"][:MAX_RECORDS]]
    if tampered:
        patched.append("the grader's helpers in the kernel")
    patched += [f"returned its own {name}" for name in own_classes or []]
    if active_content:
        patched.append("active content in outputs or text (removed)")
    violations += [f"during hidden checks: {detail(kind)[:20]}" for kind in during_checks or []]
    return {"sandbox_violation": list(dict.fromkeys(violations))[:MAX_RECORDS],
            "suspicious_code": list(dict.fromkeys(patched))[:MAX_RECORDS],
            OVER_BUDGET: list(dict.fromkeys(detail(b) for b in over)),
            "kernel_errors": [[detail(e)[:40], detail(v)] for e, v in kernel_errors]}


def kernel_text(outputs: list[NotebookNode]) -> list[NotebookNode]:
    """What a test cell keeps of its own run in the student's kernel: printed text only, as stdout.
    No output of the kernel ever becomes points: nbgrader scores a test cell by its first error or
    `execute_result` (a non-numeric one is full marks, a number is that many points), so results and
    displays of the student's code are dropped, and stderr (which nbgrader scores 0) becomes stdout;
    the judge's verdict alone decides the cell."""
    kept = []
    for output in outputs:
        if output.output_type != "stream":
            continue
        if output.name != "stdout":
            output.name = "stdout"
        kept.append(output)
    return kept

