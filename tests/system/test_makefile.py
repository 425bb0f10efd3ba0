"""The maintainer's commands (issue 34): `make help` has a line for every target, `make demo` leaves the
committed run alone unless COMMIT=1, `make clean` removes what git ignores (but the set-up), and the
messages say what to do: give ROSTER=, give a notebook file rather than a folder, run from the repository
root; Ctrl-C in any command is one line and exit 130."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest

from coursekit.cli import main

ROOT = Path(__file__).resolve().parents[2]
MAKE = ["make", "--no-print-directory", "-o", ".venv/.installed"]  # the set-up counts as done
KEPT_BY_CLEAN = {".venv/", "node_modules/", "src/lesson11_course_kit.egg-info/", "work/"}  # set-up, students' work


def phony_targets() -> list[str]:
    text = (ROOT / "Makefile").read_text(encoding="utf-8").replace("\\\n", " ")
    return re.search(r"^\.PHONY:(.*)$", text, re.M)[1].split()


def test_make_help_has_one_line_for_every_target() -> None:
    done = subprocess.run(["make", "--no-print-directory", "help"], cwd=ROOT, capture_output=True, text=True,
                          check=True)
    lines = {line.split()[1]: line for line in done.stdout.splitlines() if line.startswith("  make ")}
    missing = [t for t in phony_targets() if t not in lines]
    assert not missing, f"no `## ` line in the Makefile for: {missing}"
    assert all(len(line.split(None, 2)) == 3 for line in lines.values()), done.stdout  # each says something


def dry_run(target: str, *variables: str) -> list[str]:
    """The recipe lines `make -n` would run for `target` (not those of the set-up)."""
    done = subprocess.run([*MAKE, "-n", target, *variables], cwd=ROOT, capture_output=True, text=True, check=True)
    return [line for line in done.stdout.splitlines() if "system.py" not in line]


STAND_IN = """import json, pathlib
out = pathlib.Path(fig_dir)
out.mkdir(parents=True, exist_ok=True)
(out / "demo_training.json").write_text(json.dumps({"ran_in": str(pathlib.Path.cwd())}))
"""


def stand_in_demo(folder: Path) -> Path:
    """A tiny notebook in place of the demo: the same parameter (fig_dir, committed default), one output."""
    nb = nbformat.v4.new_notebook(metadata={"kernelspec": {"name": "python3", "language": "python",
                                                          "display_name": "Python 3"}})
    nb.cells = [nbformat.v4.new_code_cell('fig_dir = "../assets/figs"', metadata={"tags": ["parameters"]}),
                nbformat.v4.new_code_cell(STAND_IN)]
    path = folder / "lessons" / "lesson11_grpo_demo.ipynb"
    path.parent.mkdir(parents=True)
    nbformat.write(nb, path)
    return path


def run_recipe(lines: list[str], folder: Path) -> str:
    """Run the recipe's lines in `folder` (this Python for the repository's .venv); what they printed."""
    out = []
    for line in lines:
        cmd = [sys.executable if word == ".venv/bin/python" else word for word in shlex.split(line)]
        out.append(subprocess.run(cmd, cwd=folder, check=True, capture_output=True, text=True, timeout=300).stdout)
    return "\n".join(out)


@pytest.mark.slow
def test_make_demo_writes_a_scratch_folder_unless_commit_1(tmp_path) -> None:
    """`make demo`'s own recipe, run on a stand-in notebook: build/demo/ gets the notebook and its figures,
    lessons/ and assets/figs/ are untouched; `make demo COMMIT=1` replaces those and says so."""
    scratch, commit = tmp_path / "scratch", tmp_path / "commit"
    for folder in (scratch, commit):
        stand_in_demo(folder)
    before = (scratch / "lessons" / "lesson11_grpo_demo.ipynb").read_bytes()
    said = run_recipe(dry_run("demo"), scratch)
    assert "build/demo/" in said and "make demo COMMIT=1" in said, said
    assert (scratch / "lessons" / "lesson11_grpo_demo.ipynb").read_bytes() == before
    assert not (scratch / "assets").exists()
    assert nbformat.read(scratch / "build" / "demo" / "lesson11_grpo_demo.ipynb", as_version=4).cells
    stored = json.loads((scratch / "build" / "demo" / "figs" / "demo_training.json").read_text())
    assert stored["ran_in"] == str(scratch / "build" / "demo")

    said = run_recipe(dry_run("demo", "COMMIT=1"), commit)
    assert "replacing the committed run" in said, said
    assert (commit / "assets" / "figs" / "demo_training.json").is_file()
    assert not (commit / "build").exists()


def test_make_clean_removes_everything_git_ignores_but_the_set_up(tmp_path) -> None:
    """Every path .gitignore names (what the kit writes) is created in a scratch repository, then `make
    clean`: `git status --ignored` lists only the set-up and the students' old work copies."""
    shutil.copyfile(ROOT / "Makefile", tmp_path / "Makefile")
    shutil.copyfile(ROOT / ".gitignore", tmp_path / ".gitignore")
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    (tmp_path / "src" / "pkg").mkdir(parents=True)
    (tmp_path / "src" / "pkg" / "module.py").write_text("")  # tracked files beside the ignored ones
    subprocess.run(["git", "add", "."], cwd=tmp_path, check=True)
    made = []
    for raw in (ROOT / ".gitignore").read_text(encoding="utf-8").splitlines():
        pattern = raw.strip()
        if not pattern or pattern.startswith("#"):
            continue
        rel = pattern.lstrip("/").replace("**/", "lessons/").replace("*.egg-info", "src/lesson11_course_kit.egg-info")
        rel = rel.replace("*", "x")
        path = tmp_path / rel.rstrip("/") / ("kept" if rel.endswith("/") else "")
        if rel.startswith("__pycache__") or rel.startswith(".ipynb_checkpoints"):
            path = tmp_path / "src" / "pkg" / rel.rstrip("/") / "x"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("written by the kit\n")
        made.append(rel)
    assert len(made) >= 20, made
    (tmp_path / ".venv" / "lib" / "__pycache__").mkdir(parents=True)  # the set-up's own caches stay
    subprocess.run(["make", "-s", "clean"], cwd=tmp_path, check=True, capture_output=True)
    status = subprocess.run(["git", "status", "--ignored", "--porcelain"], cwd=tmp_path, capture_output=True,
                            text=True, check=True).stdout
    ignored = {line[3:] for line in status.splitlines() if line.startswith("!! ")}
    assert ignored == KEPT_BY_CLEAN, sorted(ignored - KEPT_BY_CLEAN)
    assert (tmp_path / ".venv" / "lib" / "__pycache__").is_dir()


