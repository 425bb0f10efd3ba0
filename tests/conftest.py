"""Shared fixtures: the project root, the seed's exercise cell, a static file server, one Chromium, a stale
matplotlib font cache, and committed (git HEAD) files; and the session's leftover checks: a run that leaves
a process of its own running (a server, a kernel, a sandbox, a database) fails, naming it and the test, and
so does a run that leaves a grading sandbox's folder (`ck-*`) in the temp folder.
"""

import functools
import http.server
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import psutil
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
# README's `make test` figure is read from there). Written only after a run of every test (no selection; the
# hub tests a plain run leaves out are no selection);
# COURSEKIT_TEST_DURATIONS names another file (tests/system/test_suite_clock.py).
DURATIONS_FILE = Path(os.environ.get("COURSEKIT_TEST_DURATIONS", ROOT / "build" / "test-durations.txt"))


class SuiteClock:
    """Times the session (wall, and CPU of pytest plus the processes it waited for) and its slowest tests."""

    def __init__(self, config: pytest.Config) -> None:
        self.config, self.whole, self.deselected, self.slowest = config, False, False, {}
        self.workers_cpu: float | None = None  # xdist's controller: what its workers used (they report it)

    @staticmethod
    def _cpu_s(children: bool = True) -> float:
        import resource

        own, waited = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
        return own.ru_utime + own.ru_stime + (waited.ru_utime + waited.ru_stime if children else 0.0)

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        import time

        self.started, self.cpu, self.own_cpu, self.load = (time.monotonic(), self._cpu_s(), self._cpu_s(False),
                                                           os.getloadavg())
        config = self.config  # the same options in pytest and in each of its xdist workers
        testpaths = [str(ROOT / p) for p in config.getini("testpaths")]
        args = [str(Path(a).resolve()) for a in config.args]
        self.whole = (args in ([str(ROOT)], testpaths) and not config.option.keyword and not config.option.markexpr
                      and not config.option.deselect and not config.option.collectonly)

    def pytest_deselected(self, items: list) -> None:
        """A selection (--lf, --sw, a plugin's) makes the run partial; the hub tests that tests/hub/conftest.py
        leaves out of a plain `pytest` (marked hub; make test-hub runs them) do not."""
        self.deselected = self.deselected or any(item.get_closest_marker("hub") is None for item in items)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.slowest[report.nodeid] = self.slowest.get(report.nodeid, 0.0) + report.duration

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: object, error: object) -> None:
        """xdist's controller: a worker is done; a selection made there (--lf, ...) makes the run partial."""
        output = getattr(node, "workeroutput", {})
        self.deselected = self.deselected or output.get(_WORKER_DESELECTED, False)
        self.workers_cpu = (self.workers_cpu or 0.0) + output.get(_WORKER_CPU, 0.0)

    @pytest.hookimpl(trylast=True)  # after the session's fixtures are torn down
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        import datetime
        import time

        if _is_worker(self.config):  # its controller writes the file (the tests are collected on each worker)
            self.config.workeroutput[_WORKER_DESELECTED] = self.deselected
            self.config.workeroutput[_WORKER_CPU] = self._cpu_s()  # its start-up included
            return
        if not self.whole or self.deselected or session.shouldstop or exitstatus not in (0, 1):
            return
        wall, cpu, load = time.monotonic() - self.started, self._cpu_s() - self.cpu, os.getloadavg()
        if self.workers_cpu is not None:  # xdist: workers are not yet waited for; the controller starts no other
            cpu = self._cpu_s(False) - self.own_cpu + self.workers_cpu
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


_WORKER_DESELECTED = "coursekit_deselected"  # a worker's SuiteClock.deselected, in its xdist workeroutput
_WORKER_CPU = "coursekit_cpu_s"  # ... and the CPU seconds it and the processes it waited for used


def _is_worker(config: pytest.Config) -> bool:
    """This process is one of pytest-xdist's workers (`make test` runs `pytest -n N`)."""
    return hasattr(config, "workerinput")


def pytest_configure(config: pytest.Config) -> None:
    config.pluginmanager.register(SuiteClock(config), "coursekit-suite-clock")


