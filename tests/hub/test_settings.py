"""course.yml's `hub:` section: a bad one stops `coursekit hub start` with one line naming the file and the
problem, before anything starts; passwords are kept across starts and stored hashed. (No hub starts here,
so these run in `make test`.)"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from coursekit.cli import main
from coursekit.hub.settings import check_password, ensure_accounts, load_hub_settings, parse_size

ROOT = Path(__file__).resolve().parents[2]
BASE = (ROOT / "course.yml").read_text(encoding="utf-8").split("\nhub:")[0]


@pytest.mark.parametrize(("hub", "problem"), [
    ("", "hub: missing"),
    ("\nhub:\n  instructor: teacher\n  students: []\n", "'students' must be a non-empty list"),
    ("\nhub:\n  instructor: teacher\n  students: [Alice Smith]\n", "user name 'Alice Smith'"),
    ("\nhub:\n  instructor: alice\n  students: [alice]\n", "listed twice"),
    ("\nhub:\n  instructor: t\n  students: [a]\n  resources: {student: {memory: lots}}\n", "memory must be like"),
    ("\nhub:\n  instructor: t\n  students: [a]\n  resources: {student: {cpu: 0}}\n", "cpu must be a positive"),
    ("\nhub:\n  instructor: t\n  students: [a]\n  roster: x\n", "unknown key 'roster'"),
    ("\nhub:\n  instructor: t\n  students: [a]\n  course_id: a b\n", "course_id 'a b' must match"),
])
def test_a_bad_hub_section_is_one_line_naming_the_file(tmp_path: Path, capsys, hub: str, problem: str) -> None:
    course = tmp_path / "course.yml"
    course.write_text(BASE + hub, encoding="utf-8")
    assert main(["hub", "start", "--state", str(tmp_path / "hub"), "--course-file", str(course)]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and str(course) in err and problem in err, err
    assert not (tmp_path / "hub").exists()


def test_the_project_course_file_has_a_class() -> None:
    settings = load_hub_settings(ROOT / "course.yml")
    assert settings.instructor not in settings.students and settings.students
    assert settings.student.memory == parse_size("x", "1G") == 1 << 30


def test_passwords_are_kept_and_stored_hashed(tmp_path: Path) -> None:
    csv_file, accounts = tmp_path / "passwords.csv", tmp_path / "accounts.json"
    first = ensure_accounts(("teacher", "alice"), csv_file, accounts)
    again = ensure_accounts(("teacher", "alice", "bob"), csv_file, accounts)
    assert again["alice"] == first["alice"] and again["bob"] and csv_file.stat().st_mode & 0o077 == 0
    hashes = json.loads(accounts.read_text())
    assert first["alice"] not in accounts.read_text()
    assert check_password(first["alice"], hashes["alice"]) and not check_password("guess", hashes["alice"])


def test_a_student_sandbox_binds_a_venv_under_tmp_after_its_private_tmp(tmp_path: Path, monkeypatch) -> None:
    """Issue 30, item 8: a checkout under the temp folder (and one with spaces and CJK in its path): the
    student's private /tmp is mounted before the venv's bind, which it would otherwise hide (bwrap
    applies its mounts in order; the server then could not start)."""
    import types

    from coursekit.hub import spawner as hub_spawner
    from coursekit.hub.settings import HubLayout

    venv = "/tmp/课程 kit/.venv"
    monkeypatch.setattr(hub_spawner, "python_paths", lambda: [venv, "/usr/lib"])
    monkeypatch.setattr(hub_spawner.os, "geteuid", lambda: 1000)
    spawner = types.SimpleNamespace(user=types.SimpleNamespace(name="alice"), layout=HubLayout(tmp_path))
    args = hub_spawner.ClassSpawner.sandbox_command(spawner)
    tmpfs = args.index("--tmpfs")
    assert args[tmpfs + 1] == "/tmp" and args.count("--tmpfs") == 1
    assert tmpfs < args.index(venv), "a bind under /tmp made before the tmpfs would be hidden by it"


def test_the_hubs_course_id_is_course_ymls(tmp_path: Path) -> None:
    """Issue 33: the hub's nbgrader course was named after its first lesson (settings.py, course_id = "lesson11")."""
    from coursekit.hub.command import prepare
    from coursekit.hub.settings import HubLayout

    course = tmp_path / "course.yml"
    course.write_text(BASE + "\nhub:\n  instructor: t\n  students: [a]\n  course_id: grpo-2026\n", encoding="utf-8")
    settings = load_hub_settings(course)
    assert settings.course_id == "grpo-2026" and load_hub_settings(ROOT / "course.yml").course_id == "grpo"
    layout = HubLayout(tmp_path / "hub")
    prepare(layout, settings, 8999)
    assert layout.course_id == "grpo-2026" and (layout.exchange / "grpo-2026" / "feedback" / "a").is_dir()
    assert "c.CourseDirectory.course_id = 'grpo-2026'" in (layout.course / "nbgrader_config.py").read_text()
    assert "course_id = 'grpo-2026'" in (layout.config("student") / "nbgrader_config.py").read_text()


def test_a_relative_state_is_in_the_kits_folder_whatever_the_terminals(tmp_path: Path, monkeypatch) -> None:
    """Issue 33: `hub feedback` from the instructor's terminal (in build/hub/course) looked for
    build/hub/course/build/hub and counted 0 pages."""
    import argparse

    from coursekit.hub import command

    seen = []
    monkeypatch.setattr(command, "release_feedback", lambda layout: seen.append(layout.state) or 0)
    monkeypatch.chdir(tmp_path)
    parser = argparse.ArgumentParser()
    command.add_arguments(parser)
    assert command.run(parser.parse_args(["feedback"])) == 0
    assert seen == [ROOT / "build" / "hub"]
