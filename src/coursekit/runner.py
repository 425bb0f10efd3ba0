"""The in-browser runner's files for a built site: its JSON config, its JS/CSS and Pyodide's files.

The runner (`assets/runner/runner.js`) turns the exercise cell of the page into an editor with Run and
Check buttons; Python runs in a web worker through Pyodide served from the site itself. It reads the
page's lesson config, `<site>/assets/runner/runner-config-<slug>.json` (`config_name`; the page's
script tag names it in data-runner-config), which `write_config` builds from:

- the lesson: the starter code (`lesson.blank_code`) and the check groups (`Lesson.visible_checks`:
  the visible part of each test cell, the very asserts the autograder's visible tests run, and its
  `own_run` names, the variables whose points depend on the student's own run);
- the exercise's given checks (`coursekit.lesson.given_checks`): Check names each one the student's
  code no longer holds, since the grader vetoes that;
- the grader's student-id rule (`coursekit.grading.intake.ingest.STUDENT_ID`), so the page validates the
  id the download is named after exactly as `make grade` will;
- the nbgrader release notebook, which the "download notebook" button hands back with the editor's
  code as the source of the exercise cell (the lesson's grade id, e.g. `group_advantages`) and the
  page's written answers (e.g. explanation, Q1-Q3, typed in text boxes under each answer area) after
  the prompt of their cells; every other cell and all metadata stay as released.

Hints are not in the config: the page's own hint widget (nested `<details class="course-hint">`,
written by `coursekit branches`) is the only one, and runner.js keeps its state.
The exercise config must hold no answer and no hidden test; `write_config` refuses to write one that does.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from coursekit.course_file import resolve_lesson
from coursekit.errors import CourseError
from coursekit.grading.intake.ingest import STUDENT_ID
from coursekit.lesson import GIVEN_CHECKS_TITLE, GIVEN_CHECKS_VETO, Lesson, given_checks, parse_lesson

RUNNER_SOURCE = Path(__file__).resolve().parents[2] / "assets" / "runner"
# Copied to <site>/assets/runner/; editor.js is the CodeMirror bundle (`make editor`, committed).
RUNNER_FILES = ("runner.js", "runner-worker.js", "runner.css", "editor.js")
CONFIG_NAME = "runner-config.json"  # runner.js's default when the tag names no config
PYODIDE_SOURCE = Path("node_modules/pyodide")
# What the worker loads from <site>/assets/pyodide/ (the interpreter, its standard library and the
# package lock file loadPyodide reads); no other file of the npm package is requested.
PYODIDE_FILES = ("pyodide.mjs", "pyodide.asm.mjs", "pyodide.asm.wasm", "python_stdlib.zip", "pyodide-lock.json")
BRANCHES = ("exercise", "solution")
TIME_LIMIT_S = 10.0
HIDDEN_MARKERS = ("### BEGIN HIDDEN TESTS", "### END HIDDEN TESTS", "### BEGIN SOLUTION", "### END SOLUTION")
# STUDENT_ID in words, shown beside the 学号 field.
STUDENT_ID_RULE = "1–64 个字符：英文字母、数字和 _ . -，以字母或数字开头（不要写姓名或空格），例如 2024001"


def config_name(slug: str) -> str:
    """The file name of one lesson's config in `<site>/assets/runner/`."""
    return f"runner-config-{slug}.json"


def boot_script(root: str, pyodide_url: str | None = None, config: str | None = None) -> str:
    """The inline script that starts the runner's worker, and with it Pyodide, at once: `head_tags`'s first tag,
    and the whole boot of the bench's blank page (bench/bench_runner.py). It leaves `window.courseRunnerWorker`
    (the URL, the worker and the events it got meanwhile) for runner.js to adopt. Arguments as `head_tags`'s."""
    boot = (f'{{type: "boot", configURL: at({json.dumps(root + "assets/runner/" + (config or CONFIG_NAME))}), '
            f'indexURL: at({json.dumps(pyodide_url or root + "assets/pyodide/")})}}')
    return (
        "<script>(() => { /* the runner's worker, started before runner.js is fetched (runner.js adopts it) */\n"
        "  const at = (path) => new URL(path, location.href).href;\n"
        f"  const boot = {boot};\n"
        f"  const url = at({json.dumps(root + 'assets/runner/runner-worker.js')}) + "
        '"#" + encodeURIComponent(JSON.stringify(boot));\n'
        '  const worker = new Worker(url, { type: "module" });\n'
        "  const events = [];\n"
        "  worker.onmessage = worker.onerror = (event) => { events.push(event); };\n"
        "  window.courseRunnerWorker = { url, worker, events };\n"
        "})();</script>\n")


