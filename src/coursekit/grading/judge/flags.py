"""The report's flags: what an instructor must look at, each as `name` or `name(detail)`.

Flags are joined with `;` in the CSV, so details never contain `;`. Which flags are vetoes (the
seed's 一票否决) is decided in `coursekit.grading.records.report`; see autograder/README.md.
"""

from __future__ import annotations

import re

from nbformat.notebooknode import NotebookNode

from coursekit.grading.course import Rubric
from coursekit.lesson import BLANK, given_checks, missing_given_checks

EDITED_LOCKED_CELL = "edited_locked_cell"
DELETED_TEST_CELL = "deleted_test_cell"
FABRICATED_OUTPUTS = "fabricated_outputs"
TIMEOUT = "timeout"
ERROR = "error"
INVALID_NOTEBOOK = "invalid_notebook"
MISSING_ANSWER = "missing_answer"
DELETED_ASSERTS = "deleted_asserts"
DUPLICATE_IDS = "duplicate_ids"
UNKNOWN_STUDENT_ID = "unknown_student_id"
MULTIPLE_NOTEBOOKS = "multiple_notebooks"
REJECTED_FILE = "rejected_file"  # a file of a graded student that could not be taken (link, corrupt zip member)
EXERCISE_NOTEBOOK = "exercise_notebook"
SUSPICIOUS_CODE = "suspicious_code"
SANDBOX_VIOLATION = "sandbox_violation"
OVER_BUDGET = "over_budget"  # a budget of the grader (bytes, items, CPU, memory, wall clock) per student
UNSANDBOXED = "unsandboxed"
VETO = "veto"
COPIED_REFERENCE = "copied_reference"  # coursekit.grading.records.similarity: review only, never a score change
SIMILAR_ANSWERS = "similar_answers"
HIDDEN_CONTENT = "hidden_content"  # metadata that hid a cell's source or outputs from the grader, removed at ingest

# Student code that could tamper with the grading kernel or reach outside it rather than solve the
# exercise. Names only: flags for review, never security (that is the sandbox's job).
SUSPICIOUS = re.compile(r"\b(?:get_ipython|set_custom_exc|excepthook|__builtins__|builtins|setrlimit|"
                        r"ctypes|sys\.modules|settrace|setprofile|atexit|__import__|importlib|"
                        r"input_transformers\w*|ast_transformers|currentframe|_getframe|f_back|f_globals|"
                        r"subprocess|socket|os\.system|os\.fork|sqlite3|environ|sys\.executable|readlink)\b"
                        r"|/proc/")
MAX_DETAILS = 8
MAX_FLAG_TEXT = 240  # characters of the details one flag shows (the student chooses them)
EXPECTED_ERRORS = ("AssertionError",)  # a failed check is a score, not an error
_ADDRESS = re.compile(r"0x[0-9a-fA-F]+")


def flag(name: str, detail: str = "") -> str:
    detail = detail.replace(";", ",").replace("\n", " ").strip()
    return f"{name}({detail})" if detail else name


def flag_name(text: str) -> str:
    return text.split("(", 1)[0]


def _grade_id(cell: NotebookNode) -> str | None:
    return cell.metadata.get("nbgrader", {}).get("grade_id")


def _student_code(nb: NotebookNode) -> list[NotebookNode]:
    return [c for c in nb.cells if c.cell_type == "code" and not c.metadata.get("nbgrader", {}).get("locked")]


# ---------------------------------------------------------------- at ingest (no kernel)

def duplicate_grade_ids(nb: NotebookNode) -> list[str]:
    ids = [gid for gid in map(_grade_id, nb.cells) if gid]
    dups = sorted({gid for gid in ids if ids.count(gid) > 1})
    return [flag(DUPLICATE_IDS, ",".join(dups) + ", the last copy is graded")] if dups else []


def content_flags(nb: NotebookNode, release: NotebookNode, restored: list[str], released: bool,
                  rubric: Rubric) -> list[str]:
    """edited_locked_cell, missing_answer, deleted_asserts and suspicious_code for a prepared notebook
    of the lesson graded by `rubric`.

    `released` is False for a notebook of the exercise branch, whose text cells were never locked."""
    cells = {}
    for cell in nb.cells:  # the last copy wins, as in nbgrader's DeduplicateIds
        if _grade_id(cell):
            cells[_grade_id(cell)] = cell
    edited, missing = [], []
    for ref in release.cells:
        info = ref.metadata.get("nbgrader", {})
        gid = info.get("grade_id")
        mine = cells.get(gid)
        if info.get("locked") and not info.get("solution"):
            if gid in restored or not released:
                continue  # flagged deleted_test_cell
            if mine is None or mine.cell_type != ref.cell_type or mine.source.rstrip() != ref.source.rstrip():
                edited.append(gid)
        elif gid == rubric.code_cell and (mine is None or BLANK in mine.source):
            missing.append("code")
        elif gid in rubric.answers and (mine is None or mine.source.strip() in ("", ref.source.strip())):
            missing.append(gid)
    out = []
    if edited:
        out.append(flag(EDITED_LOCKED_CELL, ",".join(edited) + ", graded with the original"))
    if missing:
        out.append(flag(MISSING_ANSWER, ",".join(missing)))
    out.extend(deleted_asserts(nb, release, rubric.code_cell))
    code = "\n".join(c.source for c in _student_code(nb))
    found = sorted(set(SUSPICIOUS.findall(code)))
    if found:
        out.append(flag(SUSPICIOUS_CODE, ",".join(found)))
    return out


