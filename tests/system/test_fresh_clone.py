"""`make` on a fresh clone leaves `git status` clean, even with a font cache older than the CJK font.

The clone borrows this checkout's .venv and node_modules (symlinks, kept out of its `git status` by the
clone's own .git/info/exclude) and runs its own sources (PYTHONPATH), so the test costs one build (about
half a minute) rather than a set-up; `-o .venv/.installed` keeps make from reinstalling into the borrowed .venv.
"""
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_make_on_a_fresh_clone_leaves_git_status_clean(tmp_path, stale_font_cache):
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "--quiet", "--no-hardlinks", str(ROOT), str(clone)], check=True)
    for borrowed in (".venv", "node_modules"):
        (clone / borrowed).symlink_to(ROOT / borrowed)
    with (clone / ".git" / "info" / "exclude").open("a") as exclude:
        exclude.write("/.venv\n/node_modules\n")
    (tmp_path / "home").mkdir()
    env = {**stale_font_cache, "HOME": str(tmp_path / "home"), "PYTHONPATH": str(clone / "src")}
    done = subprocess.run(["make", "-o", ".venv/.installed"], cwd=clone, env=env, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    status = subprocess.run(["git", "status", "--porcelain"], cwd=clone, capture_output=True, text=True, check=True)
    assert status.stdout == "", f"make changed committed files or left untracked ones:\n{status.stdout}"
