"""The suite's own leftover checks (tests/conftest.py, issue 34): a session whose test leaves a process
running, even an orphan re-parented away from pytest, fails naming it and the test, and the process is
killed; a session that stops what it starts passes, both as one pytest process and in pytest-xdist
workers (each worker checks its own processes, the controller reports them). A session that leaves a
grading sandbox's folder (`ck-*`) in its temp folder fails naming it; what another run leaves in its
own temp folder meanwhile is not counted."""

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


TEMP_LEAKS = '''import os, tempfile
from pathlib import Path

def test_runs_with_a_temp_folder_of_its_own():
    assert tempfile.gettempdir() == os.environ["TMPDIR"] != os.environ["OUTER_TEMP"]

def test_another_run_leaves_a_folder_in_its_own_temp_folder():
    Path(tempfile.mkdtemp(prefix="ck-", dir=os.environ["OUTER_TEMP"]), "kernel.json").touch()

def test_leaves_a_kernels_folder():
    folder = tempfile.mkdtemp(prefix="ck-")
    Path(folder, "kernel.json").touch()
    Path(folder + ".observed").touch()

def test_cleans_up_its_own():
    os.rmdir(tempfile.mkdtemp(prefix="ck-grade-"))
'''


def test_a_session_that_leaves_a_sandbox_folder_in_the_temp_folder_fails_naming_it(tmp_path, monkeypatch) -> None:
    outer = tmp_path / "outer"
    outer.mkdir()
    monkeypatch.setenv("OUTER_TEMP", str(outer))
    done = run_session(tmp_path, TEMP_LEAKS)
    assert done.returncode == 1, done.stdout[-3000:]
    assert "4 passed" in done.stdout, done.stdout[-3000:]
    assert "2 grading sandbox folder(s) the tests left in the temp folder (now removed)" in done.stdout
    assert re.search(r"^ck-\w+/ kernel\.json$", done.stdout, re.M), done.stdout[-3000:]
    assert re.search(r"^ck-\w+\.observed$", done.stdout, re.M), done.stdout[-3000:]
    assert len(list(outer.glob("ck-*"))) == 1  # another run's: neither counted nor removed


def test_a_session_that_removes_its_sandbox_folders_passes(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("OUTER_TEMP", str(tmp_path))
    done = run_session(tmp_path, TEMP_LEAKS.split("def test_another")[0] + "def test_cleans" +
                       TEMP_LEAKS.split("def test_cleans")[1])
    assert done.returncode == 0, done.stdout[-3000:]
    assert "grading sandbox folder" not in done.stdout
