"""Find each student's notebook in an LMS download (folder or .zip) and prepare it for nbgrader.

Layouts (may be mixed): `<student_id>.ipynb`, or `<student_id>/<anything>.ipynb` (any depth); a zip
may also wrap either in one folder named like the zip (`subs.zip` holding `subs/...`).
Rules (autograder/README.md):
- a student id matches STUDENT_ID; other names get one row flagged `unknown_student_id`, ungraded;
- several notebooks for one student: the newest readable one (modification time, then name) is
  graded and the row is flagged `multiple_notebooks`, naming the newer ones that could not be read;
- no readable `.ipynb`: the row is flagged `invalid_notebook` with each file's reason (a `.py`, a
  `.pdf`, a notebook saved as `.txt`, a broken notebook); files that could not be taken at all (a
  symbolic link, a zip member that is corrupt, unsafely named, duplicated or over the size limits)
  are named in `rejected_file` on a graded row;
- hidden files, `__MACOSX/` and `.ipynb_checkpoints/` are ignored;
- no `.ipynb` anywhere (an empty or wrong folder): one-line error, nothing graded or overwritten.
The originals are only read. The prepared copy (valid nbformat 4, unique cell ids, deleted grading
cells put back from the release) is written to nbgrader's submitted/ folder.
"""

from __future__ import annotations

import copy
import json
import os
import re
import shutil
import stat
import time
import warnings
import zipfile
import zlib
from collections import Counter
from collections.abc import Iterator
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
from nbformat.notebooknode import NotebookNode

from coursekit.errors import CourseError
from coursekit.grading.boundary import StudentStep
from coursekit.grading.course import Course, Rubric
from coursekit.grading.judge import flags as F

STUDENT_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
IGNORED_PARTS = ("__MACOSX", ".ipynb_checkpoints")
NOTEBOOK_SUFFIX = ".ipynb"
MAX_NOTEBOOK_BYTES = 100 << 20
MAX_MEMBER_BYTES = MAX_NOTEBOOK_BYTES  # one zip member, counted on the bytes decompressed
MAX_ZIP_BYTES = 2 << 30                # the whole zip, likewise
MAX_RATIO, RATIO_FLOOR = 200, 1 << 20  # members over 1 MiB may expand at most 200:1 (notebooks: ~3-10:1)
MAX_LABEL = 160                        # characters of a student-chosen file name quoted in a flag
UNSAFE_NAME = "unsafe name in the zip"


@dataclass
class Candidate:
    """One notebook file found for a student."""

    label: str  # as the instructor knows it: path inside the submissions folder or zip
    path: Path | None  # a readable copy (the original, or the file extracted from the zip); None if none
    mtime: float
    problem: str = ""  # why the file cannot be graded whatever it holds (a link, a corrupt zip member ...)


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
            entry = Entry(student_id, ", ".join(c.label for c in candidates)[:MAX_LABEL * 2].replace(";", ","))
            with StudentStep(entry.flags, "could not read the notebook") as reading:
                entry = select_notebook(student_id, candidates)
            if not reading.failed and entry.original is not None:
                with StudentStep(entry.flags, "could not prepare the notebook"):
                    self._write_prepared(entry)
            entry.original = None
            yield entry

    def _write_prepared(self, entry: Entry) -> None:
        """The prepared copy in submitted/ (a failure leaves none: the student is then not graded)."""
        target = self.course.submitted_notebook(entry.student_id)
        if target.parent.parent.exists():
            shutil.rmtree(target.parent.parent)
        prepared = prepare(entry, self.release, self.course.rubric)
        target.parent.mkdir(parents=True)
        nbformat.write(prepared, target)
        entry.gradable = True


# ---------------------------------------------------------------- finding files

