"""Shared fixtures: the project root, the seed's exercise cell, a static file server and one Chromium."""

import functools
import http.server
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SEED_DIR = ROOT.parent / "shared" / "seed"


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
    """Debian's Chromium, headless, launched once for the whole session (site and runner tests)."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()
