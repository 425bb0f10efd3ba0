"""Do grading kernels exit by themselves after a shutdown request, and what CPU does each cost?

Starts N sandboxed kernels one after another the way the grader does (SandboxKernelManager, the
grader's kernel arguments, one kernel zygote for all, as one grading worker has), runs one cell in
each, asks it to shut down (shutdown_kernel(now=False), as the grader does) and counts the kernels
the manager had to signal (SIGTERM after half of its wait, SIGKILL after the rest) instead of seeing
them exit. A signalled kernel costs that wait in wall time, and its sandbox's CPU time is counted
nowhere. Also prints the shutdown's wall seconds and the kernels' CPU seconds (their processes and
the zygote's, reaped by this one as a subreaper) per kernel.
Run: .venv/bin/python bench/kernel_exit.py [N] [--no-sandbox]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import time
from collections import Counter

from coursekit.grading.sandbox import bubblewrap as sandbox
from coursekit.grading.sandbox.executor import ARM_LINE

GRADER_ARGUMENTS = [f"--IPKernelApp.exec_lines={[ARM_LINE]!r}", "--IPKernelApp.log_level=CRITICAL",
                    "--HistoryManager.enabled=False"]


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


async def one_kernel(sandboxed: bool, zygote: sandbox.KernelZygote) -> tuple[float, str]:
    """(seconds from the shutdown request to the kernel's end, how it ended)."""
    manager = sandbox.SandboxKernelManager()
    manager.sandboxed = sandboxed
    manager.zygote = zygote
    await manager.start_kernel(extra_arguments=GRADER_ARGUMENTS)
    client = manager.client()
    client.start_channels()
    try:
        await client.wait_for_ready(timeout=120)
        await client.execute_interactive("x = sum(range(1000)); print(x)", timeout=60,
                                         output_hook=lambda msg: None)
    finally:
        client.stop_channels()
    started = time.monotonic()
    await manager.shutdown_kernel(now=False)
    seconds = time.monotonic() - started
    ended = {"ShutdownRequest": "exited", "SigtermRequest": "SIGTERM", "SigkillRequest": "SIGKILL"}
    how = ended.get(manager._shutdown_status.value, str(manager._shutdown_status.value))
    if manager.namespace:
        deadline = time.monotonic() + 5
        while (left := sandbox.processes_in(manager.namespace)) and time.monotonic() < deadline:
            sandbox.reap(left)
            await asyncio.sleep(0.01)
    manager.remove_socket_dir()
    return seconds, how


async def main(count: int, sandboxed: bool) -> None:
    sandbox.become_subreaper()
    before = children_cpu()
    zygote = sandbox.KernelZygote()
    results = [await one_kernel(sandboxed, zygote) for _ in range(count)]
    zygote.close()
    cpu = (children_cpu() - before) / count
    seconds = [s for s, _ in results]
    ends = Counter(how for _, how in results)
    print(f"{count} kernels ({'sandboxed' if sandboxed else 'no sandbox'}): "
          + ", ".join(f"{how} {n}" for how, n in sorted(ends.items()))
          + f"; shutdown wall s mean {sum(seconds) / count:.3f}, max {max(seconds):.3f}; "
          f"kernels' CPU s per kernel {cpu:.3f}; load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("count", nargs="?", type=int, default=20)
    parser.add_argument("--no-sandbox", action="store_true")
    options = parser.parse_args()
    asyncio.run(main(options.count, not options.no_sandbox))