def deleted_asserts(nb: NotebookNode, release: NotebookNode, code_cell: str) -> list[str]:
    """The release fill-in's (grade id `code_cell`) checks that no student code cell still contains:
    its assert and raise lines, and each `if` line whose next line raises (the guard)."""
    ref = next(c for c in release.cells if _grade_id(c) == code_cell)
    checks = given_checks(ref.source)
    gone = missing_given_checks(checks, "\n".join(cell.source for cell in _student_code(nb)))
    return [flag(DELETED_ASSERTS, f"{len(gone)} of {len(checks)} given checks removed or changed")] if gone else []


# ---------------------------------------------------------------- after execution

def add_detail(flags: list[str], name: str, detail: str) -> None:
    """Append detail to the row's flag `name`, or add that flag (a row has one flag of each name)."""
    old = next((f for f in flags if flag_name(f) == name), None)
    if old is None:
        flags.append(flag(name, detail))
    else:
        flags[flags.index(old)] = flag(name, ", ".join(filter(None, [old[len(name) + 1:-1], detail])))


def add_findings(flags: list[str], findings: dict) -> None:
    """Add SandboxExecute's findings: sandbox_violation(...), over_budget(...), and runtime details
    appended to suspicious_code(...) (at most MAX_DETAILS details each)."""
    for name in (SANDBOX_VIOLATION, SUSPICIOUS_CODE, OVER_BUDGET):
        details = [str(d).replace(",", " ") for d in findings.get(name, []) if isinstance(d, str)]
        if not details:
            continue
        shown: list[str] = []
        for d in details:  # at most MAX_DETAILS, and at most MAX_FLAG_TEXT characters after the first
            if len(shown) == MAX_DETAILS or (shown and sum(len(s) + 2 for s in shown) + len(d) > MAX_FLAG_TEXT):
                break
            shown.append(d)
        runtime = ", ".join(shown + ([f"{len(details) - len(shown)} more"] if len(details) > len(shown) else []))
        add_detail(flags, name, f"runtime: {runtime}" if any(flag_name(f) == name for f in flags) else runtime)

def execution_flags(executed: NotebookNode, memory_note: str, kernel_errors: list | None = None) -> list[str]:
    """timeout and error from the outputs of the executed notebook, and from `kernel_errors`
    ([ename, evalue] of test cells' visible lines in the kernel, which the trusted verdict replaced)."""
    found = [(o.ename, o.evalue) for c in executed.cells if c.cell_type == "code" for o in c.outputs
             if o.output_type == "error"]
    found += [(str(e[0]), str(e[1])) for e in kernel_errors or [] if isinstance(e, list) and len(e) == 2]
    out = []
    timed_out = any(ename == "CellTimeoutError" for ename, _ in found)
    if timed_out:
        out.append(TIMEOUT)
    errors = []
    for ename, evalue in found:
        if ename in EXPECTED_ERRORS or ename == "CellTimeoutError":
            continue
        if ename == "NameError" and BLANK in evalue:
            continue  # an unfilled blank: reported as missing_answer(code)
        if ename in ("GraderError", "OverBudget"):
            continue  # already flagged: by coursekit grade, over_budget
        if ename == "KeyboardInterrupt" and timed_out:
            continue  # the interrupt that ended a timed-out cell
        detail = {"MemoryError": f"MemoryError, {memory_note}",
                  "DeadKernelError": "kernel died"}.get(ename, ename)
        if detail not in errors:
            errors.append(detail)
    if errors:
        out.append(flag(ERROR, ", ".join(errors)))
    return out


def output_text(outputs: list) -> str:
    """What a cell claims to have printed or returned (errors excluded), normalised for comparison."""
    parts = []
    for o in outputs:
        if o.get("output_type") == "stream" and o.get("name") == "stdout":
            parts.append(o.get("text", ""))
        elif o.get("output_type") in ("execute_result", "display_data"):
            text = o.get("data", {}).get("text/plain", "")
            parts.append(text if isinstance(text, str) else "".join(text))
    text = _ADDRESS.sub("0x?", "".join(parts))
    return "\n".join(line.rstrip() for line in text.strip().split("\n"))


def fabricated_outputs(submitted: NotebookNode, executed: NotebookNode, max_chars: int) -> list[str]:
    """Cells whose stored (non-error) outputs are not what their code printed when graded."""
    bad = []
    for index, (mine, ran) in enumerate(zip(submitted.cells, executed.cells, strict=True)):
        if mine.cell_type != "code":
            continue
        claimed = output_text(mine.outputs)
        if claimed and claimed[:max_chars] != output_text(ran.outputs)[:max_chars]:
            bad.append(str(_grade_id(mine) or f"cell {index + 1}"))
    return [flag(FABRICATED_OUTPUTS, ",".join(bad) + " differ from a fresh run")] if bad else []
