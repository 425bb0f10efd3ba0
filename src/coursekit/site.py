"""`coursekit site`: render the site with Quarto when it is installed, else build the no-Quarto preview.

Quarto: `quarto render --profile exercise` (-> _site/) then `--profile solution` (-> _site-solution/),
with QUARTO_PYTHON pointing at the project's virtualenv. Preview: `coursekit.preview` for both branches,
then a notice saying what was built and how to get the Quarto site.
`coursekit site --post-render` is the Quarto post-render hook (run by assets/site/post-render.ts, see
_quarto.yml): it gives the rendered site the runner's files, as the preview has them, and MathJax, and keeps
the site self-hosted: it drops the one CDN script Quarto's HTML template adds with MathJax (a polyfill)
and fails if any page still loads a script, style, font or image from another host, naming the page, the
URL, the output or line of the page's source that makes Quarto add it, and the fix (coursekit.quarto_rules).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

from coursekit import preview, quarto_rules
from coursekit.errors import CourseError

PROFILES = ("exercise", "solution")
QUARTO_VERSION = preview.QUARTO_VERSION  # the Quarto the site is tested against (publish.yml pins it)
# Quarto's template.html adds this before MathJax whatever its url (quarto-cli src/resources/formats/html/pandoc).
QUARTO_POLYFILL = re.compile(r'[ \t]*<script src="https://cdnjs\.cloudflare\.com/polyfill/[^"]*"></script>\n?')
HEAD_INCLUDE = "assets/site/quarto-head.html"  # where a site option could add a URL (the off-host error names them)
THEME = "assets/site/theme.scss"
# Tags whose URL the browser fetches by itself (links to read elsewhere, <a href>, are not requests).
FETCHED = re.compile(r'<(?:script|link|img|iframe|source|video|audio)\b[^>]*?\b(?:src|href)='
                     r'"(?P<url>(?:https?:)?//[^"]+)"', re.I)


def self_host(build: preview.Build) -> None:
    """Drop Quarto's polyfill script from every page; fail naming each page that still fetches from another
    host, the URL, the source output or line behind it (coursekit.quarto_rules) and the fix."""
    sources = page_sources(build)
    problems = []
    for page in sorted(build.site_dir.rglob("*.html")):
        text = page.read_text(encoding="utf-8")
        kept = QUARTO_POLYFILL.sub("", text)
        if kept != text:
            page.write_text(kept, encoding="utf-8")
        for url in dict.fromkeys(m["url"] for m in FETCHED.finditer(kept)):
            problems.append(off_host_problem(build, page.relative_to(build.site_dir).as_posix(), url, sources))
    if problems:
        raise CourseError("\n".join(problems))


def page_sources(build: preview.Build) -> dict[str, str]:
    """{page path in the site: the source Quarto renders it from} (a lesson page from its branch .qmd)."""
    pages = {p.target: (p.source.with_suffix(".qmd") if p.lesson else p.source).as_posix() for p in build.pages}
    return {preview.HOME: preview.INDEX_QMD.as_posix(), **pages}


def off_host_problem(build: preview.Build, page: str, url: str, sources: Mapping[str, str]) -> str:
    """One line: the page, the URL, what in the page's source makes Quarto add it, and the fix."""
    where = f"{build.site_dir / page}: loads {url} from another host"
    source = sources.get(page)
    if source is None:
        return f"{where}; the page is not one of the profile's pages (remove it from the output folder)"
    causes = quarto_rules.findings_for_url(build.root, source, url)
    if causes:
        return f"{where}; cause: " + " | ".join(quarto_rules.summary(causes))
    return (f"{where}; nothing in {source} names it, so a site option adds it: look for it in _quarto.yml, "
            f"_quarto-{build.branch.name}.yml, {HEAD_INCLUDE} and {THEME} and serve the file from assets/")


# What a Quarto render lacks: the runner's files and its Pyodide copy, MathJax (its pages typeset in the browser;
# the preview's at build time) and the lessons' neighbour links (previous/next); then the self-hosting check.
POST_RENDER_STEPS = (preview.copy_site_assets, preview.copy_mathjax, preview.link_neighbours, preview.add_runner,
                     self_host)
PREVIEW_NOTICE = """\
note: this is the no-Quarto PREVIEW ({why}): the executed branch notebooks as HTML via
      nbconvert, with the Quarto site's paths.
        exercise site: {exercise}/index.html
        solution site: {solution}/index.html
      serve one with: {python} -m http.server --bind 127.0.0.1 --directory {exercise} 8000
      The preview has the site's navigation, a search box, math, diagrams and the runner; for
      the full Quarto site (Quarto's layout, sidebar and callouts) install Quarto {quarto_version},
      the version the site is tested on (`{python} -m pip install quarto-cli=={quarto_version}`, or
      https://quarto.org/docs/get-started/), and run `make site` again; it then runs
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
    parser.add_argument("--lesson", default=None,
                        help="preview only this lesson of course.yml (id or slug; default: every lesson)")


def run(args: argparse.Namespace) -> int:
    root = args.root.resolve()
    if args.preview and args.post_render:
        raise CourseError("--preview and --post-render exclude each other; pick one")
    if args.post_render:
        return post_render(root, os.environ)
    quarto = None if args.preview else shutil.which("quarto")
    if quarto and args.lesson:
        raise CourseError("--lesson builds the no-Quarto preview of one lesson; Quarto renders every lesson "
                          "of course.yml (add --preview, or drop --lesson)")
    if quarto:
        return render_quarto(root, quarto)
    sites = {name: preview.build_preview(root, name, lesson=args.lesson) for name in PROFILES}
    why = "--preview given" if args.preview else "quarto is not on PATH"
    paths = {k: v.relative_to(root) for k, v in sites.items()}
    print(PREVIEW_NOTICE.format(why=why, python=sys.executable, quarto_version=QUARTO_VERSION, **paths))
    return 0


def render_quarto(root: Path, quarto: str) -> int:
    """Render every profile; stop at the first failure and return its exit status. First the sources are held
    to the rules that make Quarto add files from another host (coursekit.quarto_rules), so such a page
    fails here, named with its output and the fix, not after a render at the post-render check."""
    quarto_rules.check_project(root, PROFILES)
    env = dict(os.environ, QUARTO_PYTHON=str(root / ".venv/bin/python"))
    version = subprocess.run([quarto, "--version"], env=env, capture_output=True, text=True, check=False).stdout
    if version.strip() != QUARTO_VERSION:
        print(f"note: this is Quarto {version.strip() or '(no version)'}; the site is tested against Quarto "
              f"{QUARTO_VERSION}", flush=True)
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
    try:
        for step in POST_RENDER_STEPS:
            step(build)
    except CourseError as exc:  # each step's message names the file and its own fix
        raise CourseError(f"post-render ({profile}): {exc}") from None
    return 0
