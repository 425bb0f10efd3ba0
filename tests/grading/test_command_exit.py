"""How a `python -m coursekit` command ends (cli.end): its atexit handlers and output, its exit status,
without the interpreter's teardown of every module and object."""

from __future__ import annotations

import subprocess
import sys

ENDS = """
import atexit, sys, threading, time
from coursekit.cli import end
class Torn:
    def __del__(self):
        print("torn down")
kept = Torn()  # a module global: the interpreter's teardown would call its __del__
atexit.register(lambda: print("atexit ran"))
if sys.argv[1] == "thread":
    threading.Thread(target=lambda: (time.sleep(0.3), print("thread done"))).start()
print("output", end=" ")
end(3)
"""


def _ends(how: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", ENDS, how], capture_output=True, text=True, timeout=60)


def test_a_command_ends_with_its_status_atexit_handlers_and_output_but_no_teardown():
    done = _ends("plain")
    assert done.returncode == 3 and done.stdout.split() == ["output", "atexit", "ran"]


def test_a_command_with_a_thread_still_running_waits_for_it_as_the_interpreter_does():
    done = _ends("thread")
    assert done.returncode == 3 and "thread done" in done.stdout and "torn down" in done.stdout

