"""Run uv with the package sources pip is set to use: its indexes, find-links and certificate.

    .venv/bin/python src/coursekit/pip_settings.py <uv arguments…>

`make`'s set-up installs the pins with uv (faster than pip), but uv reads no pip.conf: a mirror set for pip
(common in mainland China), a folder of local wheels or a company's certificate would be lost. This reads
pip's own settings with one `pip config list` (its PIP_* variables, as keys `:env:.name`, then pip.conf's
`global` and `install` sections, each already merged over pip's configuration files) and runs
`python -m uv <arguments>` with them as uv's options (`--index-url`, `--extra-index-url`, `--find-links`; with
extra indexes, pip's way of choosing among them: `--index-strategy unsafe-best-match`) and the certificate as
`SSL_CERT_FILE`. Standard library only: it runs before the kit is installed.
"""
from __future__ import annotations

import ast
import os
import subprocess
import sys

# pip's setting -> uv's option; each may hold several values (whitespace-separated, as in pip.conf)
OPTIONS = {"index-url": "--index-url", "extra-index-url": "--extra-index-url", "find-links": "--find-links"}


def pip_settings() -> dict[str, str]:
    """{key: value} as `pip config list` prints them (`global.index-url`, `:env:.index-url`, ...)."""
    done = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True)
    pairs = (line.split("=", 1) for line in done.stdout.splitlines() if "=" in line)
    return {key: ast.literal_eval(value) for key, value in pairs}


def uv_command(args: list[str]) -> tuple[list[str], dict[str, str]]:
    """The uv command line and the environment changes that carry pip's settings."""
    found = pip_settings()

    def setting(name: str) -> str:  # pip's precedence: its variable, then pip.conf's install and global sections
        return next((found[k] for k in (f":env:.{name}", f"install.{name}", f"global.{name}") if k in found), "")

    options = []
    for name, option in OPTIONS.items():
        for value in setting(name).split():
            options += [option, value]
    if "--extra-index-url" in options:  # pip takes the best match over all its indexes; uv, the first that has it
        options += ["--index-strategy", "unsafe-best-match"]
    env = {}
    cert = setting("cert")
    if cert and "SSL_CERT_FILE" not in os.environ:
        env["SSL_CERT_FILE"] = cert
    return [sys.executable, "-m", "uv", *args, *options], env


def main(argv: list[str]) -> int:
    command, env = uv_command(argv)
    return subprocess.run(command, env={**os.environ, **env}).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