def test_make_export_without_roster_passes_none_and_the_command_says_give_roster() -> None:
    assert "--roster" not in " ".join(dry_run("export"))
    assert '--roster "r.csv"' in " ".join(dry_run("export", "ROSTER=r.csv"))


def test_export_without_a_roster_says_give_roster(capsys) -> None:
    assert main(["export", "--format", "canvas"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "give ROSTER=path/to/roster.csv" in err[0], err
    assert main(["export", "--format", "canvas", "--roster", "lessons"]) == 1
    assert capsys.readouterr().err.strip() == ("error: lessons: a folder; give ROSTER=path/to/roster.csv, the "
                                               "roster file itself")


def test_check_of_a_folder_says_give_a_notebook_file(capsys) -> None:
    assert main(["check", "solutions"]) == 1
    assert capsys.readouterr().err.strip() == ("error: solutions: a folder, not a notebook; give the notebook "
                                               "file, e.g. make check NOTEBOOK=solutions/<name>.ipynb")


def test_a_command_run_below_the_repository_root_names_the_root(monkeypatch, capsys) -> None:
    """`make report` from a subfolder is make's "No rule to make target"; the command itself says where the
    root is, on its one error line (the commands take course.yml, lessons/ and autograder/ from there)."""
    monkeypatch.chdir(ROOT / "lessons")
    for command in (["report"], ["check", "../solutions/lesson11_grpo.ipynb"]):
        assert main(command) == 1
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("error: "), err
        assert err[0].endswith(f" (run make or coursekit from the repository root: cd {ROOT})"), err
    monkeypatch.chdir(ROOT)
    assert main(["check", "lessons"]) == 1
    assert "repository root" not in capsys.readouterr().err  # from the root: no hint


# A command busy when Ctrl-C arrives (SIGINT to the terminal's process group); `coursekit bundle` stands for
# every command without a Ctrl-C line of its own. It takes SIGINT as a terminal's foreground command does,
# whatever this test inherited: a run started in the background (`cmd &` in a script) ignores SIGINT, and so
# would the command, which then never saw the Ctrl-C.
BUSY = """import signal, sys, time
signal.signal(signal.SIGINT, signal.default_int_handler)
from coursekit import bundle

def busy(args):
    print("busy", flush=True)
    time.sleep(120)

bundle.run = busy
from coursekit.cli import main
sys.exit(main(["bundle"]))
"""


def test_ctrl_c_in_any_command_is_one_line_and_exit_130() -> None:
    proc = subprocess.Popen([sys.executable, "-c", BUSY], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    assert proc.stdout.readline().strip() == "busy"
    time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130
    assert err.strip().splitlines() == ["bundle: interrupted"], err
