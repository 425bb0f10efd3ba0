"""The grading sandbox itself: what a kernel in it sees, the refusal without it, --no-sandbox, and the
sanitiser of student content."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import json
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import nbformat
import pytest
from grading_support import REPO, read_rows
from submission_kinds import k_correct

from coursekit.cli import main
from coursekit.grading.course import Course
from coursekit.grading.preprocessors import clean_markdown, sanitize_output
from coursekit.grading.sandbox import bubblewrap as sandbox
from coursekit.grading.sandbox import seccomp
from coursekit.grading.sandbox.bubblewrap import HOME, Limits, SandboxKernelManager, unavailable_reason
from coursekit.grading.sandbox.executor import ARM_LINE, KERNEL

REPORT = f"{KERNEL}.report()"  # the kernel's helper, as a user expression
PROBE = r'''
import json, os, resource, socket, sys
def tries(f):
    try:
        f()
        return "ok"
    except OSError as exc:
        return type(exc).__name__
print("SEEN" + json.dumps({
    "root": sorted(os.listdir("/")), "cwd": os.getcwd(), "env": sorted(os.environ), "uid": os.getuid(),
    "repo": sorted(os.listdir(REPO)) if os.path.isdir(REPO) else [], "usr_bin": os.path.exists("/usr/bin"),
    "pid": os.getpid(), "processes": sorted(int(e) for e in os.listdir("/proc") if e.isdigit()),
    "status": {k: v.strip() for k, v in (l.split(":", 1) for l in open("/proc/self/status").read().splitlines())
               if k in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb", "NoNewPrivs", "Seccomp")},
    "write_home": tries(lambda: open("x", "w").write("x")),
    "write_venv": tries(lambda: open(os.path.join(os.path.dirname(os.__file__), "x"), "w")),
    "write_connection": tries(lambda: open(sys.argv[sys.argv.index("-f") + 1], "a")),
    "plant_next_to_it": tries(lambda: open(os.path.dirname(sys.argv[sys.argv.index("-f") + 1]) + "/x", "w")),
    "net": sorted(os.listdir("/sys/class/net")) if os.path.exists("/sys/class/net") else [],
    "tcp": tries(lambda: socket.create_connection(("127.0.0.1", 22), timeout=1)),
    "limits": {n: resource.getrlimit(getattr(resource, n))[0]
               for n in ("RLIMIT_AS", "RLIMIT_FSIZE", "RLIMIT_NPROC")},
}))
'''


@contextlib.asynccontextmanager
async def armed_sandbox_kernel():
    """(manager, client) of one sandboxed kernel with its audit hook armed; shut down after."""
    km = SandboxKernelManager(kernel_name="python3")
    await km.start_kernel(extra_arguments=[f"--IPKernelApp.exec_lines={[ARM_LINE]!r}"])
    kc = km.client()
    kc.start_channels()
    try:
        await kc.wait_for_ready(timeout=60)
        yield km, kc
    finally:
        kc.stop_channels()
        await km.shutdown_kernel(now=True)
        km.remove_socket_dir()


async def _run_in_sandbox(code: str) -> tuple[dict, dict, list[int]]:
    """Run code in one sandboxed kernel; return what it printed after SEEN, its report, and the
    processes of its sandbox left a moment after shutdown."""
    async with armed_sandbox_kernel() as (km, kc):
        started = len(km.sandbox_processes())
        seen = {}

        def output(msg):
            if msg["msg_type"] == "stream" and "SEEN" in msg["content"]["text"]:
                seen.update(json.loads(msg["content"]["text"].split("SEEN", 1)[1]))
        await kc.execute_interactive(code, timeout=60, output_hook=output)
        reply = await kc.execute_interactive("", timeout=60, user_expressions={"r": REPORT})
        report = json.loads(reply["content"]["user_expressions"]["r"]["data"]["application/json"]["reply"])
        assert len(km.sandbox_processes()) == started
    for _ in range(50):
        # reaped as the executor does: once a grading worker has run in this process (an earlier test), it
        # is a subreaper (execute.py), and a sandbox's init orphaned by its bwrap is this process's zombie
        sandbox.reap(sandbox.processes_in(km.namespace))
        if not sandbox.processes_in(km.namespace):
            break
        await asyncio.sleep(0.1)
    return seen, report, sandbox.processes_in(km.namespace)


@pytest.fixture(scope="module")
def inside():
    with ThreadPoolExecutor(1) as thread:  # its own event loop, whatever runs in this one (Playwright)
        return thread.submit(asyncio.run, _run_in_sandbox(PROBE.replace("REPO", repr(str(REPO))))).result()


def test_the_kernel_sees_python_and_its_scratch_folder_only(inside):
    seen, _, _ = inside
    # the system's library folders, and the top folder of wherever this checkout's venv lives
    assert set(seen["root"]) <= {"usr", "lib", "lib64", "lib32", "etc", "proc", "dev", "tmp", "home", "root", "opt",
                                 Path(sys.prefix).resolve().parts[1]}
    assert set(seen["repo"]) <= {".venv"} and not seen["usr_bin"]  # the repository shows its venv only
    assert seen["cwd"] == HOME and seen["write_home"] == "ok" and seen["write_venv"] == "OSError"
    assert seen["write_connection"] == seen["plant_next_to_it"] == "OSError"  # no host path is writable


def test_the_kernel_has_no_network_and_a_scrubbed_environment(inside):
    seen, report, _ = inside
    assert seen["tcp"] == "ConnectionRefusedError"  # its own loopback: nothing listens there
    assert set(seen["env"]) <= {"HOME", "USER", "PATH", "LANG", "TMPDIR", "PYTHONDONTWRITEBYTECODE", "MPLBACKEND",
                                "OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "PWD",
                                "TERM", "CLICOLOR", "CLICOLOR_FORCE", "FORCE_COLOR", "PAGER", "GIT_PAGER",
                                "PYDEVD_USE_FRAME_EVAL"}  # the last ones: set by ipykernel itself
    assert ["network", "127.0.0.1:22"] in report["events"] and report["patched"] == []


def test_the_kernel_has_its_own_pid_namespace_and_todays_limits(inside):
    seen, _, _ = inside
    limits = Limits()
    assert seen["pid"] == 2 and seen["processes"] == [1, 2]  # bwrap's init is 1; no zygote is in sight
    assert seen["limits"] == {"RLIMIT_AS": limits.memory, "RLIMIT_FSIZE": limits.file_size,
                              "RLIMIT_NPROC": limits.processes}


def test_the_kernel_has_no_capability_and_cannot_gain_one(inside):
    """Forked by the zygote from outside the sandbox, the kernel has dropped every privilege itself."""
    seen, _, _ = inside
    status = seen["status"]
    assert [status[k] for k in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb")] == ["0" * 16] * 5
    assert status["NoNewPrivs"] == "1"
    if sandbox.sandbox_uid() is not None:  # run as root: the kernel is a uid of its own
        assert seen["uid"] >= sandbox.SANDBOX_UID_BASE


def test_the_zygote_joins_only_the_sandbox_it_is_named(tmp_path):
    """A kernel is forked only into the sandbox whose init and PID namespace the grader names: never
    into another process's namespaces (a recycled pid), nor a sandbox bwrap has not finished."""
    zygote = sandbox.KernelZygote()
    socket_dir = tmp_path / "s"
    socket_dir.mkdir()
    observed = tmp_path / "observed"
    observed.touch()
    filter_fd = sandbox.seccomp_fd()
    bwrap = sandbox.subprocess.Popen(sandbox.bwrap_command(Limits(), str(socket_dir), sandbox.sandbox_uid(), filter_fd)
                                     + sandbox.REAPER_COMMAND, pass_fds=(filter_fd,))
    sandbox.os.close(filter_fd)
    try:
        init = sandbox.sandbox_init(bwrap)
        config = sandbox.kernel_config(Limits(), True, None, probe=True)
        with pytest.raises(RuntimeError, match="is not the init of sandbox"):
            zygote.start_kernel(bwrap.pid, sandbox.pid_namespace(init), config, [], str(observed))  # bwrap, outside
        with pytest.raises(RuntimeError, match="is not the init of sandbox"):
            zygote.start_kernel(init, sandbox.pid_namespace(bwrap.pid), config, [], str(observed))  # the grader's
        zygote.start_kernel(init, sandbox.pid_namespace(init), config, [], str(observed))  # the probe: it then ends
        assert bwrap.wait(timeout=30) != 0  # its init was killed once the kernel had ended
    finally:
        bwrap.kill()
        bwrap.wait()
        zygote.close()


