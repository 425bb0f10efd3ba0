"""The demo's sentences follow from the statistic that backs them (issue 24).

Synthetic result tables (bias present, absent, reversed, mixed; a best G that is and is not best after
Holm's correction; an exact and a merely tiny deviation) are fed to the text generator, and the test
asserts the sentence it chooses, so a wrong conclusion fails here. The statistics themselves are
checked against scipy's paired t-test (``scipy.stats.ttest_rel``) and Holm against hand-worked
cases. Cheap: no training.
"""
import dataclasses
import math

import numpy as np
import pytest
from scipy import stats

from grpolab import demo_plots, demo_text
from grpolab import experiments as ex

CFG = dataclasses.asdict(ex.demo_configs(device="cpu")["c"])


# ---- the statistics ----------------------------------------------------------------------------------
def test_paired_p_value_is_scipys_paired_t_test():
    a, b = [0.61, 0.72, 0.55, 0.80, 0.66], [0.50, 0.70, 0.41, 0.69, 0.60]
    got = ex.paired(a, b)
    want = stats.ttest_rel(a, b)
    assert got["t"] == pytest.approx(want.statistic, rel=1e-12)
    assert got["p"] == pytest.approx(want.pvalue, rel=1e-10)
    assert got["positive"] == 5


def test_holm_steps_down_like_the_definition():
    """Holm (1979): sorted p (0.01, 0.02, 0.04) against 0.05/3, 0.05/2, 0.05/1: all rejected, adjusted
    p = (0.03, 0.04, 0.04); (0.02, 0.026, 0.03): 3 x 0.02 = 0.06 > 0.05 stops at the first, none rejected."""
    pairs = {"x": {"p": 0.04}, "y": {"p": 0.01}, "z": {"p": 0.02}}
    out = ex.holm(pairs)
    assert out["m"] == 3 and list(out["tests"]) == ["x", "y", "z"]
    assert [out["tests"][k]["p_holm"] for k in "yzx"] == pytest.approx([0.03, 0.04, 0.04])
    assert all(t["reject"] for t in out["tests"].values())
    worse = ex.holm({"x": {"p": 0.03}, "y": {"p": 0.02}, "z": {"p": 0.026}})  # 0.06 > 0.05: nothing rejected
    assert not any(t["reject"] for t in worse["tests"].values())
    assert not ex.holm({"x": {"p": float("nan")}})["tests"]["x"]["reject"]


def test_stored_numbers_keep_small_values_and_every_run_parameter():
    """The old rounding (4 decimals) stored adv_eps = 1e-8 as 0.0 and the (d) deviation 4.77e-7 as 0."""
    assert demo_plots.stored({"x": 4.768e-7, "eps": 1e-8, "y": 0.123456, "z": 1234.56789}) == \
        {"x": 4.768e-7, "eps": 1e-8, "y": 0.1235, "z": 1234.5679}
    for letter, cfg in ex.demo_configs(device="cpu").items():
        assert demo_plots.stored({"config": dataclasses.asdict(cfg)})["config"] == dataclasses.asdict(cfg), letter


# ---- (c): the length bias is a between-mode claim ------------------------------------------------------
def c_sweep(rm: list[float], tm: list[float], fl: list[float]) -> dict:
    """A stored (c) result whose within-group gaps per seed are rm, tm, fl; lengths are ~10 tokens."""
    gaps = {"response_mean": rm, "token_mean": tm, "fixed_length": fl}
    lens = {m: [10.0 + 0.1 * i for i in range(len(rm))] for m in gaps}
    out = {"config": CFG, "seeds": list(range(len(rm))), "steps": 120, "modes": {}, "pairs": {}, "gap_pairs": {}}
    for m, g in gaps.items():
        out["modes"][m] = {"gap_within_per_seed": g, "gap_within": ex.spread(g), "mixed_groups": 0.5,
                           "final_len_per_seed": lens[m], "final_len": ex.spread(lens[m])}
    for a, b in (("response_mean", "token_mean"), ("response_mean", "fixed_length"), ("token_mean", "fixed_length")):
        out["pairs"][f"{a}-{b}"] = ex.paired(lens[a], lens[b])
    for b in ("token_mean", "fixed_length"):
        out["gap_pairs"][f"response_mean-{b}"] = ex.paired(rm, gaps[b])
    out["gap_holm"], out["pairs_holm"] = ex.holm(out["gap_pairs"]), ex.holm(out["pairs"])
    return demo_plots.stored(out)


