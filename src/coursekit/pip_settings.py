"""Run uv with the package sources pip is set to use: its indexes, find-links and certificate.

    .venv/bin/python src/coursekit/pip_settings.py <uv arguments…>

`make`'s set-up installs the pins with uv (faster than pip), but uv reads no pip.conf: a mirror set for pip
(common in mainland China), a folder of local wheels or a company's certificate would be lost. This reads
pip's own settings (`pip config get`, which merges pip.conf and the PIP_* variables as pip does) and runs
`python -m uv <arguments>` with them as uv's options (`--index-url`, `--extra-index-url`, `--find-links`; with
extra indexes, pip's way of choosing among them: `--index-strategy unsafe-best-match`) and the certificate as
`SSL_CERT_FILE`. Standard library only: it runs before the kit is installed.
"""
from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable

# pip's setting -> uv's option; each may hold several values (whitespace-separated, as in pip.conf)
OPTIONS = {"index-url": "--index-url", "extra-index-url": "--extra-index-url", "find-links": "--find-links"}


def pip_setting(name: str) -> str:
    """pip's value of `name` (env PIP_NAME first, then `pip config get global.name`), "" when unset."""
    env = os.environ.get("PIP_" + name.upper().replace("-", "_"))
    if env:
        return env
    done = subprocess.run([sys.executable, "-m", "pip", "config", "get", f"global.{name}"],
                          capture_output=True, text=True)
    return done.stdout.strip() if done.returncode == 0 else ""


def uv_command(args: list[str], setting: Callable[[str], str] = pip_setting) -> tuple[list[str], dict[str, str]]:
    """The uv command line and the environment changes that carry pip's settings."""
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
