"""The lesson's errata: each wrong statement of the author's page is corrected in place and keeps a
visible "勘误" callout (one sentence of evidence and the paper section), docs/errata.md lists the same
corrections with their sources, and every note reaches the branch that shows the statement.

The callouts are Pandoc fenced divs (``::: {.callout-warning title="勘误：…" erratum="<id>"}``). Quarto
makes a callout of a div with class ``callout-warning`` and takes its title from the ``title``
attribute, keeping the other attributes on the rendered div (quarto-dev/quarto-cli @ 0102a0f1,
src/resources/filters/customnodes/callout.lua: ``_quarto.ast.add_handler`` ``class_name`` list and
``parse``: ``markdownToInlines(div.attr.attributes["title"])``, ``attr = old_attr``); coursekit.branches
turns it into a titled blockquote in the notebooks (``_NotebookBuilder.callout``).
"""
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LESSON = ROOT / "lessons" / "lesson11_grpo.qmd"
ERRATA = ROOT / "docs" / "errata.md"
PAPERS = {"DeepSeekMath": "2402.03300", "Dr. GRPO": "2503.20783", "GSPO": "2507.18071"}
CALLOUT = re.compile(r'^::: \{\.callout-warning title="(勘误：[^"]+)" erratum="([a-z0-9-]+)"\}\n(.*?)\n:::$',
                     re.M | re.S)
SOLUTION_ONLY = {"std-weighting"}  # corrects the Q2 reference answer, which only the solution branch shows
WRONG = {  # the author's wording, which may survive only inside the notes that quote it
    "formula-eps": r"\text{std}(\{r_1, \dots, r_G\}) + \epsilon}",
    "gspo-motivation": "比率相乘下溢问题",
    "no-underflow": "也会导致数值下溢",
    "bias-source": "在数学上是有偏估计",
    "std-weighting": "反比于其组内方差",
}


def callouts() -> list[tuple[str, str, str]]:
    """(id, title, body) of every erratum callout in the lesson, in order."""
    return [(m[2], m[1], m[3]) for m in CALLOUT.finditer(LESSON.read_text(encoding="utf-8"))]


def errata_entries() -> dict[str, str]:
    """id -> section text of docs/errata.md, in order."""
    parts = re.split(r"^## ([a-z0-9-]+)\n", ERRATA.read_text(encoding="utf-8"), flags=re.M)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


def test_errata_list_and_lesson_notes_are_the_same_in_the_same_order():
    assert [c[0] for c in callouts()] == list(errata_entries()) == list(WRONG)


@pytest.mark.parametrize("erratum", list(WRONG))
def test_each_note_is_one_sentence_citing_the_source_the_list_gives(erratum):
    _, title, body = next(c for c in callouts() if c[0] == erratum)
    assert body.count("。") == 1 and body.endswith("。") and "\n" not in body, "one sentence"
    source = next(line for line in errata_entries()[erratum].splitlines() if line.startswith("- Source:"))
    cited = re.findall(r"(DeepSeekMath|Dr\. GRPO|GSPO) §(\d+(?:\.\d+)*)", source)
    assert cited, source
    for paper, section in cited:
        assert f"arXiv {PAPERS[paper]}，§{section}" in body, (paper, section)
        assert f"arxiv.org/abs/{PAPERS[paper]}" in ERRATA.read_text(encoding="utf-8")


def test_the_wrong_statements_are_gone_outside_the_notes():
    text = CALLOUT.sub("", LESSON.read_text(encoding="utf-8"))
    for erratum, wording in WRONG.items():
        assert wording not in text, erratum


@pytest.mark.parametrize("branch", ["exercises", "solutions"])
def test_every_note_reaches_the_branch_that_shows_the_statement(branch):
    for erratum, title, _ in callouts():
        wanted = branch == "solutions" or erratum not in SOLUTION_ONLY
        for path in (ROOT / branch / "lesson11_grpo.qmd", ROOT / branch / "lesson11_grpo.ipynb"):
            text = path.read_text(encoding="utf-8")
            assert (title in text) == wanted, (path.name, erratum)
        if branch == "exercises" and not wanted:
            assert "隐式重加权偏置" not in (ROOT / branch / "lesson11_grpo.qmd").read_text(encoding="utf-8")
