"""The executing half of grading: nbgrader's Execute with each kernel in an OS sandbox.

`SandboxExecute` (autograde, configured in autograder/nbgrader_config.py) runs each kernel in a
bubblewrap sandbox (coursekit.grading.sandbox.bubblewrap) with limits, no course and no network;
its test cells are judged by their whole source outside the kernel (coursekit.grading.judge), a
kernel that dies (`os._exit`, out of memory) is turned into error outputs instead of a crash.

Every limit is in CPU time or bytes, so that a grade does not depend on the machine's load: a cell
and a call of a hidden check may use `timeout` CPU seconds of the sandbox, the notebook
`notebook_timeout`; wall-clock limits, WALL_FACTOR times those, only end what waits forever.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import math
import os
import queue
import re
import signal
import time

import nbformat
import zmq
import zmq.asyncio
from jupyter_core.utils import ensure_async, run_sync
from nbclient import NotebookClient
from nbclient.exceptions import DeadKernelError
from nbclient.util import run_hook
from nbformat.notebooknode import NotebookNode
from nbgrader.preprocessors import Execute
from traitlets import Bool, Float, Integer

from coursekit.grading.judge import trusted
from coursekit.grading.judge.verdicts import (
    FINDINGS,
    KERNEL_DIED,
    OVER_BUDGET,
    TIMED_OUT,
    error_output,
    findings_from,
    kernel_text,
    own_classes,
    read_observed,
    test_sources,
)
from coursekit.grading.preprocessors import has_active_content
from coursekit.grading.sandbox import kernel_side
from coursekit.grading.sandbox.bubblewrap import KernelZygote, Limits, SandboxKernelManager, processes_in, reap
from coursekit.lesson import visible_test_code

GIB = 1 << 30
KERNEL = "__import__('sys').modules['_coursekit_kernel']"
ARM_LINE = f"{KERNEL}.arm()"
WALL_FACTOR = 10        # wall-clock backstops: this many times the CPU limits, far above any honest need
HIDDEN_CHECKS_WALL_FACTOR = WALL_FACTOR  # all of one student's hidden checks: this many times `timeout` of
# wall clock, like every wall-clock backstop here (with 3, an honest student's checks went over it on a busy machine)


def hidden_checks_over(cpu_used: float, wall_used: float, timeout: float) -> str | None:
    """Why one student's hidden checks, all calls together, are over their budget (None: they are not):
    the sandbox's CPU seconds over `timeout` (one cell's worth), or wall-clock seconds over
    HIDDEN_CHECKS_WALL_FACTOR times that (calls that sleep or wait: an honest student's take about a
    second on an idle machine). Each call has `timeout` of its own as well; this bounds what many calls
    cost together."""
    if cpu_used > timeout:
        return f"hidden checks over {timeout:g} s of CPU in all"
    if wall_used > HIDDEN_CHECKS_WALL_FACTOR * timeout:
        return f"hidden checks over {HIDDEN_CHECKS_WALL_FACTOR * timeout:g} s in all"
    return None
POLL = 0.05             # seconds between two looks at the sandbox's CPU time
MAX_KEPT_OUTPUT = 1 << 20  # characters of printed text kept per cell (CapOutput keeps far fewer)
MAX_REPLIES = trusted.Calls.MAX_PENDING  # reply messages read for one request
TIMED_OUT_REPLY = '{"timeout": true}'  # kernel_side._call's reply for a call stopped at its CPU limit


class _Links:
    """Watches the client's shell and IOPub sockets for a connection libzmq ended: it does so when a
    message is over the sockets' byte cap (ZMQ_MAXMSGSIZE, set by SandboxKernelManager.client)."""

    def __init__(self, kc) -> None:
        self.monitors = [channel.socket.get_monitor_socket(zmq.EVENT_DISCONNECTED)
                         for channel in (kc.shell_channel, kc.iopub_channel)]

    def broken(self) -> bool:
        return any(m.getsockopt(zmq.EVENTS) & zmq.POLLIN for m in self.monitors)

    def close(self) -> None:
        for monitor in self.monitors:
            monitor.close(linger=0)


