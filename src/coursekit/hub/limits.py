"""CPU and memory limits of one user's server: a cgroup (v1 controllers memory and cpu) when this
process may create one (root on a cgroup v1 or hybrid host, as here), else per-process rlimits.

- cgroup: memory.limit_in_bytes caps the server and every kernel and terminal it starts, together
  (the kernel's OOM killer ends the biggest process of the group); cpu.cfs_quota_us gives the group
  `cpu` cores' worth of time per period, however many processes it runs.
- fallback: RLIMIT_AS = the memory, per process (a server's kernels each get the full amount), and
  the CPU affinity is ceil(cpu) cores (whole cores only). docs/hub.md says what that does not cover.
The group of the server's first process is joined before it execs (preexec), so nothing escapes.
"""

from __future__ import annotations

import math
import os
import resource
import signal
import time
from pathlib import Path

CGROUP_V1 = Path("/sys/fs/cgroup")
CONTROLLERS = ("memory", "cpu")
CFS_PERIOD_US = 100_000


def cgroups_usable() -> bool:
    """True when the v1 memory and cpu hierarchies exist and this process may create groups there."""
    return all((CGROUP_V1 / c).is_dir() and os.access(CGROUP_V1 / c, os.W_OK)
               and (CGROUP_V1 / c / "cgroup.procs").exists() for c in CONTROLLERS)


class ServerLimits:
    """The limits of one server, in the group `parent/name` (parent: one per hub)."""

    def __init__(self, parent: str, name: str, cpu: float, memory: int):
        self.parent, self.name, self.cpu, self.memory = parent, name, cpu, memory
        self.cgroup = cgroups_usable()

    def folders(self) -> list[Path]:
        return [CGROUP_V1 / c / self.parent / self.name for c in CONTROLLERS]

    def create(self) -> None:
        """Make (or reset) the groups and write the limits; nothing to do for the fallback."""
        if not self.cgroup:
            return
        memory, cpu = self.folders()
        for folder in (memory, cpu):
            folder.mkdir(parents=True, exist_ok=True)
        (memory / "memory.limit_in_bytes").write_text(str(self.memory))
        (cpu / "cpu.cfs_period_us").write_text(str(CFS_PERIOD_US))
        (cpu / "cpu.cfs_quota_us").write_text(str(int(self.cpu * CFS_PERIOD_US)))

    def apply_to_self(self, slot: int = 0) -> None:
        """In the server's first process, before exec: join the groups, or set the fallback limits."""
        if self.cgroup:
            for folder in self.folders():
                (folder / "cgroup.procs").write_text(str(os.getpid()))
            return
        resource.setrlimit(resource.RLIMIT_AS, (self.memory, self.memory))
        cores = sorted(os.sched_getaffinity(0))
        wanted = max(1, min(len(cores), math.ceil(self.cpu)))
        os.sched_setaffinity(0, {cores[(slot * wanted + k) % len(cores)] for k in range(wanted)})


def group_pids(parent: str) -> set[int]:
    """Every process in any server group of the hub group `parent`."""
    found: set[int] = set()
    for controller in CONTROLLERS:
        for procs in (CGROUP_V1 / controller / parent).glob("*/cgroup.procs"):
            found |= {int(p) for p in procs.read_text().split()}
    return found


def end_group(parent: str, timeout: float = 10) -> set[int]:
    """SIGKILL every process left in the hub's groups, then remove the groups; return the pids killed."""
    killed: set[int] = set()
    if not cgroups_usable():
        return killed
    deadline = time.monotonic() + timeout
    while (pids := group_pids(parent)) and time.monotonic() < deadline:
        for pid in pids - killed:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        killed |= pids
        time.sleep(0.1)
    for controller in CONTROLLERS:
        top = CGROUP_V1 / controller / parent
        for folder in sorted(top.glob("*"), reverse=True) if top.is_dir() else []:
            if folder.is_dir():
                try:
                    folder.rmdir()
                except OSError:
                    pass
        try:
            top.rmdir()
        except OSError:
            pass
    return killed
