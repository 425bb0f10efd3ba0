"""Issue 9's attack matrix: one class of attackers (attack_kinds.py) between two honest students,
graded with `coursekit grade` in its sandbox; every test below reads that run, and one compares it with a
second run of the same class (--regrade) byte for byte."""

from __future__ import annotations

import asyncio
import contextlib
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
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
import pytest
from attack_kinds import (
    ATTACKS,
    HIDDEN_GROUP,
    HONEST,
    MARKDOWN_ATTACKS,
    MARKER,
    SECRET_NAME,
    TEX_ATTACKS,
    Target,
    write_attack_class,
)
from bs4 import BeautifulSoup
from grading_support import fresh_copy
from nbgrader.api import Gradebook
from test_grading_commands import free_port

from coursekit.cli import main
from coursekit.grading.course import Course
from coursekit.grading.formgrader import command
from coursekit.grading.preprocessors import clean_markdown, sanitize_output
from coursekit.grading.sandbox.bubblewrap import (
    KERNELS_PER_PROCESS,
    SANDBOX_UID_BASE,
    SandboxKernelManager,
    processes_in,
    unavailable_reason,
)
from coursekit.grading.sandbox.pool import LocalWorkers

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
    csv: str  # the report's CSV of that run
    regraded: tuple[int, str]  # exit status and CSV of a second run of the same class


def digests(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def class_processes(graders: set[int]) -> list[str]:
    """Processes of the class graded by the processes `graders` (this test's and its grading workers'): those
    with a sandbox uid of theirs (sandbox_uid: one per grader's pid), or an attack's marker in the command
    line and no sandbox uid at all (out of every sandbox: whoever made them). Another grader's sandboxes (another
    pytest-xdist worker grading its own class at the same time, another checkout's) are not the class's."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            status = Path(f"/proc/{pid}/status").read_text()
            uid = os.stat(f"/proc/{pid}").st_uid
        except OSError:
            continue
        sandboxed = uid >= SANDBOX_UID_BASE
        if sandboxed and (uid - SANDBOX_UID_BASE) // KERNELS_PER_PROCESS in graders \
                or not sandboxed and MARKER.encode() in cmdline:
            state = " ".join(line for line in status.splitlines() if line.startswith(("State", "PPid", "Uid")))
            found.append(f"{pid} ({state}): {cmdline[:60]!r}")
    return found


@contextlib.contextmanager
def recording_graders() -> Iterator[set[int]]:
    """The pids of this process and of every grading worker it starts meanwhile (LocalWorkers._start)."""
    graders = {os.getpid()}
    start = LocalWorkers._start

    def recorded(self, method):
        worker = start(self, method)
        graders.add(worker[0].pid)
        return worker

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(LocalWorkers, "_start", recorded)
        yield graders


@pytest.fixture(scope="module")
def attacked(release_template, tmp_path_factory) -> AttackedClass:
    root = tmp_path_factory.mktemp("attacks")
    reason = unavailable_reason(root)
    assert reason is None, f"the attack matrix needs the grading sandbox: {reason}"
    course = fresh_copy(release_template, root / "course")
    for folder in ("reports", "feedback"):  # so that writing there would succeed without the sandbox
        (course.root / folder).mkdir()
    listener = Listener()
    secret = "grader-secret-" + os.urandom(8).hex()
    students = write_attack_class(course.release_notebook, root / "lms",
                                  Target(course.root, listener.start(), secret))
    before = digests(course.root)
    old = os.environ.get(SECRET_NAME)
    os.environ[SECRET_NAME] = secret
    command = ["grade", str(root / "lms"), "--course", str(course.root), "--timeout", "3"]
    try:
        with recording_graders() as graders:
            code = main(command)
            alive = class_processes(graders)
            report = course.report_csv.read_text(encoding="utf-8")
            regraded = main([*command, "--regrade"])  # really grade again: without it, finished students are kept
    finally:
        os.environ.pop(SECRET_NAME) if old is None else os.environ.__setitem__(SECRET_NAME, old)
    alive += class_processes(graders)
    listener.server.close()
    rows = {r["student_id"]: r for r in csv.DictReader(io.StringIO(report))}
    return AttackedClass(course, students, code, rows, before, digests(course.root), listener.received, alive,
                         secret, report, (regraded, course.report_csv.read_text(encoding="utf-8")))


def sid_of(attacked: AttackedClass, kind: str) -> str:
    return next(sid for sid, k in attacked.students.items() if k == kind)


def hidden_test_code(source_notebook: Path) -> list[str]:
    """Code lines of the hidden tests (their messages are the diagnostics students are meant to see),
    but those that also stand in the test cells' public code (visible lines and self-checks, which the
    runner and the student bundle show): a page that shows public code shows them there."""
    hidden, public = [], ""
    for cell in nbformat.read(source_notebook, as_version=4).cells:
        for block in re.findall(r"### BEGIN HIDDEN TESTS\n(.*?)### END HIDDEN TESTS", cell.source, re.S):
            hidden += [line.strip() for line in block.split("\n") if len(line.strip()) > 20
                       and not line.strip().startswith(('"', "f\"", "'", "#"))]
        public += re.sub(r"### BEGIN HIDDEN TESTS\n.*?### END HIDDEN TESTS", "", cell.source, flags=re.S)
    return [line for line in hidden if line not in public]


def readable_by_students(course: Course, sid: str) -> str:
    """Everything of one student that reaches a page: autograded outputs and the feedback HTML."""
    nb = nbformat.read(course.autograded_notebook(sid), as_version=4)
    outputs = json.dumps([c.get("outputs", []) for c in nb.cells], ensure_ascii=False)
    return outputs + html.unescape(course.feedback_html(sid).read_text(encoding="utf-8"))


def test_the_class_is_graded_and_every_student_has_a_row(attacked):
    assert attacked.exit_code == 0
    assert set(attacked.rows) == set(attacked.students)


def test_the_class_graded_again_gives_the_same_csv_byte_for_byte(attacked):
    """bench_hostile's two reruns (issue 31): flags that depend neither on timing nor on the host's files."""
    code, csv_again = attacked.regraded
    first, again = attacked.csv.splitlines(), csv_again.splitlines()
    changed = [f"first: {a}\nagain: {b}" for a, b in zip(first, again, strict=False) if a != b]
    assert (code, len(again), changed) == (0, len(first), [])


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


# Another grader at the same time (another pytest-xdist worker grading its own class): it starts one sandboxed
# kernel, says so, and keeps it until its stdin closes.
OTHER_GRADER = """
import asyncio, sys
from coursekit.grading.sandbox.bubblewrap import SandboxKernelManager
async def run():
    km = SandboxKernelManager(kernel_name="python3")
    await km.start_kernel()
    print(km.namespace, flush=True)
    sys.stdin.read()
    await km.shutdown_kernel(now=True)
    km.remove_socket_dir()