class SandboxExecute(Execute):
    """Execute in a sandboxed kernel, with the test cells judged outside it.

    Each kernel runs in its own bubblewrap sandbox (coursekit.grading.sandbox.bubblewrap) with the
    limits below. A test cell's visible lines run in the kernel, as the notebook's own cell; its
    whole source, hidden tests included, runs afterwards in this process
    (coursekit.grading.judge.trusted) against the student's names as they were just before the
    cell, and decides the cell: its kernel errors are replaced by the one diagnostic of the trusted
    run (an error output), its stderr shown as stdout (the verdict alone decides). The trusted runs
    come after the last cell, so nothing the student's code saw of the hidden calls can reach a
    stored output; what the kernel and its supervisor recorded is taken before they start, so no
    record carries anything of them either. Afterwards `findings` holds those records
    (sandbox_violation / suspicious_code / over_budget, see coursekit.grading.judge.verdicts).
    """

    timeout = Integer(10, help="CPU seconds one cell (or one call of a hidden check) may use before it "
                      "is interrupted; one that waits is ended after WALL_FACTOR times as many seconds"
                      ).tag(config=True)
    notebook_timeout = Integer(60, help="CPU seconds for the whole notebook; later cells are not run "
                               "and get a CellTimeoutError output").tag(config=True)
    memory_limit = Integer(2 * GIB, help="address-space cap of the kernel in bytes "
                           "(allocations beyond it raise MemoryError)").tag(config=True)
    file_size_limit = Integer(256 << 20, help="largest file the kernel may write, in bytes").tag(config=True)
    process_limit = Integer(64, help="processes and threads of one sandbox (RLIMIT_NPROC)").tag(config=True)
    scratch_size = Integer(256 << 20, help="bytes of the kernel's writable home folder").tag(config=True)
    judge_cpu_limit = Float(1.5, help="CPU seconds of this process for judging one student's test "
                            "cells; beyond it the checks left score 0 (flag over_budget)").tag(config=True)
    judge_memory_limit = Integer(64 << 20, help="bytes this process may grow by while judging one "
                                 "student; beyond it the checks left score 0 (flag over_budget)").tag(config=True)
    sandbox = Bool(True, help="run each kernel in a bubblewrap sandbox (coursekit grade --no-sandbox "
                   "turns it off)").tag(config=True)
    show_hidden_inputs = Bool(False, help="diagnostics of hidden checks quote their inputs (by default "
                              "they describe them by kind)").tag(config=True)
    # A kernel that exits by itself is reaped inside its sandbox, so the sandbox ends at once with no
    # process left over and its CPU time counts to the grader (a killed one's does not); see
    # SandboxKernelManager for the short waits.
    shutdown_kernel = "graceful"
    replay = Bool(False, help="internal: this run only re-judges the test cells of a kernel that died later")

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("kernel_manager_class", SandboxKernelManager)
        super().__init__(*args, **kwargs)
        self.zygote: KernelZygote | None = None  # a grading worker's; else each kernel has one of its own
        self.folder: str | None = None  # where its kernels' folders go (a grading worker's SandboxRoot); None: temp

    def create_kernel_manager(self):
        km = super().create_kernel_manager()
        km.limits = Limits(memory=self.memory_limit, file_size=self.file_size_limit,
                           processes=self.process_limit, scratch=self.scratch_size)
        km.sandboxed = self.sandbox
        km.zygote = self.zygote
        km.folder = self.folder
        return km

    async def async_start_new_kernel(self, **kwargs):
        # Here rather than in preprocess: `coursekit grade` starts a worker's next kernel ahead of time.
        self.extra_arguments = [arg for arg in self.extra_arguments if "IPKernelApp" not in arg] + [
            f"--IPKernelApp.exec_lines={[ARM_LINE]!r}",
            "--IPKernelApp.log_level=CRITICAL",  # not the kernel's connection notes on every start
            "--HistoryManager.enabled=False"]  # no history database (and its thread) per throw-away kernel
        await super().async_start_new_kernel(**kwargs)

    start_new_kernel = run_sync(async_start_new_kernel)  # nbclient binds the sync name to its own

    async def async_start_new_kernel_client(self):
        """nbclient's, with the kernel ready once it answered kernel_info and its IOPub delivers:
        jupyter_client's wait_for_ready then still waits for 0.2 s of silence on IOPub, a fixed wait
        for every notebook; nbclient reads IOPub by the parent of each message, so what is left there
        (the status messages of that kernel_info) is skipped anyway."""
        self.kc = self.km.client()
        try:
            await ensure_async(self.kc.start_channels())
            deadline = time.monotonic() + self.startup_timeout
            while True:
                self.kc.kernel_info()
                try:
                    msg = await ensure_async(self.kc.shell_channel.get_msg(timeout=1))
                except queue.Empty:
                    msg = None
                if msg is not None and msg["msg_type"] == "kernel_info_reply":
                    try:
                        await ensure_async(self.kc.iopub_channel.get_msg(timeout=0.2))
                        self.kc._handle_kernel_info_reply(msg)
                        break
                    except queue.Empty:
                        pass  # IOPub not connected yet: ask again
                if not await ensure_async(self.km.is_alive()):
                    raise RuntimeError("Kernel died before replying to kernel_info")
                if time.monotonic() > deadline:
                    raise RuntimeError(f"Kernel didn't respond in {self.startup_timeout} seconds")
        except Exception:
            await self._async_cleanup_kernel()
            raise
        self.kc.allow_stdin = False
        await run_hook(self.on_notebook_start, notebook=self.nb)
        return self.kc

    start_new_kernel_client = run_sync(async_start_new_kernel_client)

    def preprocess(self, nb, resources=None, km=None):
        self._stopped: tuple[str, str] | None = None
        self._pending: list[tuple[NotebookNode, dict, int]] = []  # test cell, its snapshot and that one's number
        self._snapshots = 0
        self._kernel_errors: list[list[str]] = []  # errors of test cells' visible lines in the kernel
        self._own_classes: set[str] = set()  # the student's own subclasses of list, float... returned
        self._over_budget: list[str] = []
        self._received: list[int] | None = None  # values and characters of the replies since judging began
        self._judge_over: str | None = None  # the first budget the judge exceeded (_check_judge_budget)
        self._patched_seen: list[str] = []  # changes seen before a test cell (_keep_patched)
        self._hidden_start = (math.inf, math.inf)  # (sandbox CPU, wall clock) when the hidden checks began
        self._kept: dict[int, int] = {}
        self._cell_timed_out = False
        self._solution_names: dict = {}  # the student's names as the last answer cell left them
        self._looped: set[str] = set()  # statements that used a cell's CPU limit (stripped lines)
        self._replay_findings: dict[str, list] = {}
        self.findings: dict[str, list] = {}
        self._tests = test_sources(resources, nb)
        NotebookClient.__init__(self, nb, km)
        self.reset_execution_trackers()
        self._check_assign_resources(resources)
        if self.km is None:
            self.km = self.create_kernel_manager()
        manager = self.km
        try:
            return self._run(resources)
        except BaseException:
            if self.owns_km:  # a kernel of its own: ended (setup_kernel ends it, or never started), folder removed
                if manager.has_kernel:
                    with contextlib.suppress(Exception):
                        run_sync(manager.shutdown_kernel)(now=True)
                manager.remove_socket_dir()
            raise

    def _run(self, resources: dict) -> tuple[NotebookNode, dict]:
        """preprocess's run of the notebook in a kernel, the judging, and the sandbox's end."""
        with self.setup_kernel():
            manager = self.km
            self._links = _Links(self.kc)
            try:
                info = self.wait_for_reply(self.kc.kernel_info())
                self.nb.metadata["language_info"] = info["content"]["language_info"]
                started = len(manager.sandbox_processes())
                self._cpu_start = self._cpu()
                self._wall_end = time.monotonic() + self.notebook_timeout * WALL_FACTOR
                # A replay judges right after the last test cell (a later cell may end the kernel), then
                # runs the rest: what those cells do is recorded too, by kind only, and their outputs dropped.
                tests = [k for k, c in enumerate(self.nb.cells) if self._test_of(c) is not None]
                judge_after = max(tests) if self.replay and tests else len(self.nb.cells) - 1
                for index, cell in enumerate(self.nb.cells[: judge_after + 1]):
                    self.preprocess_cell(cell, resources, index)
                # before any hidden input reaches the kernel
                self.findings, observed_until = self.record_run(manager, started)
                self.judge_tests(resources)
                for index, cell in enumerate(self.nb.cells[judge_after + 1:], start=judge_after + 1):
                    self.preprocess_cell(cell, resources, index)
                self.record_judging(manager, observed_until)
            finally:
                self._links.close()
        if not self.owns_km:  # a kernel started ahead by a grading worker ends here too
            if self.kc is not None:  # nbclient keeps a client it did not start: its heartbeat thread and
                self.kc.stop_channels()  # zmq context were left running, three threads per notebook
                self.kc = None
            if manager.has_kernel:
                run_sync(manager.shutdown_kernel)(now=False)
        self.check_teardown(manager)
        self.nb.metadata[FINDINGS] = self.findings  # for coursekit grade's record(); replaces any student value
        return self.nb, self.resources

    # ---- limits in CPU time and bytes

    def _cpu(self) -> float:
        """CPU seconds of the sandbox so far (without a sandbox: wall-clock seconds)."""
        used = self.km.cpu_seconds() if self.km is not None else None
        return time.monotonic() if used is None else used

    def _notebook_over(self) -> bool:
        return self._cpu() - self._cpu_start > self.notebook_timeout or time.monotonic() > self._wall_end

    async def _async_poll_kernel_alive(self) -> None:
        """nbclient's, looking every POLL instead of every second: a cell that ends the kernel (os._exit, a
        crash) is seen within POLL, where its worker waited up to a second with nothing to do."""
        while True:
            await asyncio.sleep(POLL)
            try:
                await self._async_check_alive()
            except DeadKernelError:
                await self._read_what_the_kernel_sent()
                self.task_poll_for_reply.cancel()  # no effect when the cell's reply and output were all read
                return

    async def _read_what_the_kernel_sent(self) -> None:
        """Let the cell's reply and output tasks read the messages a kernel sent before it ended: `exit()`
        replies and goes idle, then ends the kernel 0.1 s later, and a busy grader could see the end first
        and call a finished cell one the kernel died in. Waits while a message is waiting or arrives within
        POLL (a kernel that died mid-cell costs that much more), at most a second."""
        poller = zmq.asyncio.Poller()
        for channel in (self.kc.shell_channel, self.kc.iopub_channel):
            poller.register(channel.socket, zmq.POLLIN)
        end = time.monotonic() + 1
        while not self.task_poll_for_reply.done() and time.monotonic() < end:
            if not await poller.poll(timeout=POLL * 1000):
                return
            await asyncio.sleep(POLL / 10)  # the tasks read them

    def _get_timeout(self, cell):
        return self.timeout * WALL_FACTOR  # the wall-clock backstop; the CPU limit is _watch_cell's

    async def _async_poll_for_reply(self, msg_id, cell, timeout, task_poll_output_msg, task_poll_kernel_alive):
        self._cell_timed_out = False
        watchdog = asyncio.ensure_future(self._watch_cell())
        try:
            return await super()._async_poll_for_reply(msg_id, cell, timeout, task_poll_output_msg,
                                                       task_poll_kernel_alive)
        finally:
            watchdog.cancel()

    async def _watch_cell(self) -> None:
        """Interrupt the cell once the sandbox has used `timeout` CPU seconds on it; end the kernel if it
        goes on as long again; end it too when a message over the byte cap broke a connection."""
        start, interrupted = self._cpu(), None
        while True:
            await asyncio.sleep(POLL)
            if await self._over_cap():
                self._over(f"kernel message bytes over {trusted.MAX_REPLY >> 20} MB")
                await ensure_async(self.km.shutdown_kernel(now=True))
                return
            used = self._cpu() - start
            if interrupted is None and used > self.timeout:
                self._cell_timed_out, interrupted = True, used
                await ensure_async(self.km.interrupt_kernel())
            elif interrupted is not None and used > interrupted + self.timeout:
                await ensure_async(self.km.shutdown_kernel(now=True))  # it ignores interrupts
                return

    async def _over_cap(self) -> bool:
        """A connection ended while the kernel runs on: libzmq dropped a message over the byte cap. (A
        kernel that exits ends its connections too: it is a zombie within moments, never after a second.)"""
        if not self._links.broken():
            return False
        for _ in range(20):
            if not self.km.kernel_running():
                return False
            await asyncio.sleep(POLL)
        return True

    def _over(self, budget: str) -> trusted.OverBudget:
        """Record that a budget was exceeded (flag over_budget) and return the abort that says so; the
        first one exceeded while judging is the judge's for the rest of the student (_check_judge_budget)."""
        if budget not in self._over_budget:
            self._over_budget.append(budget)
        if self._received is not None and self._judge_over is None:
            self._judge_over = budget
        return trusted.OverBudget(f"超出评分预算：{budget}")

    def output(self, outs, msg, display_id, cell_index):
        """nbclient's output, keeping at most MAX_KEPT_OUTPUT characters of printed text per cell."""
        if msg["msg_type"] == "stream":
            kept = self._kept.get(cell_index, 0)
            if kept >= MAX_KEPT_OUTPUT:
                return None
            text = str(msg["content"].get("text", ""))[: MAX_KEPT_OUTPUT - kept]
            msg["content"]["text"] = text
            self._kept[cell_index] = kept + len(text)
        return super().output(outs, msg, display_id, cell_index)

    # ---- the notebook's cells, in the kernel

    def _test_of(self, cell: NotebookNode) -> str | None:
        """The trusted source of a test cell, None for any other cell."""
        if cell.cell_type != "code":
            return None
        return self._tests.get(cell.metadata.get("nbgrader", {}).get("grade_id"))

    def preprocess_cell(self, cell, resources, index):
        if cell.cell_type != "code" or not cell.source.strip():
            return cell, resources
        if self._stopped is None and self._notebook_over():
            self._stopped = (TIMED_OUT, f"not run: the notebook time limit ({self.notebook_timeout} s of CPU) "
                             "was reached")
        if self._stopped is not None:
            cell.outputs.append(error_output(*self._stopped))
            return cell, resources
        test = self._test_of(cell)
        try:
            if test is None:
                super().preprocess_cell(cell, resources, index)
                if cell.metadata.get("nbgrader", {}).get("solution") is True:
                    self._solution_names = self._snapshot(log=False)  # the data this answer cell produced
            else:
                # the student's names as the cell finds them; the kernel logs the calls its visible lines
                # make of the student's functions, and the judge takes their replies from there
                snapshot = own_data(self._snapshot(log=True), self._solution_names)
                self._keep_patched()
                visible = visible_test_code(test)  # the kernel never receives hidden test text
                if self._looped & {line.strip() for line in visible.split("\n")}:
                    cell.outputs.append(error_output(TIMED_OUT, "not run: a check of this cell used the CPU limit "
                                                     f"({self.timeout} s) in an earlier cell"))
                else:
                    source = cell.source
                    cell.source = visible
                    try:
                        super().preprocess_cell(cell, resources, index)
                    finally:
                        cell.source = source
                self._pending.append((cell, snapshot, self._snapshots))
            if self._cell_timed_out:
                cell.outputs.append(error_output(TIMED_OUT, f"the cell used more than {self.timeout} s of CPU "
                                                 "time and was interrupted"))
                if test is None:  # its checks are not run again (the test cells' visible lines are its own)
                    self._looped.update(interrupted_statement(cell))
        except (DeadKernelError, trusted.KernelDied):
            # the kernel's count of this cell reached us or not, as the kernel's end raced its message
            # (execute_input): the same page whichever came first, a cell that never finished has none
            cell.execution_count = None
            if self._over_budget:
                cell.outputs.append(error_output(trusted.OverBudget.ename, self._over_budget[-1]))
                self._stopped = (trusted.OverBudget.ename, "not run: a message of the kernel was over the "
                                 "grader's budget")
            else:
                cell.outputs.append(error_output(KERNEL_DIED, "the kernel died while running this cell "
                                                 "(os._exit, a crash, or memory beyond the cap)"))
                self._stopped = (KERNEL_DIED, "not run: the kernel died in an earlier cell")
        except trusted.GraderAbort as abort:
            cell.outputs.append(error_output(abort.ename, abort.message))
        return cell, resources

    def _snapshot(self, log: bool) -> object:
        self._snapshots += 1
        return self.ask("snapshot", [log])

    def logged_calls(self) -> dict[int, dict[tuple[int, str], list]]:
        """The calls the test cells' visible lines made in the kernel, with their replies: {snapshot
        number: {(ref, payload): [reply JSON text, ...]}} (what the student's function returned there, as
        a call of the judge would bring it back; read by the judge within the budgets of any reply). An
        entry not in the protocol's format is left out: the judge then makes that call itself."""
        try:
            entries = self.ask("logged")
        except trusted.GraderAbort:
            return {}
        found: dict[int, dict[tuple[int, str], list]] = {}
        for entry in entries if isinstance(entries, list) else []:
            try:
                number, ref, payload, text = entry
            except (ValueError, TypeError):
                continue
            if type(number) is int and type(ref) is int and type(payload) is str and type(text) is str \
                    and text != TIMED_OUT_REPLY:
                found.setdefault(number, {}).setdefault((ref, payload), []).append(text)
        return found

    # ---- the trusted half of the test cells

    def judge_tests(self, resources) -> None:
        """Decide each test cell by running its whole source here (see coursekit.grading.judge.trusted)."""
        options = {"_SHOW_HIDDEN_INPUTS": self.show_hidden_inputs}
        self._judge_cpu = time.process_time()
        self._judge_memory = _resident()
        self._received = [0, 0]
        self._hidden_start = (self._cpu(), time.monotonic())
        logged = self.logged_calls() if self._pending else {}
        for cell, snapshot, number in self._pending:
            errors = [o for o in cell.outputs if o.output_type == "error"]
            self._kernel_errors += [[o.ename[:40], o.evalue[:200]] for o in errors]  # for the error flag
            cell.outputs = kernel_text(cell.outputs)
            stopped = next((o.ename for o in errors if o.ename in (TIMED_OUT, KERNEL_DIED)), None)
            if stopped == TIMED_OUT:
                failure = trusted.Failure(TIMED_OUT, f"运行超过 {self.timeout} 秒 CPU 时间，已中断（死循环？）")
            elif stopped == KERNEL_DIED:
                failure = trusted.Failure(KERNEL_DIED, "内核在运行这个单元格时退出（os._exit、崩溃或内存超限）")
            elif self._notebook_over():
                failure = trusted.Failure(TIMED_OUT, "没有运行：达到整本笔记本的时间上限"
                                          f"（{self.notebook_timeout} 秒 CPU 时间）")
            else:
                grade_id = cell.metadata.nbgrader.grade_id
                failure = trusted.run_test_cell(self._tests[grade_id], grade_id, snapshot, self, options,
                                                known=logged.get(number))
                if failure is not None and failure.ename == KERNEL_DIED and not self.replay:
                    return self.judge_in_replay(resources)  # it died after its test cells ran, or while judged
                if failure is not None and failure.ename == trusted.OverBudget.ename:
                    self._over(failure.evalue.rsplit("超出评分预算：", 1)[-1])  # e.g. raised by the decoding
            if failure is not None:
                cell.outputs.append(error_output(failure.ename, failure.evalue))

    def judge_in_replay(self, resources) -> None:
        """The kernel died after the test cells (`exit()` in a later cell) or while they were judged: run
        the whole notebook again in a fresh sandbox, judged after its last test cell, and take that
        run's verdicts; its records are added to this run's (see record_run), none replaces another."""
        positions = [next(k for k, c in enumerate(self.nb.cells) if c is cell) for cell, _, _ in self._pending]
        again = nbformat.from_dict(copy.deepcopy(self.nb))
        for cell in again.cells:
            if cell.cell_type == "code":
                cell.outputs = []
        replay = SandboxExecute(config=self.config, replay=True)
        replay.zygote, replay.folder = self.zygote, self.folder
        replay.preprocess(again, copy.deepcopy(resources))
        for position, (cell, _, _) in zip(positions, self._pending, strict=True):
            verdict = [o for o in again.cells[position].outputs if o.output_type == "error"]
            cell.outputs = kernel_text(cell.outputs) + verdict
        self._replay_findings = replay.findings

    def calls(self, batch: list[tuple[int, str]]) -> list:
        """trusted.Kernel: a batch of calls of the student's functions in one request, one reply message
        per call (its JSON text, read later by the judge; the judge's budgets checked after each).
        Each call may use `timeout` CPU seconds (the kernel stops it itself; the grader interrupts the
        batch past `timeout` seconds per call, and ends the kernel if it goes on as long again). Once the
        judge has exceeded a budget, every later batch fails with that one, and the kernel is not asked."""
        if self._judge_over is not None:
            raise self._over(self._judge_over)
        self._check_judge_budget()
        replies = self._request("calls", [self.timeout, [[int(ref), payload] for ref, payload in batch]],
                                self.timeout * len(batch), read=False, deadline=self._hidden_deadline())
        answers: list = []
        for reply in replies[: len(batch)]:
            if isinstance(reply, trusted.GraderAbort):
                answers.append(reply)
                break
            if not isinstance(reply, str) or reply == TIMED_OUT_REPLY:
                answers.append(trusted.KernelTimeout(f"运行超过 {self.timeout} 秒 CPU 时间，已中断（死循环？）"))
                break  # the kernel runs no call after a timeout
            answers.append(reply)
        return answers

    def checked(self, reply: object) -> None:
        """trusted.Kernel: the judge's budgets, after each reply it read; the student's own classes in it."""
        own_classes(reply.get("value") if isinstance(reply, dict) else None, self._own_classes)
        self._check_judge_budget()

    def _hidden_deadline(self) -> float:
        """When the hidden checks' wall-clock budget (hidden_checks_over) runs out, on time.monotonic()."""
        return self._hidden_start[1] + HIDDEN_CHECKS_WALL_FACTOR * self.timeout

    def _count_received(self, text: object) -> None:
        """The judge's counted budgets (trusted.JUDGE_VALUES, JUDGE_BYTES), checked on each reply as it
        arrives and before anything else: which one a student exceeds depends on no clock."""
        if not isinstance(text, str) or self._received is None:
            return  # not a reply (the protocol check says so), or no judging yet
        try:
            values, characters = trusted.reply_cost(text)
        except trusted.OverBudget as over:
            raise self._over(over.message) from None
        self._received[0] += values
        self._received[1] += characters
        if self._received[0] > trusted.JUDGE_VALUES:
            raise self._over(f"replies over {trusted.JUDGE_VALUES} values in all")
        if self._received[1] > trusted.JUDGE_BYTES:
            raise self._over(f"replies over {trusted.JUDGE_BYTES >> 20} MB in all")

    def _check_judge_budget(self) -> None:
        """The judge's budgets on its meters (CPU, memory, the hidden checks' time), until one budget was
        exceeded: the meters are not read after that. What they would say then depends on the load (a kernel
        interrupted later has sent more replies, which the grader holds), and the flags must not; the judge
        asks the kernel nothing more (calls), and the replies it already has are bounded by the counts."""
        if self._judge_over is not None:
            return
        if time.process_time() - self._judge_cpu > self.judge_cpu_limit:
            raise self._over(f"grader CPU for judging over {self.judge_cpu_limit:g} s")
        if _resident() - self._judge_memory > self.judge_memory_limit:
            raise self._over(f"grader memory for judging over {self.judge_memory_limit >> 20} MB")
        cpu_start, wall_start = self._hidden_start
        if (over := hidden_checks_over(self._cpu() - cpu_start, time.monotonic() - wall_start, self.timeout)):
            raise self._over(over)

    def ask(self, helper: str, args: list | None = None) -> dict:
        """Call a kernel_side helper (kernel_side.REQUEST); return its JSON reply, read within the budgets
        of trusted.read_reply, after at most `timeout` CPU seconds of the sandbox."""
        reply = self._request(helper, args or [], self.timeout)[0]
        if isinstance(reply, trusted.GraderAbort):
            raise reply
        return reply

    def _request(self, helper: str, args: list, cpu_limit: float, read: bool = True,
                 deadline: float = math.inf) -> list:
        """One request to the kernel: the decoded replies of its messages (one per call for `calls`),
        each read within trusted.read_reply's budgets; one refused ends the list as a GraderAbort
        instance. Interrupted after `cpu_limit` CPU seconds of the sandbox, or after WALL_FACTOR times
        (`timeout` + the CPU seconds it used) of waiting; the kernel ended when it goes on `timeout` more,
        or at once past `deadline` (time.monotonic(): the hidden checks' budget, over_budget).
        With read=False the replies are their texts, and the judge's budgets are checked after each."""
        return run_sync(self._async_request)(helper, args, cpu_limit, read, deadline)

    async def _async_request(self, helper: str, args: list, cpu_limit: float, read: bool,
                             deadline: float = math.inf) -> list:
        if self._stopped and self._stopped[0] == KERNEL_DIED:
            raise trusted.KernelDied("内核已经退出，检查无法运行")
        if self._stopped and self._stopped[0] == trusted.OverBudget.ename:
            raise self._over(self._over_budget[-1])
        request = self.kc.session.msg(kernel_side.REQUEST, {"helper": helper, "args": args})
        self.kc.shell_channel.send(request)
        msg_id = request["header"]["msg_id"]
        start, began, interrupted, replies = self._cpu(), time.monotonic(), None, []
        wall_end = began + self.timeout * WALL_FACTOR
        while True:
            try:
                msg = await self.kc.shell_channel.get_msg(timeout=POLL)
            except queue.Empty:
                if await self._over_cap():
                    await ensure_async(self.km.shutdown_kernel(now=True))
                    self._stopped = (trusted.OverBudget.ename, "not run: over the grader's budget")
                    raise self._over(f"kernel message bytes over {trusted.MAX_REPLY >> 20} MB") from None
                if not await ensure_async(self.km.is_alive()):
                    self._stopped = (KERNEL_DIED, "not run: the kernel died in an earlier cell")
                    raise trusted.KernelDied("内核在检查时退出（os._exit、崩溃或内存超限）") from None
                used = self._cpu() - start
                if interrupted is None and time.monotonic() > deadline:  # past the hidden checks' budget
                    await ensure_async(self.km.shutdown_kernel(now=True))
                    self._stopped = (trusted.OverBudget.ename, "not run: over the grader's budget")
                    raise self._over(hidden_checks_over(0, math.inf, self.timeout)) from None
                if interrupted is None:  # waiting: WALL_FACTOR times the CPU time it had, one call's limit more
                    wall_end = began + (self.timeout + used) * WALL_FACTOR
                if interrupted is None and (used > cpu_limit or time.monotonic() > wall_end):
                    await ensure_async(self.km.interrupt_kernel())
                    interrupted, wall_end = used, time.monotonic() + self.timeout * WALL_FACTOR
                elif interrupted is not None and (used > interrupted + self.timeout or time.monotonic() > wall_end):
                    await ensure_async(self.km.shutdown_kernel(now=True))  # it ignores interrupts: end the sandbox
                    self._stopped = (KERNEL_DIED, "not run: the kernel was stopped after a timeout")
                    raise trusted.KernelTimeout(f"运行超过 {self.timeout} 秒 CPU 时间，内核无法中断，已结束") from None
                continue
            if msg.get("parent_header", {}).get("msg_id") != msg_id:
                continue
            if interrupted is not None:
                raise trusted.KernelTimeout(f"运行超过 {self.timeout} 秒 CPU 时间，已中断（死循环？）")
            content: dict = {}
            try:
                content = msg["content"] if msg["msg_type"] == kernel_side.REPLY else {}
                text = content.get("reply")
                self._count_received(text)
                replies.append(trusted.read_reply(text) if read else text)
                if not read:
                    self._check_judge_budget()
            except trusted.OverBudget as over:
                abort = self._over(over.message.removeprefix("超出评分预算："))
            except (KeyError, TypeError, AttributeError, trusted.ReplyError):
                abort = trusted.InvalidReply("内核没有按协议回答（评分辅助代码被改动？）")
            else:
                if content.get("more") is not True or len(replies) >= MAX_REPLIES:
                    return replies
                continue
            if isinstance(content, dict) and content.get("more") is True:  # the kernel is still at it: stop
                await ensure_async(self.km.interrupt_kernel())  # its call now (its replies are skipped)
            return [*replies, abort]

    # ---- what the kernel and its sandbox recorded

    def _keep_patched(self) -> None:
        """What the student's code had changed (builtins, watched modules, hooks) as a test cell is about
        to run, kept here, on the grader's side: a later cell that puts things back erases nothing."""
        try:
            report = self.ask("report")
        except trusted.GraderAbort:
            return  # the helpers themselves changed: record_run's report says so
        patched = report.get("patched") if isinstance(report, dict) else None
        if isinstance(patched, list):
            self._patched_seen.extend(p for p in patched[:20] if isinstance(p, str) and p not in self._patched_seen)

    def record_run(self, manager: SandboxKernelManager, started: int) -> tuple[dict[str, list], int]:
        """The records of the notebook's run, taken before the hidden checks: the supervisor's (outside
        the kernel: kept even when the kernel died), the kernel's own report when it is alive, the
        processes left and active content; and where the supervisor's file ends then (what it writes
        later happened during the hidden checks). The processes left are ended first: what the hidden
        checks see then is the kernel alone, whatever a process left running was doing at that moment."""
        report, tampered = {}, False
        if not (self._stopped and self._stopped[0] == KERNEL_DIED) and manager.has_kernel:
            try:
                report = self.ask("report")
            except trusted.KernelDied:  # it exited after its last cell (exit() ends it 0.1 s later): no report,
                pass  # not tampering, whichever came first; the judge replays the notebook (judge_in_replay)
            except trusted.GraderAbort:
                tampered = True
        left = 0
        if manager.sandboxed and manager.has_kernel:
            processes = manager.sandbox_processes()
            left = len(processes) - started
            if left > 0:
                end_leftovers(manager, processes)
        if self._patched_seen:
            report = dict(report) if isinstance(report, dict) else {}
            now = report.get("patched") if isinstance(report.get("patched"), list) else []
            report["patched"] = self._patched_seen + [p for p in now if p not in self._patched_seen]
        until = os.path.getsize(manager.observed) if os.path.exists(manager.observed) else 0
        findings = findings_from(observed=read_observed(manager.observed, end=until), report=report,
                                 tampered=tampered, processes_left=left,
                                 active_content=any(has_active_content(c) for c in self.nb.cells), kernel_errors=[])
        return findings, until

    def record_judging(self, manager: SandboxKernelManager, observed_until: int) -> None:
        """Add what happened while the hidden checks ran: the kinds the supervisor saw then (never their
        details: the student's code had the hidden inputs), the classes returned, the budgets exceeded,
        the test cells' kernel errors, and the replay's records."""
        during = {kind for kind, _ in read_observed(manager.observed, start=observed_until)}
        extra = findings_from(observed=[], report={}, tampered=False, processes_left=0, active_content=False,
                              kernel_errors=self._kernel_errors, during_checks=sorted(during),
                              own_classes=sorted(self._own_classes), over_budget=self._over_budget)
        # what happened during the hidden checks comes first: the run's own records (the self-checks
        # call the student's function many times) must not push it past the flag's cap
        self.findings = {name: list(dict.fromkeys(extra.get(name, []) + self.findings.get(name, [])
                                                  + self._replay_findings.get(name, [])))
                         if name != "kernel_errors" else
                         self.findings.get(name, []) + extra.get(name, []) + self._replay_findings.get(name, [])
                         for name in ("sandbox_violation", "suspicious_code", OVER_BUDGET, "kernel_errors")}

    def check_teardown(self, manager: SandboxKernelManager) -> None:
        """No process of the sandbox may outlive its kernel; end any that did and say so."""
        survivors = []
        if manager.namespace:
            deadline = time.monotonic() + 5
            while (survivors := processes_in(manager.namespace)) and time.monotonic() < deadline:
                reap(survivors)  # handed to a grading worker, a subreaper (coursekit.grading.sandbox.execute)
                time.sleep(0.01)
            for pid in survivors:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
        ended = manager.memory.processes_ended() if manager.memory is not None else 0
        manager.remove_socket_dir()
        if ended:  # the sandbox's processes together reached its memory cgroup's limit
            self.findings.setdefault(OVER_BUDGET, []).append(
                f"sandbox memory: {ended} process(es) ended at {manager.limits.sandbox_memory / GIB:g} GiB "
                "for all its processes together")
        if survivors:
            self.findings.setdefault("sandbox_violation", []).append(
                f"processes outlived the sandbox: {len(survivors)}, killed")



