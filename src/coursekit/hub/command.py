"""`coursekit hub start|stop|grade|feedback`: the class on JupyterHub, and the instructor's two steps.

start     prepare build/hub/ from course.yml's `hub:` section and run JupyterHub on 127.0.0.1 until
          Ctrl-C, SIGTERM, SIGHUP (a closed terminal) or `coursekit hub stop`; on the way out every
          server, the proxy and every process in the servers' cgroups are ended (one line; exit 130
          after Ctrl-C).
stop      stop a hub started in the background.
grade     (instructor, after collecting in formgrader) the kit's sandboxed grading of the collected
          submissions: `coursekit grade` on a copy of submitted/ (collected/), so nbgrader's copies
          keep their timestamp and submission secret, which feedback release needs.
feedback  (instructor, after manual grading in formgrader) recompute grades and feedback pages
          (`coursekit report`), then release each student's page to that student's feedback folder.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from coursekit.childproc import StopSignals, exit_status
from coursekit.errors import CourseError
from coursekit.hub.limits import end_group
from coursekit.hub.settings import HubLayout, HubSettings, ensure_accounts, load_hub_settings
from coursekit.hub.spawner import UID_BASE, VALIDATE_MODULE

ROOT = Path(__file__).resolve().parents[3]
DEFAULT_STATE = Path("build/hub")
LOCALE_SETTINGS = Path(".jupyter/lab/user-settings/@jupyterlab/translation-extension/plugin.jupyterlab-settings")
# a student opens the feedback page (lesson11.html) in JupyterLab's HTML viewer: trusted, its own scripts (the
# inlined MathJax, coursekit.grading.pages) run, in the viewer's sandboxed frame (scripts, no same origin)
HTML_VIEWER_SETTINGS = Path(".jupyter/lab/user-settings/@jupyterlab/htmlviewer-extension/plugin.jupyterlab-settings")
# Validate: nbgrader's handler with the failed checks' reasons first (coursekit.hub.validate), in place of nbgrader's
STUDENT_SERVER_EXTENSIONS = {"nbgrader.server_extensions.formgrader": False,
                             "nbgrader.server_extensions.course_list": False,
                             "nbgrader.server_extensions.assignment_list": True,
                             "nbgrader.server_extensions.validate_assignment": False,
                             VALIDATE_MODULE: True}
STUDENT_LAB_DISABLED = ("@jupyter/nbgrader:formgrader", "@jupyter/nbgrader:create-assignment",
                        "@jupyter/nbgrader:course-list")
INSTRUCTOR_SERVER_EXTENSIONS = {"nbgrader.server_extensions.formgrader": True,
                                "nbgrader.server_extensions.course_list": True,
                                "nbgrader.server_extensions.assignment_list": False,
                                "nbgrader.server_extensions.validate_assignment": False,
                                "coursekit.hub.validate": True}
INSTRUCTOR_LAB_DISABLED = ("@jupyter/nbgrader:assignment-list",)
STOP_WAIT = 60  # seconds for JupyterHub to stop its servers and proxy


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("action", choices=("start", "stop", "grade", "feedback"))
    parser.add_argument("--state", type=Path, default=DEFAULT_STATE,
                        help=f"the hub's folder; a relative one is in the kit's folder (default {DEFAULT_STATE})")
    parser.add_argument("--course-file", type=Path, default=ROOT / "course.yml", help="course.yml with a hub: section")
    parser.add_argument("--port", type=int, default=None, help="port on 127.0.0.1 (default: course.yml hub: port)")


def run(args: argparse.Namespace) -> int:
    # the kit's folder, not the terminal's: `hub grade` and `hub feedback` run in the instructor's server,
    # whose terminals start in the course folder (build/hub/course)
    layout = HubLayout((ROOT / args.state).resolve())
    if args.action == "start":
        return start(layout, load_hub_settings(args.course_file), args.port)
    if args.action == "stop":
        return stop(layout)
    if args.action == "grade":
        return grade(layout)
    return release_feedback(layout)


# ---------------------------------------------------------------- start / stop

def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _write(path: Path, text: str, mode: int = 0o644) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    os.chmod(path, mode)


def _own(path: Path, uid: int | None) -> None:
    if uid is not None and os.geteuid() == 0:
        os.chown(path, uid, uid)


def prepare(layout: HubLayout, settings: HubSettings, port: int) -> dict:
    """Write the hub's folder (idempotent; class state is kept) and return hub.json's content."""
    root = layout.state
    if layout.pid_file.exists() and _alive(int(layout.pid_file.read_text().split()[0])):
        raise CourseError(f"{layout.pid_file}: a hub is already running from this folder; `make hub-stop` first")
    for folder in (root, layout.runtime, layout.course / "source"):
        folder.mkdir(parents=True, exist_ok=True)
    if layout.hub_json.is_file() and layout.course_id != settings.course_id:
        raise CourseError(f"{layout.hub_json}: this class is course {layout.course_id!r}, course.yml now says "
                          f"{settings.course_id!r}; use another --state for a new course")
    _write(layout.hub_json, json.dumps({"course_id": settings.course_id}) + "\n")  # the full file is written below
    shutil.copytree(ROOT / "autograder" / "source", layout.course / "source", dirs_exist_ok=True)
    kit_config = ROOT / "autograder" / "nbgrader_config.py"
    _write(layout.course / "nbgrader_config.py", f'''"""The hub's course: the kit's nbgrader config