def test_one_shared_zygote_serves_its_owner_and_the_processes_forked_from_it(tmp_path):
    """`coursekit grade`'s one zygote (KernelZygote(shared=True)): its probe starts it, the grading workers
    forked afterwards borrow it, two at once included (their requests serialised), and never close it; a
    borrower whose shared zygote is gone starts one of its own for its next kernels."""
    zygote = sandbox.KernelZygote(shared=True)

    def in_a_borrower(check) -> int:
        pid = sandbox.os.fork()
        if pid == 0:
            code = 1
            try:
                code = 0 if check() else 2
            finally:
                sandbox.os._exit(code)
        return pid

    def borrows() -> bool:
        started = sandbox.unavailable_reason(tmp_path, zygote=zygote) is None
        zygote.close()  # a borrower's close leaves the shared zygote running
        return started and zygote._own is None

    def starts_its_own() -> bool:
        failed = sandbox.unavailable_reason(tmp_path, zygote=zygote) is not None  # the shared one is gone
        started = sandbox.unavailable_reason(tmp_path, zygote=zygote) is None
        own = zygote._own
        zygote.close()
        return failed and started and own is not None and own.process is None

    try:
        assert sandbox.unavailable_reason(tmp_path, zygote=zygote) is None  # the owner's probe starts it
        shared = zygote.process
        borrowers = [in_a_borrower(borrows) for _ in range(2)]
        assert [sandbox.os.waitstatus_to_exitcode(sandbox.os.waitpid(pid, 0)[1]) for pid in borrowers] == [0, 0]
        assert zygote.process is shared and shared.poll() is None
        shared.kill()
        shared.wait()
        late = in_a_borrower(starts_its_own)
        assert sandbox.os.waitstatus_to_exitcode(sandbox.os.waitpid(late, 0)[1]) == 0
    finally:
        zygote.close()
    assert zygote.process is None


