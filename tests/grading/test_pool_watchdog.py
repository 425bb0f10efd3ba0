"""The pool's per-student watchdog holds whatever the grading loop waits for (issue 30: a class stopped at
28/29 under heavy load, the loop in LocalWorkers.map).

The watchdog used to run only between two rounds of the loop. A notebook bigger than the pipe's buffer
(about 200 KB on Linux; a student's notebook with a few figures is bigger) sent to a worker busy with
the student before it waits until that worker reads it: the loop waited there, and a student that never
finished held the class for good, the watchdog never looking. Here the workers are stand-ins (forked,
no kernel): one stops answering on its first student.
"""

from __future__ import annotations

import threading
import time

from traitlets.config import Config

from coursekit.grading.sandbox import pool

WALL_LIMIT = 2.0
BIG = "x" * (4 << 20)  # far over the pipe's buffer: a send to a busy worker waits until it reads


def _stand_in(conn, config, folder) -> None:
    """A worker that answers each student at once, but never the one called `hangs`."""
    while True:
        try:
            task = conn.recv()
        except EOFError:
            return
        if task is None:
            return
        if task[0] == "a_hangs":
            time.sleep(600)  # the watchdog ends it
        conn.send((task[0], f"graded {task[0]}", None))


def test_a_student_that_never_finishes_is_ended_at_the_wall_limit_while_the_loop_sends(monkeypatch):
    start = pool.LocalWorkers._start
    monkeypatch.setattr(pool, "student_wall_limit", lambda config: WALL_LIMIT)
    monkeypatch.setattr(pool, "_serve", _stand_in)
    monkeypatch.setattr(pool, "WATCH_INTERVAL", 0.2)
    monkeypatch.setattr(pool.LocalWorkers, "_start", lambda self, method: start(self, "fork"))
    workers = pool.LocalWorkers(1, Config())
    results: dict = {}

    def grade() -> None:
        for student_id, executed, failure in workers.map(iter([("a_hangs", BIG), ("b_next", BIG),
                                                               ("c_last", BIG)])):
            results[student_id] = (executed, failure)

    loop = threading.Thread(target=grade, daemon=True)
    began = time.monotonic()
    loop.start()
    loop.join(WALL_LIMIT + 40)  # the watchdog's SIGTERM is answered at once; its SIGKILL comes after 10 s
    held = time.monotonic() - began
    finished = not loop.is_alive()
    for process, _, _ in workers.workers:  # a loop still waiting (the old watchdog) is let go
        process.kill()
    loop.join(10)
    workers.close()
    assert finished, f"the class was held {held:.0f} s by one student (wall limit {WALL_LIMIT:g} s)"
    assert results == {"a_hangs": (None, f"over_budget: wall clock per student over {WALL_LIMIT:g} s"),
                       "b_next": ("graded b_next", None), "c_last": ("graded c_last", None)}


def test_close_leaves_no_process_of_the_pool_a_spawned_worker_and_its_resource_tracker_included():
    import psutil

    before = {p.pid for p in psutil.Process().children(recursive=True)}
    workers = pool.LocalWorkers(1, Config())
    with workers._lock:
        workers.workers.append(workers._start("spawn"))  # as _lost does: a fresh worker, spawned
    workers.close()
    left = [" ".join(p.cmdline())[:80] for p in psutil.Process().children(recursive=True)
            if p.pid not in before and p.status() != psutil.STATUS_ZOMBIE]
    assert left == []