({kit_config}) with this folder as the course root and the hub's exchange (one inbound and one
feedback folder per student). Written by `coursekit hub start`; edit autograder/nbgrader_config.py instead."""

KIT_CONFIG = {str(kit_config)!r}
with open(KIT_CONFIG, encoding="utf-8") as kit:
    exec(compile(kit.read(), KIT_CONFIG, "exec"))  # noqa: S102 - the kit's own config, with this __file__
c.CourseDirectory.course_id = {settings.course_id!r}  # noqa: F821 - course.yml's hub: course_id
c.Exchange.root = {str(layout.exchange)!r}  # noqa: F821
c.ExchangeFactory.collect = "coursekit.hub.exchange.CollectPerStudent"  # noqa: F821
c.ExchangeFactory.release_feedback = "coursekit.hub.exchange.ReleaseFeedbackPerStudent"  # noqa: F821
c.ExchangeCollect.check_owner = False  # noqa: F821 - students have no Unix accounts; the folder names the student
''')
    uids = {name: UID_BASE + k for k, name in enumerate(settings.students, 1)}
    exchange = layout.exchange_course()
    for folder in ("outbound", "inbound", "feedback"):
        (exchange / folder).mkdir(parents=True, exist_ok=True)
        os.chmod(exchange / folder, 0o755)
    os.chmod(layout.exchange, 0o755)
    os.chmod(exchange, 0o755)
    for name in settings.users:
        home = layout.home(name)
        home.mkdir(parents=True, exist_ok=True)
        locale = home / LOCALE_SETTINGS
        if not locale.exists():
            _write(locale, json.dumps({"locale": "zh_CN"}) + "\n")
        viewer = home / HTML_VIEWER_SETTINGS
        if name in settings.students and not viewer.exists():
            _write(viewer, json.dumps({"trustByDefault": True}) + "\n")
        uid = uids.get(name)
        for path in [home, *(p for p in home.rglob("*"))] if uid else []:
            _own(path, uid)
    for name, uid in uids.items():
        (exchange / "inbound" / name).mkdir(exist_ok=True)
        os.chmod(exchange / "inbound" / name, 0o700)
        _own(exchange / "inbound" / name, uid)
        (exchange / "feedback" / name).mkdir(exist_ok=True)
        _write(layout.passwd(name), f"root:x:0:0:root:/root:/bin/bash\n{name}:x:{uid}:{uid}::/home/{name}:/bin/bash\n")
    _write_role_config(layout.config("student"), STUDENT_SERVER_EXTENSIONS, STUDENT_LAB_DISABLED,
                       f'''"""nbgrader in a student's server on the hub (written by `coursekit hub start`)."""
