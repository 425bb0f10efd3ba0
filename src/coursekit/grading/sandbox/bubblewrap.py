"""One OS sandbox per grading kernel: bubblewrap namespaces, limits, and a count of what is left.

The kernel runs as `bwrap ... -- python -I -c <kernel_side.py> CONFIG -f CONNECTION_FILE`. Inside:
- read-only: the Python environment (the venv, its base interpreter) and the system libraries;
  nothing else of the filesystem exists (no course, gradebook, sources, other submissions);
- writable: a size-capped tmpfs home (the kernel's working folder) and a private /tmp, both
  thrown away with the sandbox, so nothing the sandbox writes ever reaches the grader's disk;
- its own PID, network (loopback only), IPC and UTS namespaces; `--die-with-parent` and the PID
  namespace end every process of the submission with its kernel;
- a scrubbed environment, and the limits of `Limits` (applied by kernel_side.main()); where this
  process may create memory cgroups, one per sandbox caps all its processes together (SandboxMemory);
- seccomp filters (coursekit.grading.sandbox.seccomp): syscalls a kernel never needs are denied,
  and the file, program and network syscalls are recorded by a supervisor outside the kernel in
  a file of the grader's (`SandboxKernelManager.observed`).
The grader reaches the kernel over unix sockets (jupyter's `ipc` transport) that the kernel
creates in its own /tmp; the grader connects to them through /proc/<pid>/root. The connection
file is bound read-only, so the sandbox can write no host path at all.

Run as root, bwrap creates no user namespace (it would map the sandbox to root, whom the process
limit does not bind); the kernel drops to a uid of its own instead, so RLIMIT_NPROC counts that
sandbox only. Run as another user, bwrap's user namespace does the same (Linux >= 5.14).
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import itertools
import json
import multiprocessing
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import zmq
from jupyter_client.kernelspec import KernelSpec
from jupyter_client.manager import AsyncKernelManager

from coursekit.grading.judge.trusted import MAX_REPLY
from coursekit.grading.sandbox import kernel_side, seccomp

HOME = "/home/student"
INSIDE_SOCKETS = "/tmp/ck-kernel"  # the kernel's unix sockets: /tmp/ck-kernel-1 ... -5 in the sandbox
KERNEL_SIDE = Path(kernel_side.__file__).read_text(encoding="utf-8")
PR_SET_CHILD_SUBREAPER = 36  # prctl(2), Linux
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
SANDBOX_UID_BASE = 1_000_000  # root only: sandbox uids = base + the grading worker's pid * 4 + 0..3
KERNELS_PER_PROCESS = 4
_kernels_started = itertools.count()
FIX = ("install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap; Fedora: dnf install "
       "bubblewrap) on Linux with unprivileged user namespaces, or grade with --no-sandbox "
       "(make grade GRADE_ARGS=--no-sandbox; every row is then flagged unsandboxed); see "
       "autograder/README.md, 'The grading sandbox'")


@dataclass(frozen=True)
class Limits:
    """What one grading kernel may use."""

    memory: int = 2 << 30       # address space; bigger allocations raise MemoryError
    file_size: int = 256 << 20  # largest file written
    processes: int = 64         # processes and threads of the sandbox (ipykernel itself uses ~10)
    scratch: int = 256 << 20    # the writable home (tmpfs)
    tmp: int = 64 << 20         # the private /tmp (tmpfs)
    headroom: int = 512 << 20   # the sandbox's processes together: memory + this (SandboxMemory)

    @property
    def sandbox_memory(self) -> int:
        """Bytes all processes of one sandbox may hold together (one process reaches `memory` first,
        and gets MemoryError; forked children share this)."""
        return self.memory + self.headroom

    def rlimits(self, sandboxed: bool) -> dict[str, int]:
        limits = {"RLIMIT_AS": self.memory, "RLIMIT_FSIZE": self.file_size, "RLIMIT_CORE": 0}
        if sandboxed:  # outside a sandbox RLIMIT_NPROC would count all of the grader's processes
            limits["RLIMIT_NPROC"] = self.processes
        return limits


MEMORY_CGROUP = Path("/sys/fs/cgroup/memory")  # the cgroup v1 memory controller (hybrid hosts, as here)
CGROUP_PARENT = "coursekit-grading"


def memory_cgroup_usable() -> bool:
    """Whether this process may create memory cgroups (v1: root on a v1 or hybrid host)."""
    return (MEMORY_CGROUP / "cgroup.procs").exists() and os.access(MEMORY_CGROUP, os.W_OK)


class SandboxMemory:
    """One memory cgroup per sandbox: a limit on all its processes together (the kernel and every
    process it forks; the kernel's OOM killer ends the biggest when they reach it), where this process
    may create one. Else (no writable v1 memory controller: not root, or a host with cgroup v2 only,
    whose memory controller is not delegated to us) `folder` is None and the limits are the per-process
    ones alone: RLIMIT_AS per process and RLIMIT_NPROC processes (Limits; autograder/README.md)."""

    def __init__(self, name: str, limit: int) -> None:
        self.limit = limit
        self.folder = MEMORY_CGROUP / CGROUP_PARENT / name if memory_cgroup_usable() else None

    def create(self) -> str | None:
        """Make the group and its limit; return the path of its cgroup.procs (None: no group)."""
        if self.folder is None:
            return None
        self.folder.mkdir(parents=True, exist_ok=True)
        (self.folder / "memory.limit_in_bytes").write_text(str(self.limit))
        swap = self.folder / "memory.memsw.limit_in_bytes"  # memory + swap: no way around it through swap
        if swap.exists():
            with contextlib.suppress(OSError):
                swap.write_text(str(self.limit))
        return str(self.folder / "cgroup.procs")

    def processes_ended(self) -> int:
        """Processes of the sandbox the OOM killer ended at the limit."""
        if self.folder is None:
            return 0
        try:
            control = (self.folder / "memory.oom_control").read_text()
        except OSError:
            return 0
        counts = dict(line.split() for line in control.splitlines() if len(line.split()) == 2)
        return int(counts.get("oom_kill", 0))

    def remove(self) -> None:
        """End whatever is left in the group, then remove it."""
        if self.folder is not None:
            _remove_cgroup(self.folder)


def _remove_cgroup(folder: Path) -> None:
    """End every process left in a memory cgroup and its subgroups, then remove them (as rmdir(2) must:
    the subgroups first)."""
    if not folder.is_dir():
        return
    with contextlib.suppress(OSError):
        for sub in folder.iterdir():
            if sub.is_dir():
                _remove_cgroup(sub)
    for _ in range(50):
        with contextlib.suppress(OSError):
            folder.rmdir()
            return
        with contextlib.suppress(OSError):
            for pid in (folder / "cgroup.procs").read_text().split():
                with contextlib.suppress(OSError):
                    os.kill(int(pid), 9)
        time.sleep(0.02)


# ---------------------------------------------------------------- what the sandboxes leave on the host

ROOT_PREFIX = "ck-run-"  # one per grading worker (SandboxRoot), in the temp folder
ROOT_LOCK = ".lock"


class SandboxRoot:
    """One private folder that holds everything the sandboxes of one grading worker put on the grader's
    disk (each kernel's socket folder and connection file, the supervisor's records, the working
    folders), with one memory cgroup of the same name above theirs (SandboxMemory).

    Made by the process that outlives the worker (the pool; a Dask worker's runner for itself), which
    removes it whole, whatever became of the worker: closed, lost, killed by the watchdog or by a
    signal. Its lock file stays locked (flock) while the process that made it, or a worker forked from
    it, lives: a root whose lock is free belongs to no living process, whose run was itself killed before
    it could remove it, and the next run removes it (remove_stale_roots)."""

    def __init__(self) -> None:
        self.path = tempfile.mkdtemp(prefix=ROOT_PREFIX)  # short: unix socket paths are limited to 107 bytes
        self._lock: int | None = os.open(os.path.join(self.path, ROOT_LOCK),
                                         os.O_CREAT | os.O_RDWR | os.O_CLOEXEC, 0o600)
        fcntl.flock(self._lock, fcntl.LOCK_EX)

    def remove(self) -> None:
        """Remove the folder and its cgroups, with whatever is in them (a process left there is killed)."""
        if self._lock is None:
            return
        remove_root(self.path)
        os.close(self._lock)
        self._lock = None


def remove_root(path: str) -> None:
    """Remove a sandbox root's folder and the memory cgroups named after it."""
    shutil.rmtree(path, ignore_errors=True)
    if memory_cgroup_usable():
        _remove_cgroup(MEMORY_CGROUP / CGROUP_PARENT / os.path.basename(path))


def remove_stale_roots() -> list[str]:
    """Remove the sandbox roots of this user in the temp folder that no living process holds (their run
    was killed before it could remove them); return their paths. A root still being made (no lock file
    yet) or held by a run going on is left alone."""
    removed = []
    for path in sorted(Path(tempfile.gettempdir()).glob(ROOT_PREFIX + "*")):
        try:
            if path.stat().st_uid != os.geteuid():
                continue
            lock = os.open(path / ROOT_LOCK, os.O_RDWR | os.O_CLOEXEC)
        except OSError:
            continue
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(lock)
            continue
        remove_root(str(path))
        os.close(lock)
        removed.append(str(path))
    return removed


def sandbox_uid() -> int | None:
    """The uid the kernel drops to when bwrap runs as root (None: bwrap maps the caller's uid).

    One of its own per kernel: a grading worker has up to KERNELS_PER_PROCESS kernels at once (the
    one running, the next one booting, a replay), and RLIMIT_NPROC counts per uid."""
    if os.geteuid() != 0:
        return None
    return SANDBOX_UID_BASE + os.getpid() * KERNELS_PER_PROCESS + next(_kernels_started) % KERNELS_PER_PROCESS


def python_paths() -> list[str]:
    """Read-only paths the kernel's Python needs: its environment, base interpreter, system libraries."""
    paths = [sys.prefix, sys.exec_prefix, sys.base_prefix, sys.base_exec_prefix,
             os.path.realpath(sys.executable)]
    if any(p == "/usr" for p in paths):  # a system Python: its interpreter and library, not all of /usr
        paths = [p for p in paths if p != "/usr"] + [f"/usr/lib/python{sys.version_info[0]}"
                                                      f".{sys.version_info[1]}"]
    paths += ["/usr/lib", "/usr/lib64", "/usr/lib32", "/lib", "/lib64", "/lib32", "/etc/ld.so.cache"]
    out: list[str] = []
    for path in paths:
        if os.path.lexists(path) and not any(path == p or path.startswith(p + "/") for p in out):
            out = [p for p in out if not p.startswith(path + "/")] + [path]
    return out


def _mkdirs(path: str, made: set[str]) -> list[str]:
    """bwrap arguments that create the parents of path world-readable (bwrap's own are 0700)."""
    args = []
    parent = os.path.dirname(path)
    chain = []
    while parent not in ("/", "") and parent not in made:
        chain.append(parent)
        parent = os.path.dirname(parent)
    for folder in reversed(chain):
        made.add(folder)
        args += ["--perms", "0755", "--dir", folder]
    return args


def sandbox_env() -> dict[str, str]:
    """The kernel's whole environment (the zygote's too, whose kernels inherit it)."""
    return {"HOME": HOME, "USER": "student", "PATH": os.path.join(sys.prefix, "bin"), "LANG": "C.UTF-8",
            "TMPDIR": "/tmp", "PYTHONDONTWRITEBYTECODE": "1", "MPLBACKEND": "agg",
            "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def seccomp_fd() -> int:
    """A file descriptor holding the deny filter for bwrap's `--seccomp FD` (the caller passes and closes it)."""
    fd = os.memfd_create("ck-seccomp", 0)  # not close-on-exec: bwrap inherits it (pass_fds)
    os.write(fd, seccomp.deny_program())
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


def bwrap_command(limits: Limits, socket_dir: str, uid: int | None, filter_fd: int) -> list[str]:
    """The bwrap command line (up to and including `--`) for one kernel."""
    bwrap = shutil.which("bwrap") or "bwrap"
    # --as-pid-1: kernel_side.REAPER is the namespace's init itself.
    args = [bwrap, "--die-with-parent", "--new-session", "--unshare-ipc", "--unshare-pid", "--as-pid-1",
            "--unshare-net", "--unshare-uts", "--unshare-cgroup-try", "--hostname", "sandbox", "--clearenv",
            "--seccomp", str(filter_fd)]
    if uid is None:
        args += ["--unshare-user", "--disable-userns"]
    else:
        args += ["--cap-drop", "ALL"]
    # the private /tmp first: a checkout or venv under /tmp is then bound over it, not hidden by it
    args += ["--perms", "1777", "--size", str(limits.tmp), "--tmpfs", "/tmp"]
    made: set[str] = {"/tmp"}
    for path in python_paths():
        if os.path.islink(path):
            args += _mkdirs(path, made) + ["--symlink", os.readlink(path), path]
        else:
            args += _mkdirs(path, made) + ["--ro-bind", path, path]
    args += ["--proc", "/proc", "--dev", "/dev"]
    args += _mkdirs(HOME, made) + ["--perms", "1777", "--size", str(limits.scratch), "--tmpfs", HOME]
    args += _mkdirs(socket_dir, made) + ["--ro-bind", socket_dir, socket_dir, "--chdir", HOME]
    for name, value in sandbox_env().items():
        args += ["--setenv", name, value]
    return args + ["--"]


def kernel_config(limits: Limits, sandboxed: bool, uid: int | None, probe: bool = False) -> dict:
    """What kernel_side.py needs to start one kernel: uid, limits, the paths it may read (`python`:
    those of its Python environment, which are never scratch folders, wherever it is installed)."""
    allowed = python_paths() + ["/usr", "/proc", "/dev", "/sys", "/tmp", HOME]
    if not sandboxed:
        allowed += [os.getcwd(), tempfile.gettempdir()]
    return {"uid": uid if sandboxed else None, "limits": limits.rlimits(sandboxed), "allowed": allowed,
            "python": python_paths(),
            "tmp": "/tmp" if sandboxed else tempfile.gettempdir(), "probe": probe, "sandboxed": sandboxed,
            "seccomp": seccomp.filters() if sandboxed else None}


def kernel_side_command(config: dict) -> list[str]:
    """`python -I -c <kernel_side.py> CONFIG`: a zygote, or an unsandboxed kernel."""
    return [sys.executable, "-I", "-c", KERNEL_SIDE, json.dumps(config)]


REAPER_COMMAND = [sys.executable, "-I", "-S", "-c", kernel_side.REAPER]  # the sandbox's init


class KernelZygote:
    """A process with the kernel's libraries imported that forks every sandboxed kernel.

    Importing ipykernel and IPython is most of a kernel's start-up CPU; the zygote does it once
    (per grading run, or per worker) and forks a kernel per sandbox into that sandbox's namespaces, where the
    kernel drops every privilege before any student code exists (kernel_side._zygote, _enter). No
    kernel is ever reused: each is a fresh fork that serves one submission. The zygote itself runs
    outside the sandboxes and runs no student code.

    `shared=True`: one zygote for a whole grading run, owned by the process that makes it (`coursekit
    grade`: its probe of the sandbox starts it, then it forks the grading workers, which borrow it),
    so the libraries are imported once for the class rather than once per worker.
    Its requests are then serialised across processes (a lock made before the fork); a borrower never
    restarts or closes it: when it does not answer, the borrower ends it (a late answer must never be
    taken for the next request's, of any process) and starts a zygote of its own for its next kernels."""

    _early: subprocess.Popen | None = None  # launch_early's, for this process's next shared zygote

    def __init__(self, shared: bool = False) -> None:
        self.process: subprocess.Popen | None = None
        if shared and KernelZygote._early is not None:  # launched while this process imported its libraries
            self.process, KernelZygote._early = KernelZygote._early, None
        self._owner = os.getpid()
        self._lock = multiprocessing.get_context("fork").Lock() if shared else threading.Lock()
        self._own: KernelZygote | None = None  # a borrower's, once the shared one failed it

    @staticmethod
    def launch_early() -> None:
        """Start the zygote of this process's grading run now (`coursekit grade`, before it imports its
        libraries): its own imports, about 0.25 s of CPU, then run beside those of the grading process
        instead of after them, while the sandbox's probe waits. The next KernelZygote(shared=True) takes
        it; `end_early` ends it if none did."""
        if KernelZygote._early is None and sys.platform.startswith("linux"):
            KernelZygote._early = KernelZygote._launch()

    @staticmethod
    def end_early() -> None:
        """End launch_early's zygote if no grading run took it (the command stopped before grading)."""
        process, KernelZygote._early = KernelZygote._early, None
        if process is not None:
            process.stdin.close()
            process.wait()
            process.stdout.close()

    @staticmethod
    def _launch() -> subprocess.Popen:
        return subprocess.Popen(kernel_side_command({"role": "zygote"}), stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=sandbox_env(), cwd="/")

    def start_kernel(self, init: int, pid_namespace: str, config: dict, argv: list[str], observed: str,
                     timeout: float = 60, cgroup: str | None = None) -> None:
        """Fork a kernel into the sandbox whose init has host pid `init`; raise when it did not start.
        What its supervisor sees is appended to the file `observed` (it must exist); the kernel joins
        the memory cgroup whose cgroup.procs is `cgroup` before anything else (SandboxMemory)."""
        if self._own is not None:
            return self._own.start_kernel(init, pid_namespace, config, argv, observed, timeout, cgroup)
        request = json.dumps({"init": init, "pid_namespace": pid_namespace, "config": config,
                              "argv": argv, "cwd": HOME, "observed": observed, "cgroup": cgroup}) + "\n"
        borrowed = os.getpid() != self._owner
        answer = ""
        # a borrower that died while it held the lock (killed by the pool's watchdog) holds it for ever:
        # the others wait `timeout` once, then use zygotes of their own
        if not self._lock.acquire(timeout=timeout):
            self._own = KernelZygote()
            raise RuntimeError("the grading sandbox did not start its kernel (the shared zygote was held)")
        try:
            if not borrowed and (self.process is None or self.process.poll() is not None):
                self.process = self._launch()
            if self.process is not None:
                try:
                    self.process.stdin.write(request.encode())
                    self.process.stdin.flush()
                except OSError:
                    pass  # it died: the answer below says so
                ready, _, _ = select.select([self.process.stdout], [], [], timeout)
                answer = self.process.stdout.readline().decode(errors="replace").strip() if ready else ""
            if not answer and self.process is not None:  # dead or stuck: a late answer must never be taken
                with contextlib.suppress(OSError):      # for the next request's
                    os.kill(self.process.pid, signal.SIGKILL)  # (Popen.kill: the owner's child only)
                if borrowed:
                    self._own = KernelZygote()  # this process's next kernels
                else:
                    self.process.wait()
                    self.process = None
        finally:
            self._lock.release()
        if answer != "ok":
            raise RuntimeError(f"the grading sandbox did not start its kernel ({answer or 'no answer'})")

    def close(self) -> None:
        """End the zygote once its kernels have ended (their CPU time is then counted with ours); a
        borrower ends only the zygote of its own, if it has one. The owner closes it once the workers
        have ended, so a lock still held then is a dead worker's (Ctrl-C ends them at once, whatever
        they held): waiting for it would wait for ever."""
        if self._own is not None:
            self._own.close()
        if os.getpid() != self._owner:
            return
        held = self._lock.acquire(False)
        try:
            process, self.process = self.process, None
        finally:
            if held:
                self._lock.release()
        if process is None:
            return
        process.stdin.close()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        process.stdout.close()

    def kill(self) -> None:
        """SIGKILL the zygote (from a signal handler); its waiting children end with their sandboxes.
        A borrower kills only the zygote of its own."""
        if self._own is not None:
            self._own.kill()
        process = self.process
        if process is not None and os.getpid() == self._owner:
            with contextlib.suppress(OSError):
                process.kill()


def unavailable_reason(course_root: Path, limits: Limits | None = None,
                       zygote: KernelZygote | None = None) -> str | None:
    """Why no grading sandbox can start here (one line with the fix), or None when it can. The probe's
    kernel comes from `zygote` when given (left running), else from a zygote of its own."""
    if not sys.platform.startswith("linux"):
        return f"the grading sandbox needs Linux namespaces (bubblewrap); this is {sys.platform}: {FIX}"
    if shutil.which("bwrap") is None:
        return f"bubblewrap (bwrap) is not installed: {FIX}"
    if (reason := seccomp.unavailable_reason()) is not None:
        return reason
    root = str(course_root.resolve())
    inside = [p for p in python_paths() if root == p or root.startswith(p.rstrip("/") + "/")]
    if inside:
        return (f"{course_root}: the course folder is inside {inside[0]}, which the sandbox must show to "
                "the kernel; keep the course outside the Python environment")
    limits = limits or Limits()
    own = zygote is None
    zygote = KernelZygote() if own else zygote
    with tempfile.TemporaryDirectory(prefix="ck-probe-") as socket_dir:
        uid = sandbox_uid()
        os.chmod(socket_dir, 0o711)
        filter_fd = seccomp_fd()
        command = bwrap_command(limits, socket_dir, uid, filter_fd) + REAPER_COMMAND
        observed = os.path.join(socket_dir, "observed")
        Path(observed).touch(0o600)
        try:
            process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                       stderr=subprocess.PIPE, text=True, pass_fds=(filter_fd,))
        except OSError as exc:
            return f"bubblewrap could not start ({exc}): {FIX}"
        finally:
            os.close(filter_fd)
        try:
            init = sandbox_init(process)
            zygote.start_kernel(init, pid_namespace(init) or "", kernel_config(limits, True, uid, probe=True), [],
                                observed)
            process.wait(timeout=60)
        except (RuntimeError, OSError, subprocess.TimeoutExpired) as exc:
            process.kill()
            stderr = process.communicate()[1].strip().splitlines()
            return f"the grading sandbox did not start ({(stderr or [str(exc)])[-1].strip()[:200]}): {FIX}"
        finally:
            if own:
                zygote.close()
    return None


# ---------------------------------------------------------------- processes of one sandbox

def pid_namespace(pid: int) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/ns/pid")
    except OSError:
        return None


def children(pid: int) -> list[int]:
    """The processes whose parent is `pid`: from /proc/PID/task/*/children where Linux has that file
    (one read per thread of `pid`), else by reading every process's stat."""
    try:
        threads = os.listdir(f"/proc/{pid}/task")
        found = []
        for thread in threads:
            with open(f"/proc/{pid}/task/{thread}/children", encoding="ascii") as f:
                found += [int(child) for child in f.read().split()]
        return found
    except FileNotFoundError:  # no such file (a kernel without CONFIG_PROC_CHILDREN), or pid is gone
        if not os.path.exists(f"/proc/{pid}/task"):
            return []
    except OSError:
        return []
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", encoding="utf-8", errors="replace") as f:
                    stat = f.read()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry))
    return found


