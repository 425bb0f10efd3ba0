"""One gradebook commit per notebook (records.record.one_commit): nbgrader's own commits only flush."""

from __future__ import annotations

import pytest
from nbgrader.api import Gradebook
from sqlalchemy import event

from coursekit.grading.course import put_venv_on_path
from coursekit.grading.records.record import one_commit


@pytest.fixture
def gradebook(tmp_path):
    put_venv_on_path()  # nbgrader runs alembic from the environment
    with Gradebook(f"sqlite:///{tmp_path / 'gradebook.db'}") as gb:
        yield gb


def test_nbgraders_commits_inside_only_flush_and_the_block_commits_once(gradebook):
    commits = []
    event.listen(gradebook.db.bind, "commit", lambda connection: commits.append(1))
    with one_commit(gradebook.db) as commit:
        for student in ("a", "b", "c"):
            gradebook.add_student(student)  # each commits, as SaveAutoGrades does per grade and comment
        assert commits == []
        commit()
    assert len(commits) == 1 and sorted(s.id for s in gradebook.students) == ["a", "b", "c"]


def test_a_notebook_that_fails_leaves_nothing_in_the_gradebook(gradebook):
    with pytest.raises(RuntimeError), one_commit(gradebook.db):
        gradebook.add_student("half")
        raise RuntimeError("the recorder failed after some writes")
    assert [s.id for s in gradebook.students] == []
    gradebook.add_student("next")  # commits normally again
    assert [s.id for s in gradebook.students] == ["next"]