def head_tags(root: str, pyodide_url: str | None = None, config: str | None = None) -> str:
    """The tags a page needs to load the runner; `root` is the page's relative path to the site root,
    `config` the config's name in assets/runner/ (default: runner.js's, CONFIG_NAME; runner.js resolves
    data-runner-config against the site root, not the page).

    Meant to be the first thing in `<head>`. `boot_script` starts the worker, and with it
    Pyodide, at once. runner.js adopts it (`window.courseRunnerWorker`, with the events it got
    meanwhile) when it was started from the URL runner.js would use, else ends it and starts its own.
    The worker then starts while the parser waits for runner.js instead of after it, when the
    parser's long tasks (the page's ~280 KB of inline CSS, its first layout) hold up the main thread
    the worker's start needs. runner.js is a classic (blocking) script: `async` let those tasks
    delay the worker by up to a second. The stylesheet comes after it so the script does not wait
    for it. `pyodide_url` (default: the site's own `assets/pyodide/`) may name another folder, e.g. a
    CDN's `https://cdn.jsdelivr.net/pyodide/v314.0.8/full/`.
    """
    extra = f' data-pyodide-url="{pyodide_url}"' if pyodide_url else ""
    extra += f' data-runner-config="assets/runner/{config}"' if config else ""
    return (boot_script(root, pyodide_url, config)
            + f'<script src="{root}assets/runner/runner.js" data-runner-root="{root}"{extra}></script>\n'
            f'<link rel="stylesheet" href="{root}assets/runner/runner.css">\n')


def read_release_notebook(path: Path, answer_grade_id: str) -> dict:
    """The nbgrader release notebook as JSON, checked to hold the answer cell (`answer_grade_id`, the
    lesson's exercise cell) the runner fills in."""
    try:
        nb = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CourseError(f"{path}: release notebook not found; run 'make release' first") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CourseError(f"{path}: cannot read the release notebook ({exc}); rerun 'make release'") from None
    ids = [c.get("metadata", {}).get("nbgrader", {}).get("grade_id") for c in nb.get("cells", [])]
    if ids.count(answer_grade_id) != 1:
        raise CourseError(f"{path}: expected one cell with nbgrader grade_id '{answer_grade_id}', found "
                          f"{ids.count(answer_grade_id)}; rerun 'make release'")
    return nb


def check_groups(lesson: Lesson) -> list[dict]:
    """One group per test cell (`Lesson.visible_checks`): id, Chinese title, points, visible asserts, own_run."""
    return [{"id": c.id, "title": c.title, "points": c.points, "code": c.code, "own_run": list(c.own_run)}
            for c in lesson.visible_checks()]


def answer_areas(lesson: Lesson, notebook: dict) -> list[dict]:
    """The written answers (explanation, Q1-Q3): grade id, title and the released prompt of each cell."""
    titles = {div.attrs["id"]: div.attrs.get("title", div.attrs["id"]) for div in lesson.answers()}
    areas = []
    for cell in notebook["cells"]:
        grade_id = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
        if cell["cell_type"] == "markdown" and grade_id in titles:
            source = cell["source"] if isinstance(cell["source"], str) else "".join(cell["source"])
            areas.append({"grade_id": grade_id, "title": titles[grade_id], "prompt": source.strip()})
    return areas


