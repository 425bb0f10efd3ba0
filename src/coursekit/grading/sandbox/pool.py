"""Where the submissions run: local worker processes (default) or a Dask cluster (`--scheduler`).

Both take (student_id, sanitised notebook JSON) pairs from an iterator and yield
(student_id, executed notebook JSON or None, failure message or None) as each finishes. Both keep a
bounded number of notebooks in flight, so the class is streamed and memory does not grow with it.
Dask is imported only by `DaskWorkers`, i.e. only when the instructor passes `--scheduler`.

Each local worker's sandboxes keep everything they put on disk in one folder of its own (a
SandboxRoot this process makes and removes whole once the worker has ended: closed, lost or killed),
so no grading run leaves anything in the temp folder, whatever became of its workers.

A local worker that spends longer than `student_wall_limit(config)` on one student (a watchdog far
above the executor's own CPU-time and wall-clock limits, for a grader that hangs) is killed by a
thread of its own, whatever the grading loop is waiting for: that student fails with an OVER_BUDGET
failure, the ones it had queued go to a new worker.
"""

from __future__ import annotations

import collections
import contextlib
import multiprocessing
import os
import queue
import signal
import sys
import threading
import time
from collections.abc import Iterator
from multiprocessing import resource_tracker
from multiprocessing.connection import Connection, wait

from traitlets.config import Config

from coursekit.errors import CourseError
from coursekit.grading.boundary import StudentStep, reason
from coursekit.grading.judge.trusted import OverBudget
from coursekit.grading.sandbox.bubblewrap import KernelZygote, SandboxRoot, remove_stale_roots

Task = tuple[str, str]
Result = tuple[str, str | None, str | None]
PER_WORKER = 2  # notebooks in flight per worker: the one running and the next, already sent
SCHEDULER_TIMEOUT = "10s"  # Dask retries a refused connection until then
OVER_BUDGET = "over_budget: "  # a failure that names the budget it exceeded (flag over_budget)
WALL_FACTOR = 10  # as the executor's: its wall-clock backstops are this many times its CPU limits
CLOSE_GRACE = 30.0  # seconds close() waits for the workers to finish on their own, all together
WATCH_INTERVAL = 1.0  # seconds between two looks of the watchdog at the workers


def student_wall_limit(config: Config) -> float:
    """Seconds a worker may spend on one student: two whole runs (a replay) at the executor's
    wall-clock backstop, and a minute more for starting and recording."""
    section = config.get("SandboxExecute", {})
    return 2.0 * section.get("notebook_timeout", 60) * WALL_FACTOR + 60


def _failure(exc: BaseException) -> str:
    """One line for the student's row; a budget the judge enforced keeps its name (flag over_budget)."""
    if isinstance(exc, OverBudget):
        return OVER_BUDGET + " ".join(exc.message.split())[:200]
    return reason(exc)


def _serve(conn: Connection, config: Config, folder: str, zygote: KernelZygote | None = None) -> None:
    """A local worker: run the tasks sent over conn until None or the pipe closes, its sandboxes' files
    in `folder` (the parent's, which removes it), its kernels forked by the parent's shared `zygote`
    (forked workers only) or by one of its own."""
    from coursekit.grading.sandbox.execute import Runner

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is for `coursekit grade`, which then stops us
    runner = Runner(config, folder, zygote)

    def stop(signum, frame):
        runner.kill()  # no kernel outlives its worker
        os._exit(1)

    signal.signal(signal.SIGTERM, stop)
    tasks: queue.SimpleQueue = queue.SimpleQueue()

    def read() -> None:
        """Take every message as it comes: the grader's send never waits on the student this worker runs
        (a send it waited on would hold every other worker's result too)."""
        try:
            while (message := conn.recv()) is not None:
                tasks.put(message)
        except (EOFError, OSError):
            pass  # the grader is gone
        tasks.put(None)

    threading.Thread(target=read, name="grading-tasks", daemon=True).start()
    ahead: list = []  # the message after the current task, when it was already there (None: no more tasks)
    try:
        while True:
            task = ahead.pop() if ahead else tasks.get()
            if task is None:
                break
            with contextlib.suppress(queue.Empty):
                ahead.append(tasks.get_nowait())
            student_id, notebook = task
            result = None
            with StudentStep([], "") as step:  # one student's failure, BaseException included, is its own
                result = runner.run(notebook, more=ahead != [None])  # no kernel booted for no one
            if step.failed:
                conn.send((student_id, None, _failure(step.error)))
            else:
                conn.send((student_id, result, None))
    finally:
        runner.close()