def find_candidates(course: Course, submissions: Path) -> dict[str, list[Candidate]]:
    """Every student's files: student id -> candidates. CourseError (one line) when `submissions` is
    missing, not a folder or zip, or holds no .ipynb file at all (an empty or wrong folder): nothing is
    graded or overwritten then."""
    if not submissions.exists():
        raise CourseError(f"{submissions}: no such file or folder; pass SUBMISSIONS=<folder or .zip>")
    problems: dict[str, str] = {}
    if submissions.is_file():
        if not zipfile.is_zipfile(submissions):
            raise CourseError(f"{submissions}: not a folder or a .zip file; pass the LMS download")
        root = course.ingest_dir / "unzipped"
        problems = extract_zip(submissions, root)
        prefix = f"{submissions.name}:"
        wrapper = root / submissions.stem
        top = [p.name for p in root.iterdir() if not p.name.startswith(".") and p.name not in IGNORED_PARTS]
        top += [name.split("/")[0] for name in problems if "/" in name]
        if set(top) == {submissions.stem} and wrapper.is_dir():
            root, prefix = wrapper, f"{prefix}{submissions.stem}/"  # `zip -r subs.zip subs/`
            problems = {name[len(submissions.stem) + 1:]: why for name, why in problems.items()}
    elif submissions.is_dir():
        root, prefix = submissions, ""
    else:
        raise CourseError(f"{submissions}: not a folder or a .zip file; pass the LMS download")
    found: dict[str, list[Candidate]] = {}
    for item in sorted(root.iterdir()):
        if _ignored(item.name):
            continue
        if item.is_symlink():
            found.setdefault(_student_of(item.name), []).append(
                Candidate(prefix + item.name, None, 0.0, "a symbolic link, not followed"))
        elif item.is_file():
            found.setdefault(_student_of(item.name), []).append(_candidate(item, root, prefix))
        elif item.is_dir():
            found.setdefault(item.name, []).extend(_folder_candidates(item, root, prefix))
    for name, why in sorted(problems.items()):
        first, _, rest = name.partition("/")
        if why.startswith(UNSAFE_NAME):
            found.setdefault(name, []).append(Candidate(prefix + name, None, 0.0, why))
        elif not any(_ignored(part) for part in name.split("/")):
            found.setdefault(first if rest else _student_of(first), []).append(
                Candidate(prefix + name, None, 0.0, why))
    if not any(c.label.lower().endswith(NOTEBOOK_SUFFIX) for cs in found.values() for c in cs):
        raise CourseError(f"{submissions}: no .ipynb file in it (empty, or not the LMS download?); "
                          "nothing was graded or overwritten")
    return found


def _ignored(name: str) -> bool:
    return name.startswith(".") or name in IGNORED_PARTS


def _student_of(file_name: str) -> str:
    """The student id a top-level file stands for: its name without the suffix (and without a `.ipynb`
    left before another suffix: `alice.ipynb.txt` is alice's)."""
    stem = Path(file_name).stem
    return stem[:-len(NOTEBOOK_SUFFIX)] if stem.lower().endswith(NOTEBOOK_SUFFIX) else stem


def _folder_candidates(folder: Path, root: Path, prefix: str) -> list[Candidate]:
    """The files of one student's folder at any depth (hidden ones and checkpoints left out); links are
    listed, never followed."""
    found = []
    for dirpath, dirnames, filenames in os.walk(folder):
        here = Path(dirpath)
        dirnames[:] = sorted(d for d in dirnames if not _ignored(d))
        for name in [*dirnames, *sorted(filenames)]:
            path = here / name
            if path.is_symlink():
                found.append(Candidate(prefix + path.relative_to(root).as_posix(), None, 0.0,
                                       "a symbolic link, not followed"))
            elif name in filenames and not _ignored(name):
                found.append(_candidate(path, root, prefix))
        dirnames[:] = [d for d in dirnames if not (here / d).is_symlink()]
    return found


def _candidate(path: Path, root: Path, prefix: str) -> Candidate:
    return Candidate(prefix + path.relative_to(root).as_posix(), path, path.stat().st_mtime)


class MemberError(Exception):
    """One zip member cannot be extracted; the message says why."""


