"""`coursekit` command line: one subcommand per job, each in its own module.

Every subcommand module defines `add_arguments(parser)` and `run(args) -> int`. A CourseError is one line
`error: ...` and exit 1 (run below the repository root, it says where the root is); Ctrl-C is one line
and exit 130.
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import importlib
import os
import sys
import threading
from pathlib import Path
from typing import NoReturn

from coursekit.course_file import COURSE_FILE
from coursekit.errors import CourseError

INTERRUPTED = 130  # exit status after Ctrl-C, as a shell reports it

# name -> (module, one-line help). Modules are imported only when their command runs.
COMMANDS: dict[str, tuple[str, str]] = {
    "branches": ("coursekit.branches", "write exercises/, solutions/ and the nbgrader source from the lesson"),
    "release": ("coursekit.grading.intake.release", "generate the student version with nbgrader"),
    "grade": ("coursekit.grading.grade", "autograde a folder or .zip of submissions and write the report"),
    "check": ("coursekit.grading.sandbox.check", "a student's self-check of one notebook (visible checks)"),
    "report": ("coursekit.grading.records.report", "recompute the CSV report after manual grading"),
    "formgrader": ("coursekit.grading.formgrader", "start nbgrader's formgrader on localhost"),
    "export": ("coursekit.grading.records.export",
               "write the grades for an LMS gradebook import (Canvas, Moodle, CSV)"),
    "site": ("coursekit.site", "render the site with Quarto, or the no-Quarto preview"),
    "lab": ("coursekit.lab", "start JupyterLab on localhost from the student bundle"),
    "bundle": ("coursekit.bundle", "write the student bundle (folder and zip) of one lesson"),
    "demo": ("coursekit.demo", "re-run the GRPO demo notebook into build/demo/ (--commit: replace the committed run)"),
    "hub": ("coursekit.hub.command", "a class on JupyterHub on localhost (start, stop; grade, feedback)"),
}


def main(argv: list[str] | None = None) -> int:
    given = argv if argv is not None else sys.argv[1:]
    # `coursekit grade` with the sandbox: its kernel zygote starts first, so that the kernel's libraries
    # load beside this process's (KernelZygote.launch_early); ended here if grading never took it
    early_zygote = given[:1] == ["grade"] and not any(a in ("-h", "--help", "--no-sandbox")
                                                      or a.startswith("--scheduler") for a in given)
    if early_zygote:
        from coursekit.grading.sandbox.bubblewrap import KernelZygote

        KernelZygote.launch_early()
    try:
        return run_command(given)
    finally:
        if early_zygote:
            KernelZygote.end_early()


def run_command(argv: list[str]) -> int:
    """Parse `argv` (importing only its command's module) and run the command."""
    parser = argparse.ArgumentParser(prog="coursekit", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    modules = {}
    for name, (module_name, help_text) in COMMANDS.items():
        cmd = sub.add_parser(name, help=help_text, description=help_text)
        if argv[:1] == [name]:
            modules[name] = importlib.import_module(module_name)
            modules[name].add_arguments(cmd)
    args = parser.parse_args(argv)
    try:
        return modules[args.command].run(args)
    except CourseError as exc:
        print(f"error: {exc}{root_hint(Path.cwd())}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:  # Ctrl-C in a command that has no line of its own (grade, formgrader, lab have)
        print(f"{args.command}: interrupted", file=sys.stderr)
        return INTERRUPTED


def root_hint(cwd: Path) -> str:
    """Where to run from, when run below the repository root (a folder under one with course.yml): the
    commands take course.yml, lessons/, autograder/ and build/ from the folder they run in."""
    if (cwd / COURSE_FILE).is_file():
        return ""
    root = next((folder for folder in cwd.parents if (folder / COURSE_FILE).is_file()), None)
    return "" if root is None else f" (run make or coursekit from the repository root: cd {root})"


def end(code: int) -> NoReturn:
    """Exit with `code` as the interpreter would, less its teardown of every module and object, which
    nothing needs once a command has finished: about 0.4 CPU-s on one core after `coursekit grade`
    (nbgrader, nbconvert, SQLAlchemy, matplotlib loaded), at the end of the instructor's wait. The
    atexit handlers run (logging's, temporary folders', those of the libraries), then stdout and
    stderr (and the originals, when they were replaced) are flushed. While a thread that is not a
    daemon still runs, the interpreter's own exit, which waits for it, is used instead."""
    if any(t.is_alive() and not t.daemon for t in threading.enumerate() if t is not threading.main_thread()):
        sys.exit(code)
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):  # and the originals, if replaced
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code)
