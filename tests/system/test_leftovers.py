"""The suite's own leftover check (tests/conftest.py, issue 34): a session whose test leaves a process
running, even an orphan re-parented away from pytest, fails naming it and the test, and the process is
killed; a session that stops what it starts passes. Both as one pytest process and as `make test` runs
it, in pytest-xdist workers (each worker checks its own processes, the controller reports them)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

TESTS = Path(__file__).resolve().parents[1]
LEAKY = '''import subprocess, sys, time

def test_stops_what_it_starts():
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    proc.terminate()
    proc.wait()

def test_leaves_an_orphan_behind():
    # a shell starts a server in the background and exits: its parent is gone, it keeps running
    subprocess.run(["sh", "-c", "sleep 600 &"], check=True)
'''


WORKERS = {"one process": [], "xdist workers": ["-n", "2", "--dist", "loadgroup"]}  # make test: -n 3 --dist loadgroup


def run_session(folder: Path, source: str, workers: list[str] = ()) -> subprocess.CompletedProcess:
    (folder / "test_session.py").write_text(source, encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(TESTS), "COURSEKIT_LEFTOVER_GRACE_S": "2"}
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "conftest", "-p", "no:cacheprovider",
                           *workers, "--rootdir", str(folder), str(folder / "test_session.py")], cwd=folder,
                          env=env, capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("workers", WORKERS.values(), ids=WORKERS)
def test_a_session_that_leaves_a_process_running_fails_naming_it_and_kills_it(tmp_path, workers) -> None:
    done = run_session(tmp_path, LEAKY, workers)
    assert done.returncode == 1, done.stdout[-3000:]
    assert "2 passed" in done.stdout
    found = re.search(r"pid (\d+) \(started by .*test_session\.py::test_leaves_an_orphan_behind\): sleep 600",
                      done.stdout)
    assert found, done.stdout[-3000:]
    assert "1 process(es) the tests started still running" in done.stdout
    deadline = time.monotonic() + 10
    while psutil.pid_exists(int(found[1])) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not psutil.pid_exists(int(found[1])) or psutil.Process(int(found[1])).status() == psutil.STATUS_ZOMBIE


@pytest.mark.parametrize("workers", WORKERS.values(), ids=WORKERS)
def test_a_session_that_stops_what_it_starts_passes(tmp_path, workers) -> None:
    done = run_session(tmp_path, LEAKY.split("def test_leaves")[0], workers)
    assert done.returncode == 0, done.stdout[-3000:]
    assert "still running" not in done.stdout
