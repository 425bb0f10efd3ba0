"""The committed demo tells the truth, and the parts of it that are exact on every CPU are checked exactly.

Exact on any machine (compared with the committed assets/figs/demo_*.json):
- step 0 of the default run (section a), sections (d) and (e)'s batch numbers: samples of the initial
  policy, before any update;
- one update replayed on a stored rollout (tests/grpo/files/replay_step1.json), to 1e-5.
Only statistically: the default run's later steps. A different CPU rounds differently, one sampled
token flips, and the run diverges from there (another CPU's run diverged at step 63), so a fresh run is
checked against the committed seed spread, never step by step. Bit-for-bit determinism is checked as
two runs on the same machine (test_toy_and_train.py).

The text: every "看到的" paragraph, the closing summary and the figures' alt text are rendered again
from the committed JSON with grpolab.demo_text and must equal what the committed notebook shows; the
key claims are also recomputed here independently of demo_text; each figure is redrawn from its JSON.
"""
import dataclasses
import json
import math
import re
import statistics
from pathlib import Path

import nbformat
import numpy as np
import pytest
from bs4 import BeautifulSoup
from replay import FILE as REPLAY_FILE
from replay import config as replay_config
from replay import replay, step1_rollout

from grpolab import demo_plots, demo_refresh, demo_text
from grpolab import experiments as ex
from grpolab.train import train

ROOT = Path(__file__).resolve().parents[2]
FIGS = ROOT / "assets" / "figs"
NOTEBOOK = ROOT / "lessons" / "lesson11_grpo_demo.ipynb"
LESSON = ROOT / "lessons" / "lesson11_grpo.qmd"
TOL = 2e-4  # numbers are stored rounded to 4 digits
RENDER = {"a": (demo_text.section_a, demo_text.alt_a), "b": (demo_text.section_b, demo_text.alt_b),
          "c": (demo_text.section_c, demo_text.alt_c), "d": (demo_text.section_d, demo_text.alt_d),
          "e": (demo_text.section_e, demo_text.alt_e)}
PLOTS = {"a": demo_plots.plot_training, "b": demo_plots.plot_group_sweep, "c": demo_plots.plot_length_bias,
         "d": demo_plots.plot_std_weighting, "e": demo_plots.plot_advantage_comparison}
CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")  # every control character but \n (and \t, checked apart)


def committed(letter: str) -> dict:
    return json.loads((FIGS / f"demo_{demo_plots.SECTIONS[letter]}.json").read_text())


def notebook() -> nbformat.NotebookNode:
    return nbformat.read(NOTEBOOK, as_version=4)


def outputs(mime: str) -> list[str]:
    """Every output of the committed notebook with this MIME type, in order."""
    return [o["data"][mime] for c in notebook().cells if c.cell_type == "code" for o in c.get("outputs", [])
            if mime in o.get("data", {})]


def assert_close(got, want, path="") -> None:
    if isinstance(want, dict):
        assert set(got) == set(want), path
        for k in want:
            assert_close(got[k], want[k], f"{path}.{k}")
    elif isinstance(want, list):
        assert len(got) == len(want), path
        for i, (g, w) in enumerate(zip(got, want, strict=True)):
            assert_close(g, w, f"{path}[{i}]")
    elif isinstance(want, float):
        assert got is not None and abs(got - want) <= TOL, f"{path}: {got} != {want}"
    else:
        assert got == want, path


# ---- what the committed notebook shows --------------------------------------------------------------
def test_committed_demo_outputs_exist_and_notebook_states_its_run():
    for stem in demo_plots.SECTIONS.values():
        assert (FIGS / f"demo_{stem}.png").stat().st_size > 10_000
        assert (FIGS / f"demo_{stem}.json").exists()
    text = "\n".join("".join(o.get("text", "")) for c in notebook().cells for o in c.get("outputs", []))
    for needle in ("device=cpu", "torch 2.", "CPU threads", "总耗时", "进程 CPU 时间"):
        assert needle in text, f"the committed run states {needle!r}"


