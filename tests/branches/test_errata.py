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
PAPERS = {"DeepSeekMath": "2402.03300", "Dr. GRPO": "2503.20783", "GSPO": "2507.18071", "DAPO": "2503.14476"}
REPOSITORY_FILE = re.compile(r"(verl|TRL) `[^`]+` @ ([0-9a-f]{8})")  # a peer's file at the commit it was read
CALLOUT = re.compile(r'^::: \{\.callout-warning title="(勘误：[^"]+)" erratum="([a-z0-9-]+)"\}\n(.*?)\n:::$',
                     re.M | re.S)
SOLUTION_ONLY = {"std-weighting", "q3-compute"}  # correct the Q2 / Q3 reference answers: solution branch only
WRONG = {  # the author's wording, which may survive only inside the notes that quote it
    "critic-memory": "至少 50% 的集群显存",
    "formula-eps": r"\text{std}(\{r_1, \dots, r_G\}) + \epsilon}",
    "group-size": r"G = 8 \sim 64",
    "notation": "组间优势分配",
    "dr-grpo-dapo": "非重要 Prompt",
    "gspo-motivation": "比率相乘下溢问题",
    "no-underflow": "也会导致数值下溢",
    "token-mean-scope": "将整个 Batch 内所有回答的所有有效 Token 损失求和",
    "bias-source": "在数学上是有偏估计",
    "l-max": "再除以最大长度",
    "exercise-comments": "代码注释说明了每个边界条件",
    "std-weighting": "反比于其组内方差",
    "q3-compute": "60%～80%",
}
ALSO_WRONG = {"notation": "唯一样题", "critic-memory": "腰斩", "q3-compute": "直接丢弃"}


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
    entry = errata_entries()[erratum]
    source = entry[entry.index("- Source:"):].replace("\n  ", " ").split("\n")[0]
    cited = re.findall(r"(DeepSeekMath|Dr\. GRPO|GSPO|DAPO) §(\d+(?:\.\d+)*)", source)
    files = REPOSITORY_FILE.findall(source)
    assert cited or files or "the author's page" in source, source
    for paper, section in cited:
        assert f"arXiv {PAPERS[paper]}，§{section}" in body, (paper, section)
        assert f"arxiv.org/abs/{PAPERS[paper]}" in ERRATA.read_text(encoding="utf-8")
    for _, commit in files:  # the note names the commit its peer file was read at
        assert f"@ {commit}" in body, (erratum, commit)


def test_the_wrong_statements_are_gone_outside_the_notes():
    text = CALLOUT.sub("", LESSON.read_text(encoding="utf-8"))
    for erratum, wording in (WRONG | ALSO_WRONG).items():
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
