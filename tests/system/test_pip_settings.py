"""`make`'s set-up runs uv with pip's package sources (src/coursekit/pip_settings.py).

Stands in for a maintainer whose pip is set to a mirror (pip.conf or PIP_* variables): pip's own
`pip config get` reads them here, as pip would for an install, and uv must get the same indexes,
find-links and certificate."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "src" / "coursekit"))
import pip_settings  # noqa: E402 - run as a script by the Makefile, before the kit is installed

MIRROR = "https://mirrors.example.edu.cn/pypi/simple"


@pytest.fixture
def pip_conf(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A pip.conf that pip reads last (PIP_CONFIG_FILE), no PIP_* source variables, a home of its own."""
    for name in ("PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_FIND_LINKS", "PIP_CERT", "SSL_CERT_FILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / ".config"))
    conf = tmp_path / "pip.conf"
    monkeypatch.setenv("PIP_CONFIG_FILE", str(conf))
    return conf


def test_pips_mirror_extra_indexes_find_links_and_certificate_reach_uv(pip_conf: Path, tmp_path: Path) -> None:
    pip_conf.write_text(f"[global]\nindex-url = {MIRROR}\nextra-index-url = file:///a/simple file:///b/simple\n"
                        f"find-links = {tmp_path / 'wheels'}\ncert = {tmp_path / 'ca.pem'}\n", encoding="utf-8")
    command, env = pip_settings.uv_command(["pip", "sync", "requirements.txt"])
    assert command[:6] == [sys.executable, "-m", "uv", "pip", "sync", "requirements.txt"]
    assert " ".join(command[6:]) == (f"--index-url {MIRROR} --extra-index-url file:///a/simple --extra-index-url "
                                     f"file:///b/simple --find-links {tmp_path / 'wheels'} "
                                     "--index-strategy unsafe-best-match")
    assert env == {"SSL_CERT_FILE": str(tmp_path / "ca.pem")}


def test_a_pip_variable_wins_over_pip_conf_as_in_pip(pip_conf: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pip_conf.write_text("[global]\nindex-url = https://pypi.org/simple\n", encoding="utf-8")
    monkeypatch.setenv("PIP_INDEX_URL", MIRROR)
    command, _ = pip_settings.uv_command(["pip", "install", "-e", "."])
    assert command[7:] == ["--index-url", MIRROR]


def test_without_settings_uv_gets_none(pip_conf: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)  # pip then reads no configuration file at all
    command, env = pip_settings.uv_command(["pip", "sync", "requirements.txt"])
    assert command[3:] == ["pip", "sync", "requirements.txt"] and env == {}