import os

c = get_config()  # noqa: F821
c.CourseDirectory.course_id = {layout.course_id!r}
c.CourseDirectory.student_id = os.environ["JUPYTERHUB_USER"]
c.Exchange.root = "/srv/nbgrader/exchange"
''')
    _write_role_config(layout.config("instructor"), INSTRUCTOR_SERVER_EXTENSIONS, INSTRUCTOR_LAB_DISABLED, None)
    ensure_accounts(settings.users, layout.passwords_csv, layout.accounts_json)
    hub = {"port": port, "hub_port": free_port(), "proxy_api_port": free_port(), "instructor": settings.instructor,
           "course_id": settings.course_id,
           "students": list(settings.students), "uids": uids,
           "student": vars(settings.student), "instructor_resources": vars(settings.instructor_resources)}
    _write(layout.hub_json, json.dumps(hub, indent=1) + "\n")
    _write(layout.runtime / "jupyterhub_config.py",
           f"from coursekit.hub.config import configure\n\nconfigure(c, {str(layout.state)!r})  # noqa: F821\n")
    return hub


def _write_role_config(folder: Path, server: dict, lab_disabled: tuple[str, ...], nbgrader: str | None) -> None:
    # a terminal's bash is not a login shell, so /etc/profile does not take the venv off PATH
    app = {"jpserver_extensions": server, "terminado_settings": {"shell_command": ["/bin/bash"]}}
    _write(folder / "jupyter_server_config.json", json.dumps({"ServerApp": app}, indent=1) + "\n")
    _write(folder / "labconfig" / "page_config.json",
           json.dumps({"disabledExtensions": dict.fromkeys(lab_disabled, True)}, indent=1) + "\n")
    if nbgrader:
        _write(folder / "nbgrader_config.py", nbgrader)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie has exited
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def start(layout: HubLayout, settings: HubSettings, port: int | None) -> int:
    hub = prepare(layout, settings, port or settings.port)
    url = f"http://127.0.0.1:{hub['port']}/"
    log = open(layout.runtime / "jupyterhub.log", "ab")  # noqa: SIM115 - open while the hub runs
    with StopSignals() as stops:  # Ctrl-C, SIGTERM (`coursekit hub stop`) and SIGHUP end the wait below
        process = subprocess.Popen([os.path.join(os.path.dirname(sys.executable), "jupyterhub"), "-f",
                                    str(layout.runtime / "jupyterhub_config.py")], cwd=layout.runtime,
                                   stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        _write(layout.pid_file, f"{os.getpid()} {process.pid}\n")
        try:
            _wait_until_up(url, process, lambda: bool(stops.received))
            if not stops.received:
                print(f"JupyterHub for {len(settings.students)} students and instructor {settings.instructor}: "
                      f"{url}\npasswords: {layout.passwords_csv} (give each student theirs); "
                      f"log: {layout.runtime / 'jupyterhub.log'}\nCtrl-C stops it (or `make hub-stop`)", flush=True)
            while not stops.received and process.poll() is None:
                time.sleep(0.2)
        finally:
            shutdown(layout, process)
            log.close()
    if stops.first is None:
        return process.returncode or 1
    print(f"hub: stopped (the servers, their kernels and the proxy too); the class is kept in {layout.state}, "
          "`make hub` starts it again", file=sys.stderr)
    return exit_status(stops.first)


def _wait_until_up(url: str, process: subprocess.Popen, stopping, timeout: float = 180) -> None:  # noqa: ANN001
    from coursekit.hub.client import hub_answers

    deadline = time.monotonic() + timeout
    while not stopping() and time.monotonic() < deadline:
        if process.poll() is not None:
            raise CourseError(f"JupyterHub exited with status {process.returncode}; see its log in build/hub/runtime")
        if hub_answers(url):
            return
        time.sleep(0.3)
    if not stopping():
        raise CourseError(f"JupyterHub did not answer on {url} within {timeout:.0f} s; see build/hub/runtime")


def shutdown(layout: HubLayout, process: subprocess.Popen | None) -> None:
    """Stop JupyterHub (it stops the servers and the proxy), then end whatever is left."""
    if process is not None and process.poll() is None:
        process.terminate()
        try:
            process.wait(STOP_WAIT)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    proxy_pid = layout.runtime / "proxy.pid"
    if proxy_pid.exists():
        pid = int(proxy_pid.read_text().strip() or 0)
        if pid and _alive(pid):
            os.kill(pid, signal.SIGTERM)
        proxy_pid.unlink(missing_ok=True)
    end_group(layout.cgroup_parent)
    layout.pid_file.unlink(missing_ok=True)


def stop(layout: HubLayout) -> int:
    if not layout.pid_file.exists():
        print(f"no hub running from {layout.state}")
        end_group(layout.cgroup_parent)
        return 0
    launcher, hub = (int(p) for p in layout.pid_file.read_text().split())
    if _alive(launcher):
        os.kill(launcher, signal.SIGTERM)
        deadline = time.monotonic() + STOP_WAIT + 15
        while _alive(launcher) and time.monotonic() < deadline:
            time.sleep(0.2)
    for pid in (launcher, hub):
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)
    shutdown(layout, None)
    print(f"stopped the hub of {layout.state}")
    return 0


# ---------------------------------------------------------------- the instructor's steps

SUBMISSION_FILES = ("timestamp.txt", "submission_secret.txt")


def _course(layout: HubLayout):  # noqa: ANN202
    from coursekit.grading.course import Course

    root = layout.course if (layout.course / "nbgrader_config.py").is_file() else Path.cwd()
    course = Course.at(root)
    os.chdir(ROOT)  # the report reads the lesson source by its course.yml path
    return course


def _copy_submission_files(course, into: str) -> None:  # noqa: ANN001
    """timestamp.txt and submission_secret.txt of each collected submission into its `into` folder
    (feedback or submitted); nbgrader's release_feedback names the page after them."""
    for folder in sorted((course.root / "collected").glob(f"*/{course.assignment}")):
        target = course.root / into / folder.parent.name / course.assignment
        if target.is_dir():
            for name in SUBMISSION_FILES:
                if (folder / name).is_file():
                    shutil.copyfile(folder / name, target / name)


def grade(layout: HubLayout) -> int:
    from coursekit.cli import main

    course = _course(layout)
    submitted, collected = course.root / "submitted", course.root / "collected"
    found = sorted(p for p in submitted.glob(f"*/{course.assignment}") if (p / "timestamp.txt").is_file())
    if not found:
        raise CourseError(f"{submitted}: no collected submissions; collect them in formgrader first")
    for folder in found:  # nbgrader's fresh collections (the kit's prepared copies have no timestamp.txt)
        target = collected / folder.parent.name / course.assignment
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(folder, target)
    code = main(["grade", str(collected), "--course", str(course.root), "--lesson", course.assignment])
    _copy_submission_files(course, "submitted")
    _copy_submission_files(course, "feedback")
    return code


def release_feedback(layout: HubLayout) -> int:
    from nbgrader.auth import Authenticator
    from nbgrader.exchange import ExchangeFactory

    from coursekit.cli import main

    course = _course(layout)
    code = main(["report", "--course", str(course.root), "--lesson", course.assignment])
    if code:
        return code
    _copy_submission_files(course, "feedback")
    config = course.config
    coursedir = course.coursedir(config)
    coursedir.assignment_id = course.assignment
    releaser = ExchangeFactory(config=config).ReleaseFeedback(
        coursedir=coursedir, authenticator=Authenticator(config=config), config=config)
    releaser.start()
    released = getattr(releaser, "released", None)
    if released is None:
        raise CourseError(f"{course.root}: not the hub's course (its exchange is not one folder per student); "
                          "run `make hub` first")
    print(f"released feedback: {len(released)} page(s)")
    return 0
