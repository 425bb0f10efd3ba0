"""bench/bench_runner.py's --against REV (an earlier revision's lesson page, built by that revision's own code, in
the same rounds) and --busy N (the loaded machine)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))
import bench_runner  # noqa: E402 - the bench, not a package


def worktrees() -> str:
    return subprocess.run(["git", "-C", str(ROOT), "worktree", "list", "--porcelain"], capture_output=True,
                          text=True, check=True).stdout


def test_a_revision_is_built_by_its_own_code_and_its_worktree_removed(tmp_path: Path) -> None:
    """Stands in for `--against REV` with REV = HEAD (an older revision's build would tie the test to what today's
    virtual environment can still run): git's worktree of the revision, built by its `coursekit release` and
    `coursekit site --preview`; the lesson page the bench serves is there, and git no longer lists the worktree."""
    before = worktrees()
    site = bench_runner.build_revision("HEAD", tmp_path)
    page = site / bench_runner.preview.lesson_page(bench_runner.LESSON, "exercise").target
    assert page.is_file(), f"no lesson page in {site}"
    assert "celltag_course-exercise" in page.read_text(encoding="utf-8"), "the page has no exercise for the runner"
    assert worktrees() == before, "the revision's worktree was left registered"
    assert [p.name for p in tmp_path.iterdir()] == ["against-site"], "the worktree's folder was left behind"


def test_busy_processes_spin_until_the_block_ends() -> None:
    """--busy 2: two processes use the CPU during the block and are gone after it."""
    with bench_runner.busy_processes(2):
        spinners = [c for c in psutil.Process().children() if "while True: pass" in c.cmdline()]
        assert len(spinners) == 2
        deadline = time.monotonic() + 10  # a loaded machine may give a spinner its first tick late
        while not all(s.cpu_times().user > 0 for s in spinners) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert all(s.cpu_times().user > 0 for s in spinners), "a spinner did not run"
    assert not any(s.is_running() for s in spinners), "a spinner outlived the block"


def test_a_revision_git_does_not_know_stops_the_bench_with_one_line(tmp_path: Path) -> None:
    """`--against` a name that is no revision: git's reason in one line, and nothing left registered or written."""
    before = worktrees()
    try:
        bench_runner.build_revision("no-such-revision", tmp_path)
    except SystemExit as stop:
        message = str(stop)
    else:
        raise AssertionError("an unknown revision was built")
    assert message.startswith("error: --against no-such-revision: git worktree add failed: ") and "\n" not in message
    assert worktrees() == before
    assert not any(tmp_path.iterdir())
