"""The student path in JupyterLab: open the work copy, type the two missing lines, run all, see it pass;
`make check` (coursekit check) agrees on the saved copy and still fails the unfilled exercise."""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import nbformat
import pytest
from site_support import ROOT, ensure_release, wait_for_server

from coursekit import bundle
from coursekit.cli import main

pytestmark = [pytest.mark.browser, pytest.mark.slow]


NOTEBOOK = "lesson11_grpo.ipynb"
FILLS = {  # blank line as shown in the exercise -> the text that replaces its ______
    "var = ______": "sum((r - mean) ** 2 for r in rewards) / len(rewards)",
    "return ______": "[0.0] * len(rewards)",
}
DONE = "all checks passed"


def printed_url(log: Path, port: int, proc: subprocess.Popen, timeout_s: float = 60) -> str:
    """The URL JupyterLab prints for the student to open (a token given on the command line shows as "...")."""
    pattern = re.compile(rf"http://127\.0\.0\.1:{port}/\S*\?token=\S+")
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and proc.poll() is None:
        if found := pattern.search(log.read_text(encoding="utf-8", errors="replace")):
            return found[0]
        time.sleep(0.5)
    raise AssertionError(f"jupyter lab printed no URL:\n{log.read_text(encoding='utf-8', errors='replace')[-2000:]}")


