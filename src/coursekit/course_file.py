"""The course file (`course.yml`): the lessons in order and the lesson template.

    title:    the site's title
    lessons:  - id: lesson11, slug: lesson11_grpo, source: lessons/lesson11_grpo.qmd, title: 第 11 课,
                demos: [{source: lessons/lesson11_grpo_demo.ipynb, title: 演示, long_title: 演示：…}]
    template: sections: [本课目标与完成标准, ...], pass_score: 8   (a lesson entry may set its own pass_score)

Every other module takes lesson names and paths from here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import yaml

from coursekit.errors import CourseError

COURSE_FILE = Path("course.yml")
PACKAGE_ROOT = Path(__file__).resolve().parents[2]  # the checkout this package is installed from
_ID = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")
_LESSON_KEYS = {"id", "slug", "source", "title", "demos", "pass_score"}


@dataclass(frozen=True)
class Demo:
    """A demo notebook shown beside its lesson."""

    source: Path
    title: str  # the navbar's text
    long_title: str  # the sidebar's text

    @property
    def target(self) -> str:
        return self.source.with_suffix(".html").as_posix()


@dataclass(frozen=True)
class LessonEntry:
    """One lesson of the course and the paths derived from it (relative to the project root)."""

    id: str  # nbgrader assignment id and notebook name
    slug: str
    source: Path
    title: str
    demos: tuple[Demo, ...] = ()
    pass_score: float = 0.0  # points needed to pass (the lesson's own, else the template's)

    def branch_notebook(self, branch: str) -> Path:
        """exercises/<slug>.ipynb or solutions/<slug>.ipynb."""
        return Path(f"{branch}s") / f"{self.slug}.ipynb"

    @property
    def source_notebook(self) -> Path:
        return Path("autograder/source") / self.id / f"{self.id}.ipynb"

    @property
    def release_notebook(self) -> Path:
        return Path("autograder/release") / self.id / f"{self.id}.ipynb"


@dataclass(frozen=True)
class CourseFile:
    """The parsed course file."""

    path: Path
    title: str  # the site's title (_quarto.yml; the solution profile adds 参考答案版)
    lessons: tuple[LessonEntry, ...]
    sections: tuple[str, ...]

    @property
    def first(self) -> LessonEntry:
        return self.lessons[0]

    def lesson(self, name: str) -> LessonEntry:
        """The lesson whose id or slug is `name`."""
        for entry in self.lessons:
            if name in (entry.id, entry.slug):
                return entry
        raise CourseError(f"{self.path}: no lesson '{name}'; the lessons are "
                          + ", ".join(e.id for e in self.lessons))

    def select(self, name: str | None) -> tuple[LessonEntry, ...]:
        """One lesson by id or slug, or every lesson when `name` is None."""
        return self.lessons if name is None else (self.lesson(name),)

    def for_source(self, source: Path) -> LessonEntry | None:
        """The lesson whose source file is `source` (any spelling of the path), if any."""
        for entry in self.lessons:
            if source.name == entry.source.name and source.resolve() in (
                    entry.source.resolve(), (self.path.parent / entry.source).resolve()):
                return entry
        return None

    def neighbours(self, entry: LessonEntry) -> tuple[LessonEntry | None, LessonEntry | None]:
        """(previous, next) lesson in course order; None at either end."""
        k = self.lessons.index(entry)
        return (self.lessons[k - 1] if k else None, self.lessons[k + 1] if k + 1 < len(self.lessons) else None)


def load_course(path: Path | None = None) -> CourseFile:
    """Parse the course file: `path`, else ./course.yml, else the one of this checkout."""
    if path is None:
        path = COURSE_FILE if COURSE_FILE.is_file() else PACKAGE_ROOT / COURSE_FILE
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise CourseError(f"{path}: cannot read the course file ({exc.strerror})") from exc
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark else str(path)
        raise CourseError(f"{where}: not valid YAML ({getattr(exc, 'problem', None) or exc})") from exc
    if not isinstance(data, dict) or not isinstance(data.get("lessons"), list) or not data["lessons"]:
        raise CourseError(f"{path}: needs a non-empty 'lessons' list")
    if not isinstance(data.get("title"), str):
        raise CourseError(f"{path}: needs a 'title' (the site's title)")
    sections = (data.get("template") or {}).get("sections")
    if not isinstance(sections, list) or not all(isinstance(s, str) and s for s in sections):
        raise CourseError(f"{path}: 'template: sections:' must be a list of heading titles")
    pass_score = _pass_score(f"{path}: template", data["template"].get("pass_score"))
    lessons = tuple(_lesson(path, k, item, pass_score) for k, item in enumerate(data["lessons"], 1))
    for key in ("id", "slug"):
        seen = [getattr(e, key) for e in lessons]
        if dup := sorted({v for v in seen if seen.count(v) > 1}):
            raise CourseError(f"{path}: lesson {key} '{dup[0]}' is used twice")
    return CourseFile(path, data["title"], lessons, tuple(sections))


def _pass_score(where: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise CourseError(f"{where}: 'pass_score' must be a positive number of points, got {value!r}")
    return float(value)


def _lesson(path: Path, k: int, item: object, pass_score: float) -> LessonEntry:
    where = f"{path}: lesson {k}"
    if not isinstance(item, dict):
        raise CourseError(f"{where}: expected a mapping with id, slug, source, title")
    if missing := [key for key in ("id", "slug", "source", "title") if not isinstance(item.get(key), str)]:
        raise CourseError(f"{where}: missing or non-text '{missing[0]}'")
    if unknown := sorted(set(item) - _LESSON_KEYS):
        raise CourseError(f"{where}: unknown key '{unknown[0]}' (known: {', '.join(sorted(_LESSON_KEYS))})")
    if not _ID.match(item["id"]) or not _ID.match(item["slug"]):
        raise CourseError(f"{where}: id and slug must be letters, digits and _ (starting with a letter)")
    source = Path(item["source"])
    if source.suffix != ".qmd" or source.stem != item["slug"]:
        raise CourseError(f"{where}: source must be <folder>/{item['slug']}.qmd, got '{item['source']}'")
    demos = []
    for demo in item.get("demos") or []:
        if not isinstance(demo, dict) or not isinstance(demo.get("source"), str) \
                or not isinstance(demo.get("title"), str) or not demo["source"].endswith(".ipynb"):
            raise CourseError(f"{where}: each demo needs 'source' (an .ipynb) and 'title'")
        demos.append(Demo(Path(demo["source"]), demo["title"], str(demo.get("long_title") or demo["title"])))
    if "pass_score" in item:
        pass_score = _pass_score(where, item["pass_score"])
    return LessonEntry(item["id"], item["slug"], source, item["title"], tuple(demos), pass_score)


def resolve_lesson(value: str | Path, course: CourseFile | None = None) -> LessonEntry:
    """A `--lesson` value: a lesson id or slug of the course file, or the path of a lesson source.

    A source that is not in the course (a test fixture, a draft) gets its file name as id and slug.
    """
    course = course or load_course()
    text = str(value)
    if not text.endswith(".qmd"):
        return course.lesson(text)
    path = Path(value)
    entry = course.for_source(path)
    if entry is None:
        return LessonEntry(path.stem, path.stem, path, path.stem, pass_score=course.first.pass_score)
    return LessonEntry(entry.id, entry.slug, path, entry.title, entry.demos, entry.pass_score)
