"""`coursekit lab`: JupyterLab on localhost with the student's own copy of the exercise notebook.

Generated files are never edited in place: the exercise notebook is copied once to work/ (gitignored)
and JupyterLab opens that copy; an existing copy is kept, so a student's work is never overwritten.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path

from coursekit.errors import CourseError

EXERCISE = Path("exercises/lesson11_grpo.ipynb")
WORK_DIR = Path("work")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--root", type=Path, default=Path.cwd(), help="project root (default: current folder)")
    parser.add_argument("--port", type=int, default=8888, help="port on 127.0.0.1 (default: 8888)")
    parser.add_argument("--no-browser", action="store_true", help="do not open a web browser")


def run(args: argparse.Namespace) -> int:
    root = args.root.resolve()
    notebook, created = prepare_workspace(root)
    rel = notebook.relative_to(root)
    print(f"{'created' if created else 'keeping your work in'} {rel}; check it with: make check NOTEBOOK={rel}")
    cmd = lab_command(root, notebook, args.port, open_browser=not args.no_browser)
    return subprocess.run(cmd, cwd=root, check=False).returncode


def prepare_workspace(root: Path, work_dir: Path = WORK_DIR) -> tuple[Path, bool]:
    """Copy the exercise notebook into work_dir unless a copy is already there; return (copy, created)."""
    source = root / EXERCISE
    if not source.is_file():
        raise CourseError(f"{EXERCISE}: missing; run `make branches` first")
    target = root / work_dir / EXERCISE.name
    if target.exists():
        return target, False
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source, target)
    return target, True


def lab_command(root: Path, notebook: Path, port: int, open_browser: bool, token: str | None = None) -> list[str]:
    """The JupyterLab command: bound to 127.0.0.1, serving the project root, opening `notebook`."""
    cmd = [
        sys.executable, "-m", "jupyterlab",
        "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={port}", "--ServerApp.port_retries=0",
        f"--ServerApp.root_dir={root}",
    ]
    if not open_browser:
        cmd.append("--no-browser")
    if os.geteuid() == 0:  # containers and CI run as root; JupyterLab refuses that unless told
        cmd.append("--ServerApp.allow_root=True")
    if token is not None:
        cmd.append(f"--IdentityProvider.token={token}")
    return [*cmd, notebook.relative_to(root).as_posix()]
