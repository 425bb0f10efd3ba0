"""`coursekit lab`: JupyterLab on localhost with the student's own copy of the exercise notebook.

Generated files are never edited in place: the exercise notebook is copied once to work/ (gitignored)
and JupyterLab opens that copy; an existing copy is kept, so a student's work is never overwritten.
JupyterLab serves only work/ (the file browser shows no solutions/ or autograder/), opens the notebook
itself (the URL it prints is `/lab/tree/lesson11_grpo.ipynb?token=...`, not the Launcher), and runs
without nbgrader's instructor extensions (formgrader, Create Assignment, course and assignment lists),
switched off by the config in build/lab-config/ that `lab_environment` writes.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

from coursekit.course_file import COURSE_FILE, load_course, resolve_lesson
from coursekit.errors import CourseError

WORK_DIR = Path("work")
LAB_CONFIG = Path("build/lab-config")  # JUPYTER_CONFIG_PATH for `make lab` (outside the served folder)
NBGRADER_SERVER_EXTENSIONS = ("nbgrader.server_extensions.formgrader", "nbgrader.server_extensions.assignment_list",
                              "nbgrader.server_extensions.course_list",
                              "nbgrader.server_extensions.validate_assignment")
NBGRADER_LAB_EXTENSION = "@jupyter/nbgrader"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--root", type=Path, default=Path.cwd(), help="project root (default: current folder)")
    parser.add_argument("--port", type=int, default=8888, help="port on 127.0.0.1 (default: 8888)")
    parser.add_argument("--no-browser", action="store_true", help="do not open a web browser")
    parser.add_argument("--lesson", default=None, help="lesson id of course.yml (default: the first lesson)")


def exercise_notebook(root: Path, lesson: str | None = None) -> Path:
    """The exercise notebook (relative to `root`) of `lesson`, else of the course file's first lesson."""
    course = load_course(root / COURSE_FILE if (root / COURSE_FILE).is_file() else None)
    return (resolve_lesson(lesson, course) if lesson else course.first).branch_notebook("exercise")


def run(args: argparse.Namespace) -> int:
    root = args.root.resolve()
    notebook, created = prepare_workspace(root, exercise_notebook(root, args.lesson))
    rel = notebook.relative_to(root)
    print(f"{'created' if created else 'keeping your work in'} {rel}; check it with: make check NOTEBOOK={rel}")
    cmd = lab_command(notebook, args.port, open_browser=not args.no_browser)
    return subprocess.run(cmd, cwd=root, env=lab_environment(root, os.environ), check=False).returncode


def prepare_workspace(root: Path, exercise: Path, work_dir: Path = WORK_DIR) -> tuple[Path, bool]:
    """Copy the exercise notebook (`exercise`, relative to `root`) into work_dir unless a copy is already
    there; return (copy, created)."""
    source = root / exercise
    if not source.is_file():
        raise CourseError(f"{exercise}: missing; run `make branches` first")
    target = root / work_dir / exercise.name
    if target.exists():
        return target, False
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source, target)
    return target, True


def lab_environment(root: Path, env: Mapping[str, str]) -> dict[str, str]:
    """`env` plus JUPYTER_CONFIG_PATH pointing at a config (written here) without nbgrader's instructor tools."""
    config = root / LAB_CONFIG
    (config / "labconfig").mkdir(parents=True, exist_ok=True)
    server = {"ServerApp": {"jpserver_extensions": dict.fromkeys(NBGRADER_SERVER_EXTENSIONS, False)}}
    (config / "jupyter_server_config.json").write_text(json.dumps(server, indent=1) + "\n", encoding="utf-8")
    page = {"disabledExtensions": {NBGRADER_LAB_EXTENSION: True}}
    (config / "labconfig" / "page_config.json").write_text(json.dumps(page, indent=1) + "\n", encoding="utf-8")
    paths = [str(config), *filter(None, env.get("JUPYTER_CONFIG_PATH", "").split(os.pathsep))]
    return {**env, "JUPYTER_CONFIG_PATH": os.pathsep.join(paths)}


def lab_command(notebook: Path, port: int, open_browser: bool, token: str | None = None) -> list[str]:
    """The JupyterLab command: bound to 127.0.0.1, serving only `notebook`'s folder, opening `notebook`."""
    cmd = [
        sys.executable, "-m", "jupyterlab",
        "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={port}", "--ServerApp.port_retries=0",
        f"--ServerApp.root_dir={notebook.parent}", f"--LabApp.default_url=/lab/tree/{notebook.name}",
    ]
    if not open_browser:
        cmd.append("--no-browser")
    if os.geteuid() == 0:  # containers and CI run as root; JupyterLab refuses that unless told
        cmd.append("--ServerApp.allow_root=True")
    if token is not None:
        cmd.append(f"--IdentityProvider.token={token}")
    return cmd
