"""The no-Quarto preview: branch notebooks -> a static site with the Quarto site's paths.

One build per branch (exercise -> `_site/`, solution -> `_site-solution/`), each an ordered list of
small steps over a `Build`. A site holds every lesson of course.yml (or the one `--lesson` names) and
each lesson's demos, in course order; the navigation lists them as the Quarto profiles do
(coursekit.nav), and each lesson's previous/next links point at its neighbours in the course
(`link_neighbours`, also run on a Quarto-rendered site) or stay the source's plain text.
Every script, style, font and image is served by the site itself
(Mermaid from node_modules), so a page makes no request beyond its own origin.
The formulas are typeset at build time as SVG (`typeset_math`: MathJax in node, typeset_math.cjs), so a
page loads no MathJax and does no typesetting while the runner's Python starts; on the runner's page they are
drawn after its start (site.js), each in a box of its size meanwhile (issue 33).
The in-browser runner (assets/runner/ and coursekit.runner, owned by the runner work) hooks in at two
places, both only when `assets/runner/runner.js` exists: `page_head` (its tags on the lesson page) and
the `add_runner` step (Pyodide, its files and its per-branch config).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from types import ModuleType

import nbformat
import yaml
from bs4 import BeautifulSoup
from nbconvert import HTMLExporter

from coursekit.course_file import COURSE_FILE, CourseFile, LessonEntry, load_course
from coursekit.errors import CourseError
from coursekit.lesson import parse_lesson
from coursekit.nav import BRANCH_TEXT

TEMPLATE_DIR = Path(__file__).parent / "templates"
SITE_LANG = "zh-Hans"  # <html lang>, as _quarto.yml: Chinese (simplified) glyph forms, not Japanese
QUARTO_VERSION = "1.10.18"  # the Quarto the site is tested against (.github/workflows/publish.yml pins it)
NOTICE = (f"预览版：由 nbconvert 生成（未安装 Quarto），有导航、搜索、公式、图和代码运行器。完整的 Quarto 站点请安装 "
          f"Quarto {QUARTO_VERSION}（本站测试所用的版本）后运行 make site。")
MATHJAX = Path("node_modules/mathjax/es5")
# The preview's formulas typeset at build time as SVG by MathJax in node (one run for all pages of a site), and
# MathJax's stylesheet for them in the site (each page links it).
TYPESET_MATH = Path(__file__).parent / "typeset_math.cjs"
MATH_CSS = "assets/vendor/mathjax/typeset.css"
MAIN = re.compile(r"(?<=<main>)(.*)(?=</main>)", re.S)
WRAPPER_TAB_STOP = re.compile(r'(<div class="(?:jp-Cell-inputWrapper|[^"]*\bjp-OutputArea-output)"[^>]*?) tabindex="0"')
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
    lesson: LessonEntry | None = None  # the lesson whose branch page this is; None for a demo


@dataclass(frozen=True)
class Branch:
    """One site: its profile name and output folder."""

    name: str
    out_dir: str


def lesson_page(entry: LessonEntry, branch: str) -> Page:
    """A lesson's page in one branch's site, e.g. exercises/<slug>.html titled '<title>（练习）'."""
    source = entry.branch_notebook(branch)
    return Page(source, source.with_suffix(".html").as_posix(), f"{entry.title}（{BRANCH_TEXT[branch]}）", entry)


BRANCHES = {"exercise": Branch("exercise", "_site"), "solution": Branch("solution", "_site-solution")}
HOME = "index.html"
INDEX_QMD = Path("index.qmd")
# The lesson source's pagination (`::: {.course-pagination}`): one line per neighbour starting with its label.
PAGINATION = {"prev": "← 上一课", "next": "下一课 →"}


@dataclass
class Build:
    """State shared by the steps of one preview build: the site of `branch` for the lessons of the
    project's course file (all, or the one whose id or slug is `lesson`)."""

    root: Path
    branch: Branch
    site_dir: Path
    lesson: str | None = None
    notice: str | None = NOTICE  # the banner above each page; None: none (the student bundle's site)
    written: list[str] = field(default_factory=list)  # html pages written, relative to site_dir

    @cached_property
    def course(self) -> CourseFile:
        """The project's course file (`root/course.yml`, else the default one)."""
        return load_course(self.root / COURSE_FILE if (self.root / COURSE_FILE).is_file() else None)

    @property
    def lessons(self) -> tuple[LessonEntry, ...]:
        return self.course.select(self.lesson)

    @property
    def pages(self) -> tuple[Page, ...]:
        """Each lesson's page, then its demos, in course order."""
        return tuple(page for entry in self.lessons for page in (
            lesson_page(entry, self.branch.name), *(Page(d.source, d.target, d.title) for d in entry.demos)))

    @property
    def has_runner(self) -> bool:
        """The site carries the runner: it exists (RUNNER_JS) and this is the exercise site (a solution page shows
        the task as text, with no cell for it)."""
        return (self.root / RUNNER_JS).is_file() and self.branch.name == "exercise"

    @property
    def runner_pages(self) -> frozenset[str]:
        """The targets of the pages that carry the runner: the exercise site's lesson pages."""
        return frozenset(page.target for page in self.pages if page.lesson) if self.has_runner else frozenset()


