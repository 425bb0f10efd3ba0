"""The generated branches: no drift, no leaks, the solution runs, the exercise stops at the blanks."""

import re
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

from coursekit.branches import SOLUTION_ANSWER_NOTE, build_outputs, stale_outputs
from coursekit.lesson import parse_lesson

ROOT = Path(__file__).resolve().parents[2]
LESSON = parse_lesson(ROOT / "lessons" / "lesson11_grpo.qmd")
EXERCISE_FILES = sorted((ROOT / "exercises").iterdir())


@pytest.fixture(scope="module")
def outputs():
    return build_outputs(ROOT / "lessons" / "lesson11_grpo.qmd")


def test_regenerating_the_branches_changes_nothing(outputs):
    assert stale_outputs(outputs, ROOT) == [], "run `make branches` and commit the result"


def _answer_texts() -> list[str]:
    """Pieces of answer text that must never reach the exercise branch."""
    texts = [line.strip() for line in LESSON.answer_lines]
    for div in LESSON.reference_answers().values():
        texts += [line.strip("-*0123456789. ")[:40] for line in div.text_lines() if len(line.strip()) > 20]
    return texts + ["填空处的参考代码"]  # the solution's level-4 hint


@pytest.mark.parametrize("path", EXERCISE_FILES, ids=lambda p: p.name)
def test_exercise_branch_holds_no_answer(path):
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".ipynb":  # compare the notebook's text, not its JSON escaping
        text = "\n".join(cell.source for cell in nbformat.reads(text, 4).cells)
    leaked = [piece for piece in _answer_texts() if piece and piece in text]
    assert leaked == []
    assert not re.search(r"sum\(\(r - mean\) \*\* 2|\[0\.0\] \* len\(rewards\)", text)


def test_exercise_cell_is_the_seed_cell_in_both_formats(seed_exercise_cell):
    nb = nbformat.read(ROOT / "exercises" / "lesson11_grpo.ipynb", 4)
    [cell] = [c for c in nb.cells if "course-exercise" in c.metadata.get("tags", [])]
    assert cell.source + "\n" == seed_exercise_cell
    qmd = (ROOT / "exercises" / "lesson11_grpo.qmd").read_text(encoding="utf-8")
    block = re.search(r"```\{python\}\n#\| course_role: exercise\n#\| eval: false\n(.*?)```", qmd, re.S)
    assert block and block.group(1) == seed_exercise_cell


@pytest.mark.parametrize("branch", ["exercises", "solutions"])
def test_notebooks_read_well_in_jupyterlab(branch):
    nb = nbformat.read(ROOT / branch / "lesson11_grpo.ipynb", 4)
    nbformat.validate(nb)
    for cell in nb.cells:
        assert not re.search(r"^:::", cell.source, re.M), "raw Quarto div fence in a notebook"
        assert not re.search(r"\]\{[.#]", cell.source), "Quarto attribute syntax in a notebook"
        if cell.cell_type == "code":
            assert not cell.source.startswith("#|"), "cell options must be stripped"
    hints = [c for c in nb.cells if "course-hints" in c.metadata.get("tags", [])]
    assert len(hints) == 1
    levels = re.findall(r'data-level="(\d)"', hints[0].source)
    assert levels == ["1", "2", "3", "4"]
    level4 = hints[0].source.split('data-level="4"', 1)[1]
    if branch == "exercises":  # the page promises four levels: the 4th says where the answer is
        assert "参考答案版" in level4 and "```" not in level4
    else:
        assert all(line.strip() in level4 for line in LESSON.answer_lines)


