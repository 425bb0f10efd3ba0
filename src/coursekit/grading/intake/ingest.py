"""Find each student's notebook in an LMS download (folder or .zip) and prepare it for nbgrader.

Layouts (may be mixed): `<student_id>.ipynb`, or `<student_id>/<anything>.ipynb` (any depth); a zip
may also wrap either in one folder named like the zip (`subs.zip` holding `subs/...`).
Rules (autograder/README.md):
- a student id matches STUDENT_ID; other names get one row flagged `unknown_student_id`, ungraded;
- several notebooks for one student: the newest (modification time, then name) is graded and the
  row is flagged `multiple_notebooks`;
- hidden files, `__MACOSX/`, `.ipynb_checkpoints/` and files that are not `.ipynb` are ignored.
The originals are only read. The prepared copy (valid nbformat 4, unique cell ids, deleted grading
cells put back from the release) is written to nbgrader's submitted/ folder.
"""

from __future__ import annotations

import copy
import json
import os
import re
import shutil
import time
import warnings
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
from nbformat.notebooknode import NotebookNode

from coursekit.errors import CourseError
from coursekit.grading.course import Course, Rubric
from coursekit.grading.judge import flags as F

STUDENT_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
IGNORED_PARTS = ("__MACOSX", ".ipynb_checkpoints")
MAX_NOTEBOOK_BYTES = 100 << 20
MAX_ZIP_BYTES = 2 << 30


@dataclass
class Candidate:
    """One notebook file found for a student."""

    label: str  # as the instructor knows it: path inside the submissions folder or zip
    path: Path  # a readable copy (the original, or the file extracted from the zip)
    mtime: float


@dataclass
class Entry:
    """One student: one row of the report."""

    student_id: str
    source: str = ""
    flags: list[str] = field(default_factory=list)
    original: NotebookNode | None = None  # as submitted (outputs kept), cell ids made unique; until written
    gradable: bool = False  # its prepared copy is in submitted/


class Ingest:
    """The students of a submissions folder or zip; iterating prepares them one at a time.

    Only file names are held for the whole class: each notebook is read, prepared, written to
    submitted/ and let go before the next one is read, so memory does not grow with the class."""

    def __init__(self, course: Course, submissions: Path):
        self.course = course
        self.found = sorted(find_candidates(course, submissions).items())
        self.release = nbformat.read(course.release_notebook, as_version=4)

    def __len__(self) -> int:
        return len(self.found)

    def __iter__(self) -> Iterator[Entry]:
        for student_id, candidates in self.found:
            entry = select_notebook(student_id, candidates)
            if entry.original is not None:
                target = self.course.submitted_notebook(student_id)
                if target.parent.parent.exists():
                    shutil.rmtree(target.parent.parent)
                target.parent.mkdir(parents=True)
                nbformat.write(prepare(entry, self.release, self.course.rubric), target)
                entry.original, entry.gradable = None, True
            yield entry


# ---------------------------------------------------------------- finding files

def find_candidates(course: Course, submissions: Path) -> dict[str, list[Candidate]]:
    if not submissions.exists():
        raise CourseError(f"{submissions}: no such file or folder; pass SUBMISSIONS=<folder or .zip>")
    if submissions.is_file():
        if not zipfile.is_zipfile(submissions):
            raise CourseError(f"{submissions}: not a folder or a .zip file; pass the LMS download")
        root = extract_zip(submissions, course.ingest_dir / "unzipped")
        prefix = f"{submissions.name}:"
        wrapper = root / submissions.stem
        top = [p.name for p in root.iterdir() if not p.name.startswith(".") and p.name not in IGNORED_PARTS]
        if top == [submissions.stem] and wrapper.is_dir():
            root, prefix = wrapper, f"{prefix}{submissions.stem}/"  # `zip -r subs.zip subs/`
    else:
        root, prefix = submissions, ""
    found: dict[str, list[Candidate]] = {}
    for item in sorted(root.iterdir()):
        if item.name.startswith(".") or item.name in IGNORED_PARTS:
            continue
        if item.is_file() and item.suffix.lower() == ".ipynb":
            found.setdefault(item.stem, []).append(_candidate(item, root, prefix))
        elif item.is_dir():
            notebooks = [p for p in sorted(item.rglob("*")) if p.is_file() and p.suffix.lower() == ".ipynb"
                         and not any(part.startswith(".") or part in IGNORED_PARTS
                                     for part in p.relative_to(root).parts)]
            found.setdefault(item.name, []).extend(_candidate(p, root, prefix) for p in notebooks)
    return found


