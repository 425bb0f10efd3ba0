"""The Quarto project is correct by construction: Quarto cannot run here, so its config is checked as data.

Quarto merges a profile's `_quarto-<name>.yml` over `_quarto.yml` and concatenates lists, so every list
must live in the profile files only; each profile renders exactly the preview's pages into the preview's
folder, so the two renderings share paths.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from coursekit import preview

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
    assert html["html-math-method"] == "mathjax"
    assert (ROOT / html["css"]).is_file()


def test_base_config_holds_no_list_a_profile_would_be_merged_into() -> None:
    allowed = {"profile.group", "project.resources", "filters"}  # the same for both profiles by design
    assert set(lists_in(load("_quarto.yml"))) <= allowed


@pytest.mark.parametrize("name", list(preview.BRANCHES))
def test_each_profile_renders_the_preview_pages_into_the_preview_folder(name: str) -> None:
    branch = preview.BRANCHES[name]
    profile = load(f"_quarto-{name}.yml")
    assert profile["project"]["output-dir"] == branch.out_dir
    assert profile["project"]["render"] == [
        "index.qmd", branch.lesson.source.with_suffix(".qmd").as_posix(), preview.DEMO.source.as_posix()
    ]
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


def test_publish_workflow_renders_both_profiles_and_publishes_the_exercise_site() -> None:
    workflow = load(".github/workflows/publish.yml")
    steps = workflow["jobs"]["build-deploy"]["steps"]
    uses = [s.get("uses", "") for s in steps]
    assert "quarto-dev/quarto-actions/setup@v2" in uses
    renders = [s["env"]["QUARTO_PROFILE"] for s in steps if s.get("uses") == "quarto-dev/quarto-actions/render@v2"]
    assert renders == list(preview.BRANCHES)
    publish = next(s for s in steps if s.get("uses") == "quarto-dev/quarto-actions/publish@v2")
    assert publish["with"] == {"target": "gh-pages", "render": False}
    assert publish["env"]["QUARTO_PROFILE"] == "exercise"
    solution_copy = next(s for s in steps if "_site/solution" in s.get("run", ""))
    assert "publish_solution" in solution_copy["if"], "the solution site must be published only on request"
