"""build/test-durations.txt, where the README's `make test` figure comes from (tests/conftest.py's SuiteClock):
a run of every test writes its wall and CPU seconds, result, machine, load and slowest tests; a run of a
selection leaves the file alone; as one pytest process and as `make test` runs it, in xdist workers. Here the
"every test" of a run is one small file and one hub test module (pytest's testpaths), whose tests a plain run
leaves out as `make test` does (tests/hub/conftest.py); the inner runs keep their temporary files in this
test's folder (--basetemp), leaving the outer run's alone."""
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ONE_FILE = "tests/branches/test_errata.py"
HUB_FILE = "tests/hub/test_stop.py"  # left out of a plain run (make test-hub runs it)


WORKERS = {"one process": [], "xdist workers": ["-n", "2", "--dist", "loadgroup"]}  # make test: -n 3 --dist loadgroup


@pytest.mark.parametrize("workers", WORKERS.values(), ids=WORKERS)
def test_a_whole_run_writes_its_durations_and_a_selection_writes_nothing(tmp_path, workers):
    out = tmp_path / "build" / "test-durations.txt"
    env = {**os.environ, "COURSEKIT_TEST_DURATIONS": str(out)}
    run = [sys.executable, "-m", "pytest", "-q", "-o", f"testpaths={ONE_FILE} {HUB_FILE}", *workers,
           "--basetemp", str(tmp_path / "tmp"),
           "-p", "no:cacheprovider", "-p", "no:hypothesispytest", "-p", "no:anyio"]  # not used there: a quicker start
    selection = subprocess.run([*run, "-k", "same_order"], cwd=ROOT, env=env, capture_output=True, text=True)
    assert selection.returncode == 0, selection.stdout[-2000:]
    assert not out.exists(), "a run of a selection wrote the durations"
    whole = subprocess.run(run, cwd=ROOT, env=env, capture_output=True, text=True)
    assert whole.returncode == 0, whole.stdout[-2000:]
    passed = int(re.search(r"(\d+) passed", whole.stdout)[1])
    if not workers:  # (xdist's controller does not count what its workers leave out)
        assert re.search(r"\d+ deselected", whole.stdout), "the hub tests should be left out of a plain run"
    lines = out.read_text(encoding="utf-8").splitlines()
    assert re.fullmatch(r"pytest over tests/ \(make test\): \d+ s wall \(\d+\.\d min\), \d+ s CPU .*", lines[0])
    assert lines[1] == f"result: {passed} passed, 0 failed, 0 error, 0 skipped; exit status 0"
    assert re.fullmatch(rf"machine: {os.cpu_count()} CPUs, \d+ GiB; load average \(1, 5, 15 min\) "
                        r"[\d. ]+ at the start, [\d. ]+ at the end", lines[2])
    slowest = lines[lines.index("slowest tests (setup + call + teardown, s):") + 1:]
    assert len(slowest) == passed and all(ONE_FILE + "::" in line for line in slowest)
