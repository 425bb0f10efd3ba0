"""Every server the kit starts for a person ends with its command (issue 34, issue 30 item 7): Ctrl-C,
SIGTERM or SIGHUP to `lab.py`, `coursekit lab` or the shared helper (`coursekit.childproc`) stops the
child server and its process group, checked by pid and by port; Ctrl-C is one line and exit 130."""

from __future__ import annotations

import os
import re
import secrets
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import psutil
import pytest
from site_support import ROOT, ensure_release, wait_for_server

from coursekit import bundle

# A server that ignores SIGTERM, with a helper process in its process group: the helper must escalate to
# SIGKILL after its grace period and take the whole group with it.
STUBBORN = """import signal, subprocess, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
helper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
print(helper.pid, flush=True)
time.sleep(600)
"""
DRIVER = """import sys
from coursekit.childproc import run_until_stopped
code, stopped_by = run_until_stopped([sys.executable, "-c", sys.argv[1]], grace=1)
print("stopped", code, stopped_by, flush=True)
"""


def wait_for(pattern: str, log: Path, proc: subprocess.Popen, timeout_s: float = 120) -> re.Match:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if found := re.search(pattern, log.read_text(encoding="utf-8", errors="replace")):
            return found
        assert proc.poll() is None, log.read_text(encoding="utf-8", errors="replace")[-3000:]
        time.sleep(0.3)
    raise AssertionError(f"no {pattern!r} within {timeout_s}s:\n{log.read_text(errors='replace')[-3000:]}")


def descendants(pid: int) -> list[int]:
    return [p.pid for p in psutil.Process(pid).children(recursive=True)]


def command_line(pid: int) -> str:
    """The process's command line; "" once it has exited (a short-lived helper, such as `npm prefix`)."""
    try:
        return " ".join(psutil.Process(pid).cmdline())
    except psutil.Error:
        return ""


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_the_helper_stops_the_childs_whole_group_even_when_it_ignores_sigterm(signum, tmp_path, processes_gone):
    log = tmp_path / "driver.log"
    with log.open("w") as out:
        driver = subprocess.Popen([sys.executable, "-c", DRIVER, STUBBORN], stdout=out, stderr=subprocess.STDOUT,
                                  start_new_session=True)
    helper = int(wait_for(r"(?m)^(\d+)$", log, driver, 30)[1])
    server = psutil.Process(helper).ppid()
    driver.send_signal(signum)
    assert driver.wait(timeout=30) == 0
    assert f"stopped -9 {int(signum)}" in log.read_text()
    processes_gone([server, helper])


def lab_bundle(folder: Path) -> Path:
    ensure_release(ROOT)
    return bundle.write_folder(ROOT, bundle.lesson_entry(ROOT, "lesson11"), folder)


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_lab_py_stops_its_jupyterlab_and_kernels(signum, tmp_path, processes_gone):
    """SIGTERM (a test's proc.terminate(), `kill`) and SIGHUP (a closed terminal) to the bundle's lab.py."""
    folder = lab_bundle(tmp_path / "home")
    token = secrets.token_hex(16)
    env = dict(os.environ, HOME=str(tmp_path), JUPYTER_RUNTIME_DIR=str(tmp_path / "runtime"))
    log = tmp_path / "lab.log"
    with log.open("w") as out:
        proc = subprocess.Popen([sys.executable, "lab.py", "--no-browser", "--token", token], cwd=folder, env=env,
                                stdout=out, stderr=subprocess.STDOUT)
    port = int(wait_for(r"http://127\.0\.0\.1:(\d+)/lab", log, proc)[1])
    wait_for_server(f"http://127.0.0.1:{port}/api/status?token={token}", proc)
    request = urllib.request.Request(f"http://127.0.0.1:{port}/api/kernels?token={token}", data=b"{}",
                                     method="POST")
    with urllib.request.urlopen(request, timeout=60) as reply:
        assert reply.status == 201
    time.sleep(1)
    started = descendants(proc.pid)
    assert any("ipykernel" in command_line(p) for p in started), started
    proc.send_signal(signum)
    assert proc.wait(timeout=90) == 128 + signum
    assert log.read_text(encoding="utf-8").strip().splitlines()[-1].startswith("JupyterLab 已停止")
    processes_gone(started, port)


@pytest.mark.slow
def test_make_lab_ctrl_c_is_one_line_exit_130_and_stops_jupyterlab(tmp_path, processes_gone):
    """Ctrl-C in the terminal of `make lab`: SIGINT to the whole foreground process group."""
    ensure_release(ROOT)
    env = dict(os.environ, HOME=str(tmp_path), JUPYTER_RUNTIME_DIR=str(tmp_path / "runtime"))
    out, err = tmp_path / "out.log", tmp_path / "err.log"
    with out.open("w") as o, err.open("w") as e:
        proc = subprocess.Popen([sys.executable, "-m", "coursekit", "lab", "--root", str(ROOT), "--home",
                                 str(tmp_path / "home"), "--no-browser"], cwd=ROOT, env=env, stdout=o, stderr=e,
                                start_new_session=True)  # its own process group, as a terminal's job
    port = int(wait_for(r"http://127\.0\.0\.1:(\d+)/lab", err, proc)[1])
    started = descendants(proc.pid)
    assert any("jupyterlab" in command_line(p) for p in started), started
    os.killpg(proc.pid, signal.SIGINT)
    assert proc.wait(timeout=90) == 130
    stderr = err.read_text(encoding="utf-8")
    assert "Traceback" not in stderr and "KeyboardInterrupt" not in stderr, stderr[-3000:]
    assert stderr.strip().splitlines()[-1].startswith("JupyterLab 已停止"), stderr[-3000:]
    processes_gone(started, port)
