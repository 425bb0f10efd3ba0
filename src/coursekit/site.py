"""`coursekit site`: render the site with Quarto when it is installed, else build the no-Quarto preview.

Quarto: `quarto render --profile exercise` (-> _site/) then `--profile solution` (-> _site-solution/),
with QUARTO_PYTHON pointing at the project's virtualenv. Preview: `coursekit.preview` for both branches,
then a notice saying what was built and how to get the Quarto site.
`coursekit site --post-render` is the Quarto post-render hook (see _quarto.yml): it gives the rendered
site the runner's files, as the preview does.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

from coursekit import preview
from coursekit.errors import CourseError

PROFILES = ("exercise", "solution")
# What a Quarto render lacks that the preview has: the runner's files and its Pyodide copy.
POST_RENDER_STEPS = (preview.copy_site_assets, preview.add_runner)
PREVIEW_NOTICE = """\
note: this is the no-Quarto PREVIEW ({why}): the executed branch notebooks as HTML via
      nbconvert, with the Quarto site's paths.
        exercise site: {exercise}/index.html
        solution site: {solution}/index.html
      serve one with: {python} -m http.server --bind 127.0.0.1 --directory {exercise} 8000
      For the full Quarto site (navbar, sidebar, search, callouts), install Quarto
      (https://quarto.org/docs/get-started/) and run `make site` again; it then runs
      `quarto render --profile exercise` and `quarto render --profile solution`."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--preview", action="store_true", help="build the no-Quarto preview even if quarto is installed"
    )
    parser.add_argument(
        "--post-render", action="store_true",
        help="Quarto post-render hook: add the runner's files to $QUARTO_PROJECT_OUTPUT_DIR",
    )
    parser.add_argument("--root", type=Path, default=Path.cwd(), help="project root (default: current folder)")


def run(args: argparse.Namespace) -> int:
    root = args.root.resolve()
    if args.preview and args.post_render:
        raise CourseError("--preview and --post-render exclude each other; pick one")
    if args.post_render:
        return post_render(root, os.environ)
    quarto = None if args.preview else shutil.which("quarto")
    if quarto:
        return render_quarto(root, quarto)
    sites = {name: preview.build_preview(root, name) for name in PROFILES}
    why = "--preview given" if args.preview else "quarto is not on PATH"
    paths = {k: v.relative_to(root) for k, v in sites.items()}
    print(PREVIEW_NOTICE.format(why=why, python=sys.executable, **paths))
    return 0


def render_quarto(root: Path, quarto: str) -> int:
    """Render every profile; stop at the first failure and return its exit status."""
    env = dict(os.environ, QUARTO_PYTHON=str(root / ".venv/bin/python"))
    for profile in PROFILES:
        print(f"quarto render --profile {profile}", flush=True)
        done = subprocess.run([quarto, "render", "--profile", profile], cwd=root, env=env, check=False)
        if done.returncode:
            print(f"error: quarto render --profile {profile} failed (exit {done.returncode})", file=sys.stderr)
            return done.returncode
    return 0


def post_render(root: Path, env: Mapping[str, str]) -> int:
    """Give a Quarto-rendered site what the preview's `add_runner` step gives the preview."""
    out = env.get("QUARTO_PROJECT_OUTPUT_DIR")
    if not out:
        raise CourseError("--post-render: QUARTO_PROJECT_OUTPUT_DIR is not set; it is meant to be run by quarto render")
    profile = env.get("QUARTO_PROFILE", PROFILES[0]).split(",")[0] or PROFILES[0]
    if profile not in preview.BRANCHES:
        raise CourseError(f"--post-render: QUARTO_PROFILE={profile!r}; expected one of {', '.join(PROFILES)}")
    site_dir = (root / out).resolve()
    build = preview.Build(root=root, branch=preview.BRANCHES[profile], site_dir=site_dir)
    for step in POST_RENDER_STEPS:
        step(build)
    return 0
