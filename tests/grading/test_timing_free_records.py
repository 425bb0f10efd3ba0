"""Records that depend neither on the clock nor on the host's files (issue 31: two runs of any class give
byte-identical CSVs).

bench_hostile's two reruns once differed on `m02_read_glob`: a student that walks "/" for two seconds of
wall clock. Every folder the walk opened outside the trees the sandbox shows was a record: "/", /home,
/etc, /root/.pyenv/versions, /work/hd... folders bwrap made only to hold its mount points. How many of
them a run reached depended on how long the walk spent in the base interpreter's tree (a host folder
the sandbox shows) and on the load; the flag lists them, so the CSV differed. They list only the
sandbox's own layout: they are one record now, `file: the sandbox's own folders`, whichever were reached.
Here the clock is replaced by a count of folders, so the test does not depend on timing either.
"""

from __future__ import annotations

from types import SimpleNamespace

import nbformat
import pytest
from submission_kinds import _code, _extra, k_correct
from traitlets.config import Config

from coursekit.grading.judge import trusted
from coursekit.grading.records import record
from coursekit.grading.sandbox import execute, executor, kernel_side

pytestmark = pytest.mark.slow
WALK = '''import os, sys
walked = 0
for root, dirs, files in os.walk("/"):
    dirs[:] = [d for d in dirs if d not in ("proc", "sys", "usr")
               and os.path.join(root, d) not in (sys.prefix, sys.base_prefix)]
    walked += 1
    if walked >= {folders}:
        break
print("walked", walked)
'''


def test_a_walk_of_the_sandbox_leaves_the_same_records_however_far_it_got(released_course):
    recorder = record.Recorder(released_course, Config(released_course.config))
    runner = execute.Runner(recorder.worker_config())
    base = nbformat.read(released_course.release_notebook, as_version=4)
    violations, printed = {}, {}
    try:
        for folders in (1, 10_000):  # "/" alone; every folder of the sandbox but its environment's
            nb = k_correct(nbformat.from_dict(base))
            _extra(nb, _code(nb), WALK.format(folders=folders))
            executed = nbformat.reads(runner.run(nbformat.writes(nb)), as_version=4)
            violations[folders] = executed.metadata["coursekit_findings"]["sandbox_violation"]
            printed[folders] = "".join(o.get("text", "") for c in executed.cells if c.cell_type == "code"
                                       for o in c.outputs if "walked" in o.get("text", ""))
    finally:
        runner.close()
        recorder.close()
    assert printed[1] == "walked 1\n" and int(printed[10_000].split()[1]) > 5, printed  # it did get further
    assert violations[1] == violations[10_000] == [f"file: {kernel_side.LAYOUT}"]


PYTHON = ["/work/kit/.venv", "/root/.pyenv/versions/3.11.7", "/usr/lib", "/etc/ld.so.cache"]
SCRATCH = ["/tmp", "/home/student"]
ALLOWED = PYTHON + ["/usr", "/proc", "/dev", "/sys", "/etc"] + SCRATCH


@pytest.mark.parametrize("path, record", [
    *[(folder, kernel_side.LAYOUT) for folder in ("/", "/home", "/root", "/root/.pyenv", "/root/.pyenv/versions",
                                                   "/work", "/work/kit")],
    # what is in them, but the trees the sandbox shows, is a guess at the host's files: recorded as itself
    ("/work/kit/autograder/gradebook.db", "/work/kit/autograder/gradebook.db"), ("/root/.bashrc", "/root/.bashrc"),
    ("/root/.pyenv/version", "/root/.pyenv/version"), ("/srv", "/srv"),
    ("/work/kit/.venv/lib", None), ("/tmp", None), ("/etc", None),
])
def test_a_folder_that_only_holds_the_sandboxs_mount_points_is_one_record(path, record):
    assert kernel_side._observed("file", path, PYTHON, ALLOWED, SCRATCH, "/home/student") == record