class LocalWorkers:
    """`jobs` worker processes on this machine: children of this one, forked with its imports loaded.

    Made before this process starts any thread (so forking is safe); a system without fork
    (macOS's default, Windows) spawns them instead, and each imports coursekit once.

    The watchdog is a thread of its own (`_watch`): whatever the grading loop is doing (sending a
    notebook to a busy worker, which waits until that worker reads it; recording a result), a worker
    whose oldest student has run past `wall_limit` is ended, and the loop then finds its pipe closed."""

    def __init__(self, jobs: int, config: Config, zygote: KernelZygote | None = None):
        import coursekit.grading.sandbox.execute  # noqa: F401 (loaded once here, inherited by every worker)

        self.config = config
        self.zygote = zygote  # shared by the forked workers (a spawned one starts its own); its owner closes it
        self.wall_limit = student_wall_limit(config)
        self.workers = []
        self.backlog: collections.deque = collections.deque()  # tasks of a lost worker, sent before new ones
        self._lock = threading.Lock()  # the pending lists, between the grading loop and the watchdog
        self._overdue: dict[int, str] = {}  # pid of a worker the watchdog ended -> the student it ran
        self._closing = threading.Event()
        self._told_done: set[int] = set()  # pids of the workers told that no more tasks come (_tell_done)
        self._own_tracker = False
        self._roots: dict[int, SandboxRoot] = {}  # id of a worker's pipe -> its sandboxes' folder
        remove_stale_roots()  # those of earlier runs that were killed before they could remove theirs
        for _ in range(jobs):
            self.workers.append(self._start("fork" if sys.platform.startswith("linux") else "spawn"))
        self._watchdog = threading.Thread(target=self._watch, name="grading-watchdog", daemon=True)
        self._watchdog.start()  # after the forks

    def _start(self, method: str) -> tuple:
        """A worker process: (process, its pipe, [(student id, task, time sent)] not answered yet)."""
        context = multiprocessing.get_context(method)
        if method != "fork" and getattr(resource_tracker._resource_tracker, "_pid", 0) is None:
            self._own_tracker = True  # spawning starts multiprocessing's resource tracker: ours to stop
        mine, theirs = context.Pipe()
        root = SandboxRoot()
        # a forked worker borrows the shared zygote; a spawned one cannot have its pipes, and starts its own
        shared = (self.zygote,) if method == "fork" and self.zygote is not None else ()
        process = context.Process(target=_serve, args=(theirs, self.config, root.path, *shared), daemon=True)
        process.start()
        theirs.close()
        self._roots[id(mine)] = root
        return process, mine, []

    def _remove_root(self, conn: Connection) -> None:
        """Remove an ended worker's folder, with whatever its sandboxes left there."""
        root = self._roots.pop(id(conn), None)
        if root is not None:
            root.remove()

    def _watch(self) -> None:
        """Until close(): end each worker whose oldest student has run past the wall limit."""
        while not self._closing.wait(WATCH_INTERVAL):
            now = time.monotonic()
            with self._lock:
                late = [(process, pending[0][0]) for process, _, pending in self.workers
                        if pending and now - pending[0][2] > self.wall_limit and process.pid not in self._overdue]
                self._overdue.update((process.pid, student_id) for process, student_id in late)
            for process, _ in late:
                _end(process)  # SIGTERM: the worker kills its kernels, then itself

    def map(self, tasks: Iterator[Task]) -> Iterator[Result]:
        tasks = iter(tasks)
        more = True
        while True:
            for worker in list(self.workers):
                process, conn, pending = worker
                if process.pid in self._told_done:  # it ends after its tasks: a lost worker's go to a fresh one
                    continue
                while (more or self.backlog) and len(pending) < PER_WORKER and worker in self.workers:
                    task = self.backlog.popleft() if self.backlog else next(tasks, None)
                    if task is None:
                        more = False
                        break
                    with self._lock:
                        pending.append((task[0], task, time.monotonic()))
                    try:
                        conn.send(task)  # waits while a busy worker's pipe is full: the watchdog still runs
                    except (OSError, ValueError) as exc:  # a dead worker's pipe: broken, reset or closed
                        with self._lock:
                            pending.pop()
                        yield from self._lost(worker, f"the grading worker was gone ({reason(exc)})", [task])
            if not more and not self.backlog:
                self._tell_done()
            busy = {conn: worker for worker in self.workers for conn in [worker[1]] if worker[2]}
            if not busy:
                if more or self.backlog:  # a lost worker's tasks, for its fresh successor
                    continue
                return
            for conn in wait(list(busy), timeout=1.0):
                worker = busy[conn]
                pending = worker[2]
                try:
                    student_id, executed, failure = conn.recv()
                    done = next(k for k, entry in enumerate(pending) if entry[0] == student_id)
                except Exception as exc:  # EOF, reset, a message that does not unpickle, or not ours
                    why = "died" if isinstance(exc, EOFError) else f"disconnected ({reason(exc)})"
                    yield from self._lost(worker, f"the grading worker {why}")
                    continue
                with self._lock:
                    pending.pop(done)
                    if done == 0 and pending:  # the next one starts now
                        sid, task, _ = pending[0]
                        pending[0] = (sid, task, time.monotonic())
                yield student_id, executed, failure

    def _tell_done(self) -> None:
        """Tell each worker, after the tasks it has, that no more will come (None, which ends it once it
        has finished them): it then boots no kernel ahead for its last notebook."""
        for process, conn, _ in self.workers:
            if process.pid not in self._told_done:
                self._told_done.add(process.pid)
                with contextlib.suppress(OSError, ValueError):
                    conn.send(None)

    def _lost(self, worker: tuple, why: str, unsent: list[Task] = ()) -> Iterator[Result]:
        """A worker died, its pipe broke, or the watchdog ended it: the student it was running fails
        with `why` (over_budget when the watchdog ended it); the ones it had queued (and `unsent`) go to
        a fresh worker, so a student who kills its worker costs no one else."""
        process, conn, pending = worker
        _end(process)  # if still alive: it kills its kernels, then itself
        self._remove_root(conn)
        conn.close()
        with self._lock:
            self.workers.remove(worker)
            overdue = self._overdue.pop(process.pid, None)
        failed = pending[:1]
        if overdue is not None:  # ended by the watchdog: its student fails, unless it had just finished
            why = f"{OVER_BUDGET}wall clock per student over {self.wall_limit:g} s"
            failed = [entry for entry in failed if entry[0] == overdue]
        for student_id, _, _ in failed:
            yield student_id, None, why
        self.backlog.extendleft(reversed([*(task for _, task, _ in pending[len(failed):]), *unsent]))
        fresh = self._start("spawn")  # spawned: this process has threads now, so no fork
        with self._lock:
            self.workers.append(fresh)

    def close(self) -> None:
        """Stop the workers: at once (SIGTERM: they kill their kernels) if notebooks are still running."""
        self._closing.set()
        self._watchdog.join()
        for process, conn, pending in self.workers:
            if pending:
                process.terminate()
            else:
                with contextlib.suppress(OSError, ValueError):
                    conn.send(None)
        deadline = time.monotonic() + CLOSE_GRACE  # each worker closes its runner (spare kernel, zygote)
        for process, _, _ in self.workers:
            process.join(timeout=max(0.0, deadline - time.monotonic()))
        for process, conn, _ in self.workers:
            if process.is_alive():
                _end(process)  # SIGTERM: it kills its kernels and zygote; SIGKILL if it is still there
            self._remove_root(conn)
            conn.close()
        self.workers = []
        if self._own_tracker:  # no process of this pool outlives close(): the tracker is waited for too
            self._own_tracker = False
            with contextlib.suppress(Exception):
                resource_tracker._resource_tracker._stop()