def check_inputs(build: Build) -> None:
    """Fail before writing anything if a source is missing."""
    fixes = {page.source: "run `make branches`" if page.lesson else "run `make demo` (or restore it from git)"
             for page in build.pages}
    fixes |= {
        INDEX_QMD: "restore it from git",
        MATHJAX / "node-main.js": "run `make setup` (npm ci)",
        MERMAID: "run `make setup` (npm ci)",
    }
    if build.has_runner:
        fixes |= {entry.release_notebook: "run `make release` (the runner's config reads it)"
                  for entry in build.lessons}
    for path, fix in fixes.items():
        if not (build.root / path).is_file():
            raise CourseError(f"{path}: missing; {fix}")
    find_node()


def copy_site_assets(build: Build) -> None:
    """Copy the figures and the site CSS/JS to the same paths in the site."""
    for rel in SITE_ASSET_DIRS:
        copy_tree(build.root / rel, build.site_dir / rel)


def copy_mathjax(build: Build) -> None:
    """Serve MathJax 3 (tex-chtml and what it loads lazily) from assets/vendor/mathjax: a Quarto page's MathJax
    (coursekit.site's post-render; the preview's pages load none, their formulas are typeset at build time)."""
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
        write_html(build, page.target, nb, runner=page.lesson)


def write_home_page(build: Build) -> None:
    """index.html from index.qmd: this branch's `when-profile` blocks kept, .qmd links -> .html, and its
    title as the page's <h1> (Quarto's title block gives the Quarto home page one)."""
    text = (build.root / INDEX_QMD).read_text(encoding="utf-8")
    front = re.match(r"\A---\n(.*?)\n---\n", text, flags=re.S)
    title = (yaml.safe_load(front[1]) or {}).get("title") if front else None
    markdown = f"# {title or build.course.title}\n\n{home_markdown(text, build.branch.name)}"
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell(markdown)])
    nb.metadata["title"] = build.course.title
    write_html(build, HOME, nb, runner=None)


def write_search_index(build: Build) -> None:
    """search.json for assets/site/site.js: one entry per section (h1–h3) of every written page, as plain
    text (formulas as their text), and `words`, the Chinese two-character words the query is split into."""
    entries = []
    for rel in build.written:
        soup = BeautifulSoup((build.site_dir / rel).read_text(encoding="utf-8"), "html.parser")
        entries.extend(page_sections(soup, rel))
    index = {"sections": entries, "words": cjk_bigrams(" ".join(e["section"] + " " + e["text"] for e in entries))}
    (build.site_dir / "search.json").write_text(json.dumps(index, ensure_ascii=False, indent=1), encoding="utf-8")


