"""What the grading tests share, each made once per test run: the lesson released once
(tests/conftest.py's `release_template`, copied by `fresh_copy` for every course a test grades into), one graded class
(a copy of it graded once, from a folder mixing every kind of submission in
tests/grading/submission_kinds.py), the instructor's class, and one private
PostgreSQL server (`postgres`: a new database for each module that asks)."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from grading_support import CELL_TIMEOUT, GradedClass, digests, free_port, fresh_copy, postgres_bin
from submission_kinds import FILE_KINDS, NOTEBOOK_KINDS, write_class

from coursekit.cli import main
from coursekit.grading.course import Course

NOBODY = 65534  # PostgreSQL refuses to run as root; the server then runs as nobody


@pytest.fixture(scope="session")
def released_course(release_template, tmp_path_factory) -> Course:
    """A released course shared by the tests that only read it or copy it; `graded_class` grades into it."""
    return fresh_copy(release_template, tmp_path_factory.mktemp("grading") / "course")


@pytest.fixture(scope="session")
def graded_class(released_course, tmp_path_factory) -> GradedClass:
    course = released_course
    folder = tmp_path_factory.mktemp("lms") / "download"
    students = write_class(course.release_notebook, folder, [*NOTEBOOK_KINDS, *FILE_KINDS])
    before = digests(folder)
    args = ["grade", str(folder), "--course", str(course.root), "--timeout", CELL_TIMEOUT]
    # graded once: test_grading_scale grades it again (on Dask, into PostgreSQL) and compares the CSVs,
    # and test_grading_attacks regrades its own class byte for byte
    code = main(args)
    return GradedClass(course, folder, students, before, digests(folder), code,
                       course.report_csv.read_text(encoding="utf-8"))


@pytest.fixture(scope="session")
def instructor_class(release_template, tmp_path_factory) -> Course:
    """A course of its own with tests/grading/instructor_class.py's eight students graded."""
    from instructor_class import write_instructor_class

    course = fresh_copy(release_template, tmp_path_factory.mktemp("instructor") / "course")
    folder = tmp_path_factory.mktemp("instructor-lms") / "download"
    write_instructor_class(course.release_notebook, folder)
    assert main(["grade", str(folder), "--course", str(course.root), "--timeout", CELL_TIMEOUT]) == 0
    return course


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[Callable[[str], str]]:
    """One private PostgreSQL server per test run: data and unix socket in a temporary folder, its own
    port, no TCP listener. new_database(name) creates an empty database and returns its SQLAlchemy URL.

    The folder is not under pytest's: every pytest that starts (one a test runs, another checkout's) makes
    /tmp/pytest-of-<user> private again, and a server running as nobody could then no longer reach its data."""
    import sqlalchemy

    folder = Path(tempfile.mkdtemp(prefix="coursekit-postgres-"))
    as_user = {}
    if os.geteuid() == 0:
        as_user = {"user": NOBODY, "group": NOBODY}
        os.chown(folder, NOBODY, NOBODY)
        for parent in list(folder.parents)[:-1]:  # let nobody pass through (not read) the folders above
            parent.chmod(parent.stat().st_mode | stat.S_IXOTH)
    port = free_port()
    data, log = folder / "data", folder / "server.log"
    subprocess.run([postgres_bin("initdb"), "-D", str(data), "-U", "coursekit", "--auth=trust", "-E", "UTF8",
                    "--locale=C", "--no-sync"], check=True, capture_output=True, **as_user)
    ctl = postgres_bin("pg_ctl")
    subprocess.run([ctl, "-D", str(data), "-l", str(log), "-w", "-t", "60", "-o",
                    f"-k {folder} -p {port} -c listen_addresses='' -F", "start"],
                   check=True, capture_output=True, **as_user)
    url = f"postgresql+psycopg://coursekit@/{{db}}?host={folder}&port={port}"

    def new_database(name: str) -> str:
        engine = sqlalchemy.create_engine(url.format(db="postgres"), isolation_level="AUTOCOMMIT")
        try:
            with engine.connect() as conn:
                conn.execute(sqlalchemy.text(f'CREATE DATABASE "{name}"'))
        finally:
            engine.dispose()
        return url.format(db=name)

    try:
        yield new_database
    finally:
        subprocess.run([ctl, "-D", str(data), "-m", "immediate", "-w", "stop"], capture_output=True, **as_user)
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="module")
def postgres(postgres_server, request) -> str:
    """The SQLAlchemy URL of an empty database of its own for this module, on the run's PostgreSQL server."""
    return postgres_server("gradebook_" + request.module.__name__.removeprefix("test_"))