def test_the_owner_closes_a_shared_zygote_whose_lock_a_dead_worker_held(tmp_path):
    """Ctrl-C ends the grading workers at once, one of them maybe while it held the shared zygote's lock
    (CI: `coursekit grade` then hung in its close until the test's 120 s ran out). A worker is forked,
    takes the lock and dies holding it; the owner's close still ends the zygote."""
    zygote = sandbox.KernelZygote(shared=True)
    assert sandbox.unavailable_reason(tmp_path, zygote=zygote) is None  # the owner's probe starts it
    started = zygote.process
    pid = sandbox.os.fork()
    if pid == 0:
        zygote._lock.acquire()
        sandbox.os._exit(0)  # dies holding it, as a worker killed mid-request
    sandbox.os.waitpid(pid, 0)
    closing = ThreadPoolExecutor(1)
    try:
        closing.submit(zygote.close).result(timeout=30)
    finally:
        closing.shutdown(wait=False)
    assert zygote.process is None and started.poll() is not None


def test_bwrap_is_missing_stops_grading_before_anyone_is_graded(released_course, tmp_path, monkeypatch, capsys):
    course = Course.at(shutil.copytree(released_course.root, tmp_path / "course"))
    folder = tmp_path / "lms"
    folder.mkdir()
    nbformat.write(k_correct(nbformat.read(course.release_notebook, as_version=4)), folder / "ann.ipynb")
    monkeypatch.setattr(sandbox.shutil, "which", lambda name: None)
    assert main(["grade", str(folder), "--course", str(course.root)]) == 1
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "bubblewrap (bwrap) is not installed" in err and "--no-sandbox" in err
    assert "apt-get install bubblewrap" in err
    assert not course.submitted_notebook("ann").exists()