NOISE = [0.9, -1.1, 0.3, 1.4, -0.8]  # seed effect shared by every mode: each gap alone is within noise
JITTER = [0.05, -0.04, 0.02, -0.03, 0.01]


def shifted(by: float, jitter=JITTER) -> list[float]:
    return [n + by + j for n, j in zip(NOISE, jitter, strict=True)]


def test_bias_present_in_the_paired_difference_is_reported_even_when_each_gap_is_within_noise():
    """The issue's case: response-mean − token-mean = +0.58 on every seed while each mode's gap against 0
    is within noise. The old text tested the gaps against 0 and said no bias was seen."""
    sweep = c_sweep(shifted(0.58), NOISE, shifted(0.0, [-j for j in JITTER]))
    assert demo_text.verdict(sweep["modes"]["response_mean"]["gap_within"]) == "noise"
    text = demo_text.section_c(sweep)
    assert "看到了长度偏置" in demo_text.c_conclusion(sweep)
    assert "response-mean − token-mean +0.58（未校正 95% CI [" in text and "5/5 个种子为正" in text
    assert "测不出" not in text


def test_bias_absent_reversed_and_mixed_get_their_own_sentences():
    absent = c_sweep(shifted(0.0), NOISE, shifted(0.0, [-j for j in JITTER]))
    assert "测不出" in demo_text.c_conclusion(absent) and "看到了" not in demo_text.c_conclusion(absent)
    reversed_ = c_sweep(shifted(-0.6), NOISE, shifted(0.0, [-j for j in JITTER]))
    assert "相反" in demo_text.c_conclusion(reversed_)
    mixed = c_sweep(shifted(0.58), NOISE, shifted(0.58, [-j for j in JITTER]))  # beats token-mean, not fixed-length
    assert demo_text.holm_outcome(mixed["gap_holm"], mixed["gap_pairs"]) == "mixed"
    sentence = demo_text.c_conclusion(mixed)
    assert "比 token-mean 大，Holm 校正后显著" in sentence and "与 fixed-length 的差校正后不显著" in sentence
    assert "不能说 response-mean 比其他聚合都更偏" in sentence
    # token-mean and fixed-length have one gradient direction within a batch: disagreeing comparisons are
    # no confirmation of Dr. GRPO's prediction, and the sentence never says they are (issue 32, finding 11)
    assert "结论是不确定" in sentence and "方向与 Dr. GRPO" not in sentence and "一致，" not in sentence


def test_the_summary_claims_no_kl_pull_and_no_coverage_mechanism_it_did_not_measure():
    """(a) has no β comparison and (b) stores no number that isolates prompt coverage (issue 32, finding 11)."""
    from test_demo import committed

    text = demo_text.summary(*(committed(k) for k in "abcde"))
    assert "KL 项把策略拉向参考策略" not in text and "看不出 KL 项把策略拉回了多少" in text
    assert "G 太大一步覆盖的 prompt 太少" not in text and "没有单独测量（不确定）" in text
    assert "没有单独测量" in demo_text.section_b(committed("b"))


# ---- (b): "G = 4 is best" needs every comparison after Holm ---------------------------------------------
def b_ranking(acc: dict[int, list[float]]) -> dict:
    order = sorted(acc, key=lambda g: -float(np.mean(acc[g])))
    best_vs = {str(g): ex.paired(acc[order[0]], acc[g]) for g in order[1:]}
    return demo_plots.stored({"order": order, "best_vs": best_vs, "holm": ex.holm(best_vs)})


