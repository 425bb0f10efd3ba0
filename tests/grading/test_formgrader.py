"""`coursekit formgrader` offline: the printed URL, and a submission in Chromium with the network
blocked (math typeset by the course's own MathJax, Figure 11-1 shown, no request off 127.0.0.1), under
its Content-Security-Policy; a PostgreSQL gradebook; Ctrl-C, SIGTERM and SIGHUP; a busy port; the student's
flags and vetoes on the page."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
from nbgrader.api import Gradebook
from test_grading_commands import free_port

from coursekit.cli import main
from coursekit.grading import formgrader
from coursekit.grading.course import Course
from coursekit.grading.formgrader import command, prepare
from coursekit.grading.intake.release import release


def test_make_formgrader_prints_the_formgrader_url_with_its_token(released_course, monkeypatch, capsys):
    started = []
    monkeypatch.delenv("JUPYTER_TOKEN", raising=False)
    monkeypatch.setattr(formgrader, "serve", lambda cmd, cwd: started.append(cmd) or 0)
    port = free_port()
    assert main(["formgrader", "--course", str(released_course.root), "--port", str(port)]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert first.startswith(f"formgrader: open http://127.0.0.1:{port}/formgrader?token=")
    token = first.rsplit("token=", 1)[1]
    assert len(token) == 48 and f"--IdentityProvider.token={token}" in started[0]
    assert (released_course.root / "exchange").is_dir()  # Exchange.root in nbgrader_config.py


def test_formgrader_needs_the_npm_mathjax(released_course, tmp_path, capsys):
    assert main(["formgrader", "--course", str(released_course.root), "--node-modules", str(tmp_path)]) == 1
    assert "mathjax/es5/tex-chtml.js: missing" in capsys.readouterr().err


def wait_for_server(base: str, token: str) -> None:
    for _ in range(240):
        try:
            urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=2)
            return
        except OSError:
            time.sleep(0.5)
    pytest.fail(f"no Jupyter server at {base}")


@contextlib.contextmanager
def serving_formgrader(course: Course, token: str, student: str) -> Iterator[tuple[str, int]]:
    """(base URL, submission id of `student`) while formgrader serves `course`; stopped after."""
    prepare(course)
    port = free_port()
    proc = subprocess.Popen(command(course, port, token), cwd=course.root,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_for_server(base, token)
        with Gradebook(course.db_url) as gb:
            submission = gb.find_submission_notebook("lesson11", "lesson11", student).id
        yield base, submission
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@pytest.fixture(scope="module")
def formgrader_url(instructor_class):
    """(base URL, token, submission id of s01): formgrader on the instructor class, started once for this
    module's browser tests and stopped after them."""
    token = "coursekit-browser-test"
    with serving_formgrader(instructor_class, token, "s01") as (base, submission):
        yield base, token, submission


@pytest.mark.browser
@pytest.mark.slow
def test_a_submission_in_formgrader_works_with_the_network_blocked(browser, formgrader_url):
    base, token, submission = formgrader_url
    page = browser.new_page()
    requests, errors = [], []

    def local_only(route):
        requests.append(route.request.url)
        if route.request.url.startswith(base + "/"):
            route.continue_()
        else:
            route.abort()

    page.route("**/*", local_only)
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.on("console", lambda msg: "Content Security Policy" in msg.text and errors.append(msg.text))
    try:
        page.goto(f"{base}/formgrader?token={token}")  # the URL `make formgrader` prints
        assert page.url == f"{base}/formgrader/manage_assignments"
        assert page.locator("#warning-exchange").count() == 0 and page.locator(".alert-warning").count() == 0
        page.wait_for_function("() => typeof url_prefix === 'string'", timeout=30_000)  # its inline script ran
        response = page.goto(f"{base}/formgrader/submissions/{submission}/")
        scripts = response.headers["content-security-policy"].split("script-src ")[1].split(";")[0].split()
        assert scripts[0] == "'self'" and "'unsafe-inline'" not in scripts and "'unsafe-eval'" not in scripts
        page.wait_for_function("() => document.querySelectorAll('mjx-container').length > 20", timeout=60_000)
        assert "\\pi_{\\theta" not in page.locator("body").inner_text()  # no raw TeX left
        figure = page.evaluate("() => [...document.images].filter(i => i.src.startsWith('data:image/png'))"
                               ".map(i => i.complete && i.naturalWidth)")
        assert figure and all(w > 500 for w in figure), figure  # Figure 11-1, embedded
        assert page.locator("textarea.comment").count() >= 4  # the grading form is there
        # its comments loaded (nbgrader's CommentUI gives each box a placeholder then), the box's text in Chinese
        page.wait_for_function("() => [...document.querySelectorAll('textarea.comment')].every(b => b.placeholder)",
                               timeout=30_000)
        placeholders = page.eval_on_selector_all("textarea.comment", "boxes => boxes.map(b => b.placeholder)")
        assert all(p == "在这里写评语（支持 Markdown 和 MathJax 公式）" for p in placeholders), placeholders
        off_host = [u for u in requests if not u.startswith(base + "/")]
        assert off_host == [] and errors == [], (off_host, errors)
    finally:
        page.close()