def test_no_linux_namespaces_is_named_with_the_fix(monkeypatch, tmp_path):
    monkeypatch.setattr(sandbox.sys, "platform", "darwin")
    assert "needs Linux namespaces" in unavailable_reason(tmp_path)


def test_a_course_inside_the_python_environment_is_refused():
    assert "keep the course outside the Python environment" in unavailable_reason(Path(sys.prefix) / "course")


def test_nothing_of_the_sandbox_outlives_its_kernel(inside):
    assert inside[2] == []


@pytest.mark.slow
def test_no_sandbox_grades_and_flags_every_row(released_course, tmp_path, monkeypatch):
    course = Course.at(shutil.copytree(released_course.root, tmp_path / "course"))
    folder = tmp_path / "lms"
    folder.mkdir()
    nbformat.write(k_correct(nbformat.read(course.release_notebook, as_version=4)), folder / "ann.ipynb")
    monkeypatch.setattr(sandbox.shutil, "which", lambda name: None)  # no bwrap is needed
    assert main(["grade", str(folder), "--course", str(course.root), "--no-sandbox", "--jobs", "1"]) == 0
    row = read_rows(course.report_csv.read_text(encoding="utf-8"))["ann"]
    assert (row["auto_total"], row["flags"]) == ("3", "unsandboxed")


# ---------------------------------------------------------------- student content in instructor pages

@pytest.mark.parametrize("markdown", ["[x](javascript:alert(1))", "[x](  JaVa&#115;cript:alert(1))",
                                      "[x]( <javascript:alert(1)>)", "[r]: javascript:alert(1)",
                                      "![i](data:text/html,<script>alert(1)</script>)"])
def test_markdown_links_to_scripts_are_broken(markdown):
    cleaned = clean_markdown(markdown)
    assert "\\(" in cleaned or "\\:" in cleaned


def test_markdown_keeps_ordinary_text_links_and_math():
    """Issue 33: math keeps its `<` (the page's Markdown renderer escapes it once; a second escape here
    was a MathJax "Misplaced &")."""
    text = "**总体方差** $\\sigma^2 < 1$，见 [讲义](https://example.org/a) 与 [图](figs/a.png)"
    assert clean_markdown(text) == text


def test_outputs_keep_text_images_and_safe_html_only():
    output = nbformat.v4.new_output("display_data", data={
        "text/html": "<b>ok</b><script>alert(1)</script><img src=x onerror=alert(1)>",
        "application/javascript": "alert(1)", "image/svg+xml": "<svg onload=alert(1)/>", "image/png": "iVBO"})
    cleaned = sanitize_output(output)
    assert set(cleaned.data) == {"text/html", "image/png", "text/plain"}
    assert "<b>ok</b>" in cleaned.data["text/html"] and "<script" not in cleaned.data["text/html"]
    assert "<img" not in cleaned.data["text/html"]


def test_a_python_environment_under_tmp_is_bound_over_the_private_tmp(monkeypatch):
    """The private /tmp is mounted first: a venv under /tmp (a checkout there) stays visible to the kernel."""
    venv = "/tmp/checkout/.venv"
    monkeypatch.setattr(sandbox, "python_paths", lambda: [venv, "/usr/lib"])
    args = sandbox.bwrap_command(Limits(), "/tmp/sockets", uid=None, filter_fd=3)
    tmpfs = args.index("--tmpfs", 0)
    assert args[tmpfs + 1] == "/tmp"
    assert tmpfs < args.index(venv), "a bind under /tmp made before the tmpfs would be hidden by it"


# ---------------------------------------------------------------- seccomp

SYSCALLS = r'''
import ctypes, json
libc = ctypes.CDLL(None, use_errno=True)
out = {}
for name, (nr, args) in CALLS.items():
    ctypes.set_errno(0)
    result = libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(a) for a in args])
    out[name] = [result, ctypes.get_errno()]
print("SEEN" + json.dumps(out))
'''
CLONE_NEWUSER_AND_FS = 0x10000000 | 0x00000200  # invalid together: EINVAL, unless refused before
SAFE_OUTSIDE = ("ptrace", "process_vm_readv", "process_vm_writev", "keyctl", "add_key", "request_key", "bpf",
                "userfaultfd", "perf_event_open", "mount", "umount2", "unshare", "setns", "pivot_root", "clone")


