"""The lesson's teaching additions (issue 32): the ungraded practice on per-token weights works in both
branches and in the graded notebook, and the clip sentence quotes demo (a)'s stored clip fraction."""
import json
import re
import statistics
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[2]
LESSON = ROOT / "lessons" / "lesson11_grpo.qmd"
CHECK_MARK = "# 自查（不计分）"


def practice_cells(path: Path) -> tuple[str, str]:
    """(the cell that sets my_weights, the practice self-check) of a branch or autograder notebook."""
    cells = [c.source for c in nbformat.read(path, as_version=4).cells if c.cell_type == "code"]
    weights = next(c for c in cells if c.lstrip().startswith("# 不计分练习") and "my_weights = {" in c)
    check = next(c for c in cells if c.startswith(CHECK_MARK))
    return weights, check


def run(weights: str, check: str) -> list[str]:
    """The lines the practice self-check prints after the weights cell ran."""
    import contextlib
    import io

    namespace: dict = {}
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(weights, namespace)
        exec(check, namespace)
    return out.getvalue().splitlines()


def test_the_solution_weights_pass_and_the_blank_ones_say_so():
    solved = run(*practice_cells(ROOT / "solutions" / "lesson11_grpo.ipynb"))
    assert solved == ["response_mean：✓ 权重之和 1.000，加权损失 1.000", "token_mean：✓ 权重之和 1.000，加权损失 0.500",
                      "fixed_length_mean：✓ 权重之和 0.500，加权损失 0.250"]  # the seed's (1., .5, .25)
    blank = run(*practice_cells(ROOT / "exercises" / "lesson11_grpo.ipynb"))
    assert blank == [f"{m}：还没有填写" for m in ("response_mean", "token_mean", "fixed_length_mean")]


@pytest.mark.parametrize("notebook", ["exercises/lesson11_grpo.ipynb", "autograder/source/lesson11/lesson11.ipynb"])
def test_the_practice_never_raises_where_it_is_left_blank(notebook):
    """The graded notebook runs every cell: the blank practice must print, never fail."""
    assert run(*practice_cells(ROOT / notebook))


def test_a_wrong_aggregation_is_named_with_a_hint():
    weights, check = practice_cells(ROOT / "exercises" / "lesson11_grpo.ipynb")
    mixed_up = weights.replace('"response_mean": None', '"response_mean": [[1 / 4], [1 / 4, 1 / 4, 1 / 4]]') \
                      .replace('"token_mean": None', '"token_mean": [[1 / 4], [1 / 4]]')
    lines = run(mixed_up, check)
    assert lines[0].startswith("response_mean：✗ 权重不对")
    assert lines[1].startswith("token_mean：✗ 形状要与 losses 相同")


def test_the_clip_sentence_quotes_demo_a():
    """With one update per rollout ρ = 1 and the clip never binds; demo (a) updates twice and stores the
    clipped share of the second update: the lesson quotes its mean and maximum over seed 0's run."""
    run_a = json.loads((ROOT / "assets" / "figs" / "demo_training.json").read_text())
    assert run_a["config"]["inner_updates"] == 2 and run_a["seeds"][0] == 0
    clip = [x for x in run_a["history"]["clip_frac"] if x is not None]
    text = LESSON.read_text(encoding="utf-8")
    sentence = next(line for line in text.splitlines() if "被裁剪的 token 比例" in line)
    assert (f"每批更新 {run_a['config']['inner_updates']} 次" in sentence
            and f"在 {len(clip)} 步里平均 {statistics.fmean(clip):.2%}、最多 {max(clip):.2%}（种子 0）" in sentence)


def test_the_rubric_says_what_each_test_cell_is_worth():
    text = LESSON.read_text(encoding="utf-8")
    points = {m[1]: m[0] for m in re.findall(r"#\| points: ([\d.]+)\n#\| title: (.+)", text)}
    rubric = next(line for line in text.splitlines() if line.startswith("- 代码 4 分："))
    for title, value in points.items():
        assert f"{title} {float(value):g} 分" in rubric, (title, rubric)
    assert sum(map(float, points.values())) + 1 == 4  # + the written explanation (1 point)
