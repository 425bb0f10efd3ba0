"""What the site tests import (a module of its own: `conftest` is a name every test folder has, and which
one `from conftest import` finds depends on the order pytest collected the folders in)."""

from __future__ import annotations

import subprocess
import time
import urllib.request
from pathlib import Path

from coursekit import preview

ROOT = Path(__file__).resolve().parents[2]


def ensure_release(root: Path) -> None:
    """The runner's config reads the nbgrader release notebook; make it as `make site` would."""
    from filelock import FileLock

    from coursekit.cli import main
    from coursekit.course_file import load_course

    lessons = load_course(root / "course.yml").lessons
    (root / "build").mkdir(exist_ok=True)
    with FileLock(root / "build" / ".release.lock"):  # one writer when several pytest workers (xdist) need it
        if (root / preview.RUNNER_JS).is_file() and not all((root / e.release_notebook).is_file() for e in lessons):
            assert main(["release"]) == 0, "coursekit release failed; the preview's runner config needs it"


def wait_for_server(url: str, proc: subprocess.Popen, timeout_s: float = 90) -> None:
    """Until JupyterLab answers `url` with 200. Its printed URL is no sign that it listens: jupyter_server 2.x
    (`ServerApp.init_httpserver`) only checks the port is free, prints the URL in `start_app`, and binds the
    port in a callback its IO loop runs after that."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"jupyter lab exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            time.sleep(0.5)
    raise AssertionError(f"jupyter lab did not answer {url} within {timeout_s}s")
