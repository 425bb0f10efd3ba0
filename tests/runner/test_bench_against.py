"""bench/bench_runner.py's --against REV (an earlier revision's lesson page, built by that revision's own code, in
the same rounds), --busy N (the loaded machine) and its variants of the pages."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))
import bench_runner  # noqa: E402 - the bench, not a package

# stands in for the revision's `coursekit release` and `coursekit site --preview` (a minute of CPU, run by the
# bench itself): the revision's own coursekit is imported and writes where the bench takes the site from
WHICH_COURSEKIT = ("import coursekit, pathlib; page = pathlib.Path('_site/exercises/lesson11_grpo.html'); "
                   "page.parent.mkdir(parents=True); page.write_text(coursekit.__file__)")


def worktrees() -> str:
    return subprocess.run(["git", "-C", str(ROOT), "worktree", "list", "--porcelain"], capture_output=True,
                          text=True, check=True).stdout


def test_a_revision_is_built_by_its_own_code_and_its_worktree_removed(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """`--against HEAD` with a quick build: git's worktree of the revision, the build run there imports the
    worktree's coursekit (its PYTHONPATH before this checkout's editable install), its _site is what the bench
    serves, and git no longer lists the worktree, whose folder is gone."""
    monkeypatch.setattr(bench_runner, "revision_build_steps", lambda tree: [["-c", WHICH_COURSEKIT]])
    before = worktrees()
    site = bench_runner.build_revision("HEAD", tmp_path)
    imported = Path((site / "exercises" / "lesson11_grpo.html").read_text(encoding="utf-8"))
    assert imported.parts[-3:] == ("src", "coursekit", "__init__.py")
    assert tmp_path in imported.parents and ROOT not in imported.parents, f"{imported}: not the revision's own code"
    assert worktrees() == before, "the revision's worktree was left registered"
    assert [p.name for p in tmp_path.iterdir()] == ["against-site"], "the worktree's folder was left behind"


def test_the_revision_build_steps_are_the_revisions_own_cli() -> None:
    """What the bench runs in the worktree: that revision's `coursekit release`, then its no-Quarto preview of
    the lesson, into the worktree (the bench takes the site from <worktree>/_site)."""
    tree = Path("/tmp/worktree")
    assert bench_runner.revision_build_steps(tree) == [
        ["-m", "coursekit", "release"],
        ["-m", "coursekit", "site", "--preview", "--root", str(tree), "--lesson", bench_runner.LESSON.id]]


def test_a_revision_whose_build_writes_no_lesson_page_stops_the_bench_with_one_line(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A revision whose preview has no lesson page where the bench looks: one line naming the page; its worktree
    is removed all the same."""
    monkeypatch.setattr(bench_runner, "revision_build_steps", lambda tree: [["-c", "pass"]])
    before = worktrees()
    with pytest.raises(SystemExit) as stop:
        bench_runner.build_revision("HEAD", tmp_path)
    assert str(stop.value) == "error: --against HEAD: its build wrote no _site/exercises/lesson11_grpo.html"
    assert worktrees() == before
    assert not any(tmp_path.iterdir())


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


def test_busy_processes_spin_until_the_block_ends() -> None:
    """--busy 2: two processes use the CPU during the block and have ended after it."""
    with bench_runner.busy_processes(2) as spinners:
        assert len(spinners) == 2
        deadline = time.monotonic() + 10  # a loaded machine may give a spinner its first tick late
        while time.monotonic() < deadline and not all(psutil.Process(s.pid).cpu_times().user > 0 for s in spinners):
            time.sleep(0.05)
        assert all(psutil.Process(s.pid).cpu_times().user > 0 for s in spinners), "a spinner did not run"
        assert all(s.poll() is None for s in spinners), "a spinner stopped during the block"
    assert all(s.poll() is not None for s in spinners), "a spinner outlived the block"


def test_every_variant_changes_the_page_it_names_as_built_today(preview_site: Path, pages: dict[str, str],
                                                                 tmp_path: Path) -> None:
    """Each of the bench's VARIANTS finds the text it changes in the preview's lesson page as the preview builds it
    now, and in the Quarto-shaped page made from it (a variant whose text is gone measures nothing; one stopped
    matching when the preview began to draw its formulas after its start). (`pages`: this module runs with the
    runner's pages, whose fixture site holds the preview, built once.)"""
    target = "exercises/lesson11_grpo.html"
    for folder in (tmp_path, tmp_path / bench_runner.TEX_SITE):
        (folder / target).parent.mkdir(parents=True)
        shutil.copyfile(preview_site / target, folder / target)
    kinds = {"preview": target, "quarto": bench_runner.build_quarto_page(tmp_path, target)}
    for label, (kind, changes) in bench_runner.VARIANTS.items():
        written = bench_runner.write_variant(tmp_path, kinds[kind], label, changes)
        assert (tmp_path / written).read_bytes() != (tmp_path / kinds[kind]).read_bytes(), label
