"""What the grading tests import (a module of its own: `conftest` is a name every test folder has, and
which one `from conftest import` finds depends on the order pytest collected the folders in)."""

from __future__ import annotations

import csv
import glob
import hashlib
import io
import shutil
import socket
from dataclasses import dataclass
from pathlib import Path

import pytest

from coursekit.grading.course import Course

REPO = Path(__file__).resolve().parents[2]
CELL_TIMEOUT = "3"  # seconds; the infinite-loop submission costs two of these


def make_course(root: Path) -> Course:
    root.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(REPO / "autograder" / "nbgrader_config.py", root / "nbgrader_config.py")
    shutil.copytree(REPO / "autograder" / "source", root / "source")
    return Course.at(root)


def digests(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def read_rows(text: str) -> dict[str, dict[str, str]]:
    return {row["student_id"]: row for row in csv.DictReader(io.StringIO(text))}


@dataclass
class GradedClass:
    course: Course
    folder: Path
    students: dict[str, str]  # student id -> kind
    before: dict[str, str]    # sha256 of every original file before grading
    after: dict[str, str]     # ... after grading
    exit_code: int
    csv: str

    @property
    def rows(self) -> dict[str, dict[str, str]]:
        return read_rows(self.csv)

    def row(self, kind: str) -> dict[str, str]:
        return self.rows[next(sid for sid, k in self.students.items() if k == kind)]


def fresh_copy(course: Course, root: Path) -> Course:
    """A copy of a released course without its graded class (manifest, journal, reports): saves a release."""
    shutil.copytree(course.root, root, ignore=shutil.ignore_patterns(".ingest", "reports", "feedback", "autograded",
                                                                     "submitted"))
    return Course.at(root)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def postgres_bin(name: str) -> str:
    """A PostgreSQL server binary from PATH, else from Debian's /usr/lib/postgresql/<version>/bin."""
    found = shutil.which(name) or next(iter(sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"), reverse=True)),
                                       None)
    if found is None:
        pytest.fail(f"{name} not found: install PostgreSQL's server (Debian: apt-get install postgresql)")
    return found
