"""Running submissions: the work of a grading worker, in a local process or on a Dask worker.

A task is plain data: a sanitised notebook (JSON text) in, the executed notebook (JSON text, outputs
already capped) out. A worker never opens the gradebook or the course folder, so the same function
runs in the local pool (`coursekit.grading.sandbox.pool`) or on any machine of a Dask cluster; the trusted
recorder in the `coursekit grade` process is the only writer.

Each worker keeps one kernel started ahead: while a submission runs, the kernel for the next one
boots. Every kernel serves exactly one submission and is killed when that submission is done; each
is a fresh fork of the worker's kernel zygote (sandbox.KernelZygote), which has the kernel's
libraries imported once.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import tempfile
import threading
import weakref
from dataclasses import dataclass

import nbformat
from jupyter_core.utils import run_sync
from nbformat.notebooknode import NotebookNode
from nbformat.v4.nbjson import BytesEncoder
from traitlets.config import Config

from coursekit.grading.course import worker_steps
from coursekit.grading.sandbox.bubblewrap import KernelZygote, SandboxRoot, become_subreaper
from coursekit.grading.sandbox.executor import SandboxExecute


def task_json(nb: NotebookNode) -> str:
    """A notebook as the JSON text a task carries (recorder to worker, and back): what nbformat.reads
    reads as nbformat.writes' text, without its indentation, which makes `json` use its pure-Python
    encoder (several times slower, for a text that no one reads)."""
    return json.dumps(nb, ensure_ascii=False, cls=BytesEncoder)


@dataclass
class _Kernel:
    """A started kernel, the executor bound to it, and the scratch folder it runs in."""

    executor: SandboxExecute
    scratch: str


class Runner:
    """Runs submissions one after another, each in its own fresh kernel, with the next one booting.

    Everything its sandboxes put on disk goes into `folder`: the root the pool made for this worker
    (and removes whole when the worker is gone), or else a SandboxRoot of the runner's own, removed by
    close() (or when the runner is collected, or when its process exits: a Dask worker's runner).
    Its kernels are forked by `zygote`, a shared one (KernelZygote(shared=True)) that the runner
    borrows, or else by a zygote of its own."""

    def __init__(self, config: Config, folder: str | None = None, zygote: KernelZygote | None = None):
        self.config = config
        self._root = SandboxRoot() if folder is None else None
        self.folder = folder if self._root is None else self._root.path
        if self._root is not None:
            weakref.finalize(self, self._root.remove)
        steps, _ = worker_steps(config.Autograde.autograde_preprocessors)
        if not steps or steps[0] is not SandboxExecute:
            raise ValueError("the autograde pipeline must start with SandboxExecute")
        self.after = [step(config=config) for step in steps[1:]]
        become_subreaper()  # a killed sandbox's processes come to this worker, which reaps them at once
        self.zygote = zygote or KernelZygote()  # the grading run's shared one (borrowed), or its own
        self.spare: _Kernel | None = None
        self.current: _Kernel | None = None

    def _start(self) -> _Kernel:
        scratch = tempfile.mkdtemp(prefix="ck-grade-", dir=self.folder)  # the kernel's working folder, not the course
        executor = SandboxExecute(config=self.config)
        executor.zygote, executor.folder = self.zygote, self.folder
        executor.km = executor.create_kernel_manager()
        executor.start_new_kernel(cwd=scratch)  # returns once the process is launched; it boots meanwhile
        return _Kernel(executor, scratch)

    def run(self, notebook: str, more: bool = True) -> str:
        """Execute one sanitised notebook (JSON) and return it executed, with capped outputs (JSON).
        With `more` (another notebook may follow), the next kernel boots meanwhile."""
        kernel = self.current = self.spare or self._start()
        self.spare = None
        try:
            if more:
                self.spare = self._start()
            nb = nbformat.reads(notebook, as_version=4)
            resources = {"metadata": {"path": kernel.scratch}}
            nb, resources = kernel.executor.preprocess(nb, resources, km=kernel.executor.km)
            for step in self.after:
                nb, resources = step(nb, resources)  # __call__: only steps that are enabled, as in nbconvert
            return task_json(nb)
        finally:
            self.current = None
            self._stop(kernel)

    @staticmethod
    def _stop(kernel: _Kernel) -> None:
        km = kernel.executor.km
        if km is not None and km.has_kernel:
            run_sync(km.shutdown_kernel)(now=True)  # a spare that never ran: nothing of it is kept
        if km is not None:
            km.remove_socket_dir()  # done already for a kernel that ran
        shutil.rmtree(kernel.scratch, ignore_errors=True)

    def close(self) -> None:
        if self.spare is not None:
            self._stop(self.spare)
            self.spare = None
        self.zygote.close()
        if self._root is not None:
            self._root.remove()

    def kill(self) -> None:
        """SIGKILL every kernel of this runner now (from a signal handler: no event loop needed)."""
        for kernel in (self.current, self.spare):
            process = kernel and kernel.executor.km and getattr(kernel.executor.km.provisioner, "process", None)
            if process is not None:
                with contextlib.suppress(OSError):
                    os.killpg(process.pid, signal.SIGKILL)  # kernels lead their own process group
                shutil.rmtree(kernel.scratch, ignore_errors=True)
        self.zygote.kill()


_runners = threading.local()  # one warm Runner per worker thread (Dask runs tasks in threads)


def run_on_dask_worker(student_id: str, notebook: str, config: Config) -> tuple[str, str]:
    """Dask task: run one submission on whichever worker the scheduler picked; (student_id, executed)."""
    runner = getattr(_runners, "runner", None)
    if runner is None:
        runner = _runners.runner = Runner(config)
    return student_id, runner.run(notebook)