def _calls() -> dict[str, tuple[int, list[int]]]:
    """Every denied syscall with arguments that make it fail harmlessly where it is allowed (-1 is no
    valid pointer, descriptor, pid or flag set), plus clone with a CLONE_NEW* flag and a control."""
    import pyseccomp

    arch = pyseccomp.system_arch()
    calls = {}
    for name in seccomp.DENIED + ("clone3",):
        try:
            calls[name] = (pyseccomp.resolve_syscall(arch, name), [-1] * 6)
        except (ValueError, OSError, RuntimeError):
            continue  # not a syscall of this architecture
    calls["clone"] = (pyseccomp.resolve_syscall(arch, "clone"), [CLONE_NEWUSER_AND_FS, 0, 0, 0, 0, 0])
    calls["dup"] = (pyseccomp.resolve_syscall(arch, "dup"), [-1] * 6)  # allowed: EBADF
    return calls


@pytest.fixture(scope="module")
def syscalls_inside():
    calls = _calls()
    code = SYSCALLS.replace("CALLS", repr(calls))
    with ThreadPoolExecutor(1) as thread:
        seen, _, _ = thread.submit(asyncio.run, _run_in_sandbox(code)).result()
    return calls, seen


def test_seccomp_is_on_in_the_kernel(inside):
    assert inside[0]["status"]["Seccomp"] == "2"  # filter mode, loaded before any cell ran


@pytest.mark.parametrize("name", seccomp.DENIED + ("clone3", "clone"))
def test_each_denied_syscall_fails_inside_a_graded_kernel(syscalls_inside, name):
    """ENOSYS from a syscall the machine has: only the sandbox's filter answers that
    (coursekit.grading.sandbox.seccomp.DENIED_ERRNO); `clone` is refused for its CLONE_NEWUSER flag."""
    calls, seen = syscalls_inside
    if name not in calls:
        pytest.skip(f"{name} is not a syscall of this architecture")
    assert seen[name] == [-1, errno.ENOSYS], name
    assert seen["dup"] == [-1, errno.EBADF]  # the control: an allowed syscall answers for itself


def test_the_denied_syscalls_exist_outside_the_sandbox():
    """The same calls outside the sandbox fail for their arguments, not with ENOSYS: the filter is what
    refuses them inside (run in a child process; the harmless ones only)."""
    calls = {name: call for name, call in _calls().items() if name in SAFE_OUTSIDE}
    out = subprocess.run([sys.executable, "-c", SYSCALLS.replace("CALLS", repr(calls))], capture_output=True,
                         text=True, check=True).stdout
    seen = json.loads(out.split("SEEN", 1)[1])
    assert {name: e for name, (_, e) in seen.items() if e == errno.ENOSYS} == {}


async def _cpu_reads() -> dict:
    """Reads of a sandbox's CPU time (SandboxKernelManager.cpu_seconds) around a child process of its kernel."""
    opened = []
    real_open = sandbox.os.open

    def counting_open(path, *args, **kwargs):
        opened.append(path)
        return real_open(path, *args, **kwargs)

    async with armed_sandbox_kernel() as (km, kc):
        first = km.cpu_seconds()
        sandbox.os.open = counting_open
        try:
            again = km.cpu_seconds()
        finally:
            sandbox.os.open = real_open
        await kc.execute_interactive("import subprocess, sys\nchild = subprocess.Popen([sys.executable, '-c', "
                                     "'import time; time.sleep(60)'])", timeout=60)
        with_child = km.cpu_seconds(), len(km._stat_fds)
        await kc.execute_interactive("child.kill(); child.wait(); sum(range(3_000_000))", timeout=60)
        after_child = km.cpu_seconds(), len(km._stat_fds)
    return {"first": first, "again": again, "opened": opened, "with_child": with_child, "after_child": after_child}


