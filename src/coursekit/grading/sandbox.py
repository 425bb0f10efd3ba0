"""Limits for the kernel that runs a submission; called by the kernel itself at start-up.

`SandboxExecute` passes `--IPKernelApp.exec_lines=[...]` so that each grading kernel runs
`limit_resources(...)` before any student code. Soft and hard limits are set equal, so student code
cannot raise them again (unless the grader runs as root: see autograder/README.md).
"""

from __future__ import annotations

import resource
import signal


def limit_resources(memory_bytes: int, file_bytes: int) -> None:
    """Cap the address space (allocations beyond it raise MemoryError) and the size of written files."""
    resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
    # A write past RLIMIT_FSIZE raises OSError (EFBIG) instead of killing the kernel with SIGXFSZ.
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (file_bytes, file_bytes))


def startup_line(memory_bytes: int, file_bytes: int) -> str:
    """The kernel `exec_lines` entry that applies the limits and leaves no name behind."""
    return (f"import coursekit.grading.sandbox as _ck_sandbox; "
            f"_ck_sandbox.limit_resources({memory_bytes}, {file_bytes}); del _ck_sandbox")
