"""Ctrl-C while `make grade` releases the lesson on its own (issue 27, item 7): one line, exit 130, no
traceback, and the same command then releases and grades."""

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
