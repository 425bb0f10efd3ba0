"""The recorder's gradebook lookups for nbgrader's steps (records.record): the release's cells read once per
class (ReleaseCells), a student's grades and comments in one query each (_LentGradebook), each distinct
cell metadata validated once (_SchemaBuiltOnce): the same answers and errors as nbgrader's own lookups."""

from __future__ import annotations

import jsonschema
import pytest
from nbformat.v4 import new_code_cell
from nbgrader.api import Gradebook, MissingEntry
from sqlalchemy import event

from coursekit.grading.course import put_venv_on_path
from coursekit.grading.records.record import ReleaseCells, _LentGradebook, _MetadataValidator


@pytest.fixture
def gradebook(tmp_path):
    put_venv_on_path()  # nbgrader runs alembic from the environment
    with Gradebook(f"sqlite:///{tmp_path / 'gradebook.db'}") as gb:
        gb.add_assignment("a")
        gb.add_notebook("nb", "a")
        gb.add_grade_cell("graded", "nb", "a", max_score=2, cell_type="code")
        gb.add_solution_cell("answer", "nb", "a")
        gb.add_task_cell("task", "nb", "a", max_score=3, cell_type="markdown")
        gb.add_grade_cell("both", "nb", "a", max_score=1, cell_type="code")  # a grade and a solution cell
        gb.add_solution_cell("both", "nb", "a")
        for name in ("graded", "answer", "task", "both"):
            gb.add_source_cell(name, "nb", "a", cell_type="code", source=f"# {name}", checksum=f"sum-{name}",
                               locked=name != "answer")
        for student in ("st", "other"):
            gb.add_student(student)
            gb.add_submission("a", student)
        yield gb


def statements(gb: Gradebook) -> list[str]:
    seen: list[str] = []
    event.listen(gb.db.bind, "before_cursor_execute", lambda *args: seen.append(args[2]))
    return seen


def test_a_students_grades_and_comments_are_nbgraders_own_rows_from_one_query_each(gradebook):
    lent = _LentGradebook(gradebook)
    sql = statements(gradebook)
    grades = {name: lent.find_grade(name, "nb", "a", "st") for name in ("graded", "task", "both")}
    comments = {name: lent.find_comment(name, "nb", "a", "st") for name in ("answer", "task", "both")}
    assert len(sql) == 2  # one query for the grades, one for the comments
    for name, grade in grades.items():
        assert grade is gradebook.find_grade(name, "nb", "a", "st")  # the session's row, which the step may change
    for name, comment in comments.items():
        assert comment is gradebook.find_comment(name, "nb", "a", "st")
    assert lent.find_grade("graded", "nb", "a", "other") is gradebook.find_grade("graded", "nb", "a", "other")
    with pytest.raises(MissingEntry):
        lent.find_grade("answer", "nb", "a", "st")  # a solution cell has no grade
    with pytest.raises(MissingEntry):
        lent.find_comment("graded", "nb", "a", "st")
    with pytest.raises(MissingEntry):
        lent.find_grade("graded", "nb", "a", "nobody")


def test_the_release_cells_are_read_once_and_copied_read_only(gradebook):
    release = ReleaseCells()
    lent = _LentGradebook(gradebook, release)
    first = lent.find_source_cell("graded", "nb", "a")
    sql = statements(gradebook)
    again = _LentGradebook(gradebook, release).find_source_cell("graded", "nb", "a")  # the next notebook's step
    assert sql == [] and again is first
    real = gradebook.find_source_cell("graded", "nb", "a")
    assert (first.name, first.cell_type, first.locked, first.checksum, first.source) == \
        (real.name, real.cell_type, real.locked, real.checksum, real.source)
    assert lent.find_graded_cell("task", "nb", "a").max_score == 3.0
    assert lent.find_graded_cell("graded", "nb", "a").max_score == 2.0
    with pytest.raises(AttributeError):
        first.source = "changed"
    with pytest.raises(AttributeError):
        first.notebook  # noqa: B018 - a relationship, not a column: not copied
    for _ in range(2):  # missing every time, as nbgrader's lookup is
        with pytest.raises(MissingEntry, match="nope"):
            lent.find_source_cell("nope", "nb", "a")
        with pytest.raises(MissingEntry):
            lent.find_graded_cell("answer", "nb", "a")


def test_cell_metadata_is_validated_once_per_distinct_content_and_invalid_metadata_always_raises():
    validator = _MetadataValidator()
    good = new_code_cell(metadata={"nbgrader": {"grade": True, "grade_id": "g", "locked": True, "points": 1,
                                                "schema_version": 3, "solution": False}})
    bad = new_code_cell(metadata={"nbgrader": {"grade": "yes", "grade_id": "g", "locked": True, "points": 1,
                                               "schema_version": 3, "solution": False}})
    validator.validate_cell(good)
    validator.validate_cell(good)
    for _ in range(2):
        with pytest.raises(jsonschema.ValidationError):
            validator.validate_cell(bad)


def test_a_grading_kernel_names_each_cells_code_file_from_its_text(monkeypatch):
    """kernel_side._quick_cell_names: one file per distinct cell text, in ipykernel's own folder."""
    from ipykernel import compiler

    from coursekit.grading.sandbox import kernel_side

    monkeypatch.setattr(compiler, "get_file_name", compiler.get_file_name)  # put back after the test
    monkeypatch.delenv("IPYKERNEL_CELL_NAME", raising=False)
    kernel_side._quick_cell_names()
    names = [compiler.XCachingCompiler().get_code_name(code, code, 1) for code in ("x = 1", "x = 2", "x = 1", "é")]
    assert names[0] == names[2] and len(set(names)) == 3
    assert all(name.startswith(compiler.get_tmp_directory() + "/") and name.endswith(".py") for name in names)