def extract_zip(archive: Path, target: Path) -> dict[str, str]:
    """Extract `archive` into `target` (emptied first), member by member, keeping the members' dates;
    return {member name: why it was not extracted} for the members left out: unsafe names (absolute,
    `..`), symbolic links, names given twice, encrypted or corrupt data, and members past the size
    limits (MAX_MEMBER_BYTES each, MAX_ZIP_BYTES in all, MAX_RATIO compression), all counted on the
    bytes really decompressed, not on the sizes the archive declares. An archive that cannot be opened
    at all is a CourseError."""
    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    problems: dict[str, str] = {}
    try:
        zf = zipfile.ZipFile(archive)
    except (zipfile.BadZipFile, OSError, ValueError) as exc:
        raise CourseError(f"{archive}: cannot read the zip ({exc}); download it again") from None
    with zf:
        members = [m for m in zf.infolist() if not m.is_dir()]
        names = [m.filename.replace("\\", "/") for m in members]
        counts = Counter(names)
        total = 0
        for member, name in zip(members, names, strict=True):
            parts = [p for p in name.split("/") if p not in ("", ".")]
            if name.startswith("/") or re.match(r"[A-Za-z]:", name) or ".." in parts or not parts:
                problems[name[:MAX_LABEL]] = f"{UNSAFE_NAME} (absolute or '..'), not extracted"
            elif stat.S_ISLNK(member.external_attr >> 16):
                problems[name] = "a symbolic link in the zip, not extracted"
            elif counts[name] > 1:
                problems[name] = f"the name appears {counts[name]} times in the zip, none extracted"
            elif total >= MAX_ZIP_BYTES:
                problems[name] = f"not extracted: the zip expands past {MAX_ZIP_BYTES >> 20} MB in all"
            else:
                dest = target.joinpath(*parts)
                try:
                    total += _extract_member(zf, member, dest, MAX_ZIP_BYTES - total)
                except MemberError as exc:
                    problems[name] = str(exc)
                    with suppress(OSError):
                        dest.unlink()
    return problems


def _extract_member(zf: zipfile.ZipFile, member: zipfile.ZipInfo, dest: Path, room: int) -> int:
    """Decompress one member to dest within the limits; return its size. MemberError says why not."""
    limit = min(MAX_MEMBER_BYTES, room)
    if member.flag_bits & 0x1:
        raise MemberError("encrypted in the zip, not extracted")
    if member.file_size > limit:
        raise MemberError(f"expands to {member.file_size >> 20} MB, more than the {limit >> 20} MB allowed")
    if member.file_size > RATIO_FLOOR and member.file_size > MAX_RATIO * max(member.compress_size, 1):
        raise MemberError(f"compressed {member.file_size // max(member.compress_size, 1)}:1 (a zip bomb?), "
                          f"more than {MAX_RATIO}:1 allowed")
    written = 0
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
        with zf.open(member) as src, open(dest, "wb") as out:
            while chunk := src.read(1 << 20):
                written += len(chunk)
                if written > limit or (written > RATIO_FLOOR and written > MAX_RATIO * max(member.compress_size, 1)):
                    raise MemberError("expands past its declared size and the limits (zip bomb?), not extracted")
                out.write(chunk)
    except (zipfile.BadZipFile, zlib.error, EOFError, NotImplementedError, RuntimeError, ValueError) as exc:
        detail = " ".join(str(exc).split())[:80] or type(exc).__name__
        raise MemberError(f"corrupt in the zip ({detail}), not extracted") from None
    except OSError as exc:
        raise MemberError(f"cannot be extracted ({exc.strerror or exc})") from None
    stamp = time.mktime((*member.date_time, 0, 0, -1))
    os.utime(dest, (stamp, stamp))
    return written


# ---------------------------------------------------------------- reading one student

