"""Grading beyond the defaults: a PostgreSQL gradebook, a Dask cluster, and a class stopped with Ctrl-C.

One run serves both engines: the same folder as the shared sqlite class (conftest.graded_class),
graded on a Dask cluster into a PostgreSQL gradebook, must give its CSV byte for byte. The two are
independent (the notebooks run on the Dask workers; only this process writes the gradebook).
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import nbformat
import psutil
import pytest
from grading_support import free_port, fresh_copy, make_course, read_rows
from nbgrader.api import Gradebook
from submission_kinds import NOTEBOOK_KINDS, expected

from coursekit.cli import main
from coursekit.grading.course import Course
from coursekit.grading.sandbox import pool

pytestmark = pytest.mark.slow
CELL_TIMEOUT = "3"  # as in conftest.graded_class


@pytest.fixture(scope="module")
def graded_on_dask_into_postgres(graded_class, postgres, tmp_path_factory) -> SimpleNamespace:
    """The shared class graded on a 2-worker LocalCluster into a PostgreSQL gradebook (one run)."""
    from distributed import LocalCluster

    course = make_course(tmp_path_factory.mktemp("engines") / "course")
    with open(course.root / "nbgrader_config.py", "a", encoding="utf-8") as config:
        config.write(f"\nc.CourseDirectory.db_url = {postgres!r}\n")  # nbgrader's own setting
    course = Course.at(course.root)
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, memory_limit="2GiB",
                      dashboard_address=None) as cluster:
        code = main(["grade", str(graded_class.folder), "--course", str(course.root), "--timeout", CELL_TIMEOUT,
                     "--scheduler", cluster.scheduler_address])
        ran = cluster.scheduler.task_prefixes["run_on_dask_worker"].state_counts["memory"]
    return SimpleNamespace(course=course, code=code, ran=ran, db_url=postgres)


def test_a_postgresql_gradebook_gives_the_same_csv_as_sqlite(graded_class, graded_on_dask_into_postgres):
    import sqlalchemy

    run = graded_on_dask_into_postgres
    assert run.course.db_url == run.db_url
    assert run.code == 0
    assert run.course.report_csv.read_text(encoding="utf-8") == graded_class.csv
    assert not (run.course.root / "gradebook.db").exists()
    engine = sqlalchemy.create_engine(run.db_url)
    with engine.connect() as conn:
        graded = conn.execute(sqlalchemy.text("SELECT count(*) FROM submitted_assignment")).scalar()
    engine.dispose()
    assert graded == sum(1 for row in graded_class.rows.values() if "invalid_notebook" not in row["flags"]
                         and "unknown_student_id" not in row["flags"])


def test_a_dask_cluster_gives_the_same_csv_as_local_workers(graded_class, graded_on_dask_into_postgres):
    run = graded_on_dask_into_postgres
    assert run.code == 0
    assert run.course.report_csv.read_text(encoding="utf-8") == graded_class.csv
    assert run.ran == sum(1 for row in graded_class.rows.values() if row["flags"].split("(")[0] not in
                          ("invalid_notebook", "unknown_student_id"))  # every gradable notebook ran on the cluster


def test_an_unreachable_scheduler_is_a_one_line_error(released_course, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(pool, "SCHEDULER_TIMEOUT", "1s")  # not 10 s of retries against a closed port
    course = Course.at(shutil.copytree(released_course.root, tmp_path / "course"))
    (tmp_path / "subs").mkdir()
    shutil.copyfile(course.release_notebook, tmp_path / "subs" / "s01.ipynb")  # an empty folder stops earlier
    port = free_port()
    assert main(["grade", str(tmp_path / "subs"), "--course", str(course.root),
                 "--scheduler", f"tcp://127.0.0.1:{port}"]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"error: --scheduler tcp://127.0.0.1:{port}: cannot reach the Dask scheduler")
    assert len(err.splitlines()) == 1


# ---------------------------------------------------------------- Ctrl-C

RUN = """import sys
from coursekit.cli import main
code = main(sys.argv[1:])
print("dask imported:", sorted(m for m in sys.modules if m.split(".")[0] in ("dask", "distributed")))
sys.exit(code)
"""


def our_processes(scratch: Path) -> list[psutil.Process]:
    """Kernels (and anything they started) still running in this test's temporary folder."""
    alive = []
    for process in psutil.process_iter():
        try:
            if process.cwd().startswith(str(scratch)):
                alive.append(process)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    return alive