def test_both_renderings_use_the_same_hint_widget():
    """Quarto's page and the notebook carry the same nested <details> (runner.js drives them)."""
    for branch in ("exercises", "solutions"):
        qmd = (ROOT / branch / "lesson11_grpo.qmd").read_text(encoding="utf-8")
        nb = nbformat.read(ROOT / branch / "lesson11_grpo.ipynb", 4)
        [cell] = [c for c in nb.cells if "course-hints" in c.metadata.get("tags", [])]
        tags = re.findall(r'<details class="course-hint" data-level="\d">', cell.source)
        assert tags == re.findall(r'<details class="course-hint" data-level="\d">', qmd) and len(tags) == 4
        assert ".callout-tip .course-hint" not in qmd


def test_exercise_notebook_has_no_outputs_and_stops_at_the_blanks(tmp_path):
    nb = nbformat.read(ROOT / "exercises" / "lesson11_grpo.ipynb", 4)
    assert all(not c.get("outputs") and c.get("execution_count") is None for c in nb.cells if c.cell_type == "code")
    with pytest.raises(CellExecutionError) as info:
        NotebookClient(nb, timeout=60, kernel_name="python3",
                       resources={"metadata": {"path": str(tmp_path)}}).execute()
    assert info.value.ename == "NameError" and "'______'" in info.value.evalue


def test_solution_notebook_runs_every_assert_and_shows_the_worked_example(tmp_path):
    committed = nbformat.read(ROOT / "solutions" / "lesson11_grpo.ipynb", 4)
    fresh = nbformat.read(ROOT / "solutions" / "lesson11_grpo.ipynb", 4)
    NotebookClient(fresh, timeout=60, kernel_name="python3",
                   resources={"metadata": {"path": str(tmp_path)}}).execute()  # raises on any failing assert
    [reference] = [c for c in committed.cells if "course-solution" in c.metadata.get("tags", [])]
    assert reference.source == LESSON.reference_code
    printed = "".join(o.get("text", "") for c in committed.cells if c.cell_type == "code" for o in c.outputs)
    for number in ("mean = 2.0", "0.6667", "-1.2247", "1.2247", "[0.0, 0.0]"):
        assert number in printed
    example = next(c for c in committed.cells if c.cell_type == "code" and "1.2247" in str(c.outputs))
    assert "1.2247" not in example.source and "0.6667" not in example.source, "numbers must be computed"


@pytest.mark.parametrize("branch", ["exercises", "solutions"])
def test_bold_renders_in_commonmark(branch):
    """JupyterLab and nbconvert are CommonMark: no `**` may survive rendering (Pandoc is laxer)."""
    from nbconvert.filters.markdown_mistune import markdown2html_mistune

    nb = nbformat.read(ROOT / branch / "lesson11_grpo.ipynb", 4)
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            html = re.sub(r"<code>.*?</code>|<pre>.*?</pre>", "", markdown2html_mistune(cell.source), flags=re.S)
            assert "**" not in html, cell.source[:80]


@pytest.mark.parametrize("fmt", ["qmd", "ipynb"])
def test_solution_page_speaks_to_readers_not_maintainers(fmt, outputs):
    """The solution branch's reference heading says 参考答案 (not the internal "仅 answer 分支"), and its
    questions point to their reference answers instead of showing empty "你的答案：" boxes; the exercise
    branch keeps one answer box per question."""
    def text(branch: str) -> str:
        source = outputs[f"{branch}/lesson11_grpo.{fmt}"]
        if fmt == "ipynb":
            nb = nbformat.reads(source, 4)
            boxes = sum("course-answer" in c.metadata.get("tags", []) for c in nb.cells)
            return "\n".join(c.source for c in nb.cells) + f"\n<boxes {boxes}>"
        return source + f"\n<boxes {source.count('.course-answer')}>"

    questions = len(LESSON.reference_answers())
    solution, exercise = text("solutions"), text("exercises")
    assert "仅 answer 分支" not in solution and re.search(r"^#+ 参考答案$", solution, re.M)
    assert "你的答案" not in solution and "<boxes 0>" in solution
    assert solution.count(SOLUTION_ANSWER_NOTE) == questions
    assert f"<boxes {questions}>" in exercise and SOLUTION_ANSWER_NOTE not in exercise
