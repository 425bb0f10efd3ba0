"""`coursekit lab`: JupyterLab from the student bundle, never from this repository.

The lesson's bundle (`coursekit.bundle`) is written to a folder outside the repository (`student_home`:
`$XDG_DATA_HOME/coursekit-student/`, else `~/.local/share/coursekit-student/`), so nothing JupyterLab
or its kernels start in sees `solutions/` or `autograder/source/` on the way up; then the bundle's own
`lab.py` runs there, as a student's unpacked bundle runs it: the student's copy `work/<slug>.ipynb`
(copied once, never overwritten; a copy that an older `make lab` left in the repository's `work/`
is carried over once), a free port unless --port is given, no browser without a display, no
terminals, the interface in Chinese and no news pop-up. Ctrl-C, SIGTERM or SIGHUP stops `lab.py`, which
stops its JupyterLab and its kernels (`coursekit.childproc`) and says so in one line; exit 130 after Ctrl-C.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from collections.abc import Mapping
from pathlib import Path

from coursekit import bundle
from coursekit.childproc import exit_status, run_until_stopped
from coursekit.errors import CourseError

OLD_WORK_DIR = Path("work")  # where `make lab` kept the student's copy before the bundle
STOP_GRACE = 60.0  # seconds lab.py gets to stop its JupyterLab (which gets 30) before it is killed


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--root", type=Path, default=Path.cwd(), help="project root (default: current folder)")
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (default: a free one)")
    parser.add_argument("--no-browser", action="store_true", help="do not open a web browser (the default without "
                                                                  "a display)")
    parser.add_argument("--lesson", default=None, help="lesson id of course.yml (default: the first lesson)")
    parser.add_argument("--home", type=Path, default=None, help="where the bundle goes, outside the repository "
                        "(default: $XDG_DATA_HOME/coursekit-student, else ~/.local/share/coursekit-student)")


def student_home(env: Mapping[str, str]) -> Path:
    """The folder outside the repository that holds the bundles `make lab` runs."""
    data = env.get("XDG_DATA_HOME") or str(Path(env.get("HOME", str(Path.home()))) / ".local" / "share")
    return Path(data) / "coursekit-student"


def run(args: argparse.Namespace) -> int:
    root = args.root.resolve()
    home = (args.home or student_home(os.environ)).resolve()
    if home == root or root in home.parents:
        raise CourseError(f"{home}: inside the course repository {root}; JupyterLab must not see solutions/ "
                          "or autograder/; pick a folder outside it with --home")
    entry = bundle.lesson_entry(root, args.lesson)
    folder = bundle.write_folder(root, entry, home)
    carry_over_old_copy(root / OLD_WORK_DIR / f"{entry.slug}.ipynb", folder / "work" / f"{entry.slug}.ipynb")
    cmd = [sys.executable, str(folder / "lab.py"), *(["--port", str(args.port)] if args.port else []),
           *(["--no-browser"] if args.no_browser else [])]
    code, stopped_by = run_until_stopped(cmd, cwd=folder, grace=STOP_GRACE)
    return code if stopped_by is None else exit_status(stopped_by)  # lab.py printed the line


def carry_over_old_copy(old: Path, new: Path) -> None:
    """Copy the repository's old work copy into the bundle once, if the bundle has none yet."""
    if old.is_file() and not new.exists():
        new.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(old, new)
        print(f"your work in {old} is now in {new}")
