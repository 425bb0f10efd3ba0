"""The seccomp filters of a grading sandbox, built here with libseccomp (pyseccomp) as BPF programs.

- `deny`: the syscalls a grading kernel never needs, each failing with ENOSYS (as on a kernel
  without them: programs take that for "not supported", and no existing syscall answers ENOSYS
  otherwise, so a denial is told apart from a missing privilege): debugging other
  processes (ptrace, process_vm_*, kcmp, pidfd_getfd), kernel keyrings, BPF, userfaultfd, perf,
  mounts and namespaces (mount, umount2, unshare, setns, pivot_root, chroot, new mount API, and
  clone with a CLONE_NEW* flag), kexec and modules, io_uring (whose file operations no seccomp
  filter sees), file handles, and the clock, swap, reboot and accounting calls. clone3 is denied
  too, so the C library falls back to clone, whose flags the filter can read. bwrap loads it
  for the sandbox's init (`--seccomp FD`); the kernel loads it itself (kernel_side._in_sandbox),
  since the zygote forks the kernel into the sandbox from outside.
- `watch`: the file, program and network syscalls (every socket call that can name an address:
  connect, sendto with an address, sendmsg, sendmmsg), sent to the supervisor outside the kernel
  (kernel_side._supervise), which records them and lets each one run unchanged.
A syscall of another ABI (i386 or x32 on x86_64) kills the process: libseccomp's filters accept
the native architecture only.
"""

from __future__ import annotations

import base64
import errno
import functools
import tempfile

DENIED_ERRNO = errno.ENOSYS
DENIED = (
    "ptrace", "process_vm_readv", "process_vm_writev", "kcmp", "pidfd_getfd",
    "keyctl", "add_key", "request_key", "bpf", "userfaultfd", "perf_event_open",
    "mount", "umount2", "unshare", "setns", "pivot_root", "chroot", "mount_setattr", "move_mount",
    "open_tree", "fsopen", "fsconfig", "fsmount", "fspick",
    "kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module",
    "io_uring_setup", "io_uring_enter", "io_uring_register", "name_to_handle_at", "open_by_handle_at",
    "swapon", "swapoff", "reboot", "acct", "quotactl", "syslog", "settimeofday", "clock_settime",
    "clock_adjtime", "adjtimex", "personality", "iopl", "ioperm", "lookup_dcookie", "uselib", "vhangup",
)
CLONE_NEW = {"CLONE_NEWNS": 0x00020000, "CLONE_NEWCGROUP": 0x02000000, "CLONE_NEWUTS": 0x04000000,
             "CLONE_NEWIPC": 0x08000000, "CLONE_NEWUSER": 0x10000000, "CLONE_NEWPID": 0x20000000,
             "CLONE_NEWNET": 0x40000000, "CLONE_NEWTIME": 0x00000080}
# syscall -> (record kind, index of its path argument, index of the folder handle it is relative to
# or -1). Network: (kind, index of the address, index of its length), or a message header's address
# (MSGHDR: sendmsg's struct msghdr; MMSGHDR: sendmmsg's vector of them, its length the next argument).
MSGHDR, MMSGHDR = -2, -3
WATCHED = {
    "open": ("file", 0, -1), "openat": ("file", 1, 0), "openat2": ("file", 1, 0), "creat": ("file", 0, -1),
    "execve": ("subprocess", 0, -1), "execveat": ("subprocess", 1, 0),
    "connect": ("network", 1, 2), "sendto": ("network", 4, 5), "sendmsg": ("network", 1, MSGHDR),
    "sendmmsg": ("network", 1, MMSGHDR),
    "symlink": ("symlink", 0, -1), "symlinkat": ("symlink", 0, -1), "link": ("symlink", 0, -1),
    "linkat": ("symlink", 1, 0),
}
# sendto names an address only when its address argument is not NULL (send() on a connected socket,
# every message the kernel sends, is sendto(fd, buf, len, flags, NULL, 0)): only those are watched
ADDRESS_WHEN_SET = {"sendto": 4}


def _export(syscall_filter) -> bytes:
    with tempfile.TemporaryFile() as f:
        syscall_filter.export_bpf(f)
        f.seek(0)
        return f.read()


def _known(seccomp, name: str) -> bool:
    try:
        seccomp.resolve_syscall(seccomp.system_arch(), name)
        return True
    except (ValueError, OSError, RuntimeError):
        return False


@functools.cache
def filters() -> dict:
    """{"deny": BPF, "watch": BPF (both base64), "nr": the seccomp syscall's number, "watched": {nr: [kind,
    argument, folder handle or address length argument (see WATCHED)]}}; raises ImportError or OSError
    when libseccomp is not there."""
    import pyseccomp as seccomp

    arch = seccomp.system_arch()
    deny = seccomp.SyscallFilter(seccomp.ALLOW)
    for name in DENIED:
        if _known(seccomp, name):
            deny.add_rule(seccomp.ERRNO(DENIED_ERRNO), name)
    for flag in CLONE_NEW.values():
        deny.add_rule(seccomp.ERRNO(DENIED_ERRNO), "clone", seccomp.Arg(0, seccomp.MASKED_EQ, flag, flag))
    if _known(seccomp, "clone3"):
        deny.add_rule(seccomp.ERRNO(DENIED_ERRNO), "clone3")
    watch = seccomp.SyscallFilter(seccomp.ALLOW)
    watched = {}
    for name, (kind, argument, extra) in WATCHED.items():
        if _known(seccomp, name):
            if name in ADDRESS_WHEN_SET:
                watch.add_rule(seccomp.NOTIFY, name, seccomp.Arg(ADDRESS_WHEN_SET[name], seccomp.NE, 0))
            else:
                watch.add_rule(seccomp.NOTIFY, name)
            watched[str(seccomp.resolve_syscall(arch, name))] = [kind, argument, extra]
    return {"deny": base64.b64encode(_export(deny)).decode(), "watch": base64.b64encode(_export(watch)).decode(),
            "nr": seccomp.resolve_syscall(arch, "seccomp"), "watched": watched}


def deny_program() -> bytes:
    """The deny filter as the raw BPF bytes bwrap reads from `--seccomp FD`."""
    return base64.b64decode(filters()["deny"])


def unavailable_reason() -> str | None:
    """Why the filters cannot be built here (one line), or None."""
    try:
        filters()
    except (ImportError, OSError, RuntimeError, ValueError) as exc:
        return f"the seccomp filters cannot be built ({type(exc).__name__}: {exc}); install libseccomp2"
    return None
