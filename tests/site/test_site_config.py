"""The Quarto project is correct by construction: Quarto cannot run here, so its config is checked as data.

Quarto merges a profile's `_quarto-<name>.yml` over `_quarto.yml` and concatenates lists, so every list
must live in the profile files only; each profile renders exactly the preview's pages into the preview's
folder, so the two renderings share paths.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
import yaml

from coursekit import preview
from coursekit import site as site_cli

ROOT = Path(__file__).resolve().parents[2]


def load(name: str) -> dict:
    return yaml.safe_load((ROOT / name).read_text(encoding="utf-8"))


def lists_in(value: object, path: str = "") -> list[str]:
    if isinstance(value, list):
        return [path]
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in lists_in(v, f"{path}.{k}" if path else k)]
    return []


def test_base_config_is_a_website_with_freeze_search_math_and_the_course_css() -> None:
    base = load("_quarto.yml")
    assert base["project"]["type"] == "website"
    assert base["execute"]["freeze"] == "auto"
    assert base["profile"]["default"] == "exercise"
    assert base["profile"]["group"] == [["exercise", "solution"]]
    assert base["website"]["navbar"]["search"] is True
    html = base["format"]["html"]
    assert html["html-math-method"]["method"] == "mathjax"
    assert (ROOT / html["css"]).is_file()


def test_base_config_holds_no_list_a_profile_would_be_merged_into() -> None:
    allowed = {"profile.group", "project.resources", "filters", "format.html.theme"}  # the same for both profiles
    assert set(lists_in(load("_quarto.yml"))) <= allowed


@pytest.mark.parametrize("name", list(preview.BRANCHES))
def test_each_profile_renders_the_preview_pages_into_the_preview_folder(name: str) -> None:
    branch = preview.BRANCHES[name]
    profile = load(f"_quarto-{name}.yml")
    assert profile["project"]["output-dir"] == branch.out_dir
    build = preview.Build(ROOT, branch, ROOT / branch.out_dir)
    assert profile["project"]["render"] == [
        "index.qmd", *(page.source.with_suffix(".qmd").as_posix() if page.lesson else page.source.as_posix()
                       for page in build.pages)]
    for source in profile["project"]["render"]:
        assert (ROOT / source).is_file(), f"_quarto-{name}.yml renders {source}, which does not exist"
    rendered = set(profile["project"]["render"])
    for where in ("navbar", "sidebar"):
        items = profile["website"][where]["left" if where == "navbar" else "contents"]
        assert [i["href"] for i in items] == profile["project"]["render"], f"{where} of {name}"
    assert {i["href"] for i in profile["website"]["sidebar"]["contents"]} == rendered


def test_the_exercise_cell_is_not_executed_in_the_exercise_page() -> None:
    text = (ROOT / "exercises" / "lesson11_grpo.qmd").read_text(encoding="utf-8")
    cells = [c.split("```", 1)[0] for c in text.split("```{python}")[1:]]
    exercise = [c for c in cells if "______" in c]
    assert len(exercise) == 1, "expected one python cell with blanks in exercises/lesson11_grpo.qmd"
    options = [ln for ln in exercise[0].splitlines() if ln.startswith("#|")]
    assert "#| eval: false" in options, "the exercise page would run the unfilled exercise cell"


def test_runner_filter_is_wired_when_the_runner_ships_one() -> None:
    filters = load("_quarto.yml").get("filters", [])
    assert ((ROOT / "assets" / "runner" / "runner.lua").is_file()) == ("assets/runner/runner.lua" in filters)


def test_publish_workflow_renders_both_profiles_with_the_tested_quarto_and_its_checks() -> None:
    """make site (the off-host rules, then both profiles, each with the post-render checks) on the pinned
    Quarto; the checkout stays clean; the exercise site is published."""
    workflow = load(".github/workflows/publish.yml")
    steps = workflow["jobs"]["build-deploy"]["steps"]
    setup = next(s for s in steps if s.get("uses") == "quarto-dev/quarto-actions/setup@v2")
    assert str(setup["with"]["version"]) == site_cli.QUARTO_VERSION
    runs = [s.get("run", "") for s in steps]
    render = runs.index("make site")
    assert "git status --porcelain" in runs[render + 1]
    assert not any(s.get("uses") == "quarto-dev/quarto-actions/render@v2" for s in steps), "make site renders"
    publish = next(s for s in steps if s.get("uses") == "quarto-dev/quarto-actions/publish@v2")
    assert publish["with"] == {"target": "gh-pages", "render": False}
    assert publish["env"]["QUARTO_PROFILE"] == "exercise"
    solution_copy = next(s for s in steps if "_site/solution" in s.get("run", ""))
    assert "publish_solution" in solution_copy["if"], "the solution site must be published only on request"
    for doc in ("docs/site.md", "README.md"):
        assert f"Quarto {site_cli.QUARTO_VERSION}" in (ROOT / doc).read_text(encoding="utf-8"), doc


# ---- the rendered config, as Quarto merges it (profile over base, lists concatenated), per page

def merged(base: dict, over: dict) -> dict:
    """Quarto's merge of a profile (or page metadata) over the project config: maps merge, lists concatenate."""
    out = dict(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merged(out[key], value)
        elif isinstance(value, list) and isinstance(out.get(key), list):
            out[key] = out[key] + value
        else:
            out[key] = value
    return out


def front_matter(path: Path) -> dict:
    if path.suffix == ".ipynb":
        return {}
    return yaml.safe_load(path.read_text(encoding="utf-8").split("---\n", 2)[1]) or {}


def page_config(profile: str, source: str) -> dict:
    """The html format options one page is rendered with: project, profile, directory metadata, front matter."""
    config = merged(load("_quarto.yml"), load(f"_quarto-{profile}.yml"))
    html = config["format"]["html"] | {"lang": config["lang"]}
    folder = (ROOT / source).parent
    if (folder / "_metadata.yml").is_file() and folder != ROOT:
        html = merged(html, yaml.safe_load((folder / "_metadata.yml").read_text(encoding="utf-8"))["format"]["html"])
    page = front_matter(ROOT / source)
    return merged(html, {k: v for k, v in page.items() if k in ("html-math-method", "lang")})


RENDERED = [(p, s) for p in preview.BRANCHES for s in load(f"_quarto-{p}.yml")["project"]["render"]]


@pytest.mark.parametrize(("profile", "source"), RENDERED)
def test_every_page_loads_the_sites_own_mathjax_and_says_it_is_chinese(profile: str, source: str) -> None:
    """quarto.org docs/output-formats/html-basics#latex-equations: `html-math-method: {method, url}`."""
    html = page_config(profile, source)
    assert html["lang"] == "zh-Hans"
    math = html["html-math-method"]
    assert math["method"] == "mathjax"
    assert not re.match(r"(https?:)?//", math["url"]), "MathJax must come from the site itself"
    # the page lands at the same path under the output folder, where the post-render hook puts MathJax
    target = os.path.normpath(os.path.join(os.path.dirname(source), math["url"]))
    assert target == "assets/vendor/mathjax/tex-chtml.js", (source, math["url"])


def test_the_theme_fetches_no_web_font_and_uses_the_chinese_font_stack() -> None:
    """quarto.org docs/output-formats/html-themes: `theme: [cosmo, custom.scss]`, `/*-- scss:defaults --*/`."""
    theme = load("_quarto.yml")["format"]["html"]["theme"]
    assert theme[0] == "cosmo" and (ROOT / theme[1]).is_file()
    scss = (ROOT / theme[1]).read_text(encoding="utf-8")
    defaults = scss.split("/*-- scss:defaults --*/", 1)[1]
    assert re.search(r"^\$web-font-path: false;", defaults, re.M)
    assert '"Noto Sans CJK SC"' in defaults and "$font-family-sans-serif" in defaults
    assert "@import" not in scss and "url(" not in scss


def test_mathjax_options_make_the_quarto_pages_formulas_no_tab_stops() -> None:
    """The Quarto pages' MathJax options and typesetting order come from their include-in-header (the preview's
    pages load no MathJax: their formulas are typeset at build time, tests/site/test_site_preview.py)."""
    include = load("_quarto.yml")["format"]["html"]["include-in-header"]
    head = (ROOT / include).read_text(encoding="utf-8")
    assert re.search(r"menuOptions:\s*\{\s*settings:\s*\{\s*inTabOrder:\s*false", head)


def test_figure_resources_are_anchored_at_the_project_root() -> None:
    """`assets/figs/*.png` also matched `_site/assets/figs/*.png`, copying one site into the other."""
    assert load("_quarto.yml")["project"]["resources"] == ["/assets/figs/*.png"]


def test_post_render_is_the_deno_script_that_calls_coursekit() -> None:
    """quarto.org docs/projects/scripts: a `.ts` post-render script runs with the Deno embedded in Quarto."""
    hook = load("_quarto.yml")["project"]["post-render"]
    script = (ROOT / hook).read_text(encoding="utf-8")
    assert hook.endswith(".ts")
    assert '"-m", "coursekit", "site", "--post-render"' in script and "make site" in script


# pandoc's translation files for Chinese (jgm/pandoc data/translations/, at c8fb7b88): zh-Hans.yaml and
# zh-Hant.yaml; none for zh-CN or zh, so `lang: zh-CN` logged "Could not load translations for zh-CN" and
# "The term Abstract has no translation defined" on every page.
PANDOC_CHINESE_TRANSLATIONS = ("zh-Hans", "zh-Hant")


def test_lang_is_one_pandoc_and_quarto_have_chinese_translations_for() -> None:
    """pandoc loads data/translations/<lang>.yaml (Text.Pandoc.Translations), so a render with another
    Chinese tag warns on every page. Quarto reads _language-<subtag>.yml for each prefix of the tag
    (quarto-cli src/core/language.ts, readLanguageTranslations: "zh", then "zh-Hans"), so zh-Hans keeps
    Quarto's Chinese UI strings from src/resources/language/_language-zh.yml. Simplified forms: Hans."""
    lang = load("_quarto.yml")["lang"]
    assert lang in PANDOC_CHINESE_TRANSLATIONS and lang.endswith("Hans")
    for profile, source in RENDERED:
        assert page_config(profile, source)["lang"] == lang
    assert preview.SITE_LANG == lang, "the preview says the same language as the Quarto pages"


# quarto-cli src/project/project-gitignore.ts, ensureGitignore: every entry Quarto requires must be a line
# of .gitignore (trimmed, compared exactly), else Quarto rewrites the file with the missing ones appended.
# Quarto 1.10.18 requires these two (issue 22: a render appended `**/*.quarto_ipynb`).
QUARTO_GITIGNORE_ENTRIES = ("/.quarto/", "**/*.quarto_ipynb")
# What a render writes inside the project (besides the output folders): the scratch folder, the
# notebook a .qmd page is executed through, and freeze's results and libraries (issue 22 saw
# _freeze/site_libs/clipboard/clipboard.min.js).
RENDER_WRITES = (".quarto/idx/index.qmd.json", "index.quarto_ipynb", "exercises/lesson11_grpo.quarto_ipynb",
                 "solutions/lesson11_grpo.quarto_ipynb", "_freeze/solutions/lesson11_grpo/execute-results/html.json",
                 "_freeze/site_libs/clipboard/clipboard.min.js", "_site/index.html", "_site-solution/index.html")


def test_a_render_leaves_gitignore_and_git_status_as_they_were() -> None:
    lines = [line.strip() for line in (ROOT / ".gitignore").read_text(encoding="utf-8").splitlines()]
    assert [e for e in QUARTO_GITIGNORE_ENTRIES if e not in lines] == [], "Quarto would append these"
    if any(p.name.startswith("_") and p.name.endswith(".local") for p in ROOT.iterdir()):
        assert "/_*.local" in lines
    ignored = subprocess.run(["git", "check-ignore", "--no-index", *RENDER_WRITES], cwd=ROOT, capture_output=True,
                             text=True, check=False).stdout.split()
    assert sorted(ignored) == sorted(RENDER_WRITES), "not ignored: " + ", ".join(set(RENDER_WRITES) - set(ignored))


def test_freeze_policy_is_what_the_docs_say_ignored_and_not_committed() -> None:
    tracked = subprocess.run(["git", "ls-files", "_freeze"], cwd=ROOT, capture_output=True, text=True, check=True)
    assert tracked.stdout == ""
    docs = (ROOT / "docs" / "site.md").read_text(encoding="utf-8")
    assert "`_freeze/` is in `.gitignore`" in docs and "commit `_freeze/`" not in docs
    assert load("_quarto.yml")["execute"]["freeze"] == "auto"


def test_the_preview_note_says_what_the_readme_says_and_names_the_tested_quarto() -> None:
    """Issue 34: the note `make site` prints without Quarto lists the search box among what the preview has
    (README: "a search box and the in-browser runner"), not among what only Quarto gives, and names the
    Quarto version the site is tested on, as README does."""
    site = site_cli
    note = site.PREVIEW_NOTICE.format(why="quarto is not on PATH", python="python", exercise="_site",
                                      solution="_site-solution", quarto_version=site.QUARTO_VERSION)
    has, only_quarto = note.split("for\n      the full Quarto site", 1)
    assert "search box" in has and "search" not in only_quarto, note
    assert f"Quarto {site.QUARTO_VERSION}" in note and f"quarto-cli=={site.QUARTO_VERSION}" in note
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "a search box" in readme and f"**Quarto {site.QUARTO_VERSION}**" in readme
    assert "搜索" in preview.NOTICE.split("完整")[0] and f"Quarto {site.QUARTO_VERSION}" in preview.NOTICE  # the banner
