"""The system-package bootstrap: what it finds, what it installs, and the one line it stops with.

A fake bin folder on PATH stands for the machine, so "no Chromium" is simulated without uninstalling it.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from coursekit import system

ROOT = Path(__file__).resolve().parents[2]


def fake(bin_dir: Path, name: str, script: str = "echo fake 1.0") -> Path:
    """An executable bin_dir/name running script with /bin/sh."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    exe = bin_dir / name
    exe.write_text(f"#!/bin/sh\n{script}\n")
    exe.chmod(0o755)
    return exe


@pytest.fixture
def bare_machine(tmp_path, monkeypatch) -> Path:
    """PATH = one empty folder, no Playwright browsers, no PostgreSQL folder; returns the bin folder."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    monkeypatch.setenv("PATH", str(bin_dir))
    monkeypatch.setenv("PLAYWRIGHT_BROWSERS_PATH", str(tmp_path / "ms-playwright"))
    monkeypatch.setattr(system, "POSTGRES_LIBDIR", str(tmp_path / "postgresql"))
    return bin_dir


def test_finds_debian_chromium_on_path(bare_machine):
    assert system.find_chromium() is None
    exe = fake(bare_machine, "chromium", "echo Chromium 140.0")
    assert system.find_chromium() == str(exe)


def test_a_chromium_that_does_not_start_is_skipped_for_playwrights_newest(bare_machine, tmp_path):
    fake(bare_machine, "chromium", "echo 'requires the chromium snap to be installed' >&2; exit 1")
    browsers = tmp_path / "ms-playwright"
    fake(browsers / "chromium-999" / "chrome-linux", "chrome")
    newest = fake(browsers / "chromium-1255" / "chrome-linux64", "chrome")
    fake(browsers / "chromium_headless_shell-1300" / "chrome-linux", "chrome")  # not a full browser
    assert system.find_chromium() == str(newest)


def test_postgres_from_path_else_the_newest_debian_folder(bare_machine, tmp_path):
    assert system.find_postgres_bindir() is None
    for version in ("9", "15"):
        for program in ("initdb", "pg_ctl"):
            fake(tmp_path / "postgresql" / version / "bin", program)
    assert system.find_postgres_bindir() == str(tmp_path / "postgresql" / "15" / "bin")  # 15 > 9, not "15" < "9"
    fake(bare_machine, "initdb")
    assert system.find_postgres_bindir() == str(tmp_path / "postgresql" / "15" / "bin"), "initdb without pg_ctl"
    fake(bare_machine, "pg_ctl")
    assert system.find_postgres_bindir() == str(bare_machine)


def test_make_builds_without_browser_sandbox_or_database():
    build = {need.package for need in system.needs("figures")}
    assert build == {"npm", "python3-venv", "fonts-noto-cjk"}
    test = {need.package for need in system.needs("test")}
    assert test == build | {"chromium", "bubblewrap", "libseccomp2", "postgresql"}


def machine_with_fonts_and_npm(bin_dir: Path) -> None:
    fake(bin_dir, "npm")
    fake(bin_dir, "fc-list", "echo 'Noto Sans CJK SC,Noto Sans CJK SC Regular'")


def test_as_root_one_apt_update_then_one_install_of_all_that_is_missing(bare_machine, tmp_path, monkeypatch):
    machine_with_fonts_and_npm(bare_machine)
    log = tmp_path / "apt.log"
    # a fake apt-get: logs its arguments; `install` puts fake programs for the packages it is given on PATH
    fake(bare_machine, "apt-get", f"""echo "$DEBIAN_FRONTEND $*" >> {log}
for arg in "$@"; do case $arg in
  chromium) printf '#!/bin/sh\\necho Chromium\\n' > {bare_machine}/chromium ;;
  bubblewrap) printf '#!/bin/sh\\necho bwrap\\n' > {bare_machine}/bwrap ;;
  postgresql) printf '#!/bin/sh\\n' > {bare_machine}/initdb; printf '#!/bin/sh\\n' > {bare_machine}/pg_ctl ;;