def test_ctrl_c_keeps_the_gradebook_consistent_and_a_rerun_grades_only_the_rest(released_course, tmp_path):
    course = Course.at(shutil.copytree(released_course.root, tmp_path / "course"))
    shutil.rmtree(course.ingest_dir, ignore_errors=True)  # the shared course may be graded already
    base = nbformat.read(course.release_notebook, as_version=4)
    folder = tmp_path / "lms"
    folder.mkdir()
    # enough students that Ctrl-C lands mid-class; one infinite loop (its timeouts are most of the rerun)
    kinds = {f"s{n:02d}": "correct" for n in range(5)} | {"s05": "infinite_loop", "s06": "std_eq_zero",
                                                            "s07": "hard_coded"}
    for sid, kind in kinds.items():
        nb = NOTEBOOK_KINDS[kind][0](copy.deepcopy(base))
        (folder / f"{sid}.ipynb").write_text(json.dumps(nb), encoding="utf-8")
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    env = {**os.environ, "TMPDIR": str(scratch)}  # the kernels' working folders
    command = [sys.executable, "-c", RUN, "grade", str(folder), "--course", str(course.root),
               "--timeout", CELL_TIMEOUT, "--jobs", "2"]
    journal = course.ingest_dir / "graded.jsonl"

    first = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             start_new_session=True)
    deadline = time.monotonic() + 300
    while not (journal.is_file() and len(journal.read_text().splitlines()) >= 3):
        assert first.poll() is None and time.monotonic() < deadline, first.communicate()
        time.sleep(0.05)
    os.killpg(first.pid, signal.SIGINT)  # as Ctrl-C in a terminal: the whole process group
    out, err = first.communicate(timeout=120)
    assert first.returncode == 130, err
    assert "interrupted:" in err and "run the same command again" in err

    finished = [json.loads(line)["student_id"] for line in journal.read_text().splitlines()]
    assert 3 <= len(finished) < len(kinds)  # really stopped mid-class
    grace = time.monotonic() + 1.5
    while our_processes(scratch) and time.monotonic() < grace:
        time.sleep(0.05)
    assert our_processes(scratch) == []  # no kernel outlived the interrupted run (1.5 s to exit)
    db = sqlite3.connect(course.root / "gradebook.db")
    assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    db.close()
    with Gradebook(course.db_url) as gb:
        for sid in finished:  # each finished student is complete: scores, autograded notebook (its feedback
            # page is written after the class, so by the rerun when the class was interrupted)
            grades = {g.name: g.auto_score for g in gb.find_submission_notebook("lesson11", "lesson11", sid).grades}
            assert all(grades[name] is not None for name in ("test_normal", "test_boundary", "test_aggregation"))
            assert course.autograded_notebook(sid).is_file()
    stamps = {sid: course.autograded_notebook(sid).stat().st_mtime_ns for sid in finished}

    second = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
    assert second.returncode == 0, second.stderr
    assert "dask imported: []" in second.stdout  # no Dask without --scheduler
    assert {sid: course.autograded_notebook(sid).stat().st_mtime_ns for sid in finished} == stamps  # not regraded
    assert all(course.feedback_html(sid).is_file() for sid in finished)  # the rerun wrote the missing pages
    rows = read_rows(course.report_csv.read_text(encoding="utf-8"))
    assert set(rows) == set(kinds)
    for sid, kind in kinds.items():
        (normal, boundary, aggregation), flags = expected(kind)
        assert (float(rows[sid]["normal"]), float(rows[sid]["boundary"]), float(rows[sid]["aggregation"])) == \
            (normal, boundary, aggregation), rows[sid]
        assert {f.split("(", 1)[0] for f in rows[sid]["flags"].split(";") if f} == flags, rows[sid]
    assert our_processes(scratch) == []


def test_a_grading_worker_keeps_no_thread_of_a_finished_notebook(released_course):
    """A long class must not pile up threads in its workers: nbclient left the client of every kernel
    a worker started ahead running (a heartbeat thread and a zmq context, three threads per notebook)."""
    import threading

    from submission_kinds import k_correct
    from traitlets.config import Config

    from coursekit.grading.records import record
    from coursekit.grading.sandbox import execute

    recorder = record.Recorder(released_course, Config(released_course.config))
    runner = execute.Runner(recorder.worker_config())
    notebook = nbformat.writes(k_correct(nbformat.read(released_course.release_notebook, as_version=4)))
    try:
        counts = []
        for _ in range(3):
            runner.run(notebook)
            counts.append((threading.active_count(), len(os.listdir("/proc/self/task"))))
    finally:
        runner.close()
        recorder.close()
    assert counts[2] == counts[0], counts


def test_the_recorder_lends_its_gradebook_to_nbgrader_steps(release_template, tmp_path, monkeypatch):
    """nbgrader's sanitize, record and feedback steps each open `Gradebook(db_url)` per notebook (a new
    engine and schema check each); the recorder's one open gradebook serves them all, and the grades
    and feedback are still written."""
    import nbgrader.api
    from traitlets.config import Config

    from coursekit.grading.records import record

    course = fresh_copy(release_template, tmp_path / "course")
    engines = []
    create_engine = nbgrader.api.create_engine
    monkeypatch.setattr(nbgrader.api, "create_engine", lambda *a, **k: engines.append(a) or create_engine(*a, **k))
    recorder = record.Recorder(course, Config(course.config))
    own = len(engines)
    try:
        for student_id in ("s1", "s2"):
            course.submitted_notebook(student_id).parent.mkdir(parents=True)
            shutil.copyfile(course.release_notebook, course.submitted_notebook(student_id))
            recorder.sanitize(student_id)
            recorder.record(student_id, recorder.key(student_id), None, "not run in this test")
    finally:
        recorder.close()
    assert own == 1 and len(engines) == own
    with Gradebook(course.db_url) as gb:
        assert {s.student.id for s in gb.assignment_submissions(course.assignment)} == {"s1", "s2"}
    assert all(course.feedback_html(s).is_file() for s in ("s1", "s2"))
