"""Single-user servers of the class: each student's in a bubblewrap sandbox of its own, every server
in its own CPU and memory limits (coursekit.hub.limits).

A student's server runs as `bwrap ... -- prlimit ... setpriv --reuid UID ... jupyterhub-singleuser`:
- a filesystem of its own: the system (/usr, /etc) and the Python environment read-only, its home
  (/home/<user>) writable, its nbgrader config read-only, and of the exchange only the released
  assignments (read-only), its own inbound folder (writable) and its own feedback folder (read-only).
  No other home, no course folder (sources, hidden tests, gradebook), no other submission exists there;
- its own PID, IPC and UTS namespaces (it cannot see or signal the hub or other servers); the
  network is shared (the server must reach the hub), loopback only as the hub binds 127.0.0.1;
- run as root, the hub gives each student a uid of its own (20000 + roster position, no caps, no new
  privileges, its own process count limit); run as another user, bwrap's user namespace maps the
  student to that user's uid and the mounts alone separate the students;
- bwrap --die-with-parent: the sandbox ends with the hub.
The instructor's server is not sandboxed (it runs the kit's grading, which starts sandboxes of its own),
runs as the hub's user in the course folder, and dies with the hub (PR_SET_PDEATHSIG).
"""

from __future__ import annotations

import ctypes
import os
import shutil
import signal
import sys
from pathlib import Path

from jupyterhub.spawner import LocalProcessSpawner
from traitlets import Dict, Float, Integer, Unicode

from coursekit.grading.formgrader import safe_page_options
from coursekit.grading.sandbox.bubblewrap import _mkdirs, python_paths
from coursekit.hub.limits import ServerLimits
from coursekit.hub.settings import HubLayout

UID_BASE = 20000
SANDBOX_HOME = "/home"
SANDBOX_CONFIG = "/srv/coursekit/config"
SANDBOX_EXCHANGE = "/srv/nbgrader/exchange"
SANDBOX_PYTHON = "/srv/coursekit/python"  # on a student server's PYTHONPATH: the validate extension alone
VALIDATE_MODULE = "coursekit_hub_validate"  # coursekit.hub.validate, as a student's server imports it
VALIDATE_FILE = Path(__file__).with_name("validate.py")
PR_SET_PDEATHSIG = 1
SYSTEM_PATHS = ("/usr", "/etc", "/bin", "/sbin", "/lib", "/lib64", "/lib32")


def _die_with_parent() -> None:
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


