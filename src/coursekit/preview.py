"""The no-Quarto preview: branch notebooks -> a static site with the Quarto site's paths.

One build per branch (exercise -> `_site/`, solution -> `_site-solution/`), each an ordered list of
small steps over a `Build`. Every script, style, font and image is served by the site itself
(MathJax and Mermaid from node_modules), so a page makes no request beyond its own origin.
The in-browser runner (assets/runner/ and coursekit.runner, owned by the runner work) hooks in at two
places, both only when `assets/runner/runner.js` exists: `page_head` (its tags on the lesson page) and
the `add_runner` step (Pyodide, its files and its per-branch config).
"""

from __future__ import annotations

import json
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

import nbformat
from bs4 import BeautifulSoup
from nbconvert import HTMLExporter

from coursekit.course_file import LessonEntry, load_course
from coursekit.errors import CourseError

TEMPLATE_DIR = Path(__file__).parent / "templates"
SITE_TITLE = "第 11 课：GRPO 与组内相对优势"
SITE_LANG = "zh-CN"  # <html lang>: Chinese glyph forms (not Japanese) for the CJK punctuation
NOTICE = "预览版：由 nbconvert 生成（未安装 Quarto）。完整站点请安装 Quarto 后运行 make site。"
MATHJAX = Path("node_modules/mathjax/es5")
MERMAID = Path("node_modules/mermaid/dist/mermaid.min.js")
PYODIDE = Path("node_modules/pyodide")
RUNNER_JS = Path("assets/runner/runner.js")
# assets/ folders copied as they are (the runner's files are copied by coursekit.runner).
SITE_ASSET_DIRS = ("assets/figs", "assets/site")
# MathJax's other combined bundles are never loaded by tex-chtml.js; everything else may be (fonts,
# TeX extensions the autoloader fetches, the menu's a11y parts).
MATHJAX_SKIP = re.compile(r"^[^/]+\.js$")


@dataclass(frozen=True)
class Page:
    """One notebook page: where it comes from and where it lands in the site."""

    source: Path  # notebook, relative to the project root
    target: str  # html path relative to the site root, as Quarto writes it
    nav_text: str


@dataclass(frozen=True)
class Branch:
    """One site: its profile name, output folder and lesson page."""

    name: str
    out_dir: str
    lesson: Page


def lesson_page(entry: LessonEntry, branch: str) -> Page:
    """A lesson's page in one branch's site, e.g. exercises/<slug>.html titled '<title>（练习）'."""
    source = entry.branch_notebook(branch)
    return Page(source, source.with_suffix(".html").as_posix(), f"{entry.title}（{BRANCH_TEXT[branch]}）")


BRANCH_TEXT = {"exercise": "练习", "solution": "参考答案"}
_LESSON = load_course().first  # the previewed lesson: the first of course.yml
DEMO = Page(_LESSON.demos[0].source, _LESSON.demos[0].target, _LESSON.demos[0].title)
BRANCHES = {
    "exercise": Branch("exercise", "_site", lesson_page(_LESSON, "exercise")),
    "solution": Branch("solution", "_site-solution", lesson_page(_LESSON, "solution")),
}
HOME = "index.html"
INDEX_QMD = Path("index.qmd")


@dataclass
class Build:
    """State shared by the steps of one preview build."""

    root: Path
    branch: Branch
    site_dir: Path
    written: list[str] = field(default_factory=list)  # html pages written, relative to site_dir

    @property
    def pages(self) -> tuple[Page, ...]:
        return (self.branch.lesson, DEMO)

    @property
    def has_runner(self) -> bool:
        return (self.root / RUNNER_JS).is_file()


def check_inputs(build: Build) -> None:
    """Fail before writing anything if a source is missing."""
    fixes = {
        build.branch.lesson.source: "run `make branches`",
        DEMO.source: "run `make demo` (or restore it from git)",
        INDEX_QMD: "restore it from git",
        MATHJAX / "tex-chtml.js": "run `make setup` (npm ci)",
        MERMAID: "run `make setup` (npm ci)",
    }
    if build.has_runner:
        fixes[import_runner().RELEASE_NOTEBOOK] = "run `make release` (the runner's config reads it)"
    for path, fix in fixes.items():
        if not (build.root / path).is_file():
            raise CourseError(f"{path}: missing; {fix}")


