"""`coursekit bundle --lesson ID`: the student bundle, everything a student needs and nothing more.

`build/student/<slug>/` and `build/student/<slug>.zip` (one top folder, `<slug>/`) hold:
- `<slug>.ipynb`: the nbgrader release notebook (what `make grade` takes back; no solutions, no hidden tests);
- `check.py` + `bundle.json`: the self-check, the very checks of the page's Check (the visible part of
  each test cell, the given checks, the runner worker's Python helpers), with nothing but Python;
- `site/` + `site.py`: the exercise branch's offline preview (lesson, demo, runner, Pyodide, MathJax),
  served on 127.0.0.1 by the standard library;
- `lab.py` + `requirements-lab.txt`: JupyterLab on the student's copy `work/<slug>.ipynb`, in Chinese,
  without terminals or the news pop-up (it installs JupyterLab into the bundle's `.venv` if needed);
  `childproc.py` (a copy of `coursekit.childproc`) stops JupyterLab with it on Ctrl-C, SIGTERM or SIGHUP;
- `使用说明.md`: the one-page instructions.
Before writing the zip, every text file is scanned for the lesson's secrets (`coursekit.runner.secret_snippets`:
answer lines, hidden tests, reference answers); one found is a CourseError naming the file.
A rebuilt bundle keeps the student's `work/`, `.venv/` and `.jupyter/` (`KEEP`).
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import zipfile
from pathlib import Path

from coursekit import preview, runner
from coursekit.course_file import COURSE_FILE, LessonEntry, load_course, resolve_lesson
from coursekit.errors import CourseError
from coursekit.lesson import GIVEN_CHECKS_TITLE, GIVEN_CHECKS_VETO, given_checks, parse_lesson

OUT_DIR = Path("build/student")
STUDENT_FILES = Path(__file__).parent / "student"  # the bundle's scripts and its 使用说明 template
SCRIPTS = ("check.py", "lab.py", "site.py")
CHILDPROC = Path(__file__).parent / "childproc.py"  # lab.py's way of stopping JupyterLab with it
README = "使用说明.md"
KEEP = ("work", ".venv", ".jupyter")  # the student's own state in a bundle folder, never replaced or zipped
LAB_PACKAGES = ("jupyterlab", "jupyterlab-language-pack-zh-cn", "ipykernel")  # pinned from requirements.txt
HELPERS = re.compile(r"const PYTHON_HELPERS = String\.raw`(.*?)`;", re.S)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--lesson", default=None, help="lesson id of course.yml (default: the first lesson)")
    parser.add_argument("--root", type=Path, default=Path.cwd(), help="project root (default: current folder)")
    parser.add_argument("--out", type=Path, default=None, help=f"output folder (default: <root>/{OUT_DIR})")


def run(args: argparse.Namespace) -> int:
    root = args.root.resolve()
    entry = lesson_entry(root, args.lesson)
    folder = write_folder(root, entry, (args.out or root / OUT_DIR).resolve())
    archive = write_zip(folder)
    print(f"student bundle: {folder}\n                {archive}")
    return 0


def lesson_entry(root: Path, lesson: str | None) -> LessonEntry:
    """The course file's lesson `lesson` (id or slug), else its first lesson."""
    course = load_course(root / COURSE_FILE)
    return resolve_lesson(lesson, course) if lesson else course.first


def worker_helpers(root: Path) -> str:
    """The Python helpers of the runner's worker (`_course_check` and friends), as the page runs them."""
    source = root / "assets" / "runner" / "runner-worker.js"
    found = HELPERS.search(source.read_text(encoding="utf-8"))
    if not found:
        raise CourseError(f"{source}: no `const PYTHON_HELPERS = String.raw`...`;` block; restore it from git")
    return found[1]


def lab_requirements(root: Path) -> str:
    """requirements.txt's pins of LAB_PACKAGES (pip resolves their dependencies)."""
    pins = [line.strip() for line in (root / "requirements.txt").read_text(encoding="utf-8").splitlines()
            if line.split("==")[0].strip().lower().replace("_", "-") in LAB_PACKAGES]
    if len(pins) != len(LAB_PACKAGES):
        raise CourseError(f"{root / 'requirements.txt'}: expected exact pins of {', '.join(LAB_PACKAGES)}")
    return "\n".join(pins) + "\n"


def write_folder(root: Path, entry: LessonEntry, out: Path) -> Path:
    """Write the bundle folder `out/<slug>/` (keeping KEEP); return it."""
    release = root / entry.release_notebook
    if not release.is_file():
        raise CourseError(f"{entry.release_notebook}: missing; run `make release` first")
    lesson = parse_lesson(root / entry.source)
    folder = out / entry.slug
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.iterdir():
        if old.name not in KEEP:
            shutil.rmtree(old) if old.is_dir() and not old.is_symlink() else old.unlink()
    notebook = f"{entry.slug}.ipynb"
    shutil.copyfile(release, folder / notebook)
    config = {"lesson": entry.id, "title": entry.title, "notebook": notebook,
              "page": entry.branch_notebook("exercise").with_suffix(".html").as_posix(),
              "checks": runner.check_groups(lesson), "time_limit_s": runner.TIME_LIMIT_S,
              "given": {"title": GIVEN_CHECKS_TITLE, "lines": given_checks(lesson.blank_code),
                        "veto": GIVEN_CHECKS_VETO},
              "helpers": worker_helpers(root)}
    (folder / "bundle.json").write_text(json.dumps(config, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    for name in SCRIPTS:
        shutil.copyfile(STUDENT_FILES / name, folder / name)
    shutil.copyfile(CHILDPROC, folder / CHILDPROC.name)
    (folder / "requirements-lab.txt").write_text(lab_requirements(root), encoding="utf-8")
    readme = (STUDENT_FILES / README).read_text(encoding="utf-8")
    (folder / README).write_text(readme.format(title=entry.title, notebook=notebook),
                                 encoding="utf-8")
    preview.build_preview(root, "exercise", folder / "site", lesson=entry.id, notice=None)  # no maintainer's banner
    if found := find_secrets(folder, lesson):
        path, snippet = found[0]
        raise CourseError(f"{path}: the student bundle would hold '{snippet}' (an answer or a hidden test); "
                          "rerun `make release` so the release notebook holds no solutions")
    return folder


def bundle_files(folder: Path) -> list[Path]:
    """The bundle's files (relative to `folder`), the student's own state (KEEP) left out."""
    return sorted(p.relative_to(folder) for p in folder.rglob("*")
                  if p.is_file() and p.relative_to(folder).parts[0] not in KEEP)


def find_secrets(folder: Path, lesson) -> list[tuple[Path, str]]:
    """(file, snippet) for each of the lesson's secrets found in a text file of the bundle."""
    secrets = runner.secret_snippets(lesson)
    found = []
    for rel in bundle_files(folder):
        try:
            text = (folder / rel).read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue  # wasm, images, zipped standard library
        found += [(folder / rel, s) for s in secrets if s in text]
    return found


def write_zip(folder: Path) -> Path:
    """`<folder>.zip` with the bundle's files under one top folder named like `folder`; return it."""
    archive = folder.with_suffix(".zip")
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as zf:
        for rel in bundle_files(folder):
            zf.write(folder / rel, (Path(folder.name) / rel).as_posix())
    return archive