def test_a_sandboxs_cpu_time_is_read_again_through_the_files_opened_the_first_time():
    """The grader reads a sandbox's CPU time every POLL and after every reply of the judge: once each
    process's stat file is open, a read opens nothing; a process that ends has its file closed."""
    with ThreadPoolExecutor(1) as thread:
        reads = thread.submit(asyncio.run, _cpu_reads()).result()
    assert reads["opened"] == [] and reads["again"] >= reads["first"] > 0
    (with_child, open_with_child), (after_child, open_after_child) = reads["with_child"], reads["after_child"]
    assert open_with_child == open_after_child + 1  # the child's file, closed once it has ended
    assert after_child > with_child >= reads["again"]


async def _statuses_of_a_cell_and_a_request() -> dict[str, list[str]]:
    """{msg_type of the parent: the busy/idle statuses on IOPub} for one cell and one grader request."""
    from coursekit.grading.sandbox import kernel_side

    async with armed_sandbox_kernel() as (_, kc):
        cell = kc.execute("x = 1")
        request = kc.session.msg(kernel_side.REQUEST, {"helper": "report", "args": []})
        kc.shell_channel.send(request)
        waiting = {cell, request["header"]["msg_id"]}
        while waiting:  # the cell's execute_reply and the request's REPLY
            waiting.discard((await kc.get_shell_msg(timeout=30))["parent_header"]["msg_id"])
        last = kc.execute("y = 2")  # its idle comes after every status above
        statuses: dict[str, list[str]] = {}
        while True:
            msg = await kc.get_iopub_msg(timeout=30)
            if msg["msg_type"] == "status":
                parent = msg["parent_header"].get("msg_type", "")
                statuses.setdefault(parent, []).append(msg["content"]["execution_state"])
                if msg["parent_header"].get("msg_id") == last and msg["content"]["execution_state"] == "idle":
                    return statuses


def test_a_grader_request_publishes_no_status_and_a_cell_its_busy_and_idle():
    """The grader reads its requests' replies on the shell channel; busy/idle for them were read only to be
    dropped. A cell keeps both (nbclient ends a cell on its idle)."""
    with ThreadPoolExecutor(1) as thread:
        statuses = thread.submit(asyncio.run, _statuses_of_a_cell_and_a_request()).result()
    assert statuses.get("execute_request", [])[:2] == ["busy", "idle"], statuses
    assert "coursekit_request" not in statuses, statuses


async def _printed_characters_sent(*cells: str) -> list[int]:
    """The characters of printed text the kernel sent for each cell."""
    async with armed_sandbox_kernel() as (_, kc):
        sent = []

        def output(msg):
            if msg["msg_type"] == "stream":
                sent[-1] += len(msg["content"]["text"])
        for code in cells:
            sent.append(0)
            await kc.execute_interactive(code, timeout=60, output_hook=output)
        return sent


def test_a_kernel_sends_no_more_of_a_cells_prints_than_the_grader_keeps():
    """The grader keeps MAX_KEPT_OUTPUT characters of what a cell prints; a kernel that printed 3 MB
    through stdout and stderr sends as many, not all of it, to be encoded, signed and read for nothing."""
    from coursekit.grading.sandbox import kernel_side
    from coursekit.grading.sandbox.executor import MAX_KEPT_OUTPUT

    assert kernel_side.STREAM_KEPT == MAX_KEPT_OUTPUT  # so the text the grader keeps is the same
    code = f"import sys\nprint('x' * {MAX_KEPT_OUTPUT // 2})\nsys.stderr.write('y' * {MAX_KEPT_OUTPUT})\n" \
           f"sys.stderr.flush()\nprint('z' * {MAX_KEPT_OUTPUT * 2})"
    with ThreadPoolExecutor(1) as thread:
        sent = thread.submit(asyncio.run, _printed_characters_sent(code, "print('the next cell')")).result()
    assert sent == [MAX_KEPT_OUTPUT, len("the next cell\n")]  # the cap is each cell's own