def typeset_math(build: Build) -> None:
    """Every written page's formulas as MathJax's SVG with assistive MathML, typeset at build time: one run of
    TYPESET_MATH (MathJax in node) for the <main> of every page, which finds the TeX as MathJax in the page
    did (same delimiters, escapes, skipped tags and classes) and defines the glyphs each page uses once in it,
    and MathJax's stylesheet (MATH_CSS, each page links it). A page with the runner draws its formulas after
    its start (site.js: near the screen at once, the others once Python has started; typeset_math.cjs). A
    formula that is no valid TeX (or names an unknown macro) fails the build, naming it, and leaves every page
    as it was."""
    paths = [build.site_dir / rel for rel in build.written]
    pages = [path.read_text(encoding="utf-8") for path in paths]
    for path, html in zip(paths, pages, strict=True):
        if html.count("<main>") != 1 or html.count("</main>") != 1:
            raise CourseError(f"{path}: no single <main> to typeset the formulas of "
                              f"({TEMPLATE_DIR / 'preview.html.j2'})")
    done = subprocess.run([find_node(), str(TYPESET_MATH), str(build.root / MATHJAX)], capture_output=True, check=False,
                          input=json.dumps({
                              "pages": [MAIN.search(html)[0] for html in pages],
                              "drawnLater": [rel in build.runner_pages for rel in build.written]}).encode())
    if done.returncode != 0:
        first = (done.stderr.decode(errors="replace").strip().splitlines() or ["no message"])[0]
        raise CourseError(f"{TYPESET_MATH}: MathJax in node failed (exit {done.returncode}): {first}")
    typeset = json.loads(done.stdout)
    # the source a formula is written in: a lesson's .qmd (its branch notebooks are generated), a demo notebook
    sources = {page.target: page.lesson.source if page.lesson else page.source for page in build.pages}
    sources[HOME] = INDEX_QMD
    if typeset["errors"]:
        raise CourseError("\n".join(
            f"{sources.get(build.written[e['page']], build.written[e['page']])}: formula ${e['tex'].strip()}$ is "
            f"not valid TeX for MathJax: {e['message']}" for e in typeset["errors"]))
    css = build.site_dir / MATH_CSS
    css.parent.mkdir(parents=True, exist_ok=True)
    css.write_text(typeset["css"], encoding="utf-8")
    for path, html, main in zip(paths, pages, typeset["pages"], strict=True):
        path.write_text(MAIN.sub(lambda _m, main=main: main, html, count=1), encoding="utf-8")


def add_runner(build: Build) -> None:
    """The runner hook: Pyodide into assets/pyodide/, the runner's files and one config per lesson
    (`runner.config_name(slug)`, named by the lesson page's runner tag).

    Runs only when assets/runner/runner.js exists, and for the exercise site only: its lesson pages
    carry the runner's tags (see `page_head`); the solution pages have no exercise cell for it. All runner
    specifics live in coursekit.runner (the runner work owns it).
    """
    if not build.has_runner:
        return
    runner = import_runner()
    runner.copy_pyodide(build.site_dir, source=build.root / PYODIDE)
    for entry in build.lessons:
        runner.write_config(build.site_dir, build.branch.name, lesson_path=build.root / entry.source,
                            release_path=build.root / entry.release_notebook, name=runner.config_name(entry.slug),
                            lesson_id=entry.id)


def link_neighbours(build: Build) -> None:
    """Each lesson page's previous/next line (`PAGINATION`): a link to the neighbour lesson's page in
    this site when course.yml has that neighbour and the site holds its page, else the source's text.

    Works on the written HTML of both renderings: Quarto keeps the source's `.pagination-prev` /
    `.pagination-next` spans, a notebook page keeps each line as its <strong> label and the text after it.
    """
    built = {page.lesson.id: page for page in build.pages if page.lesson}
    for page in built.values():
        path = build.site_dir / page.target
        if not path.is_file():
            continue
        html = path.read_text(encoding="utf-8")
        soup = BeautifulSoup(html, "html.parser")
        changed = False
        for side, neighbour in zip(PAGINATION, build.course.neighbours(page.lesson), strict=True):
            target = built.get(neighbour.id) if neighbour else None
            if target is None:
                continue
            for line in _pagination_lines(soup, side):
                line[0].replace_with(_neighbour_link(soup, build, page, target, side))
                for node in line[1:]:
                    node.extract()
                changed = True
        if changed:
            path.write_text(str(soup), encoding="utf-8")


