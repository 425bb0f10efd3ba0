"""The system packages `make` and `make test` need: found, else installed, else one line naming them.

    python3 src/coursekit/system.py setup|figures|test [--check]

`make` runs this before each stage (the `setup` stage before .venv exists, so: standard library only).
What a stage lacks is installed with `apt-get install` when running as root or with passwordless sudo
(one `apt-get update` first); Chromium can also come from Playwright's own download. Anything still
missing stops the stage with one line naming the packages, before any build step or test runs.
`--check` only looks and reports. The tests find Chromium and PostgreSQL through the same functions.
"""
from __future__ import annotations

import argparse
import glob
import importlib.util
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
STAGES = ("setup", "figures", "test")  # each stage needs its own packages and those of the stages before it
PYTHON_MIN = (3, 11)


def _number(text: str) -> int:
    """The integer in a version or revision folder name such as "15" or "chromium-1255"; 0 if none."""
    digits = text.rpartition("-")[2]
    return int(digits) if digits.isdigit() else 0


def _runs(command: list[str]) -> bool:
    """True when command exits 0 within 60 s (a stub such as Ubuntu's snap wrapper for chromium does not)."""
    try:
        return subprocess.run(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, timeout=60).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def find_npm() -> str | None:
    """npm on PATH, and it runs (it needs node)."""
    exe = shutil.which("npm")
    return exe if exe and _runs([exe, "--version"]) else None


def find_venv() -> str | None:
    """What `python3 -m venv` needs (ensurepip; Debian's python3-venv), unless .venv already exists."""
    if (ROOT / ".venv" / "bin" / "python").exists():
        return str(ROOT / ".venv")
    spec = importlib.util.find_spec("ensurepip")
    return spec.origin if spec else None


FONT_DIRS = ("/usr/share/fonts", "/usr/local/share/fonts", "~/.local/share/fonts", "~/.fonts")


def find_cjk_font() -> str | None:
    """A Noto Sans CJK font (the committed figures are drawn with it): fontconfig's list, else the font folders."""
    if shutil.which("fc-list"):
        listing = subprocess.run(["fc-list", ":", "family"], capture_output=True, text=True).stdout
        return next((line for line in listing.splitlines() if "Noto Sans CJK" in line), None)
    return next((path for folder in FONT_DIRS
                 for path in glob.glob(os.path.join(os.path.expanduser(folder), "**", "NotoSansCJK*"),
                                       recursive=True)), None)


def playwright_browsers() -> Path:
    """Where `playwright install` puts browsers on Linux."""
    if os.environ.get("PLAYWRIGHT_BROWSERS_PATH"):
        return Path(os.environ["PLAYWRIGHT_BROWSERS_PATH"])
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")
    return Path(cache) / "ms-playwright"


def find_chromium() -> str | None:
    """A Chromium that starts: Debian's `chromium` on PATH, else the newest Playwright-installed one."""
    on_path = [shutil.which(name) for name in ("chromium", "chromium-browser")]
    playwright = sorted(playwright_browsers().glob("chromium-*/chrome-linux*/chrome"),
                        key=lambda exe: _number(exe.parts[-3]), reverse=True)  # chromium-1255/chrome-linux64/chrome
    return next((str(exe) for exe in [*on_path, *playwright] if exe and _runs([str(exe), "--version"])), None)


def find_bwrap() -> str | None:
    """bubblewrap's `bwrap` on PATH (the grading sandbox)."""
    exe = shutil.which("bwrap")
    return exe if exe and _runs([exe, "--version"]) else None


def find_libseccomp() -> str | None:
    """libseccomp's shared library (pyseccomp builds the grading sandbox's seccomp filters with it)."""
    import ctypes.util

    return ctypes.util.find_library("seccomp")


POSTGRES_LIBDIR = "/usr/lib/postgresql"  # Debian: /usr/lib/postgresql/15/bin, not on PATH


def find_postgres_bindir() -> str | None:
    """The folder holding PostgreSQL's server programs initdb and pg_ctl: PATH, else Debian's versioned folder."""
    on_path = shutil.which("initdb")
    folders = [os.path.dirname(on_path)] if on_path else []
    folders += sorted(glob.glob(f"{POSTGRES_LIBDIR}/*/bin"), key=lambda f: _number(f.split("/")[-2]), reverse=True)
    return next((f for f in folders if all(os.access(os.path.join(f, p), os.X_OK) for p in ("initdb", "pg_ctl"))),
                None)


@dataclass(frozen=True)
class Need:
    """One thing a stage needs, how to find it, and the Debian package that provides it."""

    what: str
    package: str
    stage: str
    find: Callable[[], str | None]


