"""`coursekit formgrader` offline: the printed URL, and a submission in Chromium with the network
blocked (math typeset by the course's own MathJax, Figure 11-1 shown, no request off 127.0.0.1)."""

from __future__ import annotations

import subprocess
import time
import urllib.request

import pytest
from nbgrader.api import Gradebook
from test_grading_commands import free_port

from coursekit.cli import main
from coursekit.grading import formgrader
from coursekit.grading.formgrader import command, prepare


def test_make_formgrader_prints_the_formgrader_url_with_its_token(released_course, monkeypatch, capsys):
    started = []
    monkeypatch.delenv("JUPYTER_TOKEN", raising=False)
    monkeypatch.setattr(formgrader, "serve", lambda cmd, cwd: started.append(cmd) or 0)
    assert main(["formgrader", "--course", str(released_course.root), "--port", "8899"]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert first.startswith("formgrader: open http://127.0.0.1:8899/formgrader?token=")
    token = first.rsplit("token=", 1)[1]
    assert len(token) == 48 and f"--IdentityProvider.token={token}" in started[0]
    assert (released_course.root / "exchange").is_dir()  # Exchange.root in nbgrader_config.py


def test_formgrader_needs_the_npm_mathjax(released_course, tmp_path, capsys):
    assert main(["formgrader", "--course", str(released_course.root), "--node-modules", str(tmp_path)]) == 1
    assert "mathjax/es5/tex-chtml.js: missing" in capsys.readouterr().err


@pytest.fixture
def formgrader_url(instructor_class):
    """(base URL, token, submission id of s01): formgrader on the instructor class, stopped afterwards."""
    prepare(instructor_class)
    port, token = free_port(), "coursekit-browser-test"
    proc = subprocess.Popen(command(instructor_class, port, token), cwd=instructor_class.root,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(120):
            try:
                urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=2)
                break
            except OSError:
                time.sleep(0.5)
        with Gradebook(instructor_class.db_url) as gb:
            submission = gb.find_submission_notebook("lesson11", "lesson11", "s01").id
        yield base, token, submission
    finally:
        proc.terminate()
        proc.wait(timeout=30)


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
    try:
        page.goto(f"{base}/formgrader?token={token}")  # the URL `make formgrader` prints
        assert page.url == f"{base}/formgrader/manage_assignments"
        assert page.locator("#warning-exchange").count() == 0 and page.locator(".alert-warning").count() == 0
        page.goto(f"{base}/formgrader/submissions/{submission}/")
        page.wait_for_function("() => document.querySelectorAll('mjx-container').length > 20", timeout=60_000)
        assert "\\pi_{\\theta" not in page.locator("body").inner_text()  # no raw TeX left
        figure = page.evaluate("() => [...document.images].filter(i => i.src.startsWith('data:image/png'))"
                               ".map(i => i.complete && i.naturalWidth)")
        assert figure and all(w > 500 for w in figure), figure  # Figure 11-1, embedded
        assert page.locator("textarea.comment").count() >= 4  # the grading form is there
        off_host = [u for u in requests if not u.startswith(base + "/")]
        assert off_host == [] and errors == [], (off_host, errors)
    finally:
        page.close()