# ---- `make test` runs the tests in pytest-xdist workers (`-n N --dist loadgroup`): the tests of one module stay
# on one worker (its module fixtures are made once), and every module that uses one of these session fixtures
# runs on the same worker, which makes it once: a class graded once per run, a site built and served once (its
# pages then share the warm browser context's cache and the runner's start-up snapshot: Python starts the slow
# way once per site, not once per module). (xdist's own xdist_group marks
# do nothing under pytest 9, which ignores the node id xdist rewrites: the workers write the groups into the
# run's folder as they collect, and the controller's scheduler reads them.)
SHARED_FIXTURES = ("graded_class", "instructor_class", "site_urls", "pages")
GROUPS_FILE = "xdist-groups.json"  # {module: group}, in the run's folder (the workers' basetemps are inside it)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not _is_worker(config):
        return
    groups: dict[str, str] = {}
    for item in items:
        module = item.nodeid.split("::")[0]
        shared = next((name for name in SHARED_FIXTURES if name in getattr(item, "fixturenames", ())), None)
        if shared or module not in groups:
            groups[module] = shared or groups.get(module, module)
    run = Path(config.option.basetemp).parent  # xdist gives each worker <run>/popen-gwN
    written = run / f"{GROUPS_FILE}.{config.workerinput['workerid']}"
    written.write_text(json.dumps(groups, sort_keys=True), encoding="utf-8")
    written.replace(run / GROUPS_FILE)  # every worker collects the same tests: the same groups


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    """`--dist loadgroup`: whole groups (above) to one worker each, as xdist's LoadScopeScheduling does with
    modules."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    groups_file = config._tmp_path_factory.getbasetemp() / GROUPS_FILE  # xdist's own way to the run's folder

    class SharedClassScheduling(LoadScopeScheduling):
        groups: dict[str, str] | None = None

        def _split_scope(self, nodeid: str) -> str:
            if self.groups is None:  # read once every worker has collected (xdist schedules after that)
                self.groups = json.loads(groups_file.read_text(encoding="utf-8"))
            module = nodeid.split("::")[0]
            return self.groups.get(module, module)

    return SharedClassScheduling(config, log)


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
def release_template(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> object:
    """autograder/'s config and source notebooks in a temporary course, released once per run (nbgrader's
    generate_assignment costs seconds of CPU; under xdist the first worker that needs it releases it into the
    run's folder, the others wait for it): a test that needs a released course of its own copies this one
    (tests/grading/conftest.py's fresh_copy); nothing grades into it."""
    import shutil

    from filelock import FileLock

    from coursekit.grading.course import CONFIG_FILE, Course
    from coursekit.grading.intake.release import release

    run = tmp_path_factory.getbasetemp()
    run = run.parent if _is_worker(request.config) else run  # xdist: <run>/popen-gwN is the worker's
    root, done = run / "release-template" / "course", run / "release-template" / "released"
    with FileLock(run / "release-template.lock"):
        if not done.is_file():
            shutil.rmtree(root, ignore_errors=True)  # a worker that failed half-way
            root.mkdir(parents=True)
            shutil.copyfile(ROOT / "autograder" / CONFIG_FILE, root / CONFIG_FILE)
            shutil.copytree(ROOT / "autograder" / "source", root / "source")
            release(Course.at(root))
            done.touch()
    return Course.at(root)


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


@pytest.fixture(scope="session")
def warm_context(browser: object) -> Iterator[object]:
    """One browser context per pytest process (1280x900), as a student's browser on a later visit: the HTTP
    cache, compiled WebAssembly and the runner's start-up snapshot stay warm (Python starts in a fraction of
    the time), from module to module (the modules that serve the same site run in one process: SHARED_FIXTURES).
    Tests take it through `warm_page_context`, which leaves no page and no saved work behind."""
    ctx = browser.new_context(viewport={"width": 1280, "height": 900}, accept_downloads=True)
    yield ctx
    ctx.close()


@pytest.fixture(scope="session")
def snapshot_origins() -> set[str]:
    """The sites whose runner start-up snapshot the warm context has stored."""
    return set()


SNAPSHOT_WAIT_MS = 60_000


def _origin(url: str) -> str:
    return "/".join(url.split("/", 3)[:3])


def keep_the_snapshot(page: object, stored: set[str]) -> None:
    """Before a page that started Python the slow way is closed, wait until its runner has stored the
    start-up snapshot (it does so once the page has been idle 1.5 s, in a second worker a closed page
    ends). Else every page of the module started the slow way again, and booted Python twice: the
    runner's and the snapshot maker's. Gives up quietly after SNAPSHOT_WAIT_MS (a test that broke the
    runner), and once a site's snapshot was stored, failed or never came, does not wait for it again; the
    snapshot itself is tested in tests/runner/."""
    from playwright.sync_api import Error

    origin = _origin(page.url)
    if not page.url.startswith("http") or origin in stored:
        return
    try:
        if page.query_selector(".cr-widget[data-start=fresh]") is not None:
            page.wait_for_selector(".cr-widget:is([data-snapshot=stored], [data-snapshot=failed])", state="attached",
                                   timeout=SNAPSHOT_WAIT_MS)
        elif page.query_selector(".cr-widget[data-start=snapshot]") is None:
            return  # no runner on this page, or Python has not started yet
    except Error:
        pass
    stored.add(origin)


@pytest.fixture(scope="session")
def reused_tab() -> dict[str, object]:
    """{"tab": the warm context's tab that `tab` hands to each test in turn}, once it is open."""
    return {}


@pytest.fixture
def warm_page_context(warm_context: object, snapshot_origins: set[str],
                      reused_tab: dict[str, object]) -> Iterator[object]:
    """The warm context; after the test its pages are closed (the first to start Python on a site once it has
    stored the runner's start-up snapshot: keep_the_snapshot) and every site they opened forgets what it saved
    (localStorage and sessionStorage: the runner's code and answers, the open hint levels). The forgetting is
    done in one of the test's own tabs, navigated to the site's root: a new tab costs Chromium a renderer
    process (about 0.4 s of CPU), and a navigation ends the test's page, so no late save can follow it. The
    reused tab (`tab`) stays open, at about:blank, with no routes and the context's viewport."""
    yield warm_context
    pages = warm_context.pages
    keep = reused_tab.get("tab")
    origins = {_origin(p.url) for p in pages if p.url.startswith("http")}
    for page in pages:
        keep_the_snapshot(page, snapshot_origins)
    for origin in origins:  # a site was opened, so there is a tab to forget it in
        tidy = keep if keep in pages else pages[0]
        tidy.goto(origin + "/", wait_until="domcontentloaded")
        tidy.evaluate("() => { localStorage.clear(); sessionStorage.clear(); }")
    for page in pages:
        if page is not keep:
            page.close()
    if keep in pages:
        keep.unroute_all(behavior="ignoreErrors")
        keep.set_viewport_size({"width": 1280, "height": 900})
        keep.goto("about:blank")


@pytest.fixture
def tab(warm_page_context: object, reused_tab: dict[str, object]) -> object:
    """A tab of the warm context that every test gets in turn, as a student moves from page to page in one tab:
    Chromium keeps its renderer process (a new tab costs about 0.4 s of CPU). After the test it is at
    about:blank with its routes removed and its viewport reset (warm_page_context); a test that adds listeners,
    init scripts or a CDP session opens a tab of its own with `warm_page_context.new_page()`."""
    page = reused_tab.get("tab")
    if page is None or page.is_closed():
        page = reused_tab["tab"] = warm_page_context.new_page()
    return page


# ---- nothing a test starts outlives the session
# Every process a test starts carries two environment variables (inherited from this process, which sets
# them): the session's token and the test's node id. At the end of the session (after every fixture's
# teardown) any process still running that is a descendant of this one or carries the token is a
# leftover, orphans included (JupyterLab after its lab.py was killed, a daemonised database): the run
# fails with its command line and the test that started it, and it is killed.
SESSION_VAR, TEST_VAR = "COURSEKIT_TEST_SESSION", "COURSEKIT_TEST"
ENDS_WITH_PYTEST = ("multiprocessing.resource_tracker", "multiprocessing.forkserver")  # exit when pytest does
# seconds for processes still shutting down (a kernel its server just asked to stop)
LEFTOVER_GRACE_S = float(os.environ.get("COURSEKIT_LEFTOVER_GRACE_S", "15"))
_BEFORE = pytest.StashKey[set]()  # the session's processes already running when it started
_STARTED = pytest.StashKey[tuple]()  # (monotonic time, 1-minute load average) at the session's start
_WORKER_LEFT = pytest.StashKey[list]()  # xdist's controller: the lines its workers sent (leftover_lines)
_WORKER_LEFT_KEY = "coursekit_leftovers"  # ... under this key of each worker's workeroutput


def _environ(proc: psutil.Process) -> dict[str, str]:
    try:
        return proc.environ()
    except (psutil.AccessDenied, psutil.NoSuchProcess, psutil.ZombieProcess, OSError):
        return {}


def session_processes() -> list[psutil.Process]:
    """Running processes (not zombies) this session started: descendants, and any carrying its token;
    not those that end with pytest itself."""
    me = psutil.Process()
    token = os.environ.get(SESSION_VAR)
    found = {p.pid: p for p in me.children(recursive=True)}
    for proc in psutil.process_iter():
        if proc.pid != me.pid and proc.pid not in found and token and _environ(proc).get(SESSION_VAR) == token:
            found[proc.pid] = proc
    running = []
    for proc in found.values():
        try:
            cmdline = " ".join(proc.cmdline())
            if proc.status() != psutil.STATUS_ZOMBIE and not any(m in cmdline for m in ENDS_WITH_PYTEST):
                running.append(proc)
        except psutil.Error:
            continue
    return running


def leftover_lines(procs: list[psutil.Process]) -> list[str]:
    """One line per process: pid, the test that started it, its command line."""
    lines = []
    for proc in procs:
        try:
            cmdline = " ".join(proc.cmdline())[:300]
        except psutil.Error:
            continue
        test = _environ(proc).get(TEST_VAR) or "an unknown test (its environment is its own)"
        lines.append(f"pid {proc.pid} (started by {test}): {cmdline}")
    return lines


def _running(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def assert_stopped(pids: list[int], port: int | None = None, timeout_s: float = 30) -> None:
    """Every process of `pids` has exited (zombies count as exited) and nothing listens on 127.0.0.1:`port`."""
    deadline = time.monotonic() + timeout_s
    alive = pids
    while time.monotonic() < deadline:
        alive = [p for p in pids if _running(p)]
        if not alive:
            break
        time.sleep(0.3)
    assert not alive, leftover_lines([psutil.Process(p) for p in alive if _running(p)])
    if port is not None:
        with socket.socket() as probe:
            assert probe.connect_ex(("127.0.0.1", port)) != 0, f"something still listens on 127.0.0.1:{port}"


@pytest.fixture(scope="session")
def processes_gone() -> Callable[..., None]:
    """processes_gone(pids, port=None): assert those processes exited and nothing listens on the port."""
    return assert_stopped


# ---- nothing a grading sandbox puts in the temp folder outlives the session
# The session gets a temp folder of its own (TMPDIR, inherited by every process it starts; tempfile's cached
# choice is reset), so what other runs on this machine leave or remove there meanwhile is not counted; pytest's
# own folders stay where they were (PYTEST_DEBUG_TEMPROOT). At the end, any `ck-*` entry in it (what
# SandboxKernelManager, execute.Runner and pool.LocalWorkers make: a kernel's socket folder and records, a
# worker's root, a working folder) is a leak: the run fails, naming them. Then the folder is removed.
SANDBOX_LEFTOVERS = "ck-*"
_TEMP = pytest.StashKey[tuple]()  # (the session's temp folder, TMPDIR before it)


def temp_leftovers(folder: Path) -> list[str]:
    """The grading sandboxes' entries in a temp folder, one line each (name, kind, what is in it)."""
    lines = []
    for entry in sorted(folder.glob(SANDBOX_LEFTOVERS)):
        inside = sorted(p.name for p in entry.iterdir())[:5] if entry.is_dir() else []
        lines.append(f"{entry.name}{'/' if entry.is_dir() else ''} {' '.join(inside)}".rstrip())
    return lines


def _own_temp_folder(session: pytest.Session) -> None:
    system_temp = tempfile.gettempdir()
    os.environ.setdefault("PYTEST_DEBUG_TEMPROOT", system_temp)
    folder = tempfile.mkdtemp(prefix="coursekit-tests-", dir=system_temp)
    os.chmod(folder, 0o1777)  # as the system's: a process a test runs as another user (nobody) may use it too
    session.config.stash[_TEMP] = (folder, os.environ.get("TMPDIR"))
    os.environ["TMPDIR"] = folder
    tempfile.tempdir = None  # gettempdir() reads TMPDIR again


def _check_temp_folder(session: pytest.Session) -> None:
    folder, before = session.config.stash.get(_TEMP, (None, None))
    if folder is None:
        return
    left = temp_leftovers(Path(folder))
    if before is None:
        os.environ.pop("TMPDIR", None)
    else:
        os.environ["TMPDIR"] = before
    tempfile.tempdir = None
    shutil.rmtree(folder, ignore_errors=True)
    if not left:
        return
    _fail_session(session, f"{len(left)} grading sandbox folder(s) the tests left in the temp folder (now removed)",
                  left)


def pytest_sessionstart(session: pytest.Session) -> None:
    os.environ[SESSION_VAR] = uuid.uuid4().hex
    _own_temp_folder(session)
    session.config.stash[_BEFORE] = {p.pid for p in session_processes()}
    session.config.stash[_STARTED] = (time.monotonic(), os.getloadavg()[0])


def pytest_runtest_logstart(nodeid: str, location: object) -> None:
    os.environ[TEST_VAR] = nodeid


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: object, error: object) -> None:
    """xdist's controller: keep what a worker found still running at its end (each worker checks its own)."""
    node.config.stash.setdefault(_WORKER_LEFT, []).extend(getattr(node, "workeroutput", {}).get(_WORKER_LEFT_KEY, []))


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    os.environ.pop(TEST_VAR, None)
    _check_processes(session)
    _check_temp_folder(session)  # after the processes: a leftover kernel is ended before its folder is looked at


def _check_processes(session: pytest.Session) -> None:
    before = session.config.stash.get(_BEFORE, set())
    deadline = time.monotonic() + LEFTOVER_GRACE_S
    # none left only when two looks 0.5 s apart find none: a process caught in its exec (an orphan that a
    # shell has just started) may not show its environment or command line to one look
    empty = 0
    while True:
        left = [p for p in session_processes() if p.pid not in before]
        empty = 0 if left else empty + 1
        if empty == 2 or time.monotonic() >= deadline:
            break
        time.sleep(0.5)
    lines = leftover_lines(left)
    for proc in left:
        try:
            proc.kill()
        except psutil.NoSuchProcess:
            pass
    if _is_worker(session.config):  # each xdist worker has a token of its own; its controller reports
        session.config.workeroutput[_WORKER_LEFT_KEY] = lines
        return
    lines += session.config.stash.get(_WORKER_LEFT, [])
    if not lines:
        return
    _fail_session(session, f"{len(lines)} process(es) the tests started still running (now killed)", lines)


def _fail_session(session: pytest.Session, title: str, lines: list[str]) -> None:
    """Fail the run, with `title` and one red line per thing the tests left behind."""
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter:
        reporter.write("\n")
        reporter.write_sep("=", title, red=True)
    for line in lines if reporter else [title, *lines]:
        reporter.write_line(line, red=True) if reporter else print(line, file=sys.stderr)
    session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter: object, exitstatus: int, config: pytest.Config) -> None:
    """The session's wall time with the machine and its load beside it, on one line (README: "Test
    durations"); a run of every test also writes build/test-durations.txt (SuiteClock)."""
    start, load_before = config.stash.get(_STARTED, (time.monotonic(), 0.0))
    wall = time.monotonic() - start
    ran = sum(len(terminalreporter.stats.get(k, [])) for k in ("passed", "failed", "skipped", "error"))
    terminalreporter.write_line(f"session: {int(wall // 60)} min {int(wall % 60)} s wall for {ran} tests on "
                                f"{os.cpu_count()} cores, load {load_before:.1f} at start, "
                                f"{os.getloadavg()[0]:.1f} at end")