def _end(process: multiprocessing.process.BaseProcess) -> None:
    """End a worker: SIGTERM (it kills its kernels, then itself), SIGKILL if it is still there 10 s later."""
    process.terminate()
    process.join(timeout=10)
    if process.is_alive():
        process.kill()
        process.join()  # SIGKILL cannot be refused: it is gone soon, and reaped here


class DaskWorkers:
    """The per-notebook work on a Dask cluster; the recorder stays here, the only gradebook writer."""

    def __init__(self, address: str, config: Config):
        try:
            from distributed import Client
        except ImportError:
            raise CourseError("--scheduler needs Dask: pip install distributed (pinned in "
                              "requirements.txt)") from None
        try:
            self.client = Client(address, timeout=SCHEDULER_TIMEOUT)
        except OSError as exc:
            raise CourseError(f"--scheduler {address}: cannot reach the Dask scheduler ({exc}); start "
                              "it with 'dask scheduler' and workers with 'dask worker ADDRESS'") from None
        self.config = config
        self.futures = None
        self.in_flight = PER_WORKER * max(1, sum(self.client.nthreads().values()))

    def map(self, tasks: Iterator[Task]) -> Iterator[Result]:
        from distributed import as_completed

        from coursekit.grading.sandbox.execute import run_on_dask_worker

        tasks = iter(tasks)
        futures = self.futures = as_completed()
        names = {}

        def submit() -> bool:
            task = next(tasks, None)
            if task is None:
                return False
            future = self.client.submit(run_on_dask_worker, *task, self.config, pure=False)
            names[future.key] = task[0]
            futures.add(future)
            return True

        while len(names) < self.in_flight and submit():
            pass
        for future in futures:
            student_id = names.pop(future.key)
            executed = None
            with StudentStep([], "") as step:  # raised on the worker: that student fails, the class goes on
                _, executed = future.result()
            yield student_id, executed, _failure(step.error) if step.failed else None
            submit()

    def close(self) -> None:
        """Cancel what has not run yet and disconnect (the scheduler and its workers keep running)."""
        if self.futures is not None:
            self.client.cancel(list(self.futures.futures))
            self.futures = None
        self.client.close()
