"""The no-Quarto preview build: its files, its offline assets, no answers in the exercise site, the CLI."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from bs4 import BeautifulSoup

from coursekit import preview, runner
from coursekit import site as site_cli
from coursekit.cli import main
from coursekit.course_file import load_course
from coursekit.errors import CourseError
from coursekit.lesson import parse_lesson, visible_test_code

ROOT = Path(__file__).resolve().parents[2]
LESSON_11 = load_course(ROOT / "course.yml").lesson("lesson11")
LESSON = ROOT / LESSON_11.source
DEMO_TARGET = LESSON_11.demos[0].target
EXERCISE = LESSON_11.branch_notebook("exercise")
CJK_RUN = re.compile(r"[\u4e00-\u9fff，。、；：“”（）]{10,}")
VENDOR_DIRS = ("assets/vendor", "assets/pyodide")


def squash(text: str) -> str:
    """Whitespace removed, so HTML token spans and search-index spacing do not hide a match."""
    return re.sub(r"\s+", "", text)


def json_strings(value: object) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in json_strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in json_strings(v)]
    return []


def site_text(site: Path) -> str:
    """Every text the site serves outside the vendored libraries: page text, JSON strings, scripts."""
    parts = []
    for path in sorted(site.rglob("*")):
        rel = path.relative_to(site).as_posix()
        if not path.is_file() or rel.startswith(VENDOR_DIRS):
            continue
        if path.suffix == ".html":
            parts.append(BeautifulSoup(path.read_text(encoding="utf-8"), "html.parser").get_text(""))
        elif path.suffix == ".json":
            parts.extend(json_strings(json.loads(path.read_text(encoding="utf-8"))))
        elif path.suffix in (".js", ".css"):
            parts.append(path.read_text(encoding="utf-8"))
    return squash("\n".join(parts))


def secrets() -> dict[str, str]:
    """{what: snippet} that only the solution may show: answer lines, reference answers, hidden tests."""
    lesson = parse_lesson(LESSON)
    found = {f"answer line {i}": line.strip() for i, line in enumerate(lesson.answer_lines, 1)}
    for key, div in lesson.reference_answers().items():
        runs = CJK_RUN.findall("\n".join(div.text_lines()))
        found[f"reference answer {key}"] = max(runs, key=len)
    for cell in lesson.tests():
        visible = visible_test_code(cell.body)
        hidden = [ln.strip() for ln in cell.body.split("### BEGIN HIDDEN TESTS", 1)[1].splitlines()]
        found[f"hidden test {cell.options['test_id']}"] = next(
            ln for ln in hidden if len(ln) > 20 and ln not in visible and not ln.startswith("#")
        )
    return found


def test_preview_writes_the_quarto_site_paths(sites: dict[str, Path]) -> None:
    for name, site in sites.items():
        lesson_page = preview.lesson_page(LESSON_11, name).target
        for rel in ("index.html", lesson_page, DEMO_TARGET, "search.json",
                    "assets/site/site.css", "assets/site/site.js",
                    preview.MATH_CSS, "assets/vendor/mermaid/mermaid.min.js"):
            assert (site / rel).is_file(), f"{site.name}/{rel} missing"
        figures = sorted(p.name for p in (ROOT / "assets" / "figs").glob("*.png"))
        assert figures, "assets/figs has no figures; run `make figures`"
        assert figures == sorted(p.name for p in (site / "assets" / "figs").glob("*.png"))


def test_pages_load_scripts_styles_and_images_only_from_the_site(sites: dict[str, Path]) -> None:
    for site in sites.values():
        for page in site.rglob("*.html"):
            soup = BeautifulSoup(page.read_text(encoding="utf-8"), "html.parser")
            refs = [t.get("src") for t in soup.find_all(["script", "img", "iframe"])]
            refs += [t.get("href") for t in soup.find_all("link")]
            external = [r for r in refs if r and re.match(r"^(https?:)?//", r)]
            assert not external, f"{page.relative_to(site)} loads {external}"


def test_exercise_site_and_search_index_hold_no_answer_text(sites: dict[str, Path]) -> None:
    exercise, solution = site_text(sites["exercise"]), site_text(sites["solution"])
    for what, snippet in secrets().items():
        assert squash(snippet) not in exercise, f"exercise site shows the {what}: {snippet!r}"
        if not what.startswith("hidden test"):
            assert squash(snippet) in solution, f"solution site lacks the {what} (is the check blind?)"
    index = squash(" ".join(json_strings(json.loads((sites["exercise"] / "search.json").read_text("utf-8")))))
    assert "组内" in index, "the exercise search index is empty"
    for what, snippet in secrets().items():
        assert squash(snippet) not in index, f"exercise search index holds the {what}"


def test_search_index_points_at_sections_of_the_written_pages(sites: dict[str, Path]) -> None:
    entries = json.loads((sites["solution"] / "search.json").read_text(encoding="utf-8"))["sections"]
    pages = {e["href"].split("#")[0] for e in entries}
    assert pages == {"index.html", "solutions/lesson11_grpo.html", DEMO_TARGET}
    sections = {e["section"] for e in entries if e["href"].startswith("solutions/")}
    assert {"Q1", "Q2", "Q3"} <= sections


def test_search_index_is_plain_text_with_the_sites_chinese_words(sites: dict[str, Path]) -> None:
    index = json.loads((sites["exercise"] / "search.json").read_text(encoding="utf-8"))
    text = " ".join(e["section"] + " " + e["text"] for e in index["sections"])
    assert not re.search(r"\$|\\(text|frac|hat|sigma|mathbb)\b", text), "raw TeX in the search index"
    assert "Dr. GRPO" in text and "std" in text and "G" in text.split()
    assert {"组内", "优势", "方差"} <= set(index["words"])
    assert all(len(w) == 2 for w in index["words"])


def test_formulas_become_their_text() -> None:
    assert preview.tex_to_text(r"\text{std}(\{r_1, \dots, r_G\})") == "std ( r 1, …, r G )"
    assert preview.tex_to_text(r"\frac{2}{3} \approx 0.6667") == "2/3 ≈ 0.6667"
    assert preview.plain_text("看 $G$ 与 $$\\hat{A}_i = x$$ 完") == "看 G 与 完"


def test_home_markdown_keeps_one_profile_and_links_html() -> None:
    text = (ROOT / "index.qmd").read_text(encoding="utf-8")
    exercise, solution = preview.home_markdown(text, "exercise"), preview.home_markdown(text, "solution")
    assert "(exercises/lesson11_grpo.html)" in exercise and "solutions/" not in exercise
    assert "(solutions/lesson11_grpo.html)" in solution and "exercises/" not in solution
    assert "(lessons/lesson11_grpo_demo.html)" in exercise and ".qmd" not in exercise
    assert "title:" not in exercise and ":::" not in exercise


def test_missing_branch_notebook_names_the_file_and_the_fix(tmp_path: Path) -> None:
    (tmp_path / "index.qmd").write_text("---\ntitle: x\n---\n", encoding="utf-8")
    with pytest.raises(CourseError, match=r"exercises/lesson11_grpo\.ipynb: missing; run `make branches`"):
        preview.build_preview(tmp_path, "exercise", tmp_path / "out")
    assert not (tmp_path / "out").exists(), "a failed check must write nothing"


def test_without_node_the_preview_fails_in_one_line_and_writes_nothing(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no node here
    with pytest.raises(CourseError, match=r"^node: not found on PATH; the preview typesets its formulas") as error:
        preview.build_preview(ROOT, "exercise", tmp_path / "out")
    assert "\n" not in str(error.value)
    assert not (tmp_path / "out").exists(), "a failed check must write nothing"


def typeset_pages(site: Path, pages: dict[str, str]) -> preview.Build:
    """`pages` ({path in the site: html}) written into `site` as the preview writes them, then typeset."""
    build = preview.Build(root=ROOT, branch=preview.BRANCHES["exercise"], site_dir=site)
    for rel, html in pages.items():
        (site / rel).parent.mkdir(parents=True, exist_ok=True)
        (site / rel).write_text(html, encoding="utf-8")
        build.written.append(rel)
    preview.typeset_math(build)
    return build


def test_typeset_math_keeps_the_page_around_main_and_typesets_as_mathjax_in_the_page(tmp_path: Path) -> None:
    """Only <main> changes; TeX in code, in a tex2jax_ignore box and an escaped dollar stay text; `<` and `&`
    in a formula (a `cases` block) come out as MathML, not as escapes; each page defines the glyphs it draws;
    an inline formula's depth is on its box (which scrolls on a phone, site.css); one stylesheet."""
    head = '<html><head><script>var x = "$a$";</script></head><body><nav>$b$</nav><main>'
    pages = {"a.html": head + r"<p>if $\sigma<\epsilon$ then \(x\) costs \$5</p><pre>$y$</pre>"
                              r'<div class="tex2jax_ignore">$z$</div></main></body></html>',
             "b/c.html": head + r"<p>$$\begin{cases} 1 & x \ge 0 \\ 0 & x < 0 \end{cases}$$</p></main></body></html>"}
    typeset_pages(tmp_path, pages)
    a, c = ((tmp_path / rel).read_text(encoding="utf-8") for rel in pages)
    assert a.startswith(head) and a.endswith("</main></body></html>") and c.startswith(head)
    main = BeautifulSoup(a, "html.parser").main
    assert [m.get_text() for m in main.select("mjx-assistive-mml")] == ["σ<ϵ", "x"]
    assert "costs $5" in main.get_text() and main.pre.get_text() == "$y$" and "$z$" in main.div.get_text()
    cases = BeautifulSoup(c, "html.parser").main.select_one("mjx-container[display=true]")
    assert cases.select_one("mjx-assistive-mml").get_text() == "{1x≥00x<0"
    for html, glyph in ((a, "MJX-TEX-N-3C"), (c, "MJX-TEX-N-2265")):  # `<`, `≥`: drawn and defined in the page
        assert f'xlink:href="#{glyph}"' in html and f'id="{glyph}"' in html, glyph
    inline = main.select_one("mjx-container")
    assert "vertical-align: -" in inline["style"] and "vertical-align" not in inline.svg.get("style", "")
    css = (tmp_path / preview.MATH_CSS).read_text(encoding="utf-8")
    assert 'mjx-container[jax="SVG"]' in css


