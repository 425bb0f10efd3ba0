"""The class hub for the hub tests: `coursekit hub start` on a free port with its own folder, a roster of
two students and an instructor with known passwords, stopped with Ctrl-C (SIGINT) at the end.

The tests that start a hub run in `make test-hub` (and .ci/run), not in `make test`: pytest keeps them
only when tests/hub is named on the command line.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from hub_support import ClassHub, start_hub, stop_hub

HERE = Path(__file__).resolve().parent
HUB_TESTS = {"test_class_loop.py", "test_isolation.py", "test_stop.py"}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Keep the tests that start a hub out of a plain `pytest` (make test); run them when tests/hub is named."""
    for item in items:
        if Path(str(item.fspath)).parent == HERE and Path(str(item.fspath)).name in HUB_TESTS:
            item.add_marker(pytest.mark.hub)  # leaving these out is no selection (tests/conftest.py SuiteClock)
    named = config.args_source != pytest.Config.ArgsSource.TESTPATHS and any(  # not testpaths (make test)
        Path(arg.split("::")[0]).resolve().is_relative_to(HERE) for arg in config.args)
    if not named:
        skipped = [item for item in items if item.get_closest_marker("hub")]
        if skipped:
            config.hook.pytest_deselected(items=skipped)
            items[:] = [item for item in items if item not in skipped]


@pytest.fixture(scope="session")
def class_hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClassHub]:
    if os.geteuid() != 0:
        pytest.fail("the hub tests need root here (cgroups, per-student uids); see docs/hub.md")
    hub = start_hub(tmp_path_factory.mktemp("class"))
    yield hub
    stop_hub(hub)