def test_no_markdown_holds_control_characters():
    """The old cell 17 held a form feed and a tab where \\frac and \\times were (JSON \\f, \\t)."""
    md = [c.source for c in notebook().cells if c.cell_type == "markdown"] + outputs("text/markdown")
    for text in md:
        assert not CONTROL.search(text) and "\t" not in text, repr(CONTROL.search(text) or "\t")
    for text in md:
        assert "\\frac" not in text or re.search(r"\\frac\{", text), "\\frac survives as a command"


def figures_and_paragraphs() -> tuple[list[str], list[str]]:
    """The committed notebook's Markdown outputs: the figures (an <img>, demo_plots.figure_markdown) and the rest."""
    md = outputs("text/markdown")
    return [m for m in md if m.startswith("<img ")], [m for m in md if not m.startswith("<img ")]


def test_every_paragraph_and_alt_text_is_rendered_from_the_committed_numbers():
    data = {k: committed(k) for k in RENDER}
    want_md = demo_refresh.paragraphs(data)  # what `make demo-text` writes into the notebook
    figures, paragraphs = figures_and_paragraphs()
    assert paragraphs == want_md
    assert len(figures) == 5
    for k, shown in zip("abcde", figures, strict=True):
        img = BeautifulSoup(shown, "html.parser").img
        assert img["alt"] == RENDER[k][1](data[k]), k
        assert img["src"] == f"../assets/figs/demo_{demo_plots.SECTIONS[k]}.png", "relative to lessons/, committed"


def test_figures_are_shown_as_markdown_with_alt_text_never_html_or_a_bare_png():
    """Quarto adds require.js and jQuery from a CDN for any text/html output (quarto-cli
    src/core/jupyter/widgets.ts); a bare image/png output gets no alt there (jupyter.ts mdImageOutput)."""
    assert outputs("text/html") == [] and outputs("image/png") == []
    shown = demo_plots.figure_markdown(FIGS / "demo_training.png", 'a "b" <c>', start=NOTEBOOK.parent)
    img = BeautifulSoup(shown, "html.parser").img
    assert (img["src"], img["alt"]) == ("../assets/figs/demo_training.png", 'a "b" <c>')


def test_images_carry_alt_text_in_the_preview_html():
    from nbconvert import HTMLExporter

    body, _ = HTMLExporter(template_name="lab").from_notebook_node(notebook())
    assert "No description has been provided for this image" not in body
    images = BeautifulSoup(body, "html.parser").find_all("img")
    figures = [i for i in images
               if re.fullmatch(r"\.\./assets/figs/demo_\w+\.png", i["src"]) and i["alt"].startswith("图 (")]
    assert len(figures) == 5


@pytest.mark.parametrize("letter", list(PLOTS))
def test_each_figure_is_redrawn_from_its_committed_json(letter, tmp_path):
    stem = demo_plots.SECTIONS[letter]
    data, png = demo_plots.save_section(stem, committed(letter), PLOTS[letter], tmp_path)
    assert data == committed(letter), "the stored numbers are already rounded: a round trip changes nothing"
    assert png.read_bytes() == (FIGS / f"demo_{stem}.png").read_bytes()


# ---- the claims, recomputed here without demo_text ------------------------------------------------------
T975 = {4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262}


def ci(values: list[float]) -> tuple[float, float]:
    n = len(values)
    half = T975[n - 1] * statistics.stdev(values) / math.sqrt(n)
    return statistics.fmean(values) - half, statistics.fmean(values) + half


def number_after(text: str, label: str) -> float:
    return float(re.search(re.escape(label) + r"\s*([+-]?\d+\.\d+)", text)[1])


