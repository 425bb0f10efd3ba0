"""Issue 9's attack matrix: one class of attackers (attack_kinds.py) between two honest students,
graded once with `coursekit grade` in its sandbox; every test below reads that one run."""

from __future__ import annotations

import csv
import hashlib
import html
import io
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
import pytest
from attack_kinds import ATTACKS, HIDDEN_GROUP, HONEST, MARKER, SECRET_NAME, Target, write_attack_class
from bs4 import BeautifulSoup
from conftest import make_course
from nbgrader.api import Gradebook
from test_grading_commands import free_port

from coursekit.cli import main
from coursekit.grading.course import Course
from coursekit.grading.formgrader import command
from coursekit.grading.intake.release import release
from coursekit.grading.sandbox.bubblewrap import SANDBOX_UID_BASE, unavailable_reason

pytestmark = pytest.mark.slow
# Elements through which the student's content could run: any attribute, script or frame that
# carries the attacks' marker (every active part of the HTML attack mentions __ck_pwned).
LIVE_ELEMENTS = """() => [...document.querySelectorAll('*')].filter(e =>
    [...e.attributes].some(a => a.value.includes('__ck_pwned'))
    || (['SCRIPT', 'IFRAME', 'OBJECT', 'EMBED'].includes(e.tagName) && e.outerHTML.includes('__ck_pwned'))
    ).map(e => e.outerHTML.slice(0, 120))"""
GRADER_OUTPUTS = re.compile(r"^(submitted/|autograded/|\.ingest/|feedback/[^/]+/lesson11/lesson11\.html$|"
                            r"reports/lesson11(\.csv|\.html|_mistakes\.csv)$|gradebook\.db$)")


@dataclass
class Listener:
    """A TCP server on 127.0.0.1 that records what connects to it."""

    server: socket.socket = field(default_factory=socket.socket)
    received: list[bytes] = field(default_factory=list)

    def start(self) -> int:
        self.server.bind(("127.0.0.1", 0))
        self.server.listen(16)
        threading.Thread(target=self._serve, daemon=True).start()
        return self.server.getsockname()[1]

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            with conn:
                self.received.append(conn.recv(100) or b"(connected)")


@dataclass
class AttackedClass:
    course: Course
    students: dict[str, str]
    exit_code: int
    rows: dict[str, dict[str, str]]
    before: dict[str, str]
    after: dict[str, str]
    connections: list[bytes]
    alive: list[str]  # processes of the class still running after grade returned
    secret: str