def _candidate(path: Path, root: Path, prefix: str) -> Candidate:
    return Candidate(prefix + path.relative_to(root).as_posix(), path, path.stat().st_mtime)


def extract_zip(archive: Path, target: Path) -> Path:
    """Extract safely (no absolute paths, no `..`, bounded size); keep the members' dates."""
    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    with zipfile.ZipFile(archive) as zf:
        members = [m for m in zf.infolist() if not m.is_dir()]
        if sum(m.file_size for m in members) > MAX_ZIP_BYTES:
            raise CourseError(f"{archive}: expands to more than {MAX_ZIP_BYTES >> 30} GiB; unpack it "
                              "yourself and pass the folder")
        for member in members:
            parts = Path(member.filename.replace("\\", "/")).parts
            if member.filename.startswith("/") or ".." in parts or not parts:
                continue
            dest = target.joinpath(*parts)
            dest.parent.mkdir(parents=True, exist_ok=True)
            with zf.open(member) as src, open(dest, "wb") as out:
                shutil.copyfileobj(src, out)
            stamp = time.mktime((*member.date_time, 0, 0, -1))
            os.utime(dest, (stamp, stamp))
    return target


# ---------------------------------------------------------------- reading one student

def select_notebook(student_id: str, candidates: list[Candidate]) -> Entry:
    entry = Entry(student_id)
    if not STUDENT_ID.fullmatch(student_id):
        entry.flags.append(F.flag(F.UNKNOWN_STUDENT_ID, "allowed: letters, digits, _ . -"))
        entry.source = "; ".join(c.label for c in candidates).replace(";", ",")
        return entry
    if not candidates:
        entry.flags.append(F.flag(F.INVALID_NOTEBOOK, "no .ipynb file in the student's folder"))
        return entry
    chosen = max(candidates, key=lambda c: (c.mtime, c.label))
    entry.source = chosen.label
    if len(candidates) > 1:
        entry.flags.append(F.flag(F.MULTIPLE_NOTEBOOKS, f"{len(candidates)} found, graded the newest "
                                  f"{chosen.label}"))
    notebook, problem = read_notebook(chosen.path)
    if problem:
        entry.flags.append(F.flag(F.INVALID_NOTEBOOK, problem))
    else:
        entry.original = notebook
    return entry


def read_notebook(path: Path) -> tuple[NotebookNode | None, str]:
    """Parse a notebook without trusting it; return (notebook, "") or (None, what is wrong)."""
    data = path.read_bytes()
    if not data.strip():
        return None, "empty file"
    if len(data) > MAX_NOTEBOOK_BYTES:
        return None, f"larger than {MAX_NOTEBOOK_BYTES >> 20} MB"
    try:
        raw = json.loads(data.decode("utf-8"))
    except UnicodeDecodeError:
        return None, "not a Jupyter notebook (not UTF-8 text)"
    except json.JSONDecodeError as exc:
        return None, f"not valid JSON (line {exc.lineno})"
    if not isinstance(raw, dict) or not isinstance(raw.get("cells"), list) or raw.get("nbformat") != 4:
        return None, "not a Jupyter notebook (nbformat 4 with cells expected)"
    seen: set[str] = set()
    for k, cell in enumerate(raw["cells"]):
        if isinstance(cell, dict) and cell.get("id") in seen:
            cell["id"] = f"{cell['id']}-dup{k}"  # deterministic, so a second run gives the same ids
        if isinstance(cell, dict) and isinstance(cell.get("id"), str):
            seen.add(cell["id"])
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            notebook = nbformat.reads(json.dumps(raw), as_version=4)
            nbformat.validate(notebook)
    except Exception as exc:  # nbformat raises several types for malformed cells
        first = str(exc).strip().splitlines()[0][:120].replace(";", ",")
        return None, f"not a valid notebook ({first})"
    return notebook, ""