def test_section_a_claims_match_the_stored_run():
    run = committed("a")
    text = demo_text.section_a(run)
    kl = np.array(run["history"]["kl"][1:], dtype=float)
    assert number_after(text, "中位数") == pytest.approx(np.median(kl), abs=0.006)
    band = re.search(r"10%–90% 分位 (\d+\.\d+)–(\d+\.\d+)", text)
    assert float(band[1]) == pytest.approx(np.percentile(kl, 10), abs=0.006)
    assert float(band[2]) == pytest.approx(np.percentile(kl, 90), abs=0.006)
    assert number_after(text, "最高") == pytest.approx(kl.max(), abs=0.006)
    p0, p1 = np.array(run["prompts"]["p_start"]), np.array(run["prompts"]["p_end"])
    stuck = re.search(r"训练结束时 (\d+) / (\d+) 个 prompt 的成功概率仍低于 0\.05，其中 (\d+) 个开始时就低于它", text)
    assert int(stuck[1]) == int((p1 < 0.05).sum()) and int(stuck[2]) == len(p1)
    assert int(stuck[3]) == int(((p1 < 0.05) & (p0 < 0.05)).sum())
    g = run["config"]["group_size"]
    wrong = re.search(r"预期 (\d+)% 全错、(\d+\.\d)% 全对", text)
    assert float(wrong[1]) == pytest.approx(100 * np.mean((1 - p0) ** g), abs=0.6)
    assert float(wrong[2]) == pytest.approx(100 * np.mean(p0**g), abs=0.06)
    final = run["per_seed"]["final_acc"]
    assert f"{statistics.fmean(final):.3f} ± {statistics.stdev(final):.3f}" in text, "sample sd, ddof = 1"
    assert len(run["seeds"]) >= 5


def test_differences_are_called_real_only_when_their_ci_excludes_zero():
    c, e = committed("c"), committed("e")
    text_c, text_e = demo_text.section_c(c), demo_text.section_e(e)
    for mode, d in c["modes"].items():
        lo, hi = ci(d["gap_within_per_seed"])
        line = next(s for s in text_c.splitlines() if s.startswith(f"- {demo_text.MODES[mode]}："))
        assert ("在种子噪声之内" in line) == (lo <= 0 <= hi), mode
    for beta in e["kl_coefs"]:
        lo, hi = ci([a - b for a, b in zip(e["arms"][f"grpo@{beta:g}"]["final_acc_per_seed"],
                                           e["arms"][f"dr_grpo@{beta:g}"]["final_acc_per_seed"], strict=True)])
        pair = e["pairs"][f"grpo-dr_grpo@{beta:g}"]
        assert pair["ci95"] == pytest.approx([lo, hi], abs=2e-4)
        assert f"{pair['mean']:+.3f} 95% CI [{pair['ci95'][0]:+.3f}, {pair['ci95'][1]:+.3f}]" in text_e
    assert len(e["seeds"]) >= 5 and len(c["seeds"]) >= 5 and e["kl_coefs"] == [0.01, 0.0]


def test_section_b_shows_two_horizons_and_the_curves():
    b = committed("b")
    assert len(b["horizons"]) == 2 and b["horizons"][-1] == b["steps"]
    assert all(len(c["acc"]["mean"]) == b["steps"] + 1 for c in b["curves"].values())
    text = demo_text.section_b(b)
    for h in b["horizons"]:
        assert f"**第 {h} 步**" in text
    assert len(b["seeds"]) >= 5


def holm_adjusted(p: dict[str, float]) -> dict[str, float]:
    """Holm's adjusted p-values, written out here apart from grpolab.experiments.holm."""
    names, out, running = sorted(p, key=p.get), {}, 0.0
    for j, k in enumerate(names):
        running = max(running, min(1.0, (len(p) - j) * p[k]))
        out[k] = running
    return out


