"""The supervisor outside a grading kernel (kernel_side._supervise): what it records of the file, program
and network syscalls, whatever the kernel's own hook does (issue 30, items 5, 8 and 9).

The sandboxed tests run real code in a real sandbox (bwrap, seccomp user notifications) with the
in-kernel audit hook switched off first, so every record they expect comes from the supervisor alone."""

from __future__ import annotations

import asyncio
import errno
import json
import os
import socket
import struct
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest
from test_grading_sandbox import armed_sandbox_kernel

from coursekit.grading.judge.verdicts import read_observed
from coursekit.grading.sandbox import kernel_side
from coursekit.grading.sandbox.bubblewrap import HOME, Limits, SandboxKernelManager, memory_cgroup_usable
from coursekit.grading.sandbox.executor import ARM_LINE

NO_HOOK = '''import sys as _s
_s.modules["_coursekit_kernel"].arm.__globals__["_state"]["armed"] = False
'''
# each line tries one thing; errors are the sandbox's answer, not the test's concern
ATTEMPTS = {
    # openat with a directory handle: the path is relative to /etc (then /tmp), not to the working folder
    "dirfd_secret": 'd = os.open("/etc", os.O_RDONLY | os.O_DIRECTORY)\nos.open("shadow", os.O_RDONLY, dir_fd=d)',
    "dirfd_guess": 'os.makedirs("grader", exist_ok=True)\nd = os.open("/tmp", os.O_RDONLY | os.O_DIRECTORY)\n'
                   'os.open("grader/gradebook.db", os.O_RDONLY, dir_fd=d)',
    # every socket call that names an address
    "sendto": 'socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b"x", ("10.20.30.40", 5301))',
    "sendmsg": 'socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendmsg([b"x"], [], 0, ("10.20.30.41", 5302))',
    "sendto_unix": 'socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM).sendto(b"x", "/run/grader.sock")',
    # host secrets under trees the sandbox allows
    "shadow": 'open("/etc/shadow")',
    "ssh": 'open("/etc/ssh/ssh_host_ed25519_key")',
    "others_environ": 'open("/proc/1/environ")',
}
HONEST = '''import sqlite3, fractions
own = open("/proc/self/status").read() + open(f"/proc/{os.getpid()}/stat").read()
open("notes.txt", "w").write("mine")
a, b = socket.socketpair()
a.send(b"x"); b.recv(1)
print("done")
'''


async def _observed_after(code: str) -> list[tuple[str, str]]:
    """The supervisor's records of one sandboxed kernel that ran `code` (after its start-up's)."""
    async with armed_sandbox_kernel() as (km, kc):
        await kc.execute_interactive(code, timeout=60)
        await kc.execute_interactive("", timeout=60)  # the supervisor writes before the syscall returns
        return read_observed(km.observed)


def _in_sandbox(code: str) -> list[tuple[str, str]]:
    with ThreadPoolExecutor(1) as thread:
        return thread.submit(asyncio.run, _observed_after(code)).result()


@pytest.fixture(scope="module")
def attempted():
    body = "".join(f"try:\n{''.join('    ' + line + chr(10) for line in code.splitlines())}except Exception:\n"
                   "    pass\n" for code in ATTEMPTS.values())
    return _in_sandbox(NO_HOOK + "import os, socket\n" + body)


@pytest.fixture(scope="module")
def honest():
    return _in_sandbox("import os, socket\n" + HONEST)


@pytest.mark.parametrize("attempt, record", [
    ("dirfd_secret", ("file", "/etc/shadow")),
    ("dirfd_guess", ("file", "/tmp/grader/gradebook.db")),
    ("sendto", ("network", "10.20.30.40:5301")),
    ("sendmsg", ("network", "10.20.30.41:5302")),
    ("sendto_unix", ("network", "/run/grader.sock")),
    ("shadow", ("file", "/etc/shadow")),
    ("ssh", ("file", "/etc/ssh/ssh_host_ed25519_key")),
    ("others_environ", ("file", "/proc/1/environ")),
])
def test_the_supervisor_records_what_the_kernel_tried(attempted, attempt, record):
    assert record in attempted, (attempt, attempted)