def _pagination_lines(soup: BeautifulSoup, side: str) -> list[list]:
    """The nodes of each `side` line of the page's pagination: a Quarto span, or in a notebook page the
    <strong> label and the text after it up to the next label or line break."""
    spans = soup.select(f"span.pagination-{side}")
    if spans:
        return [[span] for span in spans]
    lines = []
    for label in soup.find_all("strong", string=PAGINATION[side]):
        line = [label]
        for node in label.next_siblings:
            if getattr(node, "name", None) == "br" or (
                    getattr(node, "name", None) == "strong" and node.get_text() in PAGINATION.values()):
                break
            line.append(node)
        lines.append(line)
    return lines


def _neighbour_link(soup: BeautifulSoup, build: Build, page: Page, target: Page, side: str):
    """<a class="pagination-link pagination-prev" href="..."><strong>← 上一课</strong> 第 10 课：…</a>."""
    title = parse_lesson(build.root / target.lesson.source, build.course.sections).front_matter["title"]
    link = soup.new_tag("a", href="../" * page.target.count("/") + target.target)
    link["class"] = ["pagination-link", f"pagination-{side}"]
    label = soup.new_tag("strong")
    label.string = PAGINATION[side]
    link.append(label)
    link.append(f" {title}")
    return link


# Order matters: check before writing; pages before the home page only for a stable `written` order;
# the search index reads the written pages' TeX, so the formulas are typeset after it (and after the last
# step that re-writes a page); the runner goes last so its config sees the final site.
PREVIEW_STEPS = (
    check_inputs,
    copy_site_assets,
    copy_mermaid,
    write_pages,
    write_home_page,
    write_search_index,
    link_neighbours,
    typeset_math,
    add_runner,
)


def build_preview(root: Path, branch: str, site_dir: Path | None = None, lesson: str | None = None,
                  notice: str | None = NOTICE) -> Path:
    """Build one branch's preview site (default folder: the branch's Quarto output-dir) for every lesson
    of the course file, or for `lesson` (an id or slug) only, each page under `notice` (None: no banner);
    return the folder."""
    if branch not in BRANCHES:
        raise CourseError(f"unknown branch {branch!r}; choose one of {', '.join(BRANCHES)}")
    spec = BRANCHES[branch]
    build = Build(root=root, branch=spec, site_dir=site_dir or root / spec.out_dir, lesson=lesson, notice=notice)
    for step in PREVIEW_STEPS:
        step(build)
    return build.site_dir


# ---- helpers -----------------------------------------------------------------------------------

def write_html(build: Build, target: str, nb: nbformat.NotebookNode, runner: LessonEntry | None) -> None:
    """Render one notebook with the preview template to site_dir/target (`runner`: the lesson whose
    exercise the page's runner runs, None for a page without one)."""
    root = "../" * target.count("/")
    site = {"root": root, "title": build.course.title, "branch": build.branch.name, "notice": build.notice,
            "nav": nav_links(build, target, root), "math_css": MATH_CSS}
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
    # nbconvert makes every cell's input and output box a tab stop (~30 before the exercise): a box is one
    # only while it scrolls (site.js marks those), as in the Quarto pages.
    html = WRAPPER_TAB_STOP.sub(r"\1", html)
    out = build.site_dir / target
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(html, encoding="utf-8")
    build.written.append(target)


def page_head(build: Build, root: str, runner: LessonEntry | None) -> str:
    """Extra <head> tags for one page: the runner's with its lesson's config, on the exercise site's lesson
    pages only (a solution page shows the task as text, with no cell for the runner; the runner starts
    Pyodide before the page is parsed, so it must not be on a page without one)."""
    if runner is None or not build.has_runner:
        return ""
    module = import_runner()
    return module.head_tags(root, config=module.config_name(runner.slug))


def find_node() -> str:
    """The node executable that typesets the formulas, or a CourseError saying how to get it."""
    node = shutil.which("node")
    if node is None:
        raise CourseError(f"node: not found on PATH; the preview typesets its formulas with MathJax in node "
                          f"({TYPESET_MATH.name}): install Node.js 18 or later, as `make setup` does")
    return node


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
    """(href, text, is-current) for home, then each lesson and its demos (the Quarto navbar's items)."""
    items = [(HOME, "首页"), *((page.target, page.nav_text) for page in build.pages)]
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