@pytest.mark.browser
@pytest.mark.slow
def test_jupyterlab_in_the_formgrader_server_still_works(browser, formgrader_url):
    """The policy covers formgrader, not JupyterLab: JupyterLab's settings plugin evaluates strings and
    its page sets its config inline, so under formgrader's policy its menus never appeared."""
    base, token, _ = formgrader_url
    page = browser.new_page()
    errors = []
    page.on("console", lambda msg: "Content Security Policy" in msg.text and errors.append(msg.text))
    try:
        response = page.goto(f"{base}/lab?token={token}")
        assert "script-src" not in response.headers.get("content-security-policy", "")  # Jupyter's own only
        page.wait_for_selector(".lm-MenuBar-itemLabel", timeout=60_000)
        assert errors == []
    finally:
        page.close()


@pytest.mark.browser
@pytest.mark.slow
def test_formgrader_shows_the_students_vetoes_and_copy_flags(browser, formgrader_url, instructor_class):
    """Issue 27 item 8: s01 pasted the reference Q2 (copied_reference, instructor_class.py); a veto comment
    typed in formgrader shows on the page without `make report`."""
    base, token, submission = formgrader_url
    with Gradebook(instructor_class.db_url) as gb:
        comment = gb.find_comment("q2", "lesson11", "lesson11", "s01")
        before, comment.manual_comment = comment.manual_comment, "一票否决：照抄参考答案"
        gb.db.commit()
    page = browser.new_page()
    try:
        page.goto(f"{base}/formgrader/submissions/{submission}/?token={token}")
        banner = page.locator("#coursekit-flags")
        banner.wait_for(timeout=60_000)
        vetoes = page.locator("#coursekit-flags .label-danger").all_inner_texts()
        others = page.locator("#coursekit-flags .label-warning").all_inner_texts()
        assert vetoes == ["veto(q2: 照抄参考答案)"]
        assert any(f.startswith("copied_reference(q2 ") for f in others), others
        assert "alert-danger" in banner.get_attribute("class")
        # issue 33: the kit's template of the page's navigation bar and banner is in Chinese
        assert banner.inner_text().startswith("一票否决与标记：")
        nav_text = page.inner_text("nav.navbar-fixed-top")
        assert all(words in nav_text for words in ("上一份", "人工评分", "第 ", "份提交", "下一份")), nav_text
        body = page.inner_text("#notebook")  # and so is the kit's formgrade/index.html.j2 (nbgrader's, translated)
        assert all(words in body for words in ("学生的答案", "满分", "零分", "附加分")), body[:2000]
        assert not any(words in body for words in ("Student's answer", "Full credit", "extra credit")), body[:2000]
        # issue 33: the banner is whole, below the fixed navbar and above the notebook's header
        for width in (1280, 1024):
            page.set_viewport_size({"width": width, "height": 900})
            page.evaluate("window.scrollTo(0, 0)")
            nav, box = page.locator("nav.navbar-fixed-top").bounding_box(), banner.bounding_box()
            header = page.locator(".panel-heading").first.bounding_box()
            assert nav["y"] + nav["height"] <= box["y"], (width, nav, box)
            assert box["y"] + box["height"] <= header["y"], (width, box, header)
    finally:
        page.close()
        with Gradebook(instructor_class.db_url) as gb:
            gb.find_comment("q2", "lesson11", "lesson11", "s01").manual_comment = before
            gb.db.commit()


@pytest.mark.slow
def test_ctrl_c_stops_formgrader_with_one_line_and_it_starts_again(instructor_class, tmp_path):
    """Issue 27 item 7: Ctrl-C (SIGINT to the terminal's process group) prints one line, no traceback,
    frees the port, and the same command starts formgrader again."""
    port, token = free_port(), "coursekit-ctrl-c"
    cmd = [sys.executable, "-m", "coursekit", "formgrader", "--course", str(instructor_class.root),
           "--port", str(port)]
    env = {**os.environ, "JUPYTER_TOKEN": token}
    for _ in range(2):  # stop, then start again on the same port
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                start_new_session=True)  # its own process group, as a terminal's job
        wait_for_server(f"http://127.0.0.1:{port}", token)
        os.killpg(proc.pid, signal.SIGINT)
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 130, err
        assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
        assert err.strip().splitlines() == ["formgrader: stopped (grades and comments are saved as you type "
                                            "them); run 'make formgrader' to go on, 'make report' for the CSV"]