def test_an_honest_kernel_leaves_no_record(honest):
    """Its own /proc entries, its home, send() on a connected socket: nothing; nor the kernel's start-up."""
    assert honest == []


# Compiled modules name their frames by a relative file name (pyzmq's Cython code: "zmq/backend/cython/_zmq.py").
# Python's C-level display of an error nobody can catch (an exception ignored in a destructor or callback, one
# that ends a thread) opens that name in the working folder, then "_zmq.py" in every folder of sys.path. The
# grader's interrupt lands in such places only when the timing says so (it ends a batch of calls, while pyzmq
# frees a sent reply): a budget attack's regrade was flagged "during hidden checks: file" for
# /home/student/zmq/backend/cython/_zmq.py and <checkout>/src/_zmq.py, its first grading not.
UNCATCHABLE = '''import threading
frames = {}
exec(compile("def fail():\\n    raise KeyboardInterrupt\\n", "zmq/backend/cython/_zmq.py", "exec"), frames)
class Freed:
    def __del__(self):
        frames["fail"]()
Freed()
worker = threading.Thread(target=frames["fail"])
worker.start()
worker.join()
'''


def test_an_error_the_kernel_shows_on_its_own_opens_no_file():
    """Those errors are still shown as Python shows them (Python's own traceback module, which looks a
    source file up only where it exists); the supervisor records nothing."""
    assert _in_sandbox(UNCATCHABLE) == []


# ---------------------------------------------------------------- the rules themselves (no sandbox)

PYTHON = ["/tmp/课程 kit (nowhere)/.venv", "/root/.pyenv/versions/3.11.7", "/usr/lib", "/etc/ld.so.cache"]
SCRATCH = ["/tmp", HOME]
ALLOWED = PYTHON + ["/usr", "/proc", "/dev", "/sys", "/etc"] + SCRATCH
# an editable install's source folder: on the import path, not in the sandbox
IMPORTS = ("/tmp/课程 kit (nowhere)/src",)


@pytest.mark.parametrize("path, recorded", [
    # a checkout under the temp folder: its venv is the environment, not a scratch folder (item 8)
    ("/tmp/课程 kit (nowhere)/.venv/etc/ipython/startup", False),
    ("/tmp/课程 kit (nowhere)/.venv/lib/python3.12/site-packages/nothing_here/x.py", False),
    # the folders bwrap made to hold it, and the checkout's other files, are a guess at the host's
    ("/tmp/课程 kit (nowhere)/autograder/gradebook.db", True),
    ("/tmp/课程 kit (nowhere)/README.md", True),
    ("/tmp/课程 kit (nowhere)/src", False),  # importlib lists the folders of the import path
    ("/tmp/课程 kit (nowhere)/src/coursekit/grading/grade.py", True),
    ("/tmp/mine.txt", False),
    ("/tmp/no-such-folder/gradebook.db", True),
    ("/srv/course/gradebook.db", True),
    # secrets under allowed trees (item 9)
    ("/etc/shadow", True), ("/etc/ssh/sshd_config", True), (f"{HOME}/.ssh/id_ed25519", True),
    ("/proc/1/environ", True), ("/proc/1/task/1/environ", True), ("/proc/7/mem", True),
    ("/proc/self/environ", False), ("/proc/2/environ", False), ("/proc/1/stat", False),
    ("/etc/ld.so.cache", False), ("/etc/localtime", False),
    # a base interpreter under /root is the environment (shown to the kernel), not a secret
    ("/root/.pyenv/versions/3.11.7/lib/python3.11/sqlite3/__init__.py", False), ("/root/.bashrc", True),
])
def test_what_a_file_syscall_leaves_as_a_record(path, recorded):
    record = kernel_side._observed("file", path, PYTHON, ALLOWED, SCRATCH, HOME, own=("2",), imports=IMPORTS)
    assert (record is not None) == recorded, (path, record)


