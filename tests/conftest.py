"""Shared fixtures: the project root, the seed's exercise cell, a static file server, one Chromium, a stale
matplotlib font cache, and committed (git HEAD) files."""

import functools
import http.server
import os
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from coursekit.system import NEEDS, find_chromium, stop_line

ROOT = Path(__file__).resolve().parents[1]
SEED_DIR = ROOT.parent / "shared" / "seed"


def _committed(path: str) -> bytes:
    return subprocess.run(["git", "show", f"HEAD:{path}"], cwd=ROOT, capture_output=True, check=True).stdout


@pytest.fixture(scope="session")
def committed() -> Callable[[str], bytes]:
    """committed(path) -> the bytes of path (relative to the project root) as committed in git HEAD."""
    return _committed


# ---- what a whole run of the suite took, on what machine, under what load: build/test-durations.txt (the
# README's `make test` figure is read from there). Written only after a run of every test (no selection);
# COURSEKIT_TEST_DURATIONS names another file (tests/system/test_suite_clock.py).
DURATIONS_FILE = Path(os.environ.get("COURSEKIT_TEST_DURATIONS", ROOT / "build" / "test-durations.txt"))


class SuiteClock:
    """Times the session (wall, and CPU of pytest plus the processes it waited for) and its slowest tests."""

    def __init__(self, config: pytest.Config) -> None:
        self.config, self.whole, self.deselected, self.slowest = config, False, False, {}

    @staticmethod
    def _cpu_s() -> float:
        import resource

        own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
        return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        import time

        self.started, self.cpu, self.load = time.monotonic(), self._cpu_s(), os.getloadavg()

    def pytest_collection_modifyitems(self, session: pytest.Session, config: pytest.Config, items: list) -> None:
        testpaths = [str(ROOT / p) for p in config.getini("testpaths")]
        args = [str(Path(a).resolve()) for a in config.args]
        self.whole = (args in ([str(ROOT)], testpaths) and not config.option.keyword and not config.option.markexpr
                      and not config.option.deselect and not config.option.collectonly)

    def pytest_deselected(self, items: list) -> None:
        self.deselected = self.deselected or bool(items)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.slowest[report.nodeid] = self.slowest.get(report.nodeid, 0.0) + report.duration

    @pytest.hookimpl(trylast=True)  # after the session's fixtures are torn down
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        import datetime
        import time

        if not self.whole or self.deselected or session.shouldstop or exitstatus not in (0, 1):
            return
        wall, cpu, load = time.monotonic() - self.started, self._cpu_s() - self.cpu, os.getloadavg()
        stats = self.config.pluginmanager.get_plugin("terminalreporter").stats
        counts = ", ".join(f"{len(stats.get(k, []))} {k}" for k in ("passed", "failed", "error", "skipped"))
        commit = subprocess.run(["git", "describe", "--always", "--dirty"], cwd=ROOT, capture_output=True,
                                text=True).stdout.strip()
        memory_gib = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
        lines = [f"pytest over tests/ (make test): {wall:.0f} s wall ({wall / 60:.1f} min), {cpu:.0f} s CPU "
                 "(pytest and the processes it waited for)",
                 f"result: {counts}; exit status {exitstatus}",
                 f"machine: {os.cpu_count()} CPUs, {memory_gib:.0f} GiB; load average (1, 5, 15 min) "
                 f"{' '.join(f'{x:.2f}' for x in self.load)} at the start, {' '.join(f'{x:.2f}' for x in load)} "
                 "at the end",
                 f"commit {commit or 'unknown'}, finished {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC",
                 "slowest tests (setup + call + teardown, s):"]
        for nodeid, seconds in sorted(self.slowest.items(), key=lambda item: -item[1])[:25]:
            lines.append(f"{seconds:8.1f}  {nodeid}")
        DURATIONS_FILE.parent.mkdir(parents=True, exist_ok=True)
        DURATIONS_FILE.write_text("\n".join(lines) + "\n", encoding="utf-8")


def pytest_configure(config: pytest.Config) -> None:
    config.pluginmanager.register(SuiteClock(config), "coursekit-suite-clock")


# Writes matplotlib's font list cache as it was before fonts-noto-cjk was installed: every font but the CJK ones.
_STALE_FONT_CACHE = """
from pathlib import Path
import matplotlib
from matplotlib import font_manager as fm
fm.fontManager.ttflist = [f for f in fm.fontManager.ttflist if "CJK" not in f.name]
fm.json_dump(fm.fontManager, Path(matplotlib.get_cachedir()) / f"fontlist-v{fm.FontManager.__version__}.json")
"""
_LISTS_CJK = "from matplotlib import font_manager as fm; print(any('CJK' in f.name for f in fm.fontManager.ttflist))"