def digests(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def class_processes() -> list[str]:
    """Processes of the graded class: an attack's marker in the command line, or a sandbox uid."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            status = Path(f"/proc/{pid}/status").read_text()
            uid = os.stat(f"/proc/{pid}").st_uid
        except OSError:
            continue
        ours = cmdline.startswith(sys.executable.encode())  # not another checkout's sandboxes
        if MARKER.encode() in cmdline or uid >= SANDBOX_UID_BASE and ours:
            state = " ".join(line for line in status.splitlines() if line.startswith(("State", "PPid", "Uid")))
            found.append(f"{pid} ({state}): {cmdline[:60]!r}")
    return found


@pytest.fixture(scope="module")
def attacked(tmp_path_factory) -> AttackedClass:
    root = tmp_path_factory.mktemp("attacks")
    reason = unavailable_reason(root)
    assert reason is None, f"the attack matrix needs the grading sandbox: {reason}"
    course = make_course(root / "course")
    release(course)
    for folder in ("reports", "feedback"):  # so that writing there would succeed without the sandbox
        (course.root / folder).mkdir()
    listener = Listener()
    secret = "grader-secret-" + os.urandom(8).hex()
    students = write_attack_class(course.release_notebook, root / "lms",
                                  Target(course.root, listener.start(), secret))
    before = digests(course.root)
    old = os.environ.get(SECRET_NAME)
    os.environ[SECRET_NAME] = secret
    try:
        code = main(["grade", str(root / "lms"), "--course", str(course.root), "--timeout", "3"])
    finally:
        os.environ.pop(SECRET_NAME) if old is None else os.environ.__setitem__(SECRET_NAME, old)
    alive = class_processes()
    listener.server.close()
    rows = {r["student_id"]: r for r in csv.DictReader(io.StringIO(course.report_csv.read_text(encoding="utf-8")))}
    return AttackedClass(course, students, code, rows, before, digests(course.root), listener.received, alive,
                         secret)


def sid_of(attacked: AttackedClass, kind: str) -> str:
    return next(sid for sid, k in attacked.students.items() if k == kind)


def hidden_test_code(source_notebook: Path) -> list[str]:
    """Code lines of the hidden tests (their messages are the diagnostics students are meant to see)."""
    lines = []
    for cell in nbformat.read(source_notebook, as_version=4).cells:
        for block in re.findall(r"### BEGIN HIDDEN TESTS\n(.*?)### END HIDDEN TESTS", cell.source, re.S):
            lines += [line.strip() for line in block.split("\n") if len(line.strip()) > 20
                      and not line.strip().startswith(('"', "f\"", "'", "#"))]
    return lines


def readable_by_students(course: Course, sid: str) -> str:
    """Everything of one student that reaches a page: autograded outputs and the feedback HTML."""
    nb = nbformat.read(course.autograded_notebook(sid), as_version=4)
    outputs = json.dumps([c.get("outputs", []) for c in nb.cells], ensure_ascii=False)
    return outputs + html.unescape(course.feedback_html(sid).read_text(encoding="utf-8"))


def test_the_class_is_graded_and_every_student_has_a_row(attacked):
    assert attacked.exit_code == 0
    assert set(attacked.rows) == set(attacked.students)


@pytest.mark.parametrize("kind", ATTACKS)
def test_an_attacker_gets_no_more_than_its_honest_code_deserves(attacked, kind):
    row = attacked.rows[sid_of(attacked, kind)]
    got = (float(row["normal"]), float(row["boundary"]), float(row["aggregation"]))
    assert all(mine <= deserved for mine, deserved in zip(got, ATTACKS[kind][1], strict=True)), row


@pytest.mark.parametrize("kind", ATTACKS)
def test_each_attack_is_flagged_with_what_it_tried(attacked, kind):
    flags = attacked.rows[sid_of(attacked, kind)]["flags"].split(";")
    for name, detail in ATTACKS[kind][2].items():
        assert any(f.startswith(name) and detail in f for f in flags), flags


def test_honest_students_before_and_after_keep_full_marks_and_no_flags(attacked):
    for sid in HONEST:
        row = attacked.rows[sid]
        assert (row["normal"], row["boundary"], row["aggregation"], row["flags"]) == ("1.5", "1", "0.5", ""), row


def test_honest_students_grades_in_the_gradebook_are_their_own(attacked):
    with Gradebook(attacked.course.db_url) as gb:
        for sid in HONEST:
            submission = gb.find_submission_notebook("lesson11", "lesson11", sid)
            grades = {g.name: (g.auto_score, g.manual_score) for g in submission.grades}
            assert grades == {"test_normal": (1.5, None), "test_boundary": (1, None), "test_aggregation": (0.5, None),
                              "explanation": (None, None), "q1": (None, None), "q2": (None, None),
                              "q3": (None, None)}
            assert all(c.manual_comment is None for c in submission.comments)


def test_the_course_folder_is_unchanged_but_for_the_graders_own_outputs(attacked):
    changed = [p for p in attacked.after if attacked.before.get(p) != attacked.after[p]
               and not GRADER_OUTPUTS.match(p)]
    assert changed == []
    assert all(p in attacked.after for p in attacked.before)
    assert {p.split("/")[1] for p in attacked.after if p.startswith("feedback/")} <= set(attacked.students)


def test_test_cells_in_the_gradebook_are_still_the_lessons(attacked):
    source = nbformat.read(attacked.course.source_notebook, as_version=4)
    expected = {c.metadata.nbgrader.grade_id: c.source for c in source.cells
                if c.cell_type == "code" and c.metadata.get("nbgrader", {}).get("locked")}
    assert set(expected) == {"test_normal", "test_boundary", "test_aggregation"}
    with Gradebook(attacked.course.db_url) as gb:
        stored = {c.name: c.source for c in gb.find_notebook("lesson11", "lesson11").source_cells}
    assert {k: stored[k] for k in expected} == expected


def test_no_hidden_test_code_and_no_grader_secret_reaches_any_student_page(attacked):
    hidden = hidden_test_code(attacked.course.source_notebook)
    assert len(hidden) > 30
    for sid in attacked.students:
        text = readable_by_students(attacked.course, sid)
        assert [line for line in hidden if line in text] == [], sid
        assert attacked.secret not in text, sid
        assert "0.2, 0.9, 0.4, 0.4, 1.0" not in text, sid  # a hidden input, never quoted by default


SPELLED = (HIDDEN_GROUP, HIDDEN_GROUP.replace("_", "-"), "0.2, 0.9, 0.4, 0.4, 1.0")


@pytest.mark.parametrize("kind", [kind for kind in ATTACKS if kind.startswith("leak_")])
def test_no_hidden_input_reaches_a_record(attacked, kind):
    """The leak_* attacks spell a hidden input (HIDDEN_GROUP) in a file name, a program, an address or a
    class name while the hidden checks call them: their row (flags) never carries it, nor anything long."""
    row = ",".join(attacked.rows[sid_of(attacked, kind)].values())
    assert [s for s in SPELLED if s in row] == []
    assert all(len(f) < 400 for f in attacked.rows[sid_of(attacked, kind)]["flags"].split(";"))


def test_no_hidden_input_reaches_the_reports(attacked):
    for path in (attacked.course.report_csv, attacked.course.root / "reports" / "lesson11.html",
                 attacked.course.root / "reports" / "lesson11_mistakes.csv"):
        text = path.read_text(encoding="utf-8")
        assert [s for s in SPELLED if s in text] == [], path


def test_a_cell_dressed_as_a_test_cell_never_runs_in_the_grader(attacked):
    assert not (attacked.course.root.parent / "trusted-pwned.txt").exists()
    assert attacked.rows[sid_of(attacked, "forged_test_cell")]["max_score"] == "10"


def test_no_process_of_the_class_is_alive_after_grade_returns(attacked):
    assert attacked.alive == []


def test_nothing_connected_to_a_listener_on_this_machine(attacked):
    assert attacked.connections == []


def test_the_environment_the_student_saw_is_the_sandboxs(attacked):
    text = readable_by_students(attacked.course, sid_of(attacked, "environment"))
    assert "'HOME': '/home/student'" in text and "PATH" in text
    assert SECRET_NAME not in text


def test_a_fork_flood_stops_at_the_process_limit(attacked):
    text = readable_by_students(attacked.course, sid_of(attacked, "fork_flood"))
    assert re.search(r"fork stopped: BlockingIOError (\d+)", text), "the flood was not bounded"
    assert int(re.search(r"fork stopped: BlockingIOError (\d+)", text).group(1)) < 64


def test_late_writes_of_detached_children_never_happen(attacked):
    assert not (attacked.course.root / "reports" / "late.txt").exists()


def test_feedback_and_stored_notebook_keep_no_active_content(attacked):
    sid = sid_of(attacked, "html")
    page = BeautifulSoup(attacked.course.feedback_html(sid).read_text(encoding="utf-8"), "html.parser")
    assert "__ck_pwned" in page.get_text()  # the student's output is shown, as text ...
    live = [tag.name for tag in page.find_all(True) if any("__ck_pwned" in str(v) for v in tag.attrs.values())
            or tag.name in ("script", "iframe", "object", "embed") and "__ck_pwned" in str(tag)]
    assert live == []  # ... but no element carries any of it
    stored = nbformat.read(attacked.course.autograded_notebook(sid), as_version=4)
    mimes = {m for c in stored.cells for o in c.get("outputs", []) for m in o.get("data", {})}
    assert mimes <= {"text/plain", "text/html", "text/markdown", "image/png"}


def test_no_script_of_the_student_runs_in_the_feedback_page(attacked, browser, serve_directory, tmp_path):
    sid = sid_of(attacked, "html")
    shutil.copyfile(attacked.course.feedback_html(sid), tmp_path / "feedback.html")
    page = browser.new_page()
    try:
        page.goto(serve_directory(tmp_path) + "feedback.html", wait_until="load")
        page.wait_for_timeout(500)
        assert page.evaluate("typeof window.__ck_pwned") == "undefined"
        assert page.evaluate(LIVE_ELEMENTS) == []
        assert "__ck_pwned" in page.content()  # the text is there, inert
    finally:
        page.close()


@pytest.fixture(scope="module")
def formgrader_url(attacked):
    """nbgrader's formgrader on the attacked course: the page of the HTML/JS submission."""
    port = free_port()
    proc = subprocess.Popen(command(attacked.course, port, "coursekit-test"), cwd=attacked.course.root,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    with Gradebook(attacked.course.db_url) as gb:
        submission = gb.find_submission_notebook("lesson11", "lesson11", sid_of(attacked, "html")).id
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(120):
            try:
                urllib.request.urlopen(f"{base}/api/status?token=coursekit-test", timeout=2)
                break
            except OSError:
                time.sleep(0.5)
        yield f"{base}/formgrader/submissions/{submission}/?token=coursekit-test"
    finally:
        proc.terminate()
        proc.wait(timeout=20)


def test_no_script_of_the_student_runs_in_formgrader(formgrader_url, browser):
    page = browser.new_page()
    try:
        page.goto(formgrader_url, wait_until="load")
        page.wait_for_timeout(1000)
        assert "group_advantages" in page.content()  # the submission is shown
        assert page.evaluate("typeof window.__ck_pwned") == "undefined"
        assert page.evaluate(LIVE_ELEMENTS) == []
    finally:
        page.close()