# Every system package the project needs, in one place. `stage` is the first stage that needs it:
# setup = creating .venv and node_modules, figures = `make figures` (and so `make`), test = `make test`.
NEEDS = (
    Need("npm", "npm", "setup", find_npm),
    Need("Python venv (ensurepip)", "python3-venv", "setup", find_venv),
    Need("CJK fonts (Noto Sans CJK)", "fonts-noto-cjk", "figures", find_cjk_font),
    Need("Chromium", "chromium", "test", find_chromium),
    Need("bubblewrap (bwrap)", "bubblewrap", "test", find_bwrap),
    Need("libseccomp", "libseccomp2", "test", find_libseccomp),
    Need("PostgreSQL server (initdb, pg_ctl)", "postgresql", "test", find_postgres_bindir),
)


def needs(stage: str) -> list[Need]:
    """What stage needs: its own packages and those of the stages before it."""
    upto = STAGES[:STAGES.index(stage) + 1]
    return [need for need in NEEDS if need.stage in upto]


def missing(stage: str) -> list[Need]:
    """What stage needs and this machine lacks."""
    return [need for need in needs(stage) if need.find() is None]


def privilege() -> list[str] | None:
    """[] as root, ["sudo", "-n"] with passwordless sudo, None when packages cannot be installed."""
    if os.geteuid() == 0:
        return []
    if shutil.which("sudo") and _runs(["sudo", "-n", "true"]):
        return ["sudo", "-n"]
    return None


def _step(command: list[str]) -> bool:
    """Run an install step quietly; on failure print its last lines to stderr. True when it exited 0."""
    print(f"system: {' '.join(command)}", file=sys.stderr)
    try:
        done = subprocess.run(command, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=1800,
                              env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"})
    except (OSError, subprocess.TimeoutExpired) as exc:
        print(f"system: {command[0]}: {exc}", file=sys.stderr)
        return False
    if done.returncode:
        print("\n".join((done.stdout + done.stderr).strip().splitlines()[-5:]), file=sys.stderr)
    return done.returncode == 0


def apt_install(sudo: list[str], packages: list[str]) -> None:
    """apt-get update once, then install packages together (one by one if a name is unknown here)."""
    apt = [*sudo, "env", "DEBIAN_FRONTEND=noninteractive", "apt-get"] if sudo else ["apt-get"]  # sudo drops env
    _step([*apt, "update", "-qq"])
    if not _step([*apt, "install", "-y", "-qq", *packages]) and len(packages) > 1:
        for package in packages:
            _step([*apt, "install", "-y", "-qq", package])


def playwright_install(sudo: list[str] | None) -> None:
    """Playwright's own Chromium download (with its system libraries when packages can be installed)."""
    if importlib.util.find_spec("playwright") is not None:
        _step([sys.executable, "-m", "playwright", "install", *(["--with-deps"] if sudo is not None else []),
               "chromium"])


def install(lacking: list[Need]) -> None:
    """Install what is lacking: apt-get with privileges, then Playwright's Chromium if still without one."""
    sudo = privilege()
    if sudo is not None and shutil.which("apt-get"):
        apt_install(sudo, [need.package for need in lacking])
    if any(need.find is find_chromium for need in lacking) and find_chromium() is None:
        playwright_install(sudo)


def stop_line(lacking: list[Need]) -> str:
    """The one line printed when a stage cannot go on."""
    packages = " ".join(need.package for need in lacking)
    chromium = (" (or, for Chromium, `.venv/bin/python -m playwright install chromium`)"
                if any(need.find is find_chromium for need in lacking) else "")
    return (f"error: missing {', '.join(need.what for need in lacking)}: install with "
            f"`sudo apt-get install -y {packages}`{chromium}, or run make as root to have them installed")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 src/coursekit/system.py", description=__doc__.splitlines()[0])
    parser.add_argument("stage", choices=STAGES, help="setup (.venv, node_modules), figures (make), test (make test)")
    parser.add_argument("--check", action="store_true", help="only look: install nothing")
    args = parser.parse_args(argv)
    if sys.version_info < PYTHON_MIN:
        print(f"error: needs Python {'.'.join(map(str, PYTHON_MIN))} or newer; {sys.executable} is "
              f"{sys.version.split()[0]}", file=sys.stderr)
        return 1
    lacking = missing(args.stage)
    if lacking and not args.check:
        install(lacking)
        lacking = [need for need in lacking if need.find() is None]
    if lacking:
        print(stop_line(lacking), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