def test_a_runner_page_stores_its_formulas_svg_in_boxes_of_their_size(tmp_path: Path) -> None:
    """On the exercise lesson page (the runner's) each formula is a blank box of its SVG's size and vertical shift
    with its MathML beside it, the SVG in the page's store (JSON whose `<` are escaped, so no `</script>` in a
    formula ends the script), in order; an escaped dollar is no formula; another page draws every formula."""
    lesson = preview.lesson_page(LESSON_11, "exercise").target
    body = r"<p>\$1 $a$ $x&lt;y$</p><p>$$\frac{1}{2}$$ $c$</p><pre>$d$</pre>"
    build = typeset_pages(tmp_path, {lesson: f"<html><body><main>{body}</main></body></html>",
                                     "other.html": f"<html><body><main>{body}</main></body></html>"})
    assert lesson in build.runner_pages and "other.html" not in build.runner_pages
    main = BeautifulSoup((tmp_path / lesson).read_text(encoding="utf-8"), "html.parser").main
    assert [c.get_text() for c in main.select("mjx-container")] == ["a", "x<y", "12", "c"]
    assert not main.select("mjx-container > svg") and "$1" in main.get_text()
    blanks = main.select("mjx-container > mjx-blank")
    assert [b["data-formula"] for b in blanks] == ["0", "1", "2", "3"]
    assert all(b["aria-hidden"] == "true" for b in blanks)
    store = main.select_one("script#course-formula-svg[type='application/json']")
    assert "<" not in store.string
    svgs = [BeautifulSoup(svg, "html.parser").svg for svg in json.loads(store.string)]
    assert len(svgs) == 4 and all(svg is not None for svg in svgs)
    for blank, svg in zip(blanks, svgs, strict=True):
        style = blank["style"]
        assert f"width: {svg['width']}" in style and f"height: {svg['height']}" in style, (style, svg.attrs)
        assert ("vertical-align" in style) == ("vertical-align" in svg.get("style", "")), (style, svg.attrs)
    assert "vertical-align" in blanks[2]["style"], "the display formula's shift"
    assert 'xlink:href="#MJX-TEX-N-3C"' in str(svgs[1]) and main.find(id="MJX-TEX-N-3C")  # `<`: stored, defined
    other = BeautifulSoup((tmp_path / "other.html").read_text(encoding="utf-8"), "html.parser").main
    assert len(other.select("mjx-container > svg")) == 4 and not other.select("mjx-blank, script")