def test_best_g_is_called_best_only_when_every_holm_corrected_comparison_rejects():
    base = [0.50, 0.55, 0.48, 0.60, 0.52]
    clear = b_ranking({4: [b + 0.10 for b in base], 8: [b + 0.02 for b in base], 2: base,
                       16: [b - 0.05 for b in base], 32: [b - 0.1 for b in base]})
    assert "可以说 G = 4 最好" in demo_text.best_claim(clear)
    # G = 4 beats G = 8 and G = 16 by a little on every seed: p = 0.03 each uncorrected, but Holm over the 4
    # tests compares the third-smallest p with 0.05 / 2
    top = [b + 0.10 for b in base]
    close = b_ranking({4: top, 8: [t - d for t, d in zip(top, (0.01, 0.03, 0.02, 0.005, 0.04), strict=True)],
                       16: [t - d for t, d in zip(top, (0.01, 0.04, 0.02, 0.005, 0.03), strict=True)],
                       2: base, 32: [b - 0.1 for b in base]})
    assert close["best_vs"]["8"]["p"] < 0.05 < close["holm"]["tests"]["8"]["p_holm"]
    claim = demo_text.best_claim(close)
    assert "不能说 G = 4 最好" in claim and "G = 8" in claim


# ---- (d), (e): exact only when the unrounded values are equal -------------------------------------------
def d_data(dev: float, exact: bool) -> dict:
    return {"config": dataclasses.asdict(ex.demo_configs(device="cpu")["d"]), "G": 16, "sigma": [0.2, 0.0],
            "zero_var_groups": 1, "max_abs_ratio_minus_inv_sigma": dev, "ratio_equals_inv_sigma_exact": exact,
            "dtype": "float32", "bins": []}


def test_a_tiny_deviation_is_never_called_exact():
    assert "逐位相等" not in demo_text.section_d(d_data(4.768e-7, False))
    assert "4.8e-07，来自 float32 舍入" in demo_text.section_d(d_data(4.768e-7, False))
    assert "0，逐位相等" in demo_text.section_d(d_data(0.0, True))
    with pytest.raises(ValueError, match="exact flag"):
        demo_text.section_d(d_data(1e-9, True))


def test_the_flag_is_decided_before_rounding():
    cfg = ex.demo_configs(device="cpu")["d"]
    data = demo_plots.stored(ex.std_weighting(cfg, num_groups=16))
    assert data["ratio_equals_inv_sigma_exact"] == (data["max_abs_ratio_minus_inv_sigma"] == 0)
    assert data["config"] == dataclasses.asdict(dataclasses.replace(cfg, batch_prompts=16))


# ---- (a): where the KL sits follows the table -------------------------------------------------------------
def a_run(answer: float, scratch: float, eos: float, per_token_diff: list[float]) -> dict:
    ka = [0.3 + d for d in per_token_diff]
    ks = [0.3] * len(per_token_diff)
    return demo_plots.stored({
        "seeds": list(range(len(ka))),
        "per_seed": {"kl_share_answer": [answer] * len(ka), "kl_share_scratch": [scratch] * len(ka),
                     "kl_share_eos": [eos] * len(ka), "kl_answer": ka, "kl_scratch": ks},
        "pairs": {"kl_answer-kl_scratch": ex.paired(ka, ks)}})


def test_the_kl_sentence_ranks_token_kinds_as_the_table_does():
    """The old text said the KL sat mainly on scratch *and EOS* tokens when EOS held 6%, less than the
    answer token's 23%."""
    text = demo_text.kl_location(a_run(0.23, 0.71, 0.06, [0.2, 0.25, 0.15, 0.3, 0.22]))
    assert "草稿 71%、答案 23%、EOS 6%" in text and "一半以上在草稿 token 上" in text
    assert "草稿和 EOS" not in text and "每个答案 token 的 KL 比每个草稿 token 高" in text
    split = demo_text.kl_location(a_run(0.40, 0.35, 0.25, [0.2, -0.25, 0.15, -0.3, 0.02]))
    assert "没有哪一种 token 占一半以上，最多的是答案 token" in split and "之差" in split


def test_the_parameters_quoted_are_the_stored_ones():
    data = d_data(0.0, True)
    data["config"] = data["config"] | {"adv_eps": 1e-6}
    assert "adv_eps = 1e-06" in demo_text.section_d(data)
    assert math.isclose(demo_plots.stored({"e": 1e-6})["e"], 1e-6)