def init_of(process: subprocess.Popen) -> int | None:
    """Host pid of the init in bwrap's sandbox (its root is the sandbox's root), once bwrap has
    finished building the sandbox and started it (before that, the namespaces are half made)."""
    own = pid_namespace(os.getpid())
    for pid in children(process.pid):
        if pid_namespace(pid) not in (own, None):
            with contextlib.suppress(OSError), open(f"/proc/{pid}/cmdline", "rb") as f:
                if f.read().split(b"\0")[0] == os.fsencode(sys.executable):
                    return pid
    return None


def sandbox_init(process: subprocess.Popen, timeout: float = 6) -> int:
    """Wait for the init of bwrap's sandbox (see init_of)."""
    deadline = time.monotonic() + timeout
    while (init := init_of(process)) is None:
        if process.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"the grading sandbox did not start (bwrap exit status {process.poll()})")
        time.sleep(0.01)
    return init


def become_subreaper() -> None:
    """Orphans of this process's sandboxes (a killed bwrap's init and kernel) become its children, to
    be reaped at once by `reap` (and their CPU time counted), not by the system's init some time later."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def reap(pids: list[int]) -> None:
    """Collect those of `pids` that are finished children of this process (zombies of a sandbox)."""
    for pid in pids:
        with contextlib.suppress(ChildProcessError, OSError):
            os.waitpid(pid, os.WNOHANG)


def processes_in(namespace: str) -> list[int]:
    """Host pids of the processes in a PID namespace (zombies included)."""
    return [int(e) for e in os.listdir("/proc") if e.isdigit() and pid_namespace(int(e)) == namespace]


class SandboxKernelManager(AsyncKernelManager):
    """A kernel started by kernel_side.py, in a bwrap sandbox unless `sandboxed` is False, reached
    over unix sockets: in the sandbox's /tmp (through /proc/<pid>/root), or without a sandbox in a
    private folder."""

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.limits = Limits()
        self.sandboxed = True
        self.folder: str | None = None  # where its socket folder goes: a SandboxRoot's path (None: the temp folder)
        self.socket_dir = ""  # made when the kernel starts (_make_socket_dir), removed by remove_socket_dir
        self.observed = ""  # the supervisor's records: outside the sandbox, beside the socket folder
        self.transport = "ipc"
        self._filter_fd: int | None = None
        self.namespace: str | None = None
        self._namespace_fd: int | None = None
        self._proc_fd: int | None = None  # the sandbox's /proc, opened through its init's root
        self._stat_fds: dict[str, int] = {}  # the sandbox's /proc/<pid>/stat files, kept open (cpu_seconds)
        self.zygote: KernelZygote | None = None  # the grading worker's; else one of its own, for this kernel
        self._own_zygote: KernelZygote | None = None
        self._kernel_request: tuple[dict, list[str]] | None = None
        self._init: int | None = None
        self._cpu_seen = 0.0
        self.memory: SandboxMemory | None = None
        self.shutdown_wait_time = 2.0  # half of it, then SIGTERM; the other half, then SIGKILL
        self._spec = KernelSpec(argv=[], display_name="Python 3 (coursekit sandbox)", language="python",
                                interrupt_mode="message", env={}, metadata={})

    @property
    def kernel_spec(self) -> KernelSpec:
        return self._spec

    def _make_socket_dir(self) -> None:
        """The kernel's folder on the host: its connection file, its sockets without a sandbox."""
        if self.socket_dir:
            return
        self.socket_dir = tempfile.mkdtemp(prefix="ck-", dir=self.folder)  # short: socket paths <= 107 bytes
        self.connection_file = os.path.join(self.socket_dir, "kernel.json")
        self.observed = self.socket_dir + ".observed"

    async def _async_pre_start_kernel(self, **kw):
        self._make_socket_dir()
        if self.sandboxed:  # the kernel's view; ports are just suffixes of the socket files
            self.ip = INSIDE_SOCKETS
            self.shell_port, self.iopub_port, self.stdin_port, self.hb_port, self.control_port = range(1, 6)
        else:
            self.ip = os.path.join(self.socket_dir, "k")
        return await super()._async_pre_start_kernel(**kw)

    async def _async_wait(self, pollinterval: float = 0.1) -> None:
        # jupyter_client checks every 0.1 s whether the kernel has exited after a shutdown request;
        # a kernel exits within milliseconds, and every grading worker waits for it once per notebook.
        await super()._async_wait(pollinterval=min(pollinterval, 0.005))

    def format_kernel_cmd(self, extra_arguments: list[str] | None = None) -> list[str]:
        uid = sandbox_uid() if self.sandboxed else None
        if uid is not None:  # the kernel, as its own uid, reads the connection file (bound read-only)
            os.chmod(self.socket_dir, 0o711)
            os.chown(self.connection_file, uid, uid)
        config = kernel_config(self.limits, self.sandboxed, uid)
        argv = ["-f", self.connection_file, *(extra_arguments or [])]
        if not self.sandboxed:
            return kernel_side_command(config) + argv
        self._kernel_request = (config, argv)  # for the zygote, once bwrap's init is there
        Path(self.observed).touch(0o600)
        self._filter_fd = seccomp_fd()
        return bwrap_command(self.limits, self.socket_dir, uid, self._filter_fd) + REAPER_COMMAND

    async def _async_launch_kernel(self, kernel_cmd: list[str], **kw) -> None:
        # Student code writing to the process's own stdout/stderr (os.write) reaches no terminal.
        kw.update(stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if self._filter_fd is not None:
            kw["pass_fds"] = (self._filter_fd,)
        try:
            await super()._async_launch_kernel(kernel_cmd, **kw)
        finally:
            if self._filter_fd is not None:
                os.close(self._filter_fd)
                self._filter_fd = None
        if not self.sandboxed:
            return
        init = await self._sandbox_init()
        if self.zygote is None:
            self.zygote = self._own_zygote = KernelZygote()
        config, argv = self._kernel_request
        # under its root's group when it has one (SandboxRoot): removed with it, whatever became of this process
        name = os.path.basename(self.socket_dir)
        if self.folder is not None:
            name = f"{os.path.basename(self.folder)}/{name}"
        self.memory = SandboxMemory(name, self.limits.sandbox_memory)
        self.zygote.start_kernel(init, self.namespace, config, argv, self.observed, cgroup=self.memory.create())
        self.ip = f"/proc/{init}/root{INSIDE_SOCKETS}"  # from now on this side connects through the sandbox's root

    async def _sandbox_init(self) -> int:
        """Host pid of bwrap's init in the sandbox; holds its PID namespace (see remove_socket_dir).
        Waited for in this thread (milliseconds; nothing else runs in the loop while a kernel launches):
        a wait in a helper thread (asyncio.to_thread) left a worker waiting for ever on a loaded machine,
        its helper thread idle and the loop never woken."""
        init = sandbox_init(self.provisioner.process)
        self._init = init
        self.namespace = pid_namespace(init)
        with contextlib.suppress(OSError):
            self._namespace_fd = os.open(f"/proc/{init}/ns/pid", os.O_RDONLY)
        with contextlib.suppress(OSError):  # the sandbox's own /proc (cpu_seconds)
            self._proc_fd = os.open(f"/proc/{init}/root/proc", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        return init

    def sandbox_processes(self) -> list[int]:
        """Processes now in this kernel's sandbox (bwrap's init and the kernel included)."""
        return processes_in(self.namespace) if self.namespace else []

    def client(self, **kwargs):
        """A client whose sockets drop any message over MAX_REPLY bytes while reading it (libzmq's
        ZMQ_MAXMSGSIZE, which then ends the connection; the executor sees that, see its _links)."""
        client = super().client(**kwargs)
        client.context.setsockopt(zmq.MAXMSGSIZE, MAX_REPLY)
        return client

    def kernel_running(self) -> bool:
        """Whether the kernel process (PID 2 of the sandbox; without one, the launched process) still runs."""
        if self._init is None:
            process = getattr(self.provisioner, "process", None)
            return process is not None and process.poll() is None
        try:
            with open(f"/proc/{self._init}/root/proc/2/stat", "rb") as f:
                return f.read().rsplit(b")", 1)[1].split()[0] not in (b"Z", b"X")
        except (OSError, IndexError):
            return False

    def cpu_seconds(self) -> float | None:
        """CPU seconds used so far by every process of the sandbox, living or ended (None: no sandbox).
        Read from the sandbox's own /proc, through its init: utime + stime of the living, and the
        children's times that each waited-for child left to its parent."""
        if self._init is None:
            return None
        proc = self._proc_fd  # read every POLL and after every reply of the judge: opened once
        ticks = 0
        try:
            entries = set(filter(str.isdigit, os.listdir(proc)))
        except (OSError, TypeError):  # the sandbox has ended (or never had its /proc): what it had used last
            return self._cpu_seen
        for gone in self._stat_fds.keys() - entries:
            os.close(self._stat_fds.pop(gone))
        for entry in entries:
            try:
                fields = self._read_stat(proc, entry).rsplit(b")", 1)[1].split()
            except (OSError, IndexError):
                continue
            ticks += sum(int(v) for v in fields[11:15])  # utime stime cutime cstime
        self._cpu_seen = max(self._cpu_seen, ticks / CLOCK_TICKS)
        return self._cpu_seen

    def _read_stat(self, proc: int, entry: str) -> bytes:
        """/proc/<entry>/stat of the sandbox, read again through the file opened the first time (one system
        call instead of three); a process that ended has the entry opened anew (its PID may be another's)."""
        for _ in range(2):
            stat = self._stat_fds.get(entry)
            if stat is None:
                stat = self._stat_fds[entry] = os.open(f"{entry}/stat", os.O_RDONLY | os.O_CLOEXEC, dir_fd=proc)
            try:
                return os.pread(stat, 4096, 0)
            except OSError:  # ESRCH: that process has ended
                os.close(self._stat_fds.pop(entry))
        raise ProcessLookupError(entry)

    def remove_socket_dir(self) -> None:
        """The end of the sandbox: its folder, and the hold on its PID namespace. That hold keeps the
        namespace's id from going to a new sandbox (of this or another worker) while this one's
        leftovers are looked for by that id (processes_in), which would then find, and kill, the
        processes of the new one."""
        if self.socket_dir:
            shutil.rmtree(self.socket_dir, ignore_errors=True)
            with contextlib.suppress(OSError):
                os.remove(self.observed)
        if self.memory is not None:
            self.memory.remove()
        if self._own_zygote is not None:
            self._own_zygote.close()
            self._own_zygote = None
        if self._namespace_fd is not None:
            os.close(self._namespace_fd)
            self._namespace_fd = None
        for stat in self._stat_fds.values():
            os.close(stat)
        self._stat_fds.clear()
        if self._proc_fd is not None:
            os.close(self._proc_fd)
            self._proc_fd = None