def copy_site_assets(build: Build) -> None:
    """Copy the figures and the site CSS/JS to the same paths in the site."""
    for rel in SITE_ASSET_DIRS:
        copy_tree(build.root / rel, build.site_dir / rel)


def copy_mathjax(build: Build) -> None:
    """Serve MathJax 3 (tex-chtml and what it loads lazily) from assets/vendor/mathjax."""
    copy_tree(build.root / MATHJAX, build.site_dir / "assets/vendor/mathjax", skip=MATHJAX_SKIP, keep="tex-chtml.js")


def copy_mermaid(build: Build) -> None:
    """Serve Mermaid's single-file bundle from assets/vendor/mermaid."""
    copy_file(build.root / MERMAID, build.site_dir / "assets/vendor/mermaid" / MERMAID.name)


def write_pages(build: Build) -> None:
    """Convert the lesson and demo notebooks (stored outputs, never executed) to HTML."""
    for page in build.pages:
        path = build.root / page.source
        try:
            nb = nbformat.read(path, as_version=4)
        except Exception as exc:  # nbformat raises several unrelated types for a broken file
            raise CourseError(f"{page.source}: not a readable notebook ({exc}); rebuild it") from exc
        nb.metadata.setdefault("title", notebook_title(nb, page))
        write_html(build, page.target, nb, runner=page is build.branch.lesson)


def write_home_page(build: Build) -> None:
    """index.html from index.qmd: this branch's `when-profile` blocks kept, .qmd links -> .html."""
    text = (build.root / INDEX_QMD).read_text(encoding="utf-8")
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell(home_markdown(text, build.branch.name))])
    nb.metadata["title"] = SITE_TITLE
    write_html(build, HOME, nb, runner=False)


def write_search_index(build: Build) -> None:
    """search.json for assets/site/site.js: one entry per section (h1–h3) of every written page, as plain
    text (formulas as their text), and `words`, the Chinese two-character words the query is split into."""
    entries = []
    for rel in build.written:
        soup = BeautifulSoup((build.site_dir / rel).read_text(encoding="utf-8"), "html.parser")
        entries.extend(page_sections(soup, rel))
    index = {"sections": entries, "words": cjk_bigrams(" ".join(e["section"] + " " + e["text"] for e in entries))}
    (build.site_dir / "search.json").write_text(json.dumps(index, ensure_ascii=False, indent=1), encoding="utf-8")


def add_runner(build: Build) -> None:
    """The runner hook: Pyodide into assets/pyodide/, the runner's files and this branch's config.

    Runs only when assets/runner/runner.js exists, and for the exercise site only: its lesson page
    carries the runner's tags (see `page_head`); the solution page has no exercise cell for it. All runner
    specifics live in coursekit.runner (the runner work owns it).
    """
    if not build.has_runner or build.branch.name != "exercise":
        return
    runner = import_runner()
    runner.copy_pyodide(build.site_dir, source=build.root / PYODIDE)
    runner.write_config(
        build.site_dir, build.branch.name,
        lesson_path=build.root / runner.LESSON, release_path=build.root / runner.RELEASE_NOTEBOOK,
    )


# Order matters: check before writing; pages before the home page only for a stable `written` order;
# the search index reads the written pages; the runner goes last so its config sees the final site.
PREVIEW_STEPS = (
    check_inputs,
    copy_site_assets,
    copy_mathjax,
    copy_mermaid,
    write_pages,
    write_home_page,
    write_search_index,
    add_runner,
)