_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_CELL_LINE = re.compile(r"(?:Cell In\[[^\]]*\]|<ipython-input-[^>]*>), line (\d+)")


def interrupted_statement(cell: NotebookNode) -> list[str]:
    """The line of the cell's own code that was running when its CPU limit interrupted it (from the
    kernel's KeyboardInterrupt traceback), stripped; none when the traceback does not say."""
    for output in cell.outputs:
        if output.output_type != "error" or output.get("ename") != "KeyboardInterrupt":
            continue
        match = _CELL_LINE.search(_ANSI.sub("", "\n".join(map(str, output.get("traceback", [])))))
        lines = cell.source.split("\n")
        if match and 0 < int(match.group(1)) <= len(lines) and lines[int(match.group(1)) - 1].strip():
            return [lines[int(match.group(1)) - 1].strip()]
    return []


def end_leftovers(manager: SandboxKernelManager, processes: list[int]) -> None:
    """Kill every process of the sandbox but its init (PID 1 there) and the kernel (PID 2), and wait
    (at most a second) until they are gone: the processes a notebook left running."""
    others = [pid for pid in processes if _namespace_pid(pid) not in (1, 2)]
    for pid in others:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 1
    while others and time.monotonic() < deadline:
        reap(others)  # a grading worker is their subreaper (coursekit.grading.sandbox.execute)
        others = [pid for pid in others if os.path.exists(f"/proc/{pid}") and not _zombie(pid)]
        time.sleep(0.005)