@pytest.mark.parametrize("replies, over", [
    (["[0]"] * 10, None),  # an honest student's replies: a few values each
    (["[" + "0," * 199_999 + "0]"] * 2, f"replies over {trusted.JUDGE_VALUES} values in all"),
    (['"' + "x" * 5_000_000 + '"'] * 2, "replies over 8 MB in all"),
    (["[" + "0," * 260_000 + "0]"], f"reply items over {trusted.MAX_ITEMS}"),
])
def test_the_judges_budgets_in_all_are_counts_checked_before_its_clock_and_memory(replies, over):
    """bench_hostile's reruns once differed on m33_budget_judge_memory: the grader's CPU limit or its
    memory limit, whichever a reply found exceeded first, a race that a slower or busier machine loses
    the other way. The counted budgets come first: here the meters say every limit is long past (as on
    a machine many times slower), and the flag is the count's still. And the checks after it fail with
    that budget alone: the attack class once flagged m34_budget_judge_bytes "replies over 8 MB in all,
    grader memory for judging over 64 MB" in one of two runs, its kernel having sent more 6 MB replies
    before it was interrupted on a loaded machine, held by the grader at the next test cell's check."""
    judge = executor.SandboxExecute()
    judge._over_budget, judge._received, judge._judge_over = [], [0, 0], None
    judge._judge_cpu, judge._judge_memory = -1e9, -(1 << 40)
    raised = None
    for text in replies:
        try:
            judge._count_received(text)
        except trusted.OverBudget as exc:
            raised = exc.message.removeprefix("超出评分预算：")
            break
    assert raised == over and judge._over_budget == ([over] if over else [])
    if over is None:
        with pytest.raises(trusted.OverBudget, match="grader CPU"):  # the backstop behind them
            judge._check_judge_budget()
        return
    judge._check_judge_budget()  # the replies it had are still read (their own budgets), the meters not
    with pytest.raises(trusted.OverBudget) as later:  # the next batch: that budget, the kernel not asked
        judge.calls([(1, "[]")])
    assert later.value.message.removeprefix("超出评分预算：") == over and judge._over_budget == [over]


DIES = '''import os, sys, time
print("before the end", flush=True)
time.sleep(0.5)  # the kernel's execute_input (its count of this cell) has long reached the grader
os._exit(3)
'''


def test_a_cell_the_kernel_died_in_has_no_count_whenever_the_kernel_ended(released_course):
    """A student whose cell ends the kernel (os._exit) got `In [n]` on its feedback page in one run and
    `In [ ]` in another: whether the kernel's execute_input got out before its end. The cell never
    finished, and has no count either way; here the kernel waits long enough for the count to arrive,
    the case that used to keep it."""
    recorder = record.Recorder(released_course, Config(released_course.config))
    runner = execute.Runner(recorder.worker_config())
    nb = k_correct(nbformat.read(released_course.release_notebook, as_version=4))
    _extra(nb, _code(nb), DIES)
    try:
        executed = nbformat.reads(runner.run(nbformat.writes(nb)), as_version=4)
    finally:
        runner.close()
        recorder.close()
    died = [c for c in executed.cells if c.cell_type == "code" and "os._exit(3)" in c.source]
    assert len(died) == 1 and any("before the end" in o.get("text", "") for o in died[0].outputs)
    assert died[0].execution_count is None
    assert any(o.get("ename") == executor.KERNEL_DIED for o in died[0].outputs)


def test_a_dead_kernel_is_seen_within_one_poll(monkeypatch):
    """nbclient looks for a dead kernel once a second (NotebookClient._async_poll_kernel_alive), and a
    worker whose student's cell ended the kernel waited that long with nothing to do; the grader looks
    every POLL. (Stands in for a kernel that died between two looks: the third look finds it.)"""
    import asyncio
    from concurrent.futures import ThreadPoolExecutor

    from nbclient.exceptions import DeadKernelError

    slept, looks = [], []

    async def sleep(seconds):
        slept.append(seconds)

    async def check_alive():
        looks.append(1)
        if len(looks) == 3:
            raise DeadKernelError("Kernel died")

    judge = executor.SandboxExecute()
    monkeypatch.setattr(executor.asyncio, "sleep", sleep)
    monkeypatch.setattr(judge, "_async_check_alive", check_alive)

    async def run():
        import zmq.asyncio

        with zmq.asyncio.Context() as context:  # the client's channels, where nothing more arrives
            sockets = [context.socket(zmq.PULL) for _ in range(2)]
            judge.kc = SimpleNamespace(shell_channel=SimpleNamespace(socket=sockets[0]),
                                       iopub_channel=SimpleNamespace(socket=sockets[1]))
            judge.task_poll_for_reply = asyncio.ensure_future(asyncio.Event().wait())
            await judge._async_poll_kernel_alive()
            for socket in sockets:
                socket.close(linger=0)
        return judge.task_poll_for_reply.cancelling()  # nbclient's wait for the reply, told to end

    with ThreadPoolExecutor(1) as thread:  # its own event loop, whatever runs in this one (Playwright)
        assert thread.submit(asyncio.run, run()).result() == 1
    assert slept == [executor.POLL] * 3