esac; done
/bin/chmod +x {bare_machine}/* 2>/dev/null; true""")
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    assert system.main(["test"]) == 0
    assert log.read_text().splitlines() == ["noninteractive update -qq",
                                            "noninteractive install -y -qq chromium bubblewrap postgresql"]


def test_without_privileges_tries_playwright_then_stops_with_one_line(bare_machine, monkeypatch, capsys):
    machine_with_fonts_and_npm(bare_machine)
    fake(bare_machine, "apt-get", "echo apt-get must not run; exit 3")
    monkeypatch.setattr(os, "geteuid", lambda: 1000)  # and no sudo on PATH
    tried = []
    monkeypatch.setattr(system, "playwright_install", tried.append)  # where it can download, it would
    assert system.main(["test"]) == 1
    assert tried == [None], "no privileges: Playwright's own download, without --with-deps"
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert err.startswith("error: missing Chromium, bubblewrap (bwrap), PostgreSQL server (initdb, pg_ctl): ")
    assert "`sudo apt-get install -y chromium bubblewrap postgresql`" in err
    assert "playwright install chromium" in err


def test_check_only_installs_nothing(bare_machine, tmp_path, monkeypatch, capsys):
    machine_with_fonts_and_npm(bare_machine)
    fake(bare_machine, "apt-get", f"echo ran > {tmp_path / 'ran'}")
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    assert system.main(["figures", "--check"]) == 0
    assert system.main(["test", "--check"]) == 1
    assert not (tmp_path / "ran").exists()
    assert capsys.readouterr().err.count("\n") == 1


def test_make_test_without_chromium_stops_before_ruff_or_pytest(tmp_path):
    """The Makefile wiring: `make test` on a machine without Chromium ends at the system step, one error line."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    python3 = os.path.realpath(getattr(sys, "_base_executable", sys.executable))
    links = {"python3": python3, **{name: shutil.which(name) for name in ("make", "npm", "node", "fc-list",
                                                                             "bwrap", "initdb", "pg_ctl")}}
    for name, target in links.items():
        if target:
            (bin_dir / name).symlink_to(target)
    env = {**os.environ, "PATH": str(bin_dir), "PLAYWRIGHT_BROWSERS_PATH": str(tmp_path / "none")}
    done = subprocess.run(["make", "-o", ".venv/.installed", "test", "SYSTEM_FLAGS=--check"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)
    out = done.stdout + done.stderr
    assert done.returncode != 0, out
    errors = [line for line in out.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "missing Chromium" in errors[0], out
    assert "ruff" not in out and "pytest" not in out, out


def test_ci_runs_make_test_with_a_throwaway_home_keeping_registry_settings(tmp_path):
    developer = tmp_path / "developer"
    (developer / ".config" / "pip").mkdir(parents=True)
    (developer / ".config" / "pip" / "pip.conf").write_text("[global]\nindex-url = https://mirror.example/simple\n")
    (developer / ".cache" / "matplotlib").mkdir(parents=True)
    seen = tmp_path / "seen"
    fake(tmp_path / "bin", "make", f"""{{ echo "$*"; echo "$HOME"; echo "$XDG_CACHE_HOME"; echo "$MPLCONFIGDIR"
  cat "$XDG_CONFIG_HOME/pip/pip.conf"; }} > {seen}; exit 3""")
    env = {**os.environ, "HOME": str(developer), "PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}",
           "TMPDIR": str(tmp_path)}
    done = subprocess.run(["bash", str(ROOT / ".ci" / "run")], env=env, capture_output=True, text=True)
    assert done.returncode == 3, "the exit status of make test is CI's"
    args, home, cache, mplconfig, *pip_conf = seen.read_text().splitlines()
    assert args == "test"
    assert Path(home).parent == tmp_path and Path(home) != developer
    assert cache.startswith(home) and mplconfig.startswith(home)
    assert pip_conf == ["[global]", "index-url = https://mirror.example/simple"]
    assert not Path(home).exists(), "the throwaway HOME is removed afterwards"