# ---------------------------------------------------------------- preparing for nbgrader

def prepare(entry: Entry, release: NotebookNode, rubric: Rubric) -> NotebookNode:
    """Copy of the submission with grading cells adopted or put back; adds ingest flags to entry."""
    nb = copy.deepcopy(entry.original)
    forged = drop_foreign_metadata(nb, release)
    entry.flags.extend(F.duplicate_grade_ids(nb))
    keep_last_grade_ids(nb)
    from_exercise_branch = not any("nbgrader" in c.metadata for c in nb.cells)
    if from_exercise_branch:
        adopt_exercise_cells(nb, release, rubric.code_cell)
        entry.flags.append(F.flag(F.EXERCISE_NOTEBOOK, "no nbgrader metadata, test cells added"))
    restored = restore_missing_cells(nb, release)
    tests = [gid for gid in restored if gid.startswith("test_")]
    if tests and not from_exercise_branch:
        entry.flags.append(F.flag(F.DELETED_TEST_CELL, ",".join(tests) + " restored and graded"))
    entry.flags.extend(F.content_flags(nb, release, restored, released=not from_exercise_branch, rubric=rubric))
    if forged:
        F.add_detail(entry.flags, F.SUSPICIOUS_CODE, f"nbgrader metadata on its own cells: {' '.join(forged)}")
    return nb


def _grade_id(cell: NotebookNode) -> str | None:
    return cell.metadata.get("nbgrader", {}).get("grade_id")


def drop_foreign_metadata(nb: NotebookNode, release: NotebookNode) -> list[str]:
    """Remove nbgrader metadata whose grade id the release does not have (a cell dressed as a test
    or answer cell would make nbgrader fail, or count); return those ids."""
    known = {_grade_id(c) for c in release.cells if _grade_id(c)}
    forged = []
    for cell in nb.cells:
        if "nbgrader" in cell.metadata and _grade_id(cell) not in known:
            forged.append(str(_grade_id(cell) or "no id")[:40].replace(",", " "))
            del cell.metadata["nbgrader"]
    return forged


def keep_last_grade_ids(nb: NotebookNode) -> None:
    """Only the last cell with a grade id keeps its nbgrader metadata (nbgrader's DeduplicateIds
    would leave an empty `nbgrader` dict that fails its own metadata check)."""
    seen = set()
    for cell in reversed(nb.cells):
        gid = _grade_id(cell)
        if gid in seen:
            del cell.metadata["nbgrader"]
        elif gid:
            seen.add(gid)


def adopt_exercise_cells(nb: NotebookNode, release: NotebookNode, code_cell: str) -> None:
    """Give the exercise branch's fill-in (tag course-exercise; grade id `code_cell` in the release) and
    answer cells (course_answer_id) the release's nbgrader metadata, so they are graded like a released
    notebook's."""
    by_id = {_grade_id(c): c for c in release.cells if _grade_id(c)}
    for cell in nb.cells:
        role = code_cell if "course-exercise" in cell.metadata.get("tags", []) \
            else cell.metadata.get("course_answer_id")
        ref = by_id.pop(role, None)
        if ref is not None and ref.cell_type == cell.cell_type:
            cell.metadata["nbgrader"] = copy.deepcopy(ref.metadata["nbgrader"])


def restore_missing_cells(nb: NotebookNode, release: NotebookNode) -> list[str]:
    """Put back graded or solution cells missing from nb, after the cell that precedes them in the
    release; return their grade ids. Locked text cells are not put back (nothing grades them)."""
    restored = []
    for index, cell in enumerate(release.cells):
        info = cell.metadata.get("nbgrader", {})
        if not (info.get("grade") or info.get("solution")):
            continue
        present = [_grade_id(c) for c in nb.cells]
        if info["grade_id"] in present:
            continue
        position = 0
        for earlier in reversed(release.cells[:index]):
            if _grade_id(earlier) in present:
                position = len(present) - present[::-1].index(_grade_id(earlier))
                break
        new = copy.deepcopy(cell)
        new["id"] = f"restored-{info['grade_id']}"
        nb.cells.insert(position, new)
        restored.append(info["grade_id"])
    return restored
