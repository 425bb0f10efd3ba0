"""Ctrl-C on `make hub` (SIGINT to `coursekit hub start`), a closed terminal (SIGHUP) and `make hub-stop`
leave nothing running: not the hub, the proxy, a student's sandboxed server, its kernel, nor the cgroups."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hub_support import ROOT, start_hub, stop_hub

from coursekit.hub.limits import CGROUP_V1, group_pids


def running(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def class_processes(hub) -> set[int]:  # noqa: ANN001
    """The launcher, JupyterHub, the proxy and every process in the servers' cgroups, with alice's server
    and a kernel of hers running."""
    alice = hub.login("alice")
    alice.start_server()
    assert alice.server("POST", "api/kernels", json={"name": "python3"}).status_code == 201
    time.sleep(2)
    runtime = hub.layout.runtime
    pids = {hub.process.pid, int((runtime / "jupyterhub.pid").read_text()), int((runtime / "proxy.pid").read_text())}
    in_groups = group_pids(hub.layout.cgroup_parent)
    assert len(in_groups) >= 3, in_groups  # bwrap, the server, its kernel
    return pids | in_groups


def assert_all_gone(hub, pids: set[int]) -> None:  # noqa: ANN001
    deadline = time.monotonic() + 30
    while any(running(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert [p for p in pids if running(p)] == []
    assert not any((CGROUP_V1 / c / hub.layout.cgroup_parent).exists() for c in ("memory", "cpu"))
    assert not hub.layout.pid_file.exists()


@pytest.mark.timeout(600)
def test_ctrl_c_leaves_nothing_running(tmp_path: Path) -> None:
    hub = start_hub(tmp_path)
    pids = class_processes(hub)
    assert stop_hub(hub) == 130
    assert_all_gone(hub, pids)
    log = (tmp_path / "launcher.log").read_text(encoding="utf-8", errors="replace")
    assert "Traceback" not in log and log.strip().splitlines()[-1].startswith("hub: stopped"), log[-2000:]


@pytest.mark.timeout(600)
def test_a_closed_terminal_leaves_nothing_running(tmp_path: Path) -> None:
    """SIGHUP (the terminal `make hub` ran in was closed) ends the class as Ctrl-C does."""
    hub = start_hub(tmp_path)
    pids = class_processes(hub)
    hub.process.send_signal(signal.SIGHUP)
    assert hub.process.wait(timeout=180) == 128 + signal.SIGHUP
    assert_all_gone(hub, pids)


@pytest.mark.timeout(600)
def test_hub_stop_ends_a_background_hub(tmp_path: Path) -> None:
    hub = start_hub(tmp_path)
    pids = class_processes(hub)
    stopped = subprocess.run([sys.executable, "-m", "coursekit", "hub", "stop", "--state", str(hub.layout.state)],
                             cwd=ROOT, capture_output=True, text=True, timeout=300, env=os.environ)
    assert stopped.returncode == 0, stopped.stderr
    hub.process.wait(timeout=60)
    assert_all_gone(hub, pids)