def build_config(lesson: Lesson, notebook: dict, branch: str, *, time_limit_s: float = TIME_LIMIT_S,
                 lesson_id: str | None = None) -> dict:
    """The runner's config for one branch of the site; `lesson_id` defaults to the lesson's course id."""
    if branch not in BRANCHES:
        raise CourseError(f"unknown branch '{branch}'; use one of: {', '.join(BRANCHES)}")
    return {
        "version": 2,
        "lesson_id": lesson_id or resolve_lesson(lesson.path).id,
        "branch": branch,
        "starter_code": lesson.blank_code,
        "checks": check_groups(lesson),
        "given_checks": {"title": GIVEN_CHECKS_TITLE, "lines": given_checks(lesson.blank_code),
                         "veto": GIVEN_CHECKS_VETO},
        "time_limit_s": time_limit_s,
        "student_id": {"pattern": STUDENT_ID.pattern, "rule": STUDENT_ID_RULE},
        "answer_grade_id": lesson.exercise_id,
        "answers": answer_areas(lesson, notebook),
        "notebook": notebook,
    }


def _strings(value) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def secret_snippets(lesson: Lesson) -> list[str]:
    """Text that must never reach the exercise site: answer lines, hidden tests, reference answers."""
    public = {line.strip() for line in lesson.blank_code.split("\n")}
    public |= {line.strip() for group in check_groups(lesson) for line in group["code"].split("\n")}
    secrets = [line.strip() for line in lesson.answer_lines] + list(HIDDEN_MARKERS)
    for cell in lesson.tests():
        hidden = cell.body.split("### BEGIN HIDDEN TESTS", 1)[-1].split("### END HIDDEN TESTS", 1)[0]
        secrets += [line.strip() for line in hidden.split("\n") if len(line.strip()) > 12]
    for div in lesson.reference_answers().values():
        secrets += [line.strip() for line in div.text_lines() if len(line.strip()) > 12][:1]
    shown = "\n".join([lesson.blank_code, *(group["code"] for group in check_groups(lesson))])
    return [s for s in secrets if s not in public and s not in shown]  # a reason the self-checks also give


def find_leaks(config: dict, lesson: Lesson) -> list[str]:
    """The secret snippets that occur anywhere in the config's strings."""
    text = "\n".join(_strings(config))
    return [s for s in secret_snippets(lesson) if s in text]


def write_config(site_dir: Path, branch: str, *, lesson_path: Path, release_path: Path,
                 time_limit_s: float = TIME_LIMIT_S, name: str = CONFIG_NAME, lesson_id: str | None = None) -> Path:
    """Write `<site_dir>/assets/runner/` (runner JS/CSS + editor, and the lesson's config as `name`) for
    `branch`; return the config path. `lesson_path`: the lesson source; `release_path`: its release notebook;
    `lesson_id`: its id in the course file (default: looked up in the default course file)."""
    lesson = parse_lesson(lesson_path)
    config = build_config(lesson, read_release_notebook(release_path, lesson.exercise_id), branch,
                          time_limit_s=time_limit_s, lesson_id=lesson_id)
    if branch == "exercise" and (leaks := find_leaks(config, lesson)):
        raise CourseError(f"{release_path}: the exercise site would show '{leaks[0]}' (an answer or a hidden "
                          "test); rerun 'make release' so the release notebook holds no solutions")
    out = _copy_files(RUNNER_FILES, RUNNER_SOURCE, Path(site_dir) / "assets" / "runner",
                      "runner file missing; restore assets/runner/ from git")
    path = out / name
    path.write_text(json.dumps(config, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    return path


def copy_pyodide(site_dir: Path, source: Path = PYODIDE_SOURCE) -> Path:
    """Copy PYODIDE_FILES from the npm package into `<site_dir>/assets/pyodide/`; return that folder."""
    return _copy_files(PYODIDE_FILES, source, Path(site_dir) / "assets" / "pyodide",
                       "Pyodide file missing; run 'npm ci' (package.json pins pyodide)")


def _copy_files(names: tuple[str, ...], source: Path, out: Path, if_missing: str) -> Path:
    """Copy `names` from `source` into `out` (created); a missing file is a CourseError naming it."""
    out.mkdir(parents=True, exist_ok=True)
    for name in names:
        if not (source / name).is_file():
            raise CourseError(f"{source / name}: {if_missing}")
        shutil.copyfile(source / name, out / name)
    return out