asyncio.run(run())
"""


def kernels_in(namespace: str) -> set[int]:
    """Host pids of the processes of one sandbox that run as a sandbox uid (its kernel, once it has dropped
    to that uid, and the kernel's children)."""
    found = set()
    for pid in processes_in(namespace):
        with contextlib.suppress(OSError):
            if os.stat(f"/proc/{pid}").st_uid >= SANDBOX_UID_BASE:
                found.add(pid)
    return found


def test_the_class_processes_are_its_graders_and_not_another_graders_at_the_same_time(tmp_path):
    """class_processes counts the kernels of this process's graders, and not those of another grader running
    then: with two pytest-xdist workers, the attack class found the other worker's kernels (running or booting
    its own class) 'alive after grade returned'."""
    assert unavailable_reason(tmp_path) is None
    other = subprocess.Popen([sys.executable, "-c", OTHER_GRADER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             text=True)

    async def both_running() -> tuple[list[str], set[int], set[int]]:
        km = SandboxKernelManager(kernel_name="python3")
        await km.start_kernel()
        try:
            theirs_namespace = other.stdout.readline().strip()
            for _ in range(600):  # each kernel drops to its sandbox uid once it has started
                mine, theirs = kernels_in(km.namespace), kernels_in(theirs_namespace)
                if mine and theirs:
                    break
                await asyncio.sleep(0.05)
            return class_processes({os.getpid()}), mine, theirs
        finally:
            await km.shutdown_kernel(now=True)
            km.remove_socket_dir()

    try:  # in a thread of its own: Playwright's sync API, once started in this process, keeps a loop running here
        with ThreadPoolExecutor(max_workers=1) as thread:
            found, mine, theirs = thread.submit(asyncio.run, both_running()).result()
    finally:
        other.stdin.close()
        other.wait(timeout=60)
    found_pids = {int(line.split()[0]) for line in found}
    assert mine and mine <= found_pids  # this grader's kernel is found ...
    assert theirs and not theirs & found_pids, found  # ... and the other's, running then, is not


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
def formgrader_base(attacked):
    """nbgrader's formgrader (`coursekit formgrader`'s command) on the attacked course: its base URL."""
    port = free_port()
    proc = subprocess.Popen(command(attacked.course, port, "coursekit-test"), cwd=attacked.course.root,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(240):
            try:
                urllib.request.urlopen(f"{base}/api/status?token=coursekit-test", timeout=2)
                break
            except OSError:
                time.sleep(0.5)
        yield base
    finally:
        proc.terminate()
        proc.wait(timeout=60)  # JupyterLab stops its kernels first: slow on a loaded machine


def submission_id(attacked: AttackedClass, kind: str) -> str:
    with Gradebook(attacked.course.db_url) as gb:
        return gb.find_submission_notebook("lesson11", "lesson11", sid_of(attacked, kind)).id


@pytest.fixture(scope="module")
def formgrader_url(formgrader_base, attacked):
    """The formgrader page of the HTML/JS submission."""
    return f"{formgrader_base}/formgrader/submissions/{submission_id(attacked, 'html')}/?token=coursekit-test"


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


# ---------------------------------------------------------------- student text in instructor pages (TeX)

# What MathJax 3 makes into attributes or definitions: the html extension (\href \class \style \cssId \data,
# MathJax-src ts/input/tex/html/HtmlConfiguration.ts), \unicode (ts/input/tex/unicode), \mmlToken (any
# attribute, ts/input/tex/base/BaseMappings.ts), \require (loads extensions), \def and kin (rebuild them).
LIVE_TEX = re.compile(r"\\(href|url|class|style|cssId|data|unicode|mmlToken|require|def|let|newcommand)(?![A-Za-z])")


def browser_view(page_html: str) -> tuple[str, list[str]]:
    """The text MathJax reads (tags and comments out, character references decoded, as a browser does)
    and every URL-valued attribute with what a browser's URL parser drops removed."""
    soup = BeautifulSoup(page_html, "html.parser")
    urls = [re.sub(r"[\x00-\x20]", "", v).lower() for tag in soup.find_all(True)
            for name, v in tag.attrs.items() if name in ("href", "src", "xlink:href", "values", "action")]
    return soup.get_text(), urls


def safe_urls(urls: list[str]) -> bool:
    return all(u.startswith(("http://", "https://", "#")) or not re.match(r"[a-z][a-z0-9+.-]*:", u) for u in urls)


@pytest.mark.parametrize("attack", TEX_ATTACKS + MARKDOWN_ATTACKS)
def test_a_hostile_written_answer_keeps_no_tex_macro_and_no_script_link(attack):
    """A Markdown answer cell as formgrader and the feedback page show it: clean_markdown, then
    nbconvert's Markdown renderer; what MathJax then reads holds no LIVE_TEX macro and no link but
    http(s)."""
    from nbconvert.filters.markdown import markdown2html

    text, urls = browser_view(markdown2html(clean_markdown(attack)))
    assert not LIVE_TEX.search(text), text
    assert safe_urls(urls), urls
    assert "<svg" not in markdown2html(clean_markdown(attack))


@pytest.mark.parametrize("mime, attack", [("text/html", a) for a in TEX_ATTACKS[:6]]
                         + [("text/markdown", a) for a in (*MARKDOWN_ATTACKS[:2], *TEX_ATTACKS[6:8])])
def test_a_hostile_html_or_markdown_output_keeps_no_tex_macro_and_no_script_link(mime, attack):
    from nbconvert.filters.markdown import markdown2html

    output = sanitize_output(nbformat.v4.new_output("display_data", data={mime: attack}))
    shown = output.data[mime] if mime == "text/html" else markdown2html(output.data[mime])
    text, urls = browser_view(shown)
    assert not LIVE_TEX.search(text), text
    assert safe_urls(urls), urls


def grades_of(course: Course, student_id: str) -> dict[str, tuple]:
    with Gradebook(course.db_url) as gb:
        submission = gb.find_submission_notebook("lesson11", "lesson11", student_id)
        return {g.name: (g.auto_score, g.manual_score, g.extra_credit, g.needs_manual_grade) for g in submission.grades}


# A click on a link runs what a javascript: URL holds in the page itself; http(s) links only navigate (to
# pages that run nothing of the student's), so those clicks are kept from leaving the page under test.
CLICK_LINK = """([selector, i]) => {
    const a = document.querySelectorAll(selector)[i];
    if (!a) return;
    const stay = e => { const href = e.target.closest('a') && e.target.closest('a').href;
                        if (href && /^https?:/.test(String(href.baseVal || href))) e.preventDefault(); };
    document.addEventListener('click', stay, {capture: true, once: true});
    a.dispatchEvent(new MouseEvent('click', {bubbles: true, cancelable: true}));
  }"""
LINKS = "#notebook-container a, mjx-container a"
TOUCH_ALL = """() => { for (const e of document.querySelectorAll('#notebook-container *')) {
    if (e.focus) e.focus();
    for (const kind of ['mouseover', 'mouseenter', 'mousemove', 'click']) {
      if (kind === 'click' && e.closest('a, button, input, textarea')) continue;  // the links: one by one
      e.dispatchEvent(new MouseEvent(kind, {bubbles: true}));
    }
  } }"""
LINK_TARGETS = """() => [...document.querySelectorAll('[href]')].map(e =>
    e.href && e.href.baseVal !== undefined ? e.href.baseVal : (e.href || e.getAttribute('href')))"""


def test_clicking_through_a_hostile_tex_submission_in_formgrader_runs_nothing_and_changes_no_grade(
        formgrader_base, attacked, browser):
    """Issue 23, class 1: the TeX/Markdown attacker's page in formgrader (attack_kinds.TEX_ATTACKS): every
    link clicked, every element focused and hovered; no script of the student runs (window.__ck_pwned stays
    undefined), no link leaves http(s), no class or id of the student's, and the gradebook is unchanged."""
    sid = sid_of(attacked, "tex")
    before = grades_of(attacked.course, sid)
    url = f"{formgrader_base}/formgrader/submissions/{submission_id(attacked, 'tex')}/?token=coursekit-test"
    page = browser.new_page()
    violations = []
    page.on("console", lambda msg: "Content Security Policy" in msg.text and violations.append(msg.text))
    page.on("popup", lambda popup: popup.close())
    page.route("**/*", lambda route: route.continue_() if route.request.url.startswith(formgrader_base + "/")
               else route.abort())

    def load():
        response = page.goto(url, wait_until="load")
        page.wait_for_function("() => document.querySelectorAll('mjx-container').length > 10", timeout=60_000)
        page.wait_for_timeout(300)
        return response

    try:
        policy = load().headers.get("content-security-policy", "")
        text = page.locator("body").inner_text()
        assert "tex-tab" in text and "tex-comment" in text  # the student's text is shown, inert
        for i in range(page.evaluate("s => document.querySelectorAll(s).length", LINKS)):
            page.evaluate(CLICK_LINK, [LINKS, i])
            page.wait_for_timeout(100)
            assert page.url.split("?")[0] == url.split("?")[0]  # formgrade.js sets ?index=
        page.evaluate(TOUCH_ALL)
        page.wait_for_timeout(500)
        assert page.evaluate("typeof window.__ck_pwned") == "undefined"
        assert safe_urls([re.sub(r"[\x00-\x20]", "", u).lower() for u in page.evaluate(LINK_TARGETS)])
        assert page.evaluate("() => document.querySelectorAll('[class*=ck-evil], [id*=ck-evil]').length") == 0
        assert page.evaluate(LIVE_ELEMENTS) == []
    finally:
        page.close()
    assert grades_of(attacked.course, sid) == before
    scripts = policy.split("script-src ")[1].split(";")[0].split()
    assert scripts[0] == "'self'" and "'unsafe-inline'" not in scripts  # no inline script on this page


@pytest.mark.browser
def test_mathjax_safe_setup_defuses_raw_hostile_tex(browser, serve_directory, tmp_path):
    """The second guard alone: TEX_ATTACKS typeset without the sanitiser by MathJax 3 from node_modules
    with templates/static/safe_mathjax.js (ui/safe, MathJax-src ts/ui/safe/safe.ts; its filterURL in
    ts/ui/safe/SafeMethods.ts passes a URL whose scheme /^\\s*([a-z]+):/i misses, as "java<TAB>script:",
    hence the stricter filter): no link, no student class, id or style, nothing runs."""
    from coursekit.grading.formgrader import STATIC

    shutil.copytree(Path("node_modules/mathjax/es5"), tmp_path / "mathjax")
    shutil.copyfile(STATIC / "safe_mathjax.js", tmp_path / "safe_mathjax.js")
    body = "\n".join(f"<p>{t}</p>" for t in TEX_ATTACKS if "<!--" not in t)
    (tmp_path / "page.html").write_text(
        f'<!DOCTYPE html><html><head><meta charset="utf-8"><script src="safe_mathjax.js"></script>'
        f'<script src="mathjax/tex-chtml.js"></script></head><body>{body}</body></html>', encoding="utf-8")
    page = browser.new_page()
    try:
        page.goto(serve_directory(tmp_path) + "page.html")
        page.wait_for_function("() => window.MathJax && MathJax.startup && MathJax.startup.promise && "
                               "document.querySelectorAll('mjx-container').length >= 5", timeout=60_000)
        page.evaluate("() => MathJax.startup.promise")
        for i in range(page.evaluate("() => document.querySelectorAll('mjx-container a').length")):
            page.evaluate(CLICK_LINK, ["mjx-container a", i])
        targets = [re.sub(r"[\x00-\x20]", "", u).lower() for u in page.evaluate(LINK_TARGETS)]
        assert targets == []  # \\mmlToken's href (java<TAB>script:) dropped; \\href is not defined at all
        assert page.evaluate("typeof window.__ck_pwned") == "undefined"
        assert page.evaluate("() => document.querySelectorAll('[class*=ck-evil], [id*=ck-evil]').length") == 0
        assert page.evaluate("() => [...document.querySelectorAll('mjx-container [style]')]"
                             ".filter(e => e.style.position === 'fixed').length") == 0
    finally:
        page.close()


MATHJAX_CDN = "https://cdn.jsdelivr.net/npm/mathjax@"


def test_the_feedback_pages_mathjax_is_the_pinned_npm_version():
    """feedback/mathjax.html.j2 inlines the MathJax package.json pins (the one the safe set-up was read for),
    from node_modules, not a CDN (issue 33)."""
    from coursekit.grading.formgrader import TEMPLATE_DIRS
    from coursekit.grading.pages import inline_mathjax

    template = (Path(TEMPLATE_DIRS[0]) / "feedback" / "mathjax.html.j2").read_text(encoding="utf-8")
    pinned = json.loads(Path("package.json").read_text(encoding="utf-8"))["dependencies"]["mathjax"]
    npm = json.loads(Path("node_modules/mathjax/package.json").read_text(encoding="utf-8"))["version"]
    assert npm == pinned and "coursekit_inline_mathjax" in template and "https://" not in template
    assert f'VERSION="{pinned}"' in inline_mathjax()  # MathJax's own version string, in the page


def test_clicking_through_the_tex_attackers_feedback_page_runs_nothing(attacked, browser, serve_directory, tmp_path):
    """The feedback page of the TeX attacker, typeset (the CDN's MathJax served from node_modules, same
    version): every link clicked, every element focused; nothing runs, no link leaves http(s)."""
    shutil.copyfile(attacked.course.feedback_html(sid_of(attacked, "tex")), tmp_path / "feedback.html")
    es5 = Path("node_modules/mathjax/es5").resolve()
    page = browser.new_page()
    page.on("popup", lambda popup: popup.close())

    def local(route):
        url = route.request.url
        if url.startswith(MATHJAX_CDN):
            route.fulfill(path=str(es5 / url.split("/es5/", 1)[1].split("?")[0]))
        elif url.startswith("http://127.0.0.1:"):
            route.continue_()
        else:
            route.abort()

    page.route("**/*", local)
    url = serve_directory(tmp_path) + "feedback.html"
    try:
        page.goto(url, wait_until="load")
        page.wait_for_function("() => window.MathJax && MathJax.startup && MathJax.startup.document && "
                               "document.querySelectorAll('mjx-container').length > 10", timeout=60_000)
        page.evaluate("() => MathJax.startup.promise")
        assert page.evaluate("() => MathJax.version") == json.loads(Path("package.json").read_text())[
            "dependencies"]["mathjax"]
        for i in range(page.evaluate("() => document.querySelectorAll('a').length")):
            page.evaluate(CLICK_LINK, ["a", i])
            page.wait_for_timeout(50)
            assert page.url.split("#")[0] == url
        page.evaluate(TOUCH_ALL.replace("#notebook-container *", "body *"))
        page.wait_for_timeout(300)
        assert page.evaluate("typeof window.__ck_pwned") == "undefined"
        assert safe_urls([re.sub(r"[\x00-\x20]", "", u).lower() for u in page.evaluate(LINK_TARGETS)
                          if not u.startswith(url)])
        assert page.evaluate("() => document.querySelectorAll('[class*=ck-evil], [id*=ck-evil]').length") == 0
    finally:
        page.close()