def _namespace_pid(pid: int) -> int | None:
    """A host process's pid in its own (innermost) PID namespace; None when it is gone."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as f:
            line = next(line for line in f if line.startswith("NSpid:"))
        return int(line.split()[-1])
    except (OSError, StopIteration, ValueError):
        return None


def _zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] in (b"Z", b"X")
    except (OSError, IndexError):
        return True


def own_data(now: object, solution: object) -> dict:
    """The names a test cell is judged with: functions, classes and modules as the cell finds them
    (they are called), plain data as the last answer cell (nbgrader solution cell) left it: points
    for data need the student's own answer cell to have produced it, not a value set elsewhere."""
    def by_kind(snapshot: object, references: bool) -> dict:
        if not isinstance(snapshot, dict):
            return {}
        return {name: entry for name, entry in snapshot.items()
                if (isinstance(entry, dict) and entry.get("$") in ("callable", "module")) == references}
    return {**by_kind(solution, False), **by_kind(now, True)}


_STATM: dict[int, int] = {}  # process id -> its /proc/<pid>/statm, opened once (a forked worker opens its own)
PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")


def _resident() -> int:
    """Bytes of memory this process holds now (its resident set)."""
    pid = os.getpid()
    statm = _STATM.get(pid)
    if statm is None:
        statm = _STATM[pid] = os.open(f"/proc/{pid}/statm", os.O_RDONLY | os.O_CLOEXEC)
    return int(os.pread(statm, 256, 0).split()[1]) * PAGE_SIZE