def test_a_busy_port_is_one_line_before_any_address_is_printed(released_course, capsys):
    """Issue 30 item 7: a formgrader left running holds the port; the next start says so and prints no URL."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert main(["formgrader", "--course", str(released_course.root), "--port", str(port)]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert err.strip().splitlines() == [f"error: 127.0.0.1:{port}: port in use (Address already in use); stop what "
                                        "serves there (an earlier formgrader?) or pick another port (--port)"]


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_sigterm_or_sighup_stops_formgrader_and_its_server(signum, released_course, processes_gone):
    """Issue 30 item 7: `kill` (SIGTERM) or a closed terminal (SIGHUP) to `coursekit formgrader` stops the
    JupyterLab it started (which kept serving with the token), with the same one line as Ctrl-C."""
    port, token = free_port(), "coursekit-stop"
    proc = subprocess.Popen([sys.executable, "-m", "coursekit", "formgrader", "--course", str(released_course.root),
                             "--port", str(port)], env={**os.environ, "JUPYTER_TOKEN": token},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for_server(f"http://127.0.0.1:{port}", token)
        server = [p.pid for p in psutil.Process(proc.pid).children(recursive=True)]
        assert server
        proc.send_signal(signum)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 128 + signum, err
    assert err.strip().splitlines() == ["formgrader: stopped (grades and comments are saved as you type them); "
                                        "run 'make formgrader' to go on, 'make report' for the CSV"]
    processes_gone(server, port)


@pytest.mark.slow
def test_formgrader_opens_a_postgresql_gradebook(postgres, released_course, tmp_path):
    """Issue 27 item 1: formgrader on a course whose CourseDirectory.db_url is PostgreSQL."""
    root = shutil.copytree(released_course.root, tmp_path / "course")
    (root / "gradebook.db").unlink(missing_ok=True)
    with open(root / "nbgrader_config.py", "a", encoding="utf-8") as config:
        config.write(f"\nc.CourseDirectory.db_url = {postgres!r}\n")
    course = Course.at(root)
    release(course)
    prepare(course)  # no sqlite file needed
    port, token = free_port(), "coursekit-postgres"
    proc = subprocess.Popen(command(course, port, token), cwd=course.root,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for_server(f"http://127.0.0.1:{port}", token)
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/formgrader/api/assignments?token={token}",
                                    timeout=60) as reply:
            assignments = json.load(reply)
        assert [a["name"] for a in assignments] == ["lesson11"]
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_an_unreachable_postgresql_gradebook_is_a_one_line_error(released_course, tmp_path, capsys):
    root = shutil.copytree(released_course.root, tmp_path / "course")
    with open(root / "nbgrader_config.py", "a", encoding="utf-8") as config:
        config.write(f"\nc.CourseDirectory.db_url = 'postgresql+psycopg://ck:secret@127.0.0.1:{free_port()}/gb'\n")
    assert main(["formgrader", "--course", str(root)]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: postgresql+psycopg://ck:***@127.0.0.1:") and "cannot open the gradebook" in err
    assert len(err.splitlines()) == 1 and "secret" not in err


def test_mathjax_is_served_from_the_kits_node_modules_whatever_the_servers_folder(tmp_path, monkeypatch):
    """Issue 33: the hub's instructor server (started from build/hub/runtime) asked for
    /static/mathjax/es5/tex-chtml.js and got 404: a relative node_modules resolved there."""
    from coursekit.grading.formgrader import safe_page_options

    monkeypatch.chdir(tmp_path)
    served = [o.split("=", 1)[1] for o in safe_page_options() if o.startswith("--ServerApp.extra_static_paths=")]
    assert (Path(served[0]) / "mathjax" / "es5" / "tex-chtml.js").is_file(), served


@pytest.mark.parametrize("target, line", [("formgrader", "coursekit formgrader --port 8891"),
                                          ("hub", "coursekit hub start --port 8891")])
def test_make_takes_a_port(target, line):
    """Issue 33: `make formgrader PORT=…` and `make hub PORT=…` (the hub's port was only in course.yml)."""
    root = Path(__file__).resolve().parents[2]
    shown = subprocess.run(["make", "-n", target, "PORT=8891"], cwd=root,
                           capture_output=True, text=True, check=True).stdout
    assert line in shown, shown
    plain = subprocess.run(["make", "-n", target], cwd=root, capture_output=True, text=True, check=True).stdout
    assert "--port" not in plain, plain
