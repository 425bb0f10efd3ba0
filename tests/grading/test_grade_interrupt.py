"""Ctrl-C while `make grade` releases the lesson on its own (issue 27, item 7): one line, exit 130, no
traceback, and the same command then releases and grades; Ctrl-C during a --regrade (issue 34): the same
command regrades the rest."""

from __future__ import annotations

import copy
import json
import shutil
import subprocess
import sys

import nbformat
import pytest
from submission_kinds import k_correct

from coursekit.cli import main
from coursekit.grading.course import Course

# Ctrl-C arrives while nbgrader's generate_assignment runs (KeyboardInterrupt is what SIGINT raises in
# Python's main thread); the rest is `coursekit grade` as `make grade` runs it.
DRIVER = """import sys
from coursekit.grading.intake import release

def ctrl_c(*args, **kwargs):
    raise KeyboardInterrupt

release.check_release = ctrl_c
from coursekit.cli import main
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.slow
def test_ctrl_c_during_the_automatic_release_is_one_line_and_a_rerun_grades(released_course, tmp_path):
    course = Course.at(shutil.copytree(released_course.root, tmp_path / "course"))
    folder = tmp_path / "lms"
    folder.mkdir()
    nb = k_correct(copy.deepcopy(nbformat.read(course.release_notebook, as_version=4)))
    (folder / "s01.ipynb").write_text(json.dumps(nb), encoding="utf-8")
    course.source_notebook.touch()  # the source is newer than the release: grade releases first
    args = ["grade", str(folder), "--course", str(course.root), "--timeout", "3"]
    first = subprocess.run([sys.executable, "-c", DRIVER, *args], capture_output=True, text=True, timeout=600)
    assert first.returncode == 130, first.stderr
    assert "Traceback" not in first.stderr
    assert first.stderr.strip().splitlines() == ["interrupted: during the automatic release, before any student "
                                                 "was graded; run the same command again to grade the rest"]
    assert not course.release_notebook.exists()  # a half release is not taken for a release
    assert main(args) == 0
    assert "s01" in course.report_csv.read_text(encoding="utf-8")


# Ctrl-C arrives (SIGINT to this process, as a terminal sends it) once the recorder has recorded two
# students; the rest is `coursekit grade` as `make grade` runs it.
CTRL_C_AFTER_TWO = """import os, signal, sys
from coursekit.grading.records.record import Recorder

record = Recorder.record
recorded = []

def record_then_ctrl_c(self, *args, **kwargs):
    flags = record(self, *args, **kwargs)
    recorded.append(args[0])
    if len(recorded) == 2:
        os.kill(os.getpid(), signal.SIGINT)
    return flags

Recorder.record = record_then_ctrl_c
from coursekit.cli import main
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.slow
def test_a_rerun_after_ctrl_c_in_a_regrade_grades_only_the_rest(released_course, tmp_path, monkeypatch):
    """Issue 34: `make grade GRADE_ARGS=--regrade`, Ctrl-C, then the same command: it regrades the students
    the interrupted pass had not regraded, not everyone; the next --regrade regrades everyone again."""
    from coursekit.grading.records.record import Recorder

    course = Course.at(shutil.copytree(released_course.root, tmp_path / "course"))
    folder = tmp_path / "lms"
    folder.mkdir()
    nb = k_correct(copy.deepcopy(nbformat.read(course.release_notebook, as_version=4)))
    students = ["s01", "s02", "s03", "s04"]
    for student in students:
        (folder / f"{student}.ipynb").write_text(json.dumps(nb), encoding="utf-8")
    args = ["grade", str(folder), "--course", str(course.root), "--timeout", "5", "--jobs", "1"]
    assert main(args) == 0  # the class, graded once

    stopped = subprocess.run([sys.executable, "-c", CTRL_C_AFTER_TWO, *args, "--regrade"], capture_output=True,
                             text=True, timeout=600)
    assert stopped.returncode == 130, stopped.stderr
    assert "Traceback" not in stopped.stderr
    assert stopped.stderr.strip().splitlines()[-1] == ("interrupted: 2 of 4 students finished; run the same "
                                                       "command again to grade the rest")

    recorded: list[str] = []
    record = Recorder.record
    monkeypatch.setattr(Recorder, "record", lambda self, sid, *a: recorded.append(sid) or record(self, sid, *a))
    assert main([*args, "--regrade"]) == 0
    assert len(recorded) == 2, recorded  # the two the interrupted pass had not regraded
    rows = course.report_csv.read_text(encoding="utf-8")
    assert all(f"{student},1.5,1,0.5,3" in rows for student in students), rows

    recorded.clear()
    assert main([*args, "--regrade"]) == 0  # the pass completed: a new --regrade regrades everyone
    assert sorted(recorded) == students
