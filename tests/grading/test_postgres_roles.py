"""autograder/postgres_roles.sql, as the README tells an instructor to run it: on a private PostgreSQL
server, the owner role creates nbgrader's tables (make release) and the grader role grades, reports
and reads back a class, yet cannot create, alter or drop anything."""

from __future__ import annotations

import copy
import subprocess
from urllib.parse import parse_qs, urlsplit

import nbformat
import pytest
import sqlalchemy
from grading_support import CELL_TIMEOUT, REPO, make_course, postgres_bin, read_rows
from submission_kinds import k_correct

from coursekit.cli import main
from coursekit.grading.course import Course
from coursekit.grading.intake.release import release

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def roles(postgres):
    """The server after the README's SQL file; {role: SQLAlchemy URL of database lesson11}."""
    query = parse_qs(urlsplit(postgres).query)
    host, port = query["host"][0], query["port"][0]
    done = subprocess.run([postgres_bin("psql"), "-h", host, "-p", port, "-U", "coursekit", "-d", "postgres",
                           "-v", "ON_ERROR_STOP=1", "-f", str(REPO / "autograder" / "postgres_roles.sql")],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return {role: f"postgresql+psycopg://{role}@/lesson11?host={host}&port={port}"
            for role in ("lesson11_owner", "lesson11_grader")}


def use_gradebook(course: Course, url: str) -> Course:
    with open(course.root / "nbgrader_config.py", "a", encoding="utf-8") as config:
        config.write(f"\nc.CourseDirectory.db_url = {url!r}\n")  # the last setting wins
    return Course.at(course.root)


@pytest.fixture(scope="module")
def released(roles, tmp_path_factory) -> Course:
    """A course whose gradebook the owner role created (the first `make release`)."""
    course = use_gradebook(make_course(tmp_path_factory.mktemp("roles") / "course"), roles["lesson11_owner"])
    release(course)
    return course


def test_the_grader_role_grades_and_reports_a_class(roles, released, tmp_path):
    course = use_gradebook(released, roles["lesson11_grader"])
    folder = tmp_path / "lms"
    folder.mkdir()
    nbformat.write(k_correct(copy.deepcopy(nbformat.read(course.release_notebook, as_version=4))), folder / "s01.ipynb")
    assert main(["grade", str(folder), "--course", str(course.root), "--timeout", CELL_TIMEOUT]) == 0
    assert main(["report", "--course", str(course.root), "--no-feedback"]) == 0
    assert read_rows(course.report_csv.read_text(encoding="utf-8"))["s01"]["total"] == "3"


@pytest.mark.parametrize("statement", ["CREATE TABLE extra (id integer)", "DROP TABLE grade",
                                       "ALTER TABLE grade ADD COLUMN extra integer", "TRUNCATE grade",
                                       "CREATE SCHEMA extra", "CREATE INDEX extra ON grade (id)"])
def test_the_grader_role_can_change_no_structure(roles, released, statement):
    engine = sqlalchemy.create_engine(roles["lesson11_grader"])
    try:
        with engine.connect() as conn:
            assert conn.execute(sqlalchemy.text("SELECT count(*) FROM assignment")).scalar() >= 1
        with engine.connect() as conn:
            with pytest.raises(sqlalchemy.exc.ProgrammingError, match="permission denied|must be owner"):
                conn.execute(sqlalchemy.text(statement))
    finally:
        engine.dispose()