def test_a_relative_path_is_resolved_in_its_folder():
    assert kernel_side._observed("file", "../../srv/x", PYTHON, ALLOWED, SCRATCH, "/usr/lib") == "/srv/x"
    assert kernel_side._int_argument((1 << 64) - 100) == kernel_side.AT_FDCWD
    assert kernel_side._int_argument(5) == 5


def _sockaddr_in(host: str, port: int) -> bytes:
    return struct.pack("=H", socket.AF_INET) + struct.pack("!H", port) + socket.inet_aton(host) + bytes(8)


def test_sendmmsg_names_each_of_its_addresses_and_netlink_to_the_kernel_is_none(tmp_path):
    """A file stands in for the process's memory (/proc/PID/mem): offsets are addresses."""
    memory = bytearray(4096)
    headers, names = 1024, [(2048, "10.0.0.1", 7), (2100, "10.0.0.2", 8)]
    for n, (offset, host, port) in enumerate(names):
        memory[offset:offset + 16] = _sockaddr_in(host, port)
        stride = kernel_side.MSGHDR_SIZE + 8
        memory[headers + n * stride:headers + n * stride + 12] = struct.pack("=QI", offset, 16)
    netlink = 3000
    memory[netlink:netlink + 12] = struct.pack("=HHII", 16, 0, 0, 0)
    (tmp_path / "mem").write_bytes(bytes(memory))
    fd = os.open(tmp_path / "mem", os.O_RDONLY)
    try:
        assert kernel_side._addresses(fd, (3, headers, 2, 0, 0, 0), 1, kernel_side.MMSGHDR) == \
            ["10.0.0.1:7", "10.0.0.2:8"]
        assert kernel_side._addresses(fd, (3, headers, 0, 0, 0, 0), 1, kernel_side.MSGHDR) == ["10.0.0.1:7"]
        assert kernel_side._addresses(fd, (3, 0, 0, 0, netlink, 12), 4, 5) == [None]  # getifaddrs' netlink
        assert kernel_side._addresses(fd, (3, 0, 0, 0, 0, 0), 4, 5) == [None]  # no address
    finally:
        os.close(fd)


# ---------------------------------------------------------------- issue 30, item 6: memory of a sandbox

FORKED_HOGS = '''import os, time
held = []
for _ in range(5):  # each child writes HOG bytes (resident, not lazily mapped), then holds them 3 s
    pid = os.fork()
    if pid == 0:
        try:
            block = b"\\1" * HOG
        except MemoryError:
            os._exit(2)
        time.sleep(3)
        os._exit(0)
    held.append(pid)
statuses = [os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) for pid in held]
print("SEEN" + repr(statuses))
'''
HOG = int(0.7 * (1 << 30))


async def _run_hogs(limits) -> tuple[list[int], int]:
    km = SandboxKernelManager(kernel_name="python3")
    km.limits = limits
    await km.start_kernel(extra_arguments=[f"--IPKernelApp.exec_lines={[ARM_LINE]!r}"])
    kc = km.client()
    kc.start_channels()
    seen = []

    def output(msg):
        if msg["msg_type"] == "stream" and "SEEN" in msg["content"]["text"]:
            seen.extend(eval(msg["content"]["text"].split("SEEN", 1)[1]))  # noqa: S307 - our own list of ints
    try:
        await kc.wait_for_ready(timeout=60)
        await kc.execute_interactive(FORKED_HOGS.replace("HOG", str(HOG)), timeout=120, output_hook=output)
        return seen, km.memory.processes_ended() if km.memory is not None else 0
    finally:
        kc.stop_channels()
        await km.shutdown_kernel(now=True)
        km.remove_socket_dir()