def test_the_lesson_points_to_the_summary_and_agrees_with_section_c():
    """The lesson's length-bias sentence quotes the between-mode paired differences of section (c), each
    recomputed here with scipy's paired t-test and Holm's correction over the family."""
    from scipy import stats

    lesson = LESSON.read_text(encoding="utf-8")
    link = f"../lessons/lesson11_grpo_demo.html#{demo_text.SUMMARY_ANCHOR}"
    assert f"]({link})" in lesson, "the lesson links the demo's closing section"
    assert f'<a id="{demo_text.SUMMARY_ANCHOR}"></a>' in "".join(c.source for c in notebook().cells)
    sentence = next(line for line in lesson.splitlines() if "演示笔记本 (c) 节" in line)
    modes = committed("c")["modes"]
    rm = modes["response_mean"]["gap_within_per_seed"]
    others = ("token_mean", "fixed_length")
    p = {m: float(stats.ttest_rel(rm, modes[m]["gap_within_per_seed"]).pvalue) for m in others}
    adjusted = holm_adjusted(p)
    for m in others:
        diff = [a - b for a, b in zip(rm, modes[m]["gap_within_per_seed"], strict=True)]
        lo, hi = ci(diff)
        shown = "p < 0.001" if adjusted[m] < 0.001 else f"p = {adjusted[m]:.3f}"
        assert (f"response-mean − {demo_text.MODES[m]} {statistics.fmean(diff):+.2f} 个 token（未校正 95% CI "
                f"[{lo:+.2f}, {hi:+.2f}]，{sum(d > 0 for d in diff)}/{len(diff)} 个种子为正，Holm 校正 {shown}，"
                f"{'显著' if adjusted[m] <= 0.05 else '不显著'}") in sentence, m
    if adjusted["token_mean"] <= 0.05:
        diff_tm = statistics.fmean(rm) - statistics.fmean(modes["token_mean"]["gap_within_per_seed"])
        share = round(100 * diff_tm / modes["response_mean"]["final_len"]["mean"])
        assert f"约为 response-mean 平均长度的 {share}%" in sentence
    significant = [demo_text.MODES[m] for m in others if adjusted[m] <= 0.05]
    if len(significant) == 1:
        assert f"偏置只在与 {significant[0]} 的比较中看得到" in sentence


def test_the_best_g_claim_holds_after_holm_recomputed_here():
    """"G = x is best" at a horizon is said only when the best G's paired difference to every other G
    survives Holm's correction, recomputed here with scipy from the stored per-seed accuracies."""
    from scipy import stats

    b = committed("b")
    text = demo_text.section_b(b)
    for h in map(str, b["horizons"]):
        acc = {r["G"]: r["acc_per_seed"][h] for r in b["table"]}
        best = max(acc, key=lambda g: statistics.fmean(acc[g]))
        adjusted = holm_adjusted({g: float(stats.ttest_rel(acc[best], acc[g]).pvalue) for g in acc if g != best})
        line = next(line for line in text.splitlines() if line.startswith(f"- **第 {h} 步**"))
        assert f"最高的 G = {best}（" in line
        assert (f"可以说 G = {best} 最好" in line) == all(p <= 0.05 for p in adjusted.values()), h
        assert (f"不能说 G = {best} 最好" in line) == any(p > 0.05 for p in adjusted.values()), h


def test_every_section_stores_the_config_and_seeds_it_ran_with():
    """All run parameters (adv_eps, G, beta, lengths, ...) are stored unrounded: the old rounding stored
    adv_eps = 1e-8 as 0.0."""
    cfgs = ex.demo_configs(device="cpu")
    for letter in "abce":
        assert committed(letter)["config"] == dataclasses.asdict(cfgs[letter]), letter
        assert committed(letter)["seeds"] == [0, 1, 2, 3, 4], letter
    d = committed("d")
    assert d["config"] == dataclasses.asdict(dataclasses.replace(cfgs["d"], batch_prompts=len(d["sigma"])))
    assert committed("a")["config"]["adv_eps"] == 1e-8


def test_the_lesson_quotes_section_d_as_stored():
    """The std-weighting erratum quotes the first σ bin of section (d) (exact on every CPU)."""
    low = committed("d")["bins"][0]
    assert (f"σ ≤ {low['hi']} 的组平均权重 GRPO {low['weight_grpo']:.3f}、只减均值 {low['weight_dr_grpo']:.3f}"
            f"（比值 {low['ratio']:.2f}）") in LESSON.read_text(encoding="utf-8")


# ---- exact on every CPU ------------------------------------------------------------------------------
def test_section_a_step_0_matches_committed():
    cfg = ex.demo_configs(device="cpu")["a"]
    want = committed("a")
    assert ex.round_floats(dataclasses.asdict(cfg)) == want["config"]
    got = demo_plots.stored(train(dataclasses.replace(cfg, steps=0)).history)
    assert_close({k: v[:1] for k, v in got.items()}, {k: v[:1] for k, v in want["history"].items()}, "history")


