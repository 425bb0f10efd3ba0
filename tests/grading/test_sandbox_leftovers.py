"""What grading leaves in the temp folder: nothing, whatever becomes of its workers (issue 31's leftovers).

Every sandboxed kernel has a folder on the grader's side (its connection file, and its supervisor's
records beside it). A worker that is ended while a kernel runs (SIGTERM: the watchdog, close() with
notebooks in flight, Ctrl-C; SIGKILL: the kernel's OOM killer, a crash) never removes them: the last
session's test runs left about 250 such `ck-*` entries in /tmp. Each worker now keeps everything its
sandboxes put on disk in one root folder that the pool (which outlives it) removes whole; a run killed
before it could remove its roots has them removed by the next run.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import nbformat
import pytest
from submission_kinds import _code, _extra, k_correct
from traitlets.config import Config

from coursekit.grading.records import record
from coursekit.grading.sandbox import bubblewrap, pool

pytestmark = pytest.mark.slow


@pytest.fixture
def temp_folder(monkeypatch) -> Path:
    """A temp folder of this test's own (short: unix socket paths are limited), for this process and its workers."""
    folder = Path(tempfile.mkdtemp(prefix="t-"))
    monkeypatch.setenv("TMPDIR", str(folder))
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    return folder


def _sleeping_student(course) -> str:
    nb = k_correct(nbformat.read(course.release_notebook, as_version=4))
    _extra(nb, _code(nb), "import time\ntime.sleep(300)")
    return nbformat.writes(nb)


def _wait_for(condition, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGKILL])
def test_a_worker_ended_while_its_kernel_runs_leaves_nothing_in_the_temp_folder(released_course, temp_folder,
                                                                                 signum):
    recorder = record.Recorder(released_course, Config(released_course.config))
    workers = pool.LocalWorkers(1, recorder.worker_config())
    results: list = []
    try:
        loop = threading.Thread(target=lambda: results.extend(workers.map(iter([("a_sleeps", _sleeping_student(
            released_course))]))), daemon=True)
        loop.start()
        # its kernel runs the student's code: its folder is there (no kernel is started ahead for a
        # worker's last notebook; a spare's folder would be in the same root)
        _wait_for(lambda: len(list(temp_folder.glob("**/ck-*.observed"))) >= 1)
        time.sleep(1)
        root = next(temp_folder.glob(bubblewrap.ROOT_PREFIX + "*")).name
        os.kill(workers.workers[0][0].pid, signum)
        loop.join(120)
        assert not loop.is_alive()
    finally:
        workers.close()
        recorder.close()
    assert [(sid, executed) for sid, executed, _ in results] == [("a_sleeps", None)]
    assert sorted(p.name for p in temp_folder.iterdir()) == []
    if bubblewrap.memory_cgroup_usable():  # nor the memory cgroups of its sandboxes
        assert not (bubblewrap.MEMORY_CGROUP / bubblewrap.CGROUP_PARENT / root).exists()


def test_the_next_run_removes_the_roots_of_a_killed_run_and_no_other(temp_folder):
    """`coursekit grade` itself killed (kill -9, the OOM killer) leaves its workers' roots; the next run's
    pool removes them, but never the root of a run still going on (this process's)."""
    made = subprocess.run([sys.executable, "-c", "from coursekit.grading.sandbox.bubblewrap import SandboxRoot\n"
                           "import os, pathlib\nroot = SandboxRoot()\n"
                           "pathlib.Path(root.path, 'ck-1234abcd').mkdir()\nprint(root.path)\nos._exit(9)"],
                          capture_output=True, text=True, check=False)
    killed = Path(made.stdout.strip())
    assert made.returncode == 9 and (killed / "ck-1234abcd").is_dir(), made.stderr
    live = bubblewrap.SandboxRoot()
    try:
        workers = pool.LocalWorkers(1, Config())
        workers.close()
        assert not killed.exists()
        assert Path(live.path).is_dir()
    finally:
        live.remove()
    assert sorted(p.name for p in temp_folder.iterdir()) == []


def test_a_dask_worker_leaves_nothing_in_the_temp_folder_when_it_closes(released_course, temp_folder):
    """A Dask worker keeps a runner (and its kernel started ahead) between tasks, in a root of the
    runner's own (no pool outlives it): removed when the worker's process exits."""
    from distributed import LocalCluster

    recorder = record.Recorder(released_course, Config(released_course.config))
    notebook = nbformat.writes(k_correct(nbformat.read(released_course.release_notebook, as_version=4)))
    try:
        with LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
            workers = pool.DaskWorkers(cluster.scheduler_address, recorder.worker_config())
            results = list(workers.map(iter([("a_correct", notebook)])))
            kept = [p.name for p in temp_folder.glob("ck-*")]
            workers.close()
    finally:
        recorder.close()
    assert [(sid, failure) for sid, _, failure in results] == [("a_correct", None)]
    assert [name.startswith(bubblewrap.ROOT_PREFIX) for name in kept] == [True]  # the runner's, while it lives
    assert sorted(p.name for p in temp_folder.glob("ck-*")) == []  # (Dask keeps a scratch folder of its own)