@pytest.fixture(scope="session")
def _stale_font_cache_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An MPLCONFIGDIR holding a font list cache written before the CJK font was installed, made once per
    run (matplotlib scans every font to write it); each test gets a copy, since using it rewrites it."""
    folder = tmp_path_factory.mktemp("stale-font-cache") / "mplconfig"
    env = {**os.environ, "MPLCONFIGDIR": str(folder)}
    subprocess.run([sys.executable, "-c", _STALE_FONT_CACHE], env=env, check=True)
    lists_cjk = subprocess.run([sys.executable, "-c", _LISTS_CJK], env=env, capture_output=True, text=True, check=True)
    assert lists_cjk.stdout.strip() == "False", "the simulated cache should hide the CJK fonts from matplotlib"
    return folder


@pytest.fixture
def stale_font_cache(_stale_font_cache_template: Path, tmp_path: Path) -> dict[str, str]:
    """An environment whose MPLCONFIGDIR (a folder of this test's) holds a font list cache written before the
    CJK font was installed."""
    import shutil

    folder = shutil.copytree(_stale_font_cache_template, tmp_path / "mplconfig")  # file times kept
    return {**os.environ, "MPLCONFIGDIR": str(folder)}


def _seed_exercise_cell(seed_text: str) -> str:
    start = seed_text.index("Code\n\nimport math") + len("Code\n\n")
    last = "assert sum(ratios)/len(ratios) == 2.125"
    return seed_text[start:seed_text.index(last, start) + len(last)] + "\n"


@pytest.fixture(scope="session")
def seed_exercise_cell() -> str:
    """The seed's exercise cell: read from ../shared/seed when present (CI), else the committed copy of it."""
    fixture = (ROOT / "tests" / "fixtures" / "seed_exercise_cell.txt").read_text(encoding="utf-8")
    for seed in sorted(SEED_DIR.glob("*.txt")):
        from_seed = _seed_exercise_cell(seed.read_text(encoding="utf-8"))
        assert from_seed == fixture, f"tests/fixtures/seed_exercise_cell.txt has drifted from {seed}"
    return fixture


@pytest.fixture(scope="session")
def release_template(tmp_path_factory: pytest.TempPathFactory) -> object:
    """autograder/'s config and source notebooks in a temporary course, released once per run (nbgrader's
    generate_assignment costs seconds of CPU): a test that needs a released course of its own copies this
    one (tests/grading/conftest.py's fresh_copy); nothing grades into it."""
    import shutil

    from coursekit.grading.course import CONFIG_FILE, Course
    from coursekit.grading.intake.release import release

    root = tmp_path_factory.mktemp("release") / "course"
    root.mkdir()
    shutil.copyfile(ROOT / "autograder" / CONFIG_FILE, root / CONFIG_FILE)
    shutil.copytree(ROOT / "autograder" / "source", root / "source")
    course = Course.at(root)
    release(course)
    return course


CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--no-first-run",
]


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the base class's name
        pass


class _QuietServer(http.server.ThreadingHTTPServer):
    def handle_error(self, request: object, client_address: object) -> None:
        pass  # a stopped web worker drops its Pyodide download mid-way; that is expected


AXE = ROOT / "node_modules" / "axe-core" / "axe.min.js"  # package.json pins axe-core


@pytest.fixture(scope="session")
def axe_violations() -> Callable[[object], list[str]]:
    """axe_violations(page) -> one line per serious or critical axe-core violation of the page as it is
    now (rule, impact, count, the first node and its colours where axe gives them)."""
    source = AXE.read_text(encoding="utf-8")

    def run(page: object) -> list[str]:
        page.add_script_tag(content=source)
        found = page.evaluate("""async () => (await axe.run(document, {resultTypes: ['violations']})).violations
            .filter(v => v.impact === 'serious' || v.impact === 'critical')
            .map(v => `${v.id} (${v.impact}, ${v.nodes.length}): ${v.nodes[0].target.join(' ')} `
                      + JSON.stringify(v.nodes[0].any.map(a => a.data)))""")
        return list(found)

    return run


@pytest.fixture(scope="session")
def serve_directory() -> Iterator[Callable[[Path], str]]:
    """serve_directory(folder) -> "http://127.0.0.1:PORT/": a static server, stopped at session end."""
    servers: list[http.server.ThreadingHTTPServer] = []

    def serve(folder: Path) -> str:
        server = _QuietServer(("127.0.0.1", 0), functools.partial(_QuietHandler, directory=str(folder)))
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_port}/"

    yield serve
    for server in servers:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="session")
def browser() -> Iterator[object]:
    """The Chromium `make test` found or installed, headless, launched once for the session (site and runner tests)."""
    from playwright.sync_api import sync_playwright

    executable = find_chromium()
    if executable is None:
        pytest.fail(f"no Chromium: {stop_line([need for need in NEEDS if need.find is find_chromium])}")
    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()
