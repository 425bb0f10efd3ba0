"""The student bundle (`coursekit bundle`, `make student-bundle`) and `make lab` run from it (issue 25).

The bundle is built once, zipped, and unpacked into a fresh folder; everything below runs from that
folder alone: the self-check and the offline site with the machine's own `python3` (`-I`, an empty
environment: nothing of this repository's .venv or src/ on its path), JupyterLab with this
repository's virtualenv standing in for the one `lab.py` installs on first use (`requirements-lab.txt`).
"""

from __future__ import annotations

import json
import re
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import zipfile
from pathlib import Path

import pytest
from site_support import ROOT, ensure_release, wait_for_server

from coursekit import bundle, lab
from coursekit.cli import main
from coursekit.errors import CourseError
from coursekit.lesson import BLANK, parse_lesson
from coursekit.runner import secret_snippets

LESSON = parse_lesson(ROOT / "lessons" / "lesson11_grpo.qmd")
SYSTEM_PYTHON = shutil.which("python3", path="/usr/bin:/bin") or sys.executable
NOTEBOOK = "lesson11_grpo.ipynb"


@pytest.fixture(scope="module")
def unpacked(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The bundle's zip, unpacked into a fresh folder: its top folder."""
    ensure_release(ROOT)
    out = tmp_path_factory.mktemp("bundle")
    assert main(["bundle", "--lesson", "lesson11", "--root", str(ROOT), "--out", str(out)]) == 0
    target = tmp_path_factory.mktemp("unpacked")
    with zipfile.ZipFile(out / "lesson11_grpo.zip") as zf:
        zf.extractall(target)
    return target / "lesson11_grpo"


def filled(notebook: Path, replace: dict[str, str] | None = None) -> dict:
    """The bundle's notebook with the blanks filled by the reference lines, then `replace` applied."""
    nb = json.loads(notebook.read_text(encoding="utf-8"))
    answers = iter(LESSON.answer_lines)
    for cell in nb["cells"]:
        source = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
        if cell["cell_type"] == "code" and BLANK in source:
            source = "\n".join(next(answers) if BLANK in line else line for line in source.split("\n"))
            for old, new in (replace or {}).items():
                source = source.replace(old, new)
            cell["source"] = source
    return nb


def self_check(folder: Path, nb: dict | None, name: str = "mine.ipynb") -> subprocess.CompletedProcess:
    """`python3 -I check.py <nb>` in the unpacked bundle, with an empty environment."""
    path = folder / NOTEBOOK if nb is None else folder / name
    if nb is not None:
        path.write_text(json.dumps(nb, ensure_ascii=False), encoding="utf-8")
    return subprocess.run([SYSTEM_PYTHON, "-I", "check.py", str(path)], cwd=folder, env={"PATH": "/usr/bin:/bin"},
                          capture_output=True, text=True, timeout=120)


def test_the_bundle_holds_what_a_student_needs(unpacked):
    names = {p.name for p in unpacked.iterdir()}
    assert {NOTEBOOK, "check.py", "bundle.json", "lab.py", "childproc.py", "requirements-lab.txt", "site.py",
            "使用说明.md", "site"} == names
    assert (unpacked / "site" / "exercises" / "lesson11_grpo.html").is_file()
    assert (unpacked / "site" / "assets" / "pyodide" / "pyodide.asm.wasm").is_file()
    assert not (unpacked / "site" / "solutions").exists()
    readme = (unpacked / "使用说明.md").read_text(encoding="utf-8")
    assert all(f"python {script}" in readme for script in ("site.py", "lab.py", "check.py"))
    pins = (unpacked / "requirements-lab.txt").read_text(encoding="utf-8").split()
    assert any(p.startswith("jupyterlab-language-pack-zh-CN==") for p in pins), pins


def test_the_bundle_holds_no_solution_reference_answer_or_hidden_test(unpacked):
    found = bundle.find_secrets(unpacked, LESSON)
    assert not found, found[:3]
    paths = [p.relative_to(unpacked).as_posix() for p in unpacked.rglob("*")]
    assert not [p for p in paths if p.startswith(("solutions", "autograder")) or "/solutions/" in p]
    # the scan is real: a reference line, a hidden test line and a reference answer are each found
    planted = [LESSON.answer_lines[0].strip(), *secret_snippets(LESSON)[-3:]]
    (unpacked / "planted.txt").write_text("\n".join(planted), encoding="utf-8")
    try:
        assert {s for _, s in bundle.find_secrets(unpacked, LESSON)} >= set(planted)
    finally:
        (unpacked / "planted.txt").unlink()


def test_a_bundle_with_a_secret_is_refused(tmp_path, monkeypatch):
    ensure_release(ROOT)
    monkeypatch.setattr(bundle, "SCRIPTS", ("check.py",))
    real = bundle.worker_helpers
    monkeypatch.setattr(bundle, "worker_helpers", lambda root: real(root) + "\n# " + LESSON.answer_lines[0])
    with pytest.raises(CourseError, match=r"bundle\.json: the student bundle would hold"):
        bundle.write_folder(ROOT, bundle.lesson_entry(ROOT, "lesson11"), tmp_path)


def test_the_self_check_runs_with_the_system_python_alone(unpacked):
    blank = self_check(unpacked, None)
    assert blank.returncode == 1 and "还有 2 处 ______ 没有填写" in blank.stdout, blank.stdout + blank.stderr
    done = self_check(unpacked, filled(unpacked / NOTEBOOK))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "结果：3/3 项检查通过。" in done.stdout


def test_the_self_check_gives_the_graders_chinese_reason_and_names_the_vetoed_guard(unpacked):
    eq_zero = self_check(unpacked, filled(unpacked / NOTEBOOK, {"if std < eps:": "if std == 0:"}))
    assert eq_zero.returncode == 1
    assert "浮点误差让 std 略大于 0，组没有归零：要用 std < eps 判断，而不是 std == 0" in eq_zero.stdout, eq_zero.stdout
    sample_variance = {"/ len(rewards)\n    std": "/ (len(rewards) - 1)\n    std"}
    sample = self_check(unpacked, filled(unpacked / NOTEBOOK, sample_variance))
    bare = "AssertionError\n      （题目给出的断言不成立；为什么不成立，见下面各组检查的说明）"  # no message
    assert bare in sample.stdout, sample.stdout
    assert ("本课约定用总体方差（除以 G），不是样本方差（除以 G-1；"
            "verl 与 TRL 的 torch.std 是样本方差，换算见正文“本课的约定”）") in sample.stdout
    guard = self_check(unpacked, filled(unpacked / NOTEBOOK, {"if not rewards:": "if len(rewards) == 0:"}))
    assert guard.returncode == 1 and "✗ 题目给出的检查：`if not rewards:` 被删除或改动" in guard.stdout
    assert "一票否决" in guard.stdout and "结果：3/3 项检查通过" in guard.stdout


def test_the_self_check_gives_the_reason_first_and_cites_the_students_own_cell_and_line(unpacked):
    """Issue 33: the reason comes first; the place cited is the student's own code cell and line as the
    notebook shows them, never a line of the hidden self-check code."""
    broken = "    std = math.sqrt(var) if len(rewards) < 50 else None[0]"
    nb = filled(unpacked / NOTEBOOK, {"    std = math.sqrt(var)": broken})
    code_cells = [c for c in nb["cells"] if c["cell_type"] == "code"]
    number = next(k for k, c in enumerate(code_cells, start=1) if broken in "".join(c["source"]))
    line = "".join(code_cells[number - 1]["source"]).split("\n").index(broken) + 1
    out = self_check(unpacked, nb).stdout
    normal = re.split(r"\n  [✓✗]", out.split("✗ 正常输入：未通过\n", 1)[1])[0]
    assert normal.strip().startswith("TypeError: 'NoneType' object is not subscriptable"), out
    assert f"（出错位置：第 {number} 个代码格第 {line} 行：{broken.strip()}）" in normal, out
    assert not re.search(r"第 \d+ 行：(assert|_got|_check)", out) and "你的代码第" not in out, out


def test_site_only_instructions_work_without_lab_py(unpacked, tmp_path):
    """A student who works in the web page never runs lab.py, so there is no work/ copy: the 使用说明's
    self-check command for them checks the notebook the page's "下载 notebook" saved (named by student id)."""
    readme = (unpacked / "使用说明.md").read_text(encoding="utf-8")
    web = readme.split("**在网页里做的**")[1].split("**在 JupyterLab 里做的**")[0]
    [command] = re.findall(r"^\s*python (check\.py \S+\.ipynb)$", web, re.M)
    assert "work/" not in web
    downloads = tmp_path / "Downloads"
    downloads.mkdir()
    (downloads / command.split()[1]).write_text(json.dumps(filled(unpacked / NOTEBOOK)), encoding="utf-8")
    assert not (unpacked / "work").exists()
    done = subprocess.run([SYSTEM_PYTHON, "-I", str(unpacked / "check.py"), command.split()[1]], cwd=downloads,
                          env={"PATH": "/usr/bin:/bin"}, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "结果：3/3 项检查通过。" in done.stdout, done.stdout + done.stderr
    bare = subprocess.run([SYSTEM_PYTHON, "-I", "check.py"], cwd=unpacked, env={"PATH": "/usr/bin:/bin"},
                          capture_output=True, text=True, timeout=120)
    assert bare.returncode == 2 and not bare.stdout and len(bare.stderr.strip().splitlines()) == 1
    assert "lab.py" in bare.stderr and "下载" in bare.stderr, bare.stderr


def test_the_offline_site_shows_no_maintainers_banner(unpacked):
    pages = [p for p in (unpacked / "site").rglob("*.html")]
    assert len(pages) >= 3
    for page in pages:
        text = page.read_text(encoding="utf-8")
        assert "course-preview-notice" not in text and "make site" not in text and "预览版" not in text, page


def test_the_offline_site_is_served_by_the_system_python_alone(unpacked):
    proc = subprocess.Popen([SYSTEM_PYTHON, "-I", "site.py", "--no-browser"], cwd=unpacked,
                            env={"PATH": "/usr/bin:/bin"}, stdout=subprocess.PIPE, text=True)
    try:
        url = re.search(r"http://127\.0\.0\.1:\d+/[!-~]+", proc.stdout.readline())[0]
        with urllib.request.urlopen(url, timeout=30) as page:
            assert "group_advantages" in page.read().decode("utf-8")
        base = url.split("/exercises/")[0]
        with urllib.request.urlopen(f"{base}/assets/pyodide/pyodide.asm.wasm", timeout=30) as wasm:
            assert wasm.headers["Content-Type"] == "application/wasm"  # WebAssembly.instantiateStreaming needs it
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_lab_copies_the_notebook_once_never_overwrites_it_and_switches_off_instructor_tools(unpacked):
    """lab.py's set-up (`prepare`), run twice from the unpacked bundle with the system Python."""
    run = [SYSTEM_PYTHON, "-I", "-c", "import sys; sys.path.insert(0, '.'); import lab; print(lab.prepare())"]
    env = {"PATH": "/usr/bin:/bin"}
    mine = unpacked / "work" / NOTEBOOK
    shutil.rmtree(unpacked / "work", ignore_errors=True)
    first = subprocess.run(run, cwd=unpacked, env=env, capture_output=True, text=True, check=True).stdout
    assert "已创建你的笔记本" in first and mine.read_bytes() == (unpacked / NOTEBOOK).read_bytes()
    mine.write_text("student work", encoding="utf-8")
    again = subprocess.run(run, cwd=unpacked, env=env, capture_output=True, text=True, check=True).stdout
    assert "继续使用你的笔记本" in again and mine.read_text(encoding="utf-8") == "student work"
    config = unpacked / ".jupyter" / "config"
    server = json.loads((config / "jupyter_server_config.json").read_text(encoding="utf-8"))["ServerApp"]
    assert server["terminals_enabled"] is False and set(server["jpserver_extensions"].values()) == {False}
    page = json.loads((config / "labconfig" / "page_config.json").read_text(encoding="utf-8"))
    assert page["disabledExtensions"] == {"@jupyter/nbgrader": True, "@jupyterlab/terminal-extension": True}
    shutil.rmtree(unpacked / "work")
    shutil.rmtree(unpacked / ".jupyter")


def test_a_bundle_without_the_release_notebook_names_the_fix(tmp_path):
    with pytest.raises(CourseError, match=r"autograder/release/lesson11/lesson11\.ipynb: missing; run `make release`"):
        bundle.write_folder(tmp_path, bundle.lesson_entry(ROOT, "lesson11"), tmp_path / "out")


LAB_COMMAND = ("import sys; sys.path.insert(0, '.'); import lab; "
               "print(' '.join(lab.command(lab.Path('python'), lab.WORK / 'n.ipynb', 1234, lab.has_display())))")


@pytest.mark.parametrize(("display", "browser_opens"), [({}, False), ({"DISPLAY": ":0"}, True),
                                                         ({"WAYLAND_DISPLAY": "wayland-0"}, True)])
def test_lab_opens_no_browser_without_a_display(unpacked, display, browser_opens):
    env = {"PATH": "/usr/bin:/bin", **display}
    shown = subprocess.run([SYSTEM_PYTHON, "-I", "-c", LAB_COMMAND], cwd=unpacked, env=env, capture_output=True,
                           text=True, check=True).stdout
    assert ("--no-browser" not in shown) == browser_opens, shown
    assert "--ServerApp.terminals_enabled=False" in shown and "--ServerApp.port=1234" in shown


@pytest.mark.browser
def test_the_offline_page_checks_code_from_the_unpacked_bundle_alone(unpacked, browser):
    """site.py (system Python) serves the bundle's site; the page's Python starts and Check passes the
    reference code, with every request on 127.0.0.1; the page says the grader runs hidden checks of the same kinds."""
    proc = subprocess.Popen([SYSTEM_PYTHON, "-I", "site.py", "--no-browser"], cwd=unpacked,
                            env={"PATH": "/usr/bin:/bin"}, stdout=subprocess.PIPE, text=True)
    context = browser.new_context()
    requests: list[str] = []
    context.on("request", lambda r: requests.append(r.url))
    try:
        url = re.search(r"http://127\.0\.0\.1:\d+/[!-~]+", proc.stdout.readline())[0]
        page = context.new_page()
        page.goto(url)
        assert "评分时的隐藏检查同类" in page.inner_text("main")
        page.wait_for_selector(".cr-widget[data-state=ready]", timeout=120_000)
        page.evaluate("code => { document.querySelector('.cr-host').courseRunner.code = code; }", LESSON.reference_code)
        page.click("button[data-action=check]")
        page.wait_for_selector(".cr-summary", timeout=60_000)
        assert page.inner_text(".cr-summary") == "全部 3 组检查通过。"
        assert [u for u in requests if not u.startswith(("http://127.0.0.1:", "data:", "blob:"))] == []
    finally:
        context.close()
        proc.terminate()
        proc.wait(timeout=30)


def _get(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, b""


@pytest.mark.slow
def test_lab_runs_from_the_unpacked_bundle_in_chinese_without_terminals_on_a_free_port(unpacked, tmp_path):
    """lab.py with no --port while 8888 (JupyterLab's default) is taken: it picks a free one."""
    token = secrets.token_hex(16)
    blocker = socket.socket()
    try:
        blocker.bind(("127.0.0.1", 8888))
        blocker.listen()
    except OSError:
        pass  # already taken by someone else: just as good
    env = {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "HOME": str(tmp_path)}
    log = (tmp_path / "lab.log").open("w")
    proc = subprocess.Popen([sys.executable, "lab.py", "--token", token], cwd=unpacked, env=env,
                            stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline, base = time.monotonic() + 120, None
        while base is None and time.monotonic() < deadline and proc.poll() is None:
            found = re.search(r"http://127\.0\.0\.1:(\d+)/lab", (tmp_path / "lab.log").read_text(errors="replace"))
            base = found and f"http://127.0.0.1:{found[1]}"
            time.sleep(0.5)
        assert base, (tmp_path / "lab.log").read_text(errors="replace")[-3000:]
        assert not base.endswith(":8888")
        q = f"?token={token}"
        wait_for_server(f"{base}/api/status{q}", proc)
        status, body = _get(f"{base}/api/contents{q}")
        assert status == 200 and [c["name"] for c in json.loads(body)["content"]] == [NOTEBOOK]
        assert (unpacked / "work" / NOTEBOOK).is_file()
        assert _get(f"{base}/api/terminals{q}")[0] == 404
        status, body = _get(f"{base}/lab/api/settings/@jupyterlab/translation-extension:plugin{q}")
        assert status == 200 and json.loads(body)["settings"]["locale"] == "zh_CN"
        status, body = _get(f"{base}/lab/api/translations/zh_CN{q}")
        assert status == 200 and json.loads(body)["data"], "the zh-CN language pack is not installed"
        status, body = _get(f"{base}/lab/api/settings/@jupyterlab/apputils-extension:notification{q}")
        settings = json.loads(body)["settings"]
        assert settings["fetchNews"] == "false" and settings["checkForUpdates"] is False
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()
        blocker.close()


def test_make_lab_runs_the_bundle_outside_the_repository(tmp_path, monkeypatch):
    ensure_release(ROOT)
    ran = {}
    monkeypatch.setattr(lab, "run_until_stopped", lambda cmd, cwd, grace: ran.update(cmd=cmd, cwd=cwd) or (0, None))
    assert main(["lab", "--root", str(ROOT), "--home", str(tmp_path / "home"), "--no-browser"]) == 0
    cwd = Path(ran["cwd"])
    assert ran["cmd"][1:] == [str(cwd / "lab.py"), "--no-browser"]
    assert ROOT not in cwd.parents and not any((p / "solutions").exists() or (p / "autograder").exists()
                                               for p in [cwd, *cwd.parents])
    assert (cwd / "lab.py").is_file() and (cwd / NOTEBOOK).is_file()
    assert main(["lab", "--root", str(ROOT), "--home", str(ROOT / "build" / "x")]) == 1  # inside the repository
    assert lab.student_home({"HOME": "/h"}) == Path("/h/.local/share/coursekit-student")
    assert lab.student_home({"HOME": "/h", "XDG_DATA_HOME": "/d"}) == Path("/d/coursekit-student")
