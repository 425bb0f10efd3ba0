"""`coursekit formgrader`: nbgrader's formgrader on localhost, for grading the manual answers.

Starts JupyterLab (with nbgrader's server extensions) in the course folder, so nbgrader reads
autograder/nbgrader_config.py. Open http://127.0.0.1:PORT/formgrader with the printed token.
How to grade and how to record a veto: autograder/README.md.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

from coursekit.errors import CourseError
from coursekit.grading.course import DEFAULT_ROOT, Course, put_venv_on_path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--course", type=Path, default=DEFAULT_ROOT, help="nbgrader course folder")
    parser.add_argument("--port", type=int, default=8890, help="port on 127.0.0.1 (default 8890)")


def command(course: Course, port: int) -> list[str]:
    cmd = [sys.executable, "-m", "jupyter", "lab", "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={port}",
           "--ServerApp.port_retries=0", "--ServerApp.open_browser=False", f"--ServerApp.root_dir={course.root}"]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        cmd.append("--allow-root")  # containers often run as root
    return cmd


def run(args: argparse.Namespace) -> int:
    course = Course.at(args.course)
    if not (course.root / "gradebook.db").is_file():
        raise CourseError(f"{course.root / 'gradebook.db'}: no gradebook yet; run 'make release' "
                          "(and 'make grade SUBMISSIONS=...') first")
    put_venv_on_path()
    print(f"formgrader: open http://127.0.0.1:{args.port}/formgrader (add ?token=... from the log "
          "below); Ctrl-C stops it, then run 'make report'", flush=True)
    return subprocess.call(command(course, args.port), cwd=course.root)