def select_notebook(student_id: str, candidates: list[Candidate]) -> Entry:
    """The student's row: the newest readable .ipynb is graded (with a note naming the others); when
    none is readable, the row is flagged invalid_notebook with each file's reason (foreign uploads such
    as a .py, a .pdf or a notebook saved as .txt included)."""
    entry = Entry(student_id)
    problems = [c for c in candidates if c.problem]
    if not STUDENT_ID.fullmatch(student_id):
        entry.flags.append(F.flag(F.UNKNOWN_STUDENT_ID, ", ".join(_reason(c, c.problem) for c in problems)
                                  or "allowed: letters, digits, _ . -"))
        entry.source = "; ".join(c.label for c in candidates).replace(";", ",")
        return entry
    notebooks = sorted((c for c in candidates if not c.problem and c.label.lower().endswith(NOTEBOOK_SUFFIX)),
                       key=lambda c: (c.mtime, c.label), reverse=True)
    skipped = []
    for candidate in notebooks:
        notebook, problem = read_notebook(candidate.path)
        if notebook is None:
            skipped.append(_reason(candidate, problem))
            continue
        entry.source, entry.original = candidate.label, notebook
        if len(notebooks) > 1:
            note = f"{len(notebooks)} found, graded the newest readable {candidate.label}"
            entry.flags.append(F.flag(F.MULTIPLE_NOTEBOOKS, ", ".join([note, *skipped])))
        if problems:
            entry.flags.append(F.flag(F.REJECTED_FILE, ", ".join(_reason(c, c.problem) for c in problems)))
        return entry
    others = [c for c in candidates if c not in notebooks]
    reasons = skipped + [_reason(c, c.problem or foreign_upload(c.path)) for c in others]
    entry.flags.append(F.flag(F.INVALID_NOTEBOOK, ", ".join(reasons) or "no file in the student's folder"))
    entry.source = ", ".join(c.label for c in candidates)[:MAX_LABEL * 2].replace(";", ",")
    return entry


def _reason(candidate: Candidate, why: str) -> str:
    return f"{candidate.label[:MAX_LABEL]}: {why}"


def foreign_upload(path: Path) -> str:
    """Why a file not named .ipynb is not graded: a notebook under another name, or not a notebook."""
    notebook, _ = read_notebook(path)
    suffix = path.suffix.lower()
    if notebook is not None:
        return f"a notebook saved as {suffix or 'a file without suffix'}; rename it to .ipynb to grade it"
    return f"not a notebook ({suffix or 'no suffix'} file)"


def read_notebook(path: Path) -> tuple[NotebookNode | None, str]:
    """Parse a notebook without trusting it; return (notebook, "") or (None, what is wrong)."""
    if path.stat().st_size > MAX_NOTEBOOK_BYTES:
        return None, f"larger than {MAX_NOTEBOOK_BYTES >> 20} MB"
    data = path.read_bytes()
    if not data.strip():
        return None, "empty file"
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
    hidden = show_everything(nb)
    if hidden:
        entry.flags.append(F.flag(F.HIDDEN_CONTENT, ", ".join(hidden)[:F.MAX_FLAG_TEXT] + ", removed"))
    forged = drop_foreign_metadata(nb, release)
    changed = restore_release_metadata(nb, release)
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
    if changed:
        F.add_detail(entry.flags, F.SUSPICIOUS_CODE, f"nbgrader metadata changed, the release's put back: "
                                                     f"{' '.join(changed)}")
    return nb


def _grade_id(cell: NotebookNode) -> str | None:
    return cell.metadata.get("nbgrader", {}).get("grade_id")


# Metadata the grading reads or that only describes editing; everything else a student's notebook or cell
# carries is dropped at ingest (KEPT_*), so no renderer's switch can hide graded code from the grader.
KEPT_CELL_METADATA = {"nbgrader", "tags", "course_answer_id", "editable", "deletable", "trusted", "execution"}
KEPT_NOTEBOOK_METADATA = {"kernelspec", "language_info"}
# What hides source or outputs (named in the flag): nbconvert's templates drop the input of a cell with
# transient.remove_source (templates/base/null.j2, set by TagRemovePreprocessor for remove_input_tags);
# JupyterLab collapses jupyter.source_hidden / outputs_hidden; the classic notebook collapsed; the
# hide_input extension hide_input / hide_output; Jupyter Book, MyST-NB and Quarto tags remove-*/hide-*
# and cell options echo / include / output false.
HIDING_KEYS = {("transient",), ("jupyter", "source_hidden"), ("jupyter", "outputs_hidden"), ("collapsed",),
               ("hide_input",), ("hide_output",), ("hide_cell",), ("remove_input",), ("remove_cell",),
               ("remove_output",), ("source_hidden",), ("outputs_hidden",)}
