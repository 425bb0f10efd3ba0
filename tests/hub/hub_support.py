"""What the hub tests import (a module of its own: `conftest` is a name every test folder has, and which
one `from conftest import` finds depends on the order pytest collected the folders in)."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from coursekit.hub.client import UserSession, wait_for_hub
from coursekit.hub.settings import HubLayout

ROOT = Path(__file__).resolve().parents[2]
PASSWORDS = {"teacher": "teach-pw-1", "alice": "alice-pw-2", "bob": "bob-pw-3"}
COURSE_HUB = """
hub:
  instructor: teacher
  students: [alice, bob]
  course_id: grpo-course  # not the lesson's id (issue 33)
  resources:
    student: {cpu: 1, memory: 768M}
    instructor: {cpu: 2, memory: 3G}
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class ClassHub:
    base: str
    layout: HubLayout
    process: subprocess.Popen

    def login(self, user: str) -> UserSession:
        return UserSession.login(self.base, user, PASSWORDS[user])


def start_hub(folder: Path, roster: str = COURSE_HUB) -> ClassHub:
    """`coursekit hub start` on a free port, with its state in folder/hub; returns once the hub answers."""
    course_file = folder / "course.yml"
    course_file.write_text((ROOT / "course.yml").read_text(encoding="utf-8").split("\nhub:")[0] + roster,
                           encoding="utf-8")
    layout = HubLayout(folder / "hub")
    layout.state.mkdir(parents=True)
    layout.passwords_csv.write_text("user,password\n" + "".join(f"{u},{p}\n" for u, p in PASSWORDS.items()))
    port = free_port()
    log = open(folder / "launcher.log", "wb")  # noqa: SIM115 - kept for the hub's life
    process = subprocess.Popen([sys.executable, "-m", "coursekit", "hub", "start", "--state", str(layout.state),
                                "--course-file", str(course_file), "--port", str(port)],
                               cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_for_hub(base, timeout=180)
    except TimeoutError:
        process.kill()
        raise AssertionError((folder / "launcher.log").read_text() + _tail(layout)) from None
    return ClassHub(base, layout, process)


def _tail(layout: HubLayout) -> str:
    log = layout.runtime / "jupyterhub.log"
    return log.read_text(errors="replace")[-4000:] if log.exists() else ""


def stop_hub(hub: ClassHub) -> int:
    """Ctrl-C: SIGINT to the launcher, as a terminal sends it; its exit status."""
    if hub.process.poll() is None:
        hub.process.send_signal(signal.SIGINT)
    return hub.process.wait(timeout=180)
