"""`make test` runs pytest in xdist workers (tests/conftest.py, `-n N --dist loadgroup`): the tests of a module
stay on one worker, and every module that uses a class graded once per run (SHARED_FIXTURES) runs on the same
worker, so the class is graded once. Here an inner run has four modules using a stand-in `graded_class`
(it notes each time it is made) and four that do not, on two workers."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
GRADED = '''import os
import pytest

@pytest.fixture(scope="session")
def graded_class():
    with open(os.environ["GRADED_LOG"], "a") as log:
        log.write(f"{os.getpid()}\\n")
    return "graded"
'''
USES = "".join(f"def test_{k}(graded_class):\n    assert graded_class == 'graded'\n\n" for k in range(3))
PLAIN = "".join(f"def test_{k}():\n    assert True\n\n" for k in range(3))


def test_modules_sharing_a_graded_class_run_on_one_worker_which_grades_it_once(tmp_path) -> None:
    (tmp_path / "graded_plugin.py").write_text(GRADED, encoding="utf-8")
    for n in range(4):
        (tmp_path / f"test_uses_{n}.py").write_text(USES, encoding="utf-8")
        (tmp_path / f"test_plain_{n}.py").write_text(PLAIN, encoding="utf-8")
    log = tmp_path / "graded.log"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS), str(tmp_path)]), "GRADED_LOG": str(log)}
    done = subprocess.run([sys.executable, "-m", "pytest", "-v", "-p", "conftest", "-p", "graded_plugin",
                           "-p", "no:cacheprovider", "-n", "2", "--dist", "loadgroup", "--rootdir", str(tmp_path),
                           str(tmp_path)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:]
    ran = re.findall(r"\[(gw\d+)\] \[ *\d+%\] PASSED (test_\w+)\.py::", done.stdout)
    assert len(ran) == 24, done.stdout[-3000:]
    workers = {module: {worker for worker, m in ran if m == module} for _, module in ran}
    assert all(len(on) == 1 for on in workers.values()), workers  # a module on one worker
    assert len({worker for module, on in workers.items() if "uses" in module for worker in on}) == 1, workers
    assert len({worker for worker, _ in ran}) == 2, workers  # both worked: the grouping, not chance
    assert len(log.read_text(encoding="utf-8").split()) == 1, "graded_class was made more than once"