HIDING_FALSE = {"echo", "include", "output"}  # Quarto's cell options: false hides
HIDING_TAG = re.compile(r"(remove|hide|hidden)([-_ ]?(cell|input|inputs|output|outputs|source|code|stderr|"
                        r"stdout|all))*", re.I)


def show_everything(nb: NotebookNode) -> list[str]:
    """Drop every notebook and cell metadata key outside KEPT_* and every hiding tag; return what hid
    something (a true HIDING_KEYS value, a hiding tag, a false HIDING_FALSE option) as `cell N: key`."""
    found = [f"notebook: {key}" for key in sorted(nb.metadata) if key not in KEPT_NOTEBOOK_METADATA
             and (str(key).startswith(("hide", "remove")) and nb.metadata[key])]
    for key in [k for k in nb.metadata if k not in KEPT_NOTEBOOK_METADATA]:
        del nb.metadata[key]
    for n, cell in enumerate(nb.cells, 1):
        meta = cell.metadata
        hiding = [".".join(path) for path in sorted(HIDING_KEYS) if _truthy(meta, path)]
        hiding += [key for key in sorted(HIDING_FALSE) if key in meta and meta[key] is False]
        tags = meta.get("tags")
        if isinstance(tags, list):
            gone = [t for t in tags if isinstance(t, str) and HIDING_TAG.fullmatch(t.strip())]
            hiding += [f"tag {t[:40]}" for t in gone]
            meta["tags"] = [t for t in tags if isinstance(t, str) and t not in gone]
        elif tags is not None:
            del meta["tags"]
        for key in [k for k in meta if k not in KEPT_CELL_METADATA]:
            del meta[key]
        if hiding:
            found.append(f"cell {n}: {' '.join(hiding)}")
    return found


def _truthy(meta: dict, path: tuple[str, ...]) -> bool:
    for key in path:
        if not isinstance(meta, dict) or key not in meta:
            return False
        meta = meta[key]
    return bool(meta)


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


def restore_release_metadata(nb: NotebookNode, release: NotebookNode) -> list[str]:
    """A cell with a grade id of the release gets the release's nbgrader metadata for that id: a student
    cannot make a test cell a solution (nbgrader's OverwriteCells would stop on "Inconsistent
    checksums", nbgrader.utils.compute_checksum hashing those flags), change its points or lock, or give
    an answer's id to another cell that nbgrader would then not grade. Return the ids changed."""
    by_id = {_grade_id(c): c.metadata["nbgrader"] for c in release.cells if _grade_id(c)}
    changed = []
    for cell in nb.cells:
        gid = _grade_id(cell)
        if isinstance(gid, str) and gid in by_id and cell.metadata["nbgrader"] != by_id[gid]:
            cell.metadata["nbgrader"] = copy.deepcopy(by_id[gid])
            changed.append(str(gid))
    return sorted(set(changed))


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


CODE_CELL_TAGS = {"course-exercise", "course-solution"}  # the exercise and solution branches' code cell


def adopt_exercise_cells(nb: NotebookNode, release: NotebookNode, code_cell: str) -> None:
    """Give the exercise branch's fill-in (tag course-exercise; grade id `code_cell` in the release), the
    solution branch's filled-in code (tag course-solution: the instructor's reference, graded as `make
    check` runs it) and answer cells (course_answer_id) the release's nbgrader metadata, so they are
    graded like a released notebook's."""
    by_id = {_grade_id(c): c for c in release.cells if _grade_id(c)}
    for cell in nb.cells:
        role = code_cell if CODE_CELL_TAGS & set(cell.metadata.get("tags", [])) \
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