def test_a_formula_mathjax_cannot_read_fails_the_build_naming_it(tmp_path: Path) -> None:
    html = r"<html><body><main><p>$\frac{a}{b}$ and $\nosuchmacro{x}$</p></main></body></html>"
    with pytest.raises(CourseError, match=r"^x\.html: formula \$\\nosuchmacro\{x\}\$ is not valid TeX for MathJax: "
                                          r"Undefined control sequence \\nosuchmacro$"):
        typeset_pages(tmp_path, {"x.html": html})
    assert (tmp_path / "x.html").read_text(encoding="utf-8") == html, "the page must be left as it was"


def test_unknown_branch_lists_the_valid_ones(tmp_path: Path) -> None:
    with pytest.raises(CourseError, match="choose one of exercise, solution"):
        preview.build_preview(tmp_path, "teacher")


def test_site_without_quarto_builds_the_preview_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    calls = []
    monkeypatch.setattr(preview, "build_preview",
                        lambda root, name, lesson=None: calls.append(name) or root / f"_{name}")
    monkeypatch.setenv("PATH", str(tmp_path))  # no quarto here
    assert main(["site", "--root", str(ROOT)]) == 0
    assert calls == ["exercise", "solution"]
    out = capsys.readouterr().out
    assert "PREVIEW" in out and "install Quarto" in out and "quarto render --profile solution" in out