def build_preview(root: Path, branch: str, site_dir: Path | None = None) -> Path:
    """Build one branch's preview site (default folder: the branch's Quarto output-dir); return it."""
    if branch not in BRANCHES:
        raise CourseError(f"unknown branch {branch!r}; choose one of {', '.join(BRANCHES)}")
    spec = BRANCHES[branch]
    build = Build(root=root, branch=spec, site_dir=site_dir or root / spec.out_dir)
    for step in PREVIEW_STEPS:
        step(build)
    return build.site_dir


# ---- helpers -----------------------------------------------------------------------------------

def write_html(build: Build, target: str, nb: nbformat.NotebookNode, runner: bool) -> None:
    """Render one notebook with the preview template to site_dir/target."""
    root = "../" * target.count("/")
    site = {"root": root, "title": SITE_TITLE, "branch": build.branch.name, "notice": NOTICE,
            "nav": nav_links(build, target, root)}
    exporter = HTMLExporter(
        template_name="lab", template_file="preview.html.j2", extra_template_paths=[str(TEMPLATE_DIR)]
    )
    html, _ = exporter.from_notebook_node(nb, resources={"site": site})
    html, found = re.subn(r'<html lang="[^"]*">', f'<html lang="{SITE_LANG}">', html, count=1)
    # The runner's tags open <head>: the parser reaches them before nbconvert's ~280 KB of inline CSS,
    # so the worker (and Pyodide) start that much sooner.
    html, found_head = re.subn(r'(<head>\s*<meta charset="utf-8"\s*/?>)', lambda m: m[1] + "\n" + page_head(
        build, root, runner), html, count=1)
    if not (found and found_head):
        raise CourseError(f"{TEMPLATE_DIR / 'preview.html.j2'}: the page has no <html lang=...> or <head><meta "
                          "charset> to set")
    out = build.site_dir / target
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(html, encoding="utf-8")
    build.written.append(target)


def page_head(build: Build, root: str, runner: bool) -> str:
    """Extra <head> tags for one page: the runner's, on the exercise site's lesson page only (the solution
    page shows the task as text, with no cell for the runner; the runner starts Pyodide before the page is
    parsed, so it must not be on a page without one)."""
    wanted = runner and build.has_runner and build.branch.name == "exercise"
    return import_runner().head_tags(root) if wanted else ""


def import_runner() -> ModuleType:
    """coursekit.runner, or a CourseError saying how to fix a half-installed runner."""
    try:
        from coursekit import runner
    except ImportError as exc:
        raise CourseError(
            f"{RUNNER_JS} exists but coursekit.runner does not import ({exc}); "
            "restore src/coursekit/runner.py or remove assets/runner/"
        ) from exc
    return runner


def notebook_title(nb: nbformat.NotebookNode, page: Page) -> str:
    """The text of the notebook's first level-1 heading (Quarto's page title), else the nav text."""
    for cell in nb.cells:
        if cell.cell_type == "markdown" and (m := re.search(r"^# (.+)$", cell.source, re.M)):
            return m[1].strip()
    return page.nav_text


def nav_links(build: Build, target: str, root: str) -> list[tuple[str, str, bool]]:
    """(href, text, is-current) for home, the lesson and the demo."""
    items = [(HOME, "首页"), (build.branch.lesson.target, build.branch.lesson.nav_text), (DEMO.target, DEMO.nav_text)]
    return [(root + href, text, href == target) for href, text in items]


_VISIBLE_DIV = re.compile(
    r'^:::+\s*\{\.content-(?P<kind>visible|hidden)\s+(?P<cond>when|unless)-profile="(?P<profile>[\w-]+)"\}\s*\n'
    r"(?P<body>.*?)^:::+\s*$\n?",
    re.M | re.S,
)
_QMD_LINK = re.compile(r"\]\((?P<path>[^)\s]+?)\.(?:qmd|ipynb)(?P<anchor>#[^)\s]*)?\)")


def home_markdown(qmd_text: str, profile: str) -> str:
    """index.qmd's body as plain markdown for one profile (front matter and other profiles dropped)."""
    body = re.sub(r"\A---\n.*?\n---\n", "", qmd_text, flags=re.S)

    def keep(match: re.Match[str]) -> str:
        matches = (match["profile"] == profile) == (match["cond"] == "when")
        shown = matches if match["kind"] == "visible" else not matches
        return match["body"] if shown else ""

    body = _VISIBLE_DIV.sub(keep, body)
    return _QMD_LINK.sub(lambda m: f"]({m['path']}.html{m['anchor'] or ''})", body)