@pytest.mark.skipif(not memory_cgroup_usable(), reason="needs a writable cgroup v1 memory controller (root)")
def test_five_forked_children_of_0_7_gib_share_one_sandbox_limit():
    """Each child is under the per-process cap (2 GiB of address space); together they would hold
    3.5 GiB. The sandbox's memory cgroup (2.5 GiB for all its processes) ends some of them: the real
    kernel's OOM killer in a v1 memory cgroup, counted in its memory.oom_control."""
    with ThreadPoolExecutor(1) as thread:
        statuses, ended = thread.submit(asyncio.run, _run_hogs(Limits())).result()
    assert len(statuses) == 5, statuses
    held = statuses.count(0)
    assert held * HOG < Limits().sandbox_memory and held < 5, statuses
    assert ended >= 1 and statuses.count(-9) >= 1, (statuses, ended)


# ---------------------------------------------------------------- a syscall a signal ended (not sandboxed)

ENDED_BY_A_SIGNAL = r'''
import base64, ctypes, json, os, signal, sys, threading
from coursekit.grading.sandbox import kernel_side, seccomp
from coursekit.grading.sandbox.bubblewrap import python_paths

filters = seccomp.filters()
libc = ctypes.CDLL(None, use_errno=True)
signal.signal(signal.SIGUSR1, lambda *_: None)  # installed without SA_RESTART: a waiting open() fails, EINTR
path = ctypes.create_string_buffer(b"/grader/opened-before-the-signal", 64)
listener, ready, moved_on, finished, ended = [], threading.Event(), threading.Event(), threading.Event(), []
done_read, done_write = os.pipe()


def target():  # this thread alone is watched: the filter and no_new_privs are the calling thread's
    libc.prctl(kernel_side.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
    listener.append(kernel_side._load_filter(base64.b64decode(filters["watch"]), filters["nr"], listener=True))
    ready.set()
    ended.append((libc.open(path, os.O_RDONLY), ctypes.get_errno()))  # waits for the supervisor
    path.value = b"/grader/written-after-the-syscall-ended"  # the same memory, reused
    moved_on.set()
    os.write(done_write, b"x")
    finished.wait(10)  # alive while the supervisor reads its memory


thread = threading.Thread(target=target)
thread.start()
ready.wait(10)
records = kernel_side._records


def late_records(*args):  # a supervisor descheduled between receiving the notification and reading memory
    signal.pthread_kill(thread.ident, signal.SIGUSR1)
    moved_on.wait(10)
    return records(*args)


kernel_side._records = late_records
observed = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_APPEND)
config = {"seccomp": filters, "python": python_paths(), "allowed": ["/usr", "/proc"], "tmp": "/tmp"}
kernel_side._supervise(listener[0], done_read, observed, os.open("/proc", os.O_DIRECTORY),
                       {"config": config, "cwd": "/tmp"})
finished.set()
thread.join(10)
print(json.dumps(ended))
'''


def test_memory_read_after_a_signal_ended_the_syscall_is_no_record(tmp_path):
    """seccomp_unotify(2): a signal ends the wait of a notified syscall, and the thread goes on and may
    reuse the memory that held its arguments before the supervisor reads it (a supervisor slowed down
    by load; here the signal is sent from inside the read). The supervisor checks that the notification
    is still waiting (SECCOMP_IOCTL_NOTIF_ID_VALID) after reading: nothing is recorded of a syscall that
    did not run, so a record does not depend on when the grader's processes were scheduled."""
    observed = tmp_path / "observed"
    run = subprocess.run([sys.executable, "-c", ENDED_BY_A_SIGNAL, str(observed)], capture_output=True, text=True,
                         timeout=60, check=False)
    assert run.returncode == 0, run.stderr[-2000:]
    assert json.loads(run.stdout) == [[-1, errno.EINTR]]  # the open failed: it never ran
    assert read_observed(str(observed)) == []  # without the check: ("file", "/grader/written-after-...")