@contextlib.contextmanager
def running_lab(folder: Path) -> Iterator[str]:
    """The bundle's lab.py in `folder` (a student bundle), as `make lab` runs it; yields the URL it prints."""
    token = secrets.token_hex(16)
    env = dict(os.environ, HOME=str(folder), JUPYTER_RUNTIME_DIR=str(folder / ".runtime"))
    log_path = folder / "lab.log"
    log = log_path.open("w")
    proc = subprocess.Popen([sys.executable, "lab.py", "--no-browser", "--token", token], cwd=folder, env=env,
                            stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 90
        while not (found := re.search(r"http://127\.0\.0\.1:(\d+)/", log_path.read_text(errors="replace"))):
            assert time.monotonic() < deadline and proc.poll() is None, log_path.read_text(errors="replace")[-2000:]
            time.sleep(0.5)
        port = int(found[1])
        wait_for_server(f"http://127.0.0.1:{port}/api/status?token={token}", proc)
        yield printed_url(log_path, port, proc).replace("token=...", f"token={token}")
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()


def student_bundle(folder: Path, work_copy: Path | None = None) -> Path:
    """The lesson's student bundle in `folder`; `work_copy` (if given) as the student's work/ copy."""
    ensure_release(ROOT)
    out = bundle.write_folder(ROOT, bundle.lesson_entry(ROOT, "lesson11"), folder)
    if work_copy is not None:
        (out / "work").mkdir()
        shutil.copyfile(work_copy, out / "work" / NOTEBOOK)
    return out


@pytest.fixture
def lab_server(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """JupyterLab from a student bundle whose work copy reports success in a last cell."""
    folder = student_bundle(tmp_path)
    notebook = folder / "work" / NOTEBOOK
    notebook.parent.mkdir()
    nb = nbformat.read(folder / NOTEBOOK, as_version=4)  # the work copy only: a last cell that reports success
    nb.cells.append(nbformat.v4.new_code_cell(f'print("{DONE}")'))
    nbformat.write(nb, notebook)
    with running_lab(folder) as url:
        yield url, notebook


def fill_blank(page: object, line_text: str, replacement: str) -> None:
    """Put the cursor at the end of the blank's line, select the ______ word and type over it."""
    line = page.locator(".jp-CodeCell .cm-line", has_text=line_text).first
    line.click()
    page.keyboard.press("End")
    page.keyboard.press("Shift+Control+ArrowLeft")
    page.keyboard.type(replacement)


def test_student_fills_the_blanks_runs_all_and_every_check_passes(lab_server, browser, screenshot) -> None:
    url, notebook = lab_server
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    try:
        page.goto(url)
        page.locator(".jp-CodeCell .cm-line", has_text="var = ______").first.wait_for(timeout=60_000)
        page.wait_for_selector(".jp-Notebook-ExecutionIndicator[data-status='idle']", timeout=60_000)
        for blank, text in FILLS.items():
            fill_blank(page, blank, text)
        editor = page.locator(".jp-CodeCell .cm-content").first.inner_text()
        for blank, text in FILLS.items():
            assert blank.replace("______", text) in editor, editor
        page.locator(".lm-MenuBar-itemLabel", has_text="运行").first.click()  # the interface is in Chinese
        page.locator(".lm-Menu-itemLabel", has_text="运行所有单元格").first.click()
        done = page.locator(".jp-OutputArea-output", has_text=DONE)
        done.wait_for(timeout=60_000)
        errors = page.locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']")
        shot = screenshot(page, "jupyterlab-all-checks-passed")
        screenshot(page.locator(".jp-CodeCell").first, "jupyterlab-exercise-cell-filled")
        assert errors.count() == 0, f"a cell failed: {errors.first.inner_text()} (screenshot {shot})"
        page.keyboard.press("Control+s")
        page.wait_for_function("() => !document.querySelector('.jp-mod-dirty')", timeout=15_000)
    finally:
        context.close()
    saved = nbformat.read(notebook, as_version=4)
    code = next(c.source for c in saved.cells if "course-exercise" in c.metadata.get("tags", []))
    assert "______" not in code and all(text in code for text in FILLS.values())
    lesson = str(ROOT / "lessons" / "lesson11_grpo.qmd")
    assert main(["check", str(notebook), "--lesson", lesson]) == 0, "make check disagrees with JupyterLab"
    blanks = notebook.parent.parent / NOTEBOOK
    assert main(["check", str(blanks), "--lesson", lesson]) == 1, "make check passed the blanks"


def test_solution_notebook_opens_cleanly_with_its_outputs(tmp_path, browser, screenshot) -> None:
    """The solution branch in JupyterLab (as the work copy of a bundle): markdown, hints and the diagram
    render; stored outputs show."""
    folder = student_bundle(tmp_path, work_copy=ROOT / "solutions" / "lesson11_grpo.ipynb")
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    try:
        with running_lab(folder) as url:
            page.goto(url)
            page.locator(".jp-OutputArea-output", has_text="mean = 2.0").first.wait_for(timeout=60_000)
            page.locator("details.course-hint summary", has_text="提示 1").first.wait_for(timeout=30_000)
            # JupyterLab draws ```mermaid fences as an SVG image (Figure 11-2)
            page.locator(".jp-RenderedMarkdown img[src^='data:image/svg+xml'][src*='flowchart']").first.wait_for(
                state="attached", timeout=30_000)
            text = page.locator(".jp-Notebook").inner_text()
            screenshot(page, "jupyterlab-solution-notebook")
            assert ":::" not in text and "#|" not in text, "Quarto syntax leaked into the notebook"
            assert page.locator(".jp-Dialog").count() == 0, "JupyterLab showed a dialog on opening"
    finally:
        context.close()


def test_make_lab_opens_the_notebook_serves_only_the_work_folder_and_hides_nbgrader(lab_server, browser,
                                                                                   screenshot) -> None:
    url, notebook = lab_server
    assert "/lab/tree/lesson11_grpo.ipynb?token=" in url, url
    base = url.split("/lab/", 1)[0]
    token = url.rsplit("token=", 1)[1]
    for instructor_page in ("/formgrader", "/create_assignment", "/assignments"):
        with contextlib.suppress(urllib.error.HTTPError), urllib.request.urlopen(
                f"{base}{instructor_page}?token={token}", timeout=10) as response:
            raise AssertionError(f"{instructor_page} answered {response.status}")
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    try:
        page.goto(url)
        page.locator(".jp-CodeCell .cm-line", has_text="var = ______").first.wait_for(timeout=60_000)
        assert page.locator(".jp-Launcher").count() == 0, "the printed URL opened the Launcher"
        page.locator(".jp-DirListing-item").first.wait_for(timeout=30_000)
        listed = page.locator(".jp-DirListing-itemText").all_inner_texts()
        assert listed == [notebook.name], f"the file browser lists {listed}: only the work folder is served"
        menus = page.locator(".lm-MenuBar-itemLabel").all_inner_texts()
        text = page.locator("body").inner_text()
        screenshot(page, "jupyterlab-student")
        assert not any("nbgrader" in m.lower() for m in menus), menus
        assert "Create Assignment" not in text and "Formgrader" not in text
        assert page.locator("[id*='nbgrader'], [data-id*='nbgrader'], [data-id*='create-assignment']").count() == 0
    finally:
        context.close()