def test_sections_d_and_e_batch_numbers_match_committed():
    cfgs = ex.demo_configs(device="cpu")
    want_d = committed("d")
    got_d = demo_plots.stored(ex.std_weighting(cfgs["d"], num_groups=128))
    assert_close(got_d, want_d)
    got_e = demo_plots.stored(ex.advantage_comparison(cfgs["e"], seeds=[]))
    assert_close(got_e["batch"], committed("e")["batch"], "batch")


def test_stored_rollout_is_the_default_runs_step_1():
    assert step1_rollout(replay_config()) == json.loads(REPLAY_FILE.read_text())["rollout"]


def test_one_update_on_the_stored_rollout_matches_to_1e_5():
    stored = json.loads(REPLAY_FILE.read_text())
    got = replay(replay_config(), stored["rollout"])
    for key in ("loss", "grad_norm", "clip_frac", "kl"):
        assert got[key] == pytest.approx(stored["after"][key], abs=1e-5), key
    assert got["p_after"] == pytest.approx(stored["after"]["p_after"], abs=1e-5)


# ---- statistics only: a fresh default run against the committed seed spread ----------------------------
T9995 = {4: 8.610, 5: 6.869, 6: 5.959, 7: 5.408, 8: 5.041, 9: 4.781}  # two-sided 99.9% t quantiles


def within_prediction_interval(value: float, per_seed: list[float], floor: float) -> bool:
    """value lies in the 99.9% prediction interval of one more seed, from the committed seeds' mean and sd."""
    n = len(per_seed)
    half = T9995[n - 1] * statistics.stdev(per_seed) * math.sqrt(1 + 1 / n)
    return abs(value - statistics.fmean(per_seed)) <= max(half, floor)


@pytest.mark.slow
def test_a_fresh_default_run_lies_within_the_committed_seed_spread():
    run = committed("a")
    h = train(ex.demo_configs(device="cpu")["a"]).history
    ps = run["per_seed"]
    kl = np.array(h["kl"][1:])
    gap = np.mean(np.array(h["zero_var_frac"]) - np.array(h["zero_var_theory"]))
    assert within_prediction_interval(h["acc"][-1], ps["final_acc"], floor=0.01), h["acc"][-1]
    assert within_prediction_interval(float(np.median(kl)), ps["kl_median"], floor=0.02)
    assert within_prediction_interval(float(np.percentile(kl, 90)), ps["kl_p90"], floor=0.02)
    assert within_prediction_interval(float(gap), ps["zero_var_gap_mean"], floor=0.01)
    assert h["acc"][-1] > h["acc"][0] + 0.3, "the run learns"


@pytest.mark.slow
def test_notebook_runs_end_to_end_with_a_tiny_config(tmp_path):
    import papermill  # a pinned dependency: its absence is a failure, not a skip
    out_dir = tmp_path / "figs"
    papermill.execute_notebook(
        str(NOTEBOOK), str(tmp_path / "out.ipynb"), cwd=str(NOTEBOOK.parent), progress_bar=False,
        kernel_name="python3", parameters={"device": "cpu", "steps": 4, "sweep_steps": 4, "length_steps": 3,
                                           "num_seeds": 2, "fig_dir": str(out_dir)},
    )
    for stem in demo_plots.SECTIONS.values():
        assert (out_dir / f"demo_{stem}.png").exists() and (out_dir / f"demo_{stem}.json").exists()
    run = json.loads((out_dir / "demo_training.json").read_text())
    assert len(run["history"]["step"]) == 5 and run["seeds"] == [0, 1]


@pytest.mark.slow
def test_sections_give_the_same_numbers_in_worker_processes():
    """The notebook's numbers do not depend on `workers`: a job run in a spawned process equals the same
    job run here, bit for bit (same machine, one torch thread each)."""
    cfg = dataclasses.replace(ex.demo_configs(device="cpu")["e"], steps=3)
    jobs = {"e": (ex.advantage_comparison, (cfg, [0, 1])), "d": (ex.std_weighting, (cfg,))}
    here, close_here = ex.start_jobs(jobs, workers=1)
    there, close_there = ex.start_jobs(jobs, workers=2)
    try:
        for name in jobs:
            assert json.dumps(here[name]()[0]) == json.dumps(there[name]()[0]), name
    finally:
        close_here()
        close_there()