class ClassSpawner(LocalProcessSpawner):
    """LocalProcessSpawner for the roster of course.yml (no Unix accounts needed)."""

    state_dir = Unicode(help="the hub's state folder (coursekit.hub.settings.HubLayout)").tag(config=True)
    instructor = Unicode().tag(config=True)
    student_uids = Dict(help="student -> uid (used when the hub runs as root)").tag(config=True)
    student_cpu = Float(1.0).tag(config=True)
    student_memory = Integer(1 << 30).tag(config=True)
    instructor_cpu = Float(2.0).tag(config=True)
    instructor_memory = Integer(4 << 30).tag(config=True)

    @property
    def layout(self) -> HubLayout:
        return HubLayout(Path(self.state_dir))

    @property
    def is_instructor(self) -> bool:
        return self.user.name == self.instructor

    def server_limits(self) -> ServerLimits:
        cpu, memory = ((self.instructor_cpu, self.instructor_memory) if self.is_instructor
                       else (self.student_cpu, self.student_memory))
        return ServerLimits(self.layout.cgroup_parent, self.user.name, cpu, memory)

    def user_env(self, env: dict) -> dict:
        role = "instructor" if self.is_instructor else "student"
        home = str(self.layout.home(self.user.name)) if self.is_instructor else f"{SANDBOX_HOME}/{self.user.name}"
        config = str(self.layout.config(role)) if self.is_instructor else SANDBOX_CONFIG
        env.update(USER=self.user.name, LOGNAME=self.user.name, HOME=home, SHELL="/bin/bash", LANG="C.UTF-8",
                   JUPYTER_CONFIG_PATH=config, PATH=os.pathsep.join([os.path.dirname(sys.executable),
                                                                      "/usr/local/bin", "/usr/bin", "/bin"]))
        if not self.is_instructor:  # the kit is not installed in the sandbox; its validate extension is bound
            env["PYTHONPATH"] = SANDBOX_PYTHON
        env.pop("JUPYTER_CONFIG_DIR", None)
        env.pop("JUPYTER_DATA_DIR", None)
        return env

    def make_preexec_fn(self, name: str):  # noqa: ANN201 - JupyterHub's signature
        limits, slot = self.server_limits(), sorted(self.student_uids).index(name) if name in self.student_uids else 0
        instructor = self.is_instructor

        def preexec() -> None:
            limits.apply_to_self(slot)
            if instructor:
                _die_with_parent()

        return preexec

    async def start(self):  # noqa: ANN201 - JupyterHub's signature
        limits = self.server_limits()
        limits.create()
        self.cpu_limit, self.mem_limit = limits.cpu, limits.memory
        singleuser = [os.path.join(os.path.dirname(sys.executable), "jupyterhub-singleuser")]
        if self.is_instructor:
            root = self.layout.course
            self.cmd = singleuser + [f"--ServerApp.root_dir={root}", *safe_page_options()]
            if os.geteuid() == 0:
                self.cmd.append("--ServerApp.allow_root=True")
            self.popen_kwargs = {"cwd": str(root)}
        else:
            self.cmd = self.sandbox_command() + singleuser + [f"--ServerApp.root_dir={SANDBOX_HOME}/{self.user.name}"]
            self.popen_kwargs = {"cwd": "/"}
        return await super().start()

    def sandbox_command(self) -> list[str]:
        """bwrap (and, as root, the uid drop) up to the server's own command."""
        name, layout = self.user.name, self.layout
        exchange = layout.exchange_course()
        args = [shutil.which("bwrap") or "bwrap", "--die-with-parent", "--unshare-pid", "--unshare-ipc",
                "--unshare-uts", "--unshare-cgroup-try", "--hostname", "lesson11"]
        for path in SYSTEM_PATHS:
            if os.path.islink(path):
                args += ["--symlink", os.readlink(path), path]
            elif os.path.isdir(path):
                args += ["--ro-bind", path, path]
        # the private /tmp before the venv's bind: a checkout under /tmp is then bound over it, not hidden by it
        args += ["--tmpfs", "/tmp"]
        made = {"/usr", "/etc", "/tmp"}
        for path in python_paths():  # the venv and its base interpreter (the grading sandbox's list)
            if not path.startswith(("/usr/", "/lib", "/etc/")) and not os.path.islink(path):
                args += _mkdirs(path, made) + ["--ro-bind", path, path]
        validate_module = f"{SANDBOX_PYTHON}/{VALIDATE_MODULE}.py"
        for path in (f"{SANDBOX_HOME}/{name}", SANDBOX_CONFIG, SANDBOX_EXCHANGE, validate_module):
            args += _mkdirs(path, made)
        # nbgrader wants a writable exchange root (it is 1777 on a shared disk too); this one is the
        # sandbox's own tmpfs folder, so what a student leaves there reaches nobody
        args += ["--perms", "1777", "--dir", SANDBOX_EXCHANGE,
                 "--perms", "0755", "--dir", f"{SANDBOX_EXCHANGE}/{layout.course_id}"]
        args += ["--proc", "/proc", "--dev", "/dev",
                 "--bind", str(layout.home(name)), f"{SANDBOX_HOME}/{name}",
                 "--ro-bind", str(layout.config("student")), SANDBOX_CONFIG,
                 "--ro-bind", str(VALIDATE_FILE), validate_module,
                 "--ro-bind", str(exchange / "outbound"), f"{SANDBOX_EXCHANGE}/{layout.course_id}/outbound",
                 "--bind", str(exchange / "inbound" / name), f"{SANDBOX_EXCHANGE}/{layout.course_id}/inbound",
                 "--ro-bind", str(exchange / "feedback" / name), f"{SANDBOX_EXCHANGE}/{layout.course_id}/feedback",
                 "--chdir", f"{SANDBOX_HOME}/{name}"]
        if os.geteuid() != 0:
            return args + ["--unshare-user", "--"]
        uid = self.student_uids[name]
        args += ["--ro-bind", str(layout.passwd(name)), "/etc/passwd", "--"]
        return args + ["prlimit", "--nproc=512", "--core=0", "--",
                       "setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--no-new-privs",
                       "--bounding-set=-all", "--inh-caps=-all", "--"]
