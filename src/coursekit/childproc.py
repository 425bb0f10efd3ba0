"""Run a server as a child process and stop it when this process is asked to stop.

`run_until_stopped(cmd)` starts `cmd` in its own process group (its own session: a terminal's Ctrl-C
reaches this process only, which then stops the child once and quietly) and waits until the child ends
or this process receives SIGINT (Ctrl-C), SIGTERM or SIGHUP (a closed terminal). Then it stops the
child's whole process group: `stop_signal` to the child (SIGTERM: Jupyter's server shuts its kernels
down; SIGINT: its quiet shutdown when stdin is not a terminal, after which its kernels see their parent
gone and exit), up to `grace` seconds for a clean shutdown, then SIGKILL to what is left of its group.
The same happens if waiting fails for any other reason, so the child never outlives its command.

Standard library only, Python 3.9 or later, any OS (without SIGHUP or process groups on Windows): the
student bundle's `lab.py` runs a copy of this file (`coursekit.bundle` ships it as `childproc.py`);
`coursekit lab` and `coursekit formgrader` use it here, `coursekit hub start` its StopSignals.
"""

import os
import signal
import subprocess
import time

STOP_SIGNALS = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name))
POSIX = os.name == "posix"


def exit_status(signum):
    """The exit status a shell reports for a command ended by `signum` (130 after Ctrl-C)."""
    return 128 + int(signum)


class StopSignals:
    """While active: SIGINT, SIGTERM and SIGHUP are recorded (in `received`) instead of ending this process."""

    def __init__(self):
        self.received = []
        self._previous = {}

    def __enter__(self):
        for signum in STOP_SIGNALS:
            self._previous[signum] = signal.signal(signum, self._record)
        return self

    def _record(self, signum, frame):
        self.received.append(signum)

    def __exit__(self, *exc):
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        return False

    @property
    def first(self):
        """The first stop signal received, or None."""
        return self.received[0] if self.received else None


def run_until_stopped(cmd, cwd=None, env=None, grace=30.0, stop_signal=signal.SIGTERM):
    """Run `cmd` until it ends or a stop signal arrives; return (its exit status, the signal or None).

    On a stop signal (or any exception) the child's process group is stopped before this returns."""
    with StopSignals() as stops:
        child = subprocess.Popen(cmd, cwd=cwd, env=env, stdin=subprocess.DEVNULL, start_new_session=POSIX)
        try:
            while child.poll() is None and not stops.received:
                time.sleep(0.1)
        finally:
            stop_group(child, grace, stop_signal)
        return child.returncode, stops.first


def stop_group(child, grace=30.0, stop_signal=signal.SIGTERM):
    """Stop `child` and its process group: `stop_signal` to the child (which stops what it started), up to
    `grace` seconds for it to exit, then SIGKILL to whatever of its group is left; reap it."""
    if child.poll() is None:
        child.send_signal(stop_signal)
        try:
            child.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            pass
    _signal_group(child, getattr(signal, "SIGKILL", signal.SIGTERM))  # whatever of the group is left
    child.wait()


def _signal_group(child, signum):
    try:
        if POSIX:
            os.killpg(child.pid, signum)
        elif child.poll() is None:
            child.send_signal(signum)
    except (ProcessLookupError, PermissionError):
        pass  # the group is gone already