def test_site_with_quarto_renders_both_profiles_with_the_venv_python(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    record = tmp_path / "calls.txt"
    fake = tmp_path / "quarto"
    fake.write_text(f'#!/bin/sh\necho "$* QUARTO_PYTHON=$QUARTO_PYTHON" >> {record}\n', encoding="utf-8")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    assert main(["site", "--root", str(ROOT)]) == 0
    venv_python = ROOT / ".venv" / "bin" / "python"
    assert record.read_text().splitlines() == [
        f"--version QUARTO_PYTHON={venv_python}",  # compared with the tested version (a note if it differs)
        f"render --profile exercise QUARTO_PYTHON={venv_python}",
        f"render --profile solution QUARTO_PYTHON={venv_python}",
    ]


def test_a_failed_quarto_render_stops_with_its_exit_status(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = tmp_path / "quarto"
    fake.write_text("#!/bin/sh\nexit 3\n", encoding="utf-8")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    assert main(["site", "--root", str(ROOT)]) == 3


def test_post_render_outside_quarto_is_a_one_line_error(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("QUARTO_PROJECT_OUTPUT_DIR", raising=False)
    assert main(["site", "--post-render", "--root", str(ROOT)]) == 1
    assert capsys.readouterr().err.strip().splitlines() == [
        "error: --post-render: QUARTO_PROJECT_OUTPUT_DIR is not set; it is meant to be run by quarto render"
    ]


def test_post_render_gives_a_quarto_output_the_runner_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sites: dict[str, Path]
) -> None:
    """`sites` first: it makes sure the nbgrader release notebook the runner's config reads exists."""

    out = tmp_path / "_site"
    monkeypatch.setenv("QUARTO_PROJECT_OUTPUT_DIR", str(out))
    monkeypatch.setenv("QUARTO_PROFILE", "exercise")
    assert main(["site", "--post-render", "--root", str(ROOT)]) == 0
    config = json.loads((out / "assets" / "runner" / runner.config_name(LESSON_11.slug)).read_text(encoding="utf-8"))
    assert config["branch"] == "exercise"
    assert all((out / "assets" / "pyodide" / name).is_file() for name in runner.PYODIDE_FILES)
    assert (out / "assets" / "site" / "site.css").is_file()
    assert (out / "assets" / "vendor" / "mathjax" / "tex-chtml.js").is_file(), "the pages' html-math-method url"
    solution = tmp_path / "_site-solution"  # no exercise cell there: no runner, no Pyodide
    site_cli.post_render(ROOT, {"QUARTO_PROJECT_OUTPUT_DIR": str(solution), "QUARTO_PROFILE": "solution"})
    assert not (solution / "assets" / "pyodide").exists() and (solution / "assets" / "vendor" / "mathjax").is_dir()


QUARTO_HEAD = """<head>
<script src="../site_libs/quarto-nav/quarto-nav.js"></script>
  <script src="https://cdnjs.cloudflare.com/polyfill/v3/polyfill.min.js?features=es6"></script>
  <script src="../assets/vendor/mathjax/tex-chtml.js" type="text/javascript"></script>
</head><body><a href="https://arxiv.org/html/2402.03300v2">DeepSeekMath</a></body>"""


def test_post_render_drops_quartos_polyfill_and_keeps_links(tmp_path: Path, monkeypatch, sites) -> None:
    page = tmp_path / "_site" / "exercises" / "lesson11_grpo.html"
    page.parent.mkdir(parents=True)
    page.write_text(QUARTO_HEAD, encoding="utf-8")
    site_cli.post_render(ROOT, {"QUARTO_PROJECT_OUTPUT_DIR": str(tmp_path / "_site"), "QUARTO_PROFILE": "exercise"})
    text = page.read_text(encoding="utf-8")
    assert "polyfill" not in text and "cdnjs" not in text
    assert '<script src="../assets/vendor/mathjax/tex-chtml.js"' in text and "https://arxiv.org" in text


def test_post_render_fails_on_a_page_that_fetches_from_another_host(tmp_path: Path, sites) -> None:
    page = tmp_path / "_site" / "index.html"
    page.parent.mkdir(parents=True)
    page.write_text('<link href="https://fonts.googleapis.com/css2?family=Source+Sans+Pro" rel="stylesheet">',
                    encoding="utf-8")
    with pytest.raises(CourseError, match=r"index\.html: loads https://fonts\.googleapis\.com/\S+ from another host"):
        site_cli.post_render(ROOT, {"QUARTO_PROJECT_OUTPUT_DIR": str(tmp_path / "_site"), "QUARTO_PROFILE": "exercise"})


def test_post_render_in_a_fresh_clone_names_the_missing_release_and_its_fix(tmp_path: Path, capsys,
                                                                          monkeypatch) -> None:
    """No release notebook yet (a fresh clone after `make setup`): one line naming it and the command that
    makes it; no generic advice (`make site` is what the maintainer just ran)."""
    for name in ("index.qmd", "exercises", "lessons", "assets", "node_modules"):
        (tmp_path / name).symlink_to(ROOT / name)
    monkeypatch.setenv("QUARTO_PROJECT_OUTPUT_DIR", "_site")
    monkeypatch.setenv("QUARTO_PROFILE", "exercise")
    assert main(["site", "--post-render", "--root", str(tmp_path)]) == 1
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert re.fullmatch(r"error: post-render \(exercise\): \S+/autograder/release/\S+\.ipynb: release notebook "
                        r"not found; run 'make release' first", line), line
    assert "make site" not in line


def test_post_render_rejects_an_unknown_profile(tmp_path: Path) -> None:
    env = {"QUARTO_PROJECT_OUTPUT_DIR": str(tmp_path), "QUARTO_PROFILE": "teacher"}
    with pytest.raises(CourseError, match="QUARTO_PROFILE='teacher'; expected one of exercise, solution"):
        site_cli.post_render(ROOT, env)