_TEX_WORDS = {"pi": "π", "theta": "θ", "epsilon": "ε", "beta": "β", "sigma": "σ", "mu": "μ", "sim": "~",
              "times": "×", "dots": "…", "ldots": "…", "approx": "≈", "pm": "±", "sum": "∑", "parallel": "∥",
              "log": "log", "min": "min", "max": "max", "exp": "exp"}
_DISPLAY_MATH = re.compile(r"\$\$.*?\$\$|\\\[.*?\\\]", re.S)
_INLINE_MATH = re.compile(r"\$([^$]+)\$|\\\((.+?)\\\)", re.S)
_CJK_RUN = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]+")


def tex_to_text(tex: str) -> str:
    """A formula as plain text for the search index: `\\text{std}` -> std, `\\frac{a}{b}` -> a/b, `\\sigma` -> σ."""
    text = re.sub(r"\\frac\s*\{([^{}]*)\}\s*\{([^{}]*)\}", r"\1/\2", tex)
    text = re.sub(r"\\sqrt\s*\{([^{}]*)\}", r"√\1", text)
    text = re.sub(r"\\([A-Za-z]+)", lambda m: _TEX_WORDS.get(m[1], " "), text)
    text = re.sub(r"\\.|[{}_^&]", " ", text)
    return re.sub(r"\s+", " ", text).strip()


def plain_text(text: str) -> str:
    """Page text with display formulas dropped and inline formulas as their text."""
    text = _DISPLAY_MATH.sub(" ", text)
    text = _INLINE_MATH.sub(lambda m: tex_to_text(m[1] or m[2]), text)
    return re.sub(r"\s+", " ", text).strip()


def cjk_bigrams(text: str) -> list[str]:
    """Every two-character run of Chinese characters in `text`, sorted: the words a query is cut into."""
    return sorted({run[k:k + 2] for run in _CJK_RUN.findall(text) for k in range(len(run) - 1)})


def page_sections(soup: BeautifulSoup, href: str) -> list[dict[str, str]]:
    """Split a page's <main> into searchable sections at h1–h3 headings."""
    main = soup.find("main")
    title = soup.title.get_text(strip=True) if soup.title else href
    sections: list[dict[str, str]] = []
    current = {"href": href, "title": title, "section": title, "text": ""}
    for node in main.find_all(["h1", "h2", "h3", "p", "li", "pre", "td", "summary"]) if main else []:
        if node.name in ("h1", "h2", "h3"):
            sections.append(current)
            anchor = node.get("id", "")
            heading = node.get_text(" ", strip=True).rstrip("¶").strip()
            current = {"href": f"{href}#{anchor}" if anchor else href, "title": title, "section": heading, "text": ""}
        elif not node.find_parent(["li", "pre", "td"]) or node.name == "pre":
            current["text"] += " " + node.get_text(" ", strip=True)
    sections.append(current)
    return [s | {"text": plain_text(s["text"])} for s in sections if s["text"].strip() or s["section"] != title]


def copy_file(src: Path, dst: Path) -> None:
    """Copy one file unless dst already has the same size and a modification time at least src's."""
    if dst.is_file() and dst.stat().st_size == src.stat().st_size and dst.stat().st_mtime >= src.stat().st_mtime:
        return
    dst.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(src, dst)


def copy_tree(src: Path, dst: Path, skip: re.Pattern[str] | None = None, keep: str = "") -> None:
    """Copy a folder's files (paths matching `skip` left out, except `keep`); a missing src copies nothing."""
    if not src.is_dir():
        return
    for path in sorted(src.rglob("*")):
        rel = path.relative_to(src).as_posix()
        if path.is_file() and (skip is None or rel == keep or not skip.search(rel)):
            copy_file(path, dst / rel)
