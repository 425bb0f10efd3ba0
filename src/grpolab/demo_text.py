"""The demo notebook's "看到的" paragraphs, its closing summary and its figures' alt text, written from
the numbers each section stores (the rounded dicts of assets/figs/demo_*.json), never typed by hand.

Every function takes the stored dict(s) and returns Markdown (or plain alt text). The notebook shows
what these return; tests render them again from the committed JSON and compare with the committed
notebook, so a sentence cannot drift from its numbers. Each sentence that states an effect names its
test: a single difference is called real only when its paired 95% confidence interval over seeds
excludes 0 ("within noise" otherwise); where several comparisons back one claim ("G = 4 is best",
"response-mean lengthens wrong answers more than the other modes") the claim needs every one of them
rejected after Holm's correction; "exactly equal" needs the flag computed on the unrounded values.
The run parameters quoted are read from the ``config`` each result stores.
"""
from __future__ import annotations

from collections.abc import Sequence

SUMMARY_ANCHOR = "demo-summary"  # the lesson links here: lessons/lesson11_grpo_demo.html#demo-summary
MODES = {"response_mean": "response-mean", "token_mean": "token-mean", "fixed_length": "fixed-length"}
ESTIMATORS = {"grpo": "GRPO", "dr_grpo": "Dr. GRPO", "rloo": "RLOO"}
KINDS = {"answer": "答案", "scratch": "草稿", "eos": "EOS"}


# ---- formatting helpers ----------------------------------------------------------------------------
def _num(x: float | None, fmt: str) -> str:
    return "—" if x is None else format(x, fmt)


def _pm(sp: dict, fmt: str = ".3f") -> str:
    """'mean ± sd' (sd with ddof = 1), or just the mean for one seed."""
    if sp["sd"] is None:
        return _num(sp["mean"], fmt)
    return f"{_num(sp['mean'], fmt)} ± {_num(sp['sd'], fmt.replace('+', ''))}"


def _ci(sp: dict, fmt: str = "+.3f") -> str:
    lo, hi = sp["ci95"]
    return "95% CI 无法估计（只有 1 个种子）" if lo is None else f"95% CI [{_num(lo, fmt)}, {_num(hi, fmt)}]"


def verdict(sp: dict) -> str:
    """Whether a (paired) spread's 95% CI contains 0, in words: 'noise', 'positive', 'negative' or 'unknown'."""
    lo, hi = sp["ci95"]
    if lo is None:
        return "unknown"
    if lo <= 0.0 <= hi:
        return "noise"
    return "positive" if lo > 0 else "negative"


_VERDICT_ZH = {"noise": "在种子噪声之内", "positive": "超出种子噪声，为正", "negative": "超出种子噪声，为负",
               "unknown": "种子太少，无法判断是否超出噪声"}


def _diff(sp: dict, fmt: str = "+.3f") -> str:
    """'+0.032（95% CI [a, b]，在种子噪声之内）'."""
    return f"{_num(sp['mean'], fmt)}（{_ci(sp, fmt)}，{_VERDICT_ZH[verdict(sp)]}）"


def _pct(x: float, digits: int = 0) -> str:
    return f"{100 * x:.{digits}f}%"


def _range(values: Sequence[float], fmt: str) -> str:
    lo, hi = format(min(values), fmt), format(max(values), fmt)
    return f"从 {lo} 到 {hi}" if "+" in fmt else f"{lo}–{hi}"


def _exact_or(x: float, exact: bool, fmt: str, why: str) -> str:
    """'0，逐位相等' when ``exact`` (decided on the unrounded values before storing), else the stored
    deviation and where it comes from; a nonzero deviation is never called exact."""
    if exact:
        if x != 0:
            raise ValueError(f"exact flag set but the stored deviation is {x!r}")
        return "0，逐位相等"
    return f"{format(x, fmt)}，来自 {why}"


def _p(p: float | None) -> str:
    if p is None:
        return "p 无法计算"
    return "p < 0.001" if p < 0.001 else f"p = {p:.3f}"


def _holm_diff(sp: dict, test: dict, fmt: str = "+.3f") -> str:
    """'+0.58（95% CI [a, b]，5/5 个种子为正，Holm 校正 p = 0.01，显著）': one test of a Holm family."""
    if test["p_holm"] is None:
        return f"{_num(sp['mean'], fmt)}（种子太少，无法检验）"
    return (f"{_num(sp['mean'], fmt)}（未校正 {_ci(sp, fmt)}，{sp['positive']}/{sp['n']} 个种子为正，Holm 校正 "
            f"{_p(test['p_holm'])}，{'显著' if test['reject'] else '不显著'}）")


def holm_outcome(family: dict, pairs: dict) -> str:
    """The joint outcome of a Holm family of paired differences: 'positive' (all rejected, all > 0),
    'negative' (all rejected, all < 0), 'noise' (none rejected), 'mixed', or 'unknown' (too few seeds
    or no test)."""
    tests = family["tests"]
    if not tests or any(t["p_holm"] is None for t in tests.values()):
        return "unknown"
    outcomes = {("positive" if pairs[k]["mean"] > 0 else "negative") if t["reject"] else "noise"
                for k, t in tests.items()}
    return outcomes.pop() if len(outcomes) == 1 else "mixed"


def run_parameters(cfg: dict, seeds: Sequence[int], keys: Sequence[str], varied: dict[str, str] | None = None) -> str:
    """'本节参数（读自保存的结果）：G = 8，…': the stored config's values for ``keys``; ``varied``
    replaces the entries of the fields that differ between the arms of a comparison."""
    t = cfg["task"]
    items = {
        "G": f"G = {cfg['group_size']}", "B": f"B = {cfg['batch_prompts']}", "K": f"K = {cfg['inner_updates']}",
        "steps": f"{cfg['steps']} 步", "lr": f"lr = {cfg['lr']:g}",
        "clip": f"ε_low / ε_high = {cfg['eps_low']:g} / {cfg['eps_high']:g}", "beta": f"β = {cfg['kl_coef']:g}",
        "advantage": f"优势 {ESTIMATORS.get(cfg['advantage'], cfg['advantage'])}",
        "aggregation": f"聚合 {MODES.get(cfg['aggregation'], cfg['aggregation'])}",
        "adv_eps": f"adv_eps = {cfg['adv_eps']:g}",
        "task": f"{t['num_prompts']} 个 prompt、{t['num_digits']} 个答案数字、回答最长 {t['max_len']} token",
        "seeds": f"种子 {', '.join(map(str, seeds))}" if seeds else f"种子 {cfg['seed']}",
    } | (varied or {})
    return "本节参数（读自保存的结果）：" + "，".join(items[k] for k in keys) + "。"


# ---- (a) ---------------------------------------------------------------------------------------------
def section_a(run: dict) -> str:
    """What section (a)'s run shows: accuracy, the start's group split, zero-variance groups, stuck
    prompts, and the KL band split by token kind."""
    h, ps, sm = run["history"], run["per_seed"], run["summary"]
    cfg, seeds = run["config"], run["seeds"]
    n, g, s = len(h["step"]) - 1, cfg["group_size"], len(seeds)
    stuck_p, num_prompts = run["prompts"]["stuck_p"], len(run["prompts"]["p_end"])
    marks = [t for t in (25, 50, 75, 100) if t < n] + [n]
    acc = "、".join(f"{h['acc'][t]:.2f}（第 {t} 步）" for t in marks)
    wrong, right = ps["expected_all_wrong"][0], ps["expected_all_right"][0]
    mixed = 1 - wrong - right
    start_shape = ("多数 prompt 一开始就“全错”，有对有错的组是少数" if wrong > 0.5 else
                   "有对有错的组占多数" if mixed > 0.5 else "全错、全对与混合的组都不占多数")
    ka, ks, ke = ps["kl_answer"][0], ps["kl_scratch"][0], ps["kl_eos"][0]
    spread_note = (f"{s} 个种子第 {n} 步：{_pm(sm['final_acc'])}（均值 ± 样本标准差，ddof = 1），"
                   f"范围 {sm['final_acc']['min']:.3f}–{sm['final_acc']['max']:.3f}" if s > 1 else "只跑了 1 个种子")
    return "\n".join([
        f"**看到的（本次运行；曲线是种子 {seeds[0]}，括号里是 {s} 个种子的统计）**",
        "",
        f"- **准确率**：全体 prompt 的精确成功概率均值从 {h['acc'][0]:.2f}（第 0 步）升到 {acc}。{spread_note}。",
        f"- **开始时**：按初始策略的精确 $p_q$，一组 G = {g} 个回答预期 {_pct(wrong)} 全错、{_pct(right, 1)} 全对、"
        f"{_pct(mixed)} 有对有错（种子 {seeds[0]}；{s} 个种子的全错比例 {_range(ps['expected_all_wrong'], '.0%')}），"
        f"第 0 步实测零方差组比例 {h['zero_var_frac'][0]:.2f}：{start_shape}。",
        f"- **零方差组**：第 {n} 步零方差组比例 {h['zero_var_frac'][n]:.2f}；按结束时的精确 $p_q$，预期 "
        f"{_pct(ps['expected_all_right_end'][0])} 的组全对、{_pct(ps['expected_all_wrong_end'][0])} 全错"
        f"（{s} 个种子全对 {_range(ps['expected_all_right_end'], '.0%')}）。全程实测减理论 "
        f"$\\overline{{p_q^G+(1-p_q)^G}}$ 平均 {ps['zero_var_gap_mean'][0]:+.3f}"
        f"（{s} 个种子{_range(ps['zero_var_gap_mean'], '+.3f')}）。",
        f"- **先验很差的 prompt**：训练结束时 {ps['stuck_end'][0]} / {num_prompts} 个 prompt 的成功概率仍低于 "
        f"{stuck_p}，其中 {ps['stuck_end_started_stuck'][0]} 个开始时就低于它（开始时共 {ps['stuck_start'][0]} 个；"
        f"{s} 个种子结束时 {_range(ps['stuck_end'], 'd')} 个）。p_q < {stuck_p} 时一组 {g} 个回答全错的概率至少 "
        f"{_pct((1 - stuck_p) ** g)}：先验很差的 prompt 很少采到正确回答，组多数时候“全错”，优势为 0，"
        "拿不到信号（课文“零方差分支”）。",
        f"- **KL**：每 token 的 k3 KL（第 1–{n} 步）中位数 {ps['kl_median'][0]:.2f}，10%–90% 分位 "
        f"{ps['kl_p10'][0]:.2f}–{ps['kl_p90'][0]:.2f}，最高 {ps['kl_max'][0]:.2f}（第 {ps['kl_argmax_step'][0]} 步）；"
        f"{s} 个种子的中位数 {_range(ps['kl_median'], '.2f')}。按 token 种类（全程平均，每个 token）：答案 token "
        f"{ka:.2f}、草稿 token {ks:.2f}、EOS {ke:.2f}。{kl_location(run)}"
        f"β = {cfg['kl_coef']:g} 很小，这里没有调它。",
        "- " + run_parameters(cfg, seeds, ("G", "B", "K", "steps", "lr", "clip", "beta", "advantage", "aggregation",
                                           "adv_eps", "task", "seeds")),
    ])


def kl_location(run: dict) -> str:
    """Where the KL sits, by token kind: the shares of the narrated seed in the order of the table (a
    kind holds "most" of it only above one half), and the per-token answer-vs-scratch comparison from
    its paired difference over seeds."""
    ps, seed = run["per_seed"], run["seeds"][0]
    order = sorted(KINDS, key=lambda k: -ps[f"kl_share_{k}"][0])
    top, top_share = order[0], ps[f"kl_share_{order[0]}"][0]
    shares = "、".join(f"{KINDS[k]} {_pct(ps[f'kl_share_{k}'][0])}" for k in order)
    mass = (f"一半以上在{KINDS[top]} token 上" if top_share > 0.5 else
            f"没有哪一种 token 占一半以上，最多的是{KINDS[top]} token")
    pair = run["pairs"]["kl_answer-kl_scratch"]
    per_token = {
        "positive": "每个答案 token 的 KL 比每个草稿 token 高 {d}：与“奖励只看答案”一致",
        "negative": "每个草稿 token 的 KL 比每个答案 token 高（答案 − 草稿 = {d}）",
        "noise": "每个答案 token 与每个草稿 token 的 KL 之差 {d}",
        "unknown": "每个答案 token 与每个草稿 token 的 KL 之差 {d}",
    }[verdict(pair)].format(d=f"{_diff(pair)}，{pair['positive']}/{pair['n']} 个种子为正")
    return (f"KL 总量（按 token 求和）的份额从大到小：{shares}（种子 {seed}），{mass}。"
            f"{len(run['seeds'])} 个种子配对比较：{per_token}。")


# ---- (b) ---------------------------------------------------------------------------------------------
def section_b(sweep: dict) -> str:
    """What the group-size sweep shows, at both horizons."""
    table, s = sweep["table"], len(sweep["seeds"])
    by_g = {r["G"]: r for r in table}
    max_dev = max(abs(r["zero_var_measured"] - r["zero_var_theory"]) for r in table)
    rises = [r["late_rise"]["mean"] for r in table]
    g_lo, g_hi = min(by_g), max(by_g)
    lines = [
        f"**看到的**（{s} 个种子；同一种子在每个 G 下是同一组秘密答案和同一个初始策略，所以按种子配对比较）",
        "",
        "- **零方差比例**：每个 G 上实测与理论 $\\overline{p_q^G+(1-p_q)^G}$ 相差至多 "
        f"{max_dev:.3f}（全程、种子平均；理论用的是精确的 $p_q$，这是对实现的检查，不是对课文的额外证明）。"
        f"G = {g_lo} 时全程 {_pct(by_g[g_lo]['zero_var_measured'])} 的组被置零，G = {g_hi} 时 "
        f"{_pct(by_g[g_hi]['zero_var_measured'])}，但一步只覆盖 {by_g[g_hi]['B']} 个 prompt。",
        f"- **曲线仍在上升**：最后 20 步各 G 的准确率平均上升 {min(rises):+.3f} 到 {max(rises):+.3f}"
        "（见中图），所以下面的排序只对这个训练长度成立。",
    ]
    tops, supported = [], []
    for h in sweep["horizons"]:
        rk = sweep["ranking"][str(h)]
        order = rk["order"]
        tops.append(order[0])
        supported.append(holm_outcome(rk["holm"], rk["best_vs"]) == "positive")
        line = (f"- **第 {h} 步**：平均准确率从高到低 G = {', '.join(map(str, order))}；最高的 G = {order[0]}"
                f"（{_pm(by_g[order[0]]['acc'][str(h)])}）。")
        if rk["best_vs"]:
            diffs = "；".join(f"比 G = {g} 高 {_holm_diff(rk['best_vs'][str(g)], rk['holm']['tests'][str(g)])}"
                              for g in order[1:])
            line += (f"它与其余 {rk['holm']['m']} 个 G 逐一按种子配对比较（{rk['holm']['m']} 个比较共同支撑"
                     f"“G = {order[0]} 最好”，Holm 校正，族 α = {rk['holm']['alpha']:g}）：{diffs}。" + best_claim(rk))
        lines.append(line)
    same = len(set(tops)) == 1
    called = "、".join(f"第 {h} 步" for h, ok in zip(sweep["horizons"], supported, strict=True) if ok) or "没有"
    lines.append(f"- 两个长度下平均最高的 G {'相同' if same else '不同'}（{' → '.join(f'G = {b}' for b in tops)}"
                 f"；校正后能称为“最好”的：{called}）。"
                 "为什么大 G 不占优，这里没有单独测量：一个可能的解释是本任务里 prompt 之间不共享解法，"
                 "一步覆盖的 prompt 少就学得慢，但存下的数字没有把覆盖面与其他因素分开（不确定）。")
    lines.append("- " + run_parameters(sweep["config"], sweep["seeds"],
                                       ("G", "B", "K", "steps", "lr", "clip", "beta", "advantage", "aggregation",
                                        "adv_eps", "task", "seeds"),
                                       {"G": f"G ∈ {{{', '.join(str(r['G']) for r in table)}}}",
                                        "B": f"B = {sweep['budget']}/G"}))
    return "\n".join(lines)


def best_claim(rk: dict) -> str:
    """Whether the G with the highest mean accuracy at one horizon may be called best: only when its
    paired difference to every other G survives Holm's correction."""
    order, tests = rk["order"], rk["holm"]["tests"]
    outcome = holm_outcome(rk["holm"], rk["best_vs"])
    if outcome == "unknown":
        return "种子太少，无法检验哪个 G 最好。"
    if outcome == "positive":
        return f"校正后它与其余每个 G 的差都显著：在这个训练长度上可以说 G = {order[0]} 最好。"
    tied = [g for g in order[1:] if not tests[str(g)]["reject"]]
    return (f"校正后与 G = {'、'.join(map(str, tied))} 的差不显著：不能说 G = {order[0]} 最好，"
            f"只能说它与{'这些' if len(tied) > 1 else '这个'} G 在种子噪声内分不开。")


# ---- (c) ---------------------------------------------------------------------------------------------
def _pair_names(key: str) -> str:
    return " − ".join(MODES.get(x, ESTIMATORS.get(x, x)) for x in key.split("@")[0].split("-"))


def c_comparisons(sweep: dict) -> str:
    """The paired differences of within-group gaps, response-mean minus each other mode, with their
    Holm-corrected tests: '- response-mean − token-mean +0.58（…）' lines."""
    fam = sweep["gap_holm"]["tests"]
    return "；".join(f"{_pair_names(k)} {_holm_diff(p, fam[k], '+.2f')}" for k, p in sweep["gap_pairs"].items())


def c_conclusion(sweep: dict) -> str:
    """What the between-mode comparison says about Dr. GRPO's length bias. The claim is that
    response-mean ($1/|o_i|$) lengthens wrong answers relative to the other aggregations, so it rests
    on the paired differences of within-group gaps, response-mean minus each other mode, all of which
    must be rejected after Holm's correction, never on each mode's gap tested against 0."""
    pairs = sweep.get("gap_pairs") or {}
    if not pairs:
        return "没有 response-mean 与其他聚合的配对比较，无法检查长度偏置。"
    outcome = holm_outcome(sweep["gap_holm"], pairs)
    others = "、".join(MODES[k.split("-")[1]] for k in pairs)
    if outcome == "unknown":
        return "种子太少，无法检验聚合之间的组内长度差。"
    if outcome == "positive":
        first = next(iter(pairs.values()))
        length = sweep["modes"]["response_mean"]["final_len"]["mean"]
        return (f"response-mean 下答错与答对回答的长度差比 {others} 都大，且 Holm 校正后都显著：方向与 Dr. GRPO "
                f"的预言一致，这个玩具任务上看到了长度偏置。量不大：比 {MODES[next(iter(pairs)).split('-')[1]]} 多 "
                f"{first['mean']:+.2f} 个 token，约为 response-mean 最终平均长度 {length:.1f} 的 "
                f"{_pct(first['mean'] / length)}。偏置大小取决于任务与模型。")
    if outcome == "negative":
        return (f"response-mean 下答错与答对回答的长度差比 {others} 都小，且 Holm 校正后都显著：方向与 Dr. GRPO "
                "的预言相反。偏置大小与方向取决于任务与模型。")
    if outcome == "noise":
        return (f"response-mean 与 {others} 的组内长度差之差在 Holm 校正后都不显著：这个玩具任务上测不出 "
                "response-mean 相对其他聚合的长度偏置（测不出不等于没有）。偏置大小取决于任务与模型。")
    tests = sweep["gap_holm"]["tests"]
    larger = [k for k in pairs if tests[k]["reject"] and pairs[k]["mean"] > 0]
    smaller = [k for k in pairs if tests[k]["reject"] and pairs[k]["mean"] < 0]
    unclear = [k for k in pairs if not tests[k]["reject"]]
    length = sweep["modes"]["response_mean"]["final_len"]["mean"]

    def names(keys: list[str]) -> str:
        return "、".join(MODES[k.split("-")[1]] for k in keys)
    parts = []
    if larger:
        first = pairs[larger[0]]["mean"]
        parts.append(f"response-mean 下答错与答对回答的长度差比 {names(larger)} 大，Holm 校正后显著"
                     f"（多 {first:+.2f} 个 token，约为 response-mean 最终平均长度 {length:.1f} 的 "
                     f"{_pct(first / length)}）")
    if smaller:
        parts.append(f"比 {names(smaller)} 小，校正后显著，方向与预言相反")
    if unclear:
        parts.append(f"与 {names(unclear)} 的差校正后不显著")
    own = sweep["modes"]["response_mean"]["gap_within"]
    lo, hi = own["ci95"]
    contains = "无法判断是否包含 0" if lo is None else ("也包含 0" if lo <= 0 <= hi else "不含 0")
    return ("；".join(parts) + "。token-mean 与 fixed-length 都去掉了 $1/|o_i|$，"
            "在同一批内梯度方向相同（只差一个批内常数），"
            "Dr. GRPO 对两者的预言一样，而两个比较的结论不一致；response-mean 自身的组内长度差"
            f"{_ci(own, '+.2f')}（与 0 比）{contains}。"
            "所以这次运行对长度偏置的结论是不确定：不能说看到了 Dr. GRPO 预言的偏置，"
            "也不能说 response-mean 比其他聚合都更偏向让答错的回答变长。偏置大小取决于任务与模型。")


def section_c(sweep: dict) -> str:
    """Within-group length gaps per aggregation, and the overall length each aggregation drifts to."""
    modes, s = sweep["modes"], len(sweep["seeds"])
    lines = [
        f"**看到的**（{s} 个种子、{sweep['steps']} 步；组内长度差 = 同一组里答错回答的平均长度减答对回答的平均长度，"
        "只计有对有错的组，先对组、再对步平均）",
        "",
    ]
    for mode, d in modes.items():
        lines.append(f"- {MODES[mode]}：组内长度差 {_pm(d['gap_within'], '+.2f')} token，"
                     f"{_ci(d['gap_within'], '+.2f')}，{_VERDICT_ZH[verdict(d['gap_within'])]}"
                     f"（与 0 比；平均 {_pct(d['mixed_groups'])} 的组有对有错）。")
    if sweep["gap_pairs"]:
        lines.append(f"- **聚合之间**（长度偏置说的是 response-mean 与其他聚合的差别，所以按种子配对比较组内长度差，"
                     f"{sweep['gap_holm']['m']} 个比较共同支撑一个结论，Holm 校正，"
                     f"族 α = {sweep['gap_holm']['alpha']:g}）："
                     f"{c_comparisons(sweep)}。")
    lines.append("- 结论：" + c_conclusion(sweep))
    lens = "，".join(f"{MODES[m]} {d['final_len']['mean']:.1f}（{_range(d['final_len_per_seed'], '.1f')}）"
                    for m, d in modes.items())
    fam = sweep["pairs_holm"]
    pair_txt = "；".join(f"{_pair_names(k)} {_holm_diff(p, fam['tests'][k], '+.1f')}"
                        for k, p in sweep["pairs"].items())
    real = [_pair_names(k) for k, t in fam["tests"].items() if t["reject"]]
    lines += [
        f"- **整体长度**（最后 10 步平均，括号里是种子范围）：{lens}。"
        f"配对差（同一种子，{fam['m']} 对一起做 Holm 校正）：{pair_txt}。",
        ("- 校正后显著的整体长度差：" + "、".join(real) + "；其余不显著。" if real else
         "- 校正后三种聚合之间的整体长度差都不显著（种子之间差别很大）。") + "这里的机制我们没有验证，只报告现象。",
        "- " + run_parameters(sweep["config"], sweep["seeds"],
                              ("G", "B", "K", "steps", "lr", "clip", "beta", "advantage", "aggregation", "adv_eps",
                               "task", "seeds"),
                              {"aggregation": "聚合 " + " / ".join(MODES[m] for m in modes)}),
    ]
    return "\n".join(lines)


# ---- (d) ---------------------------------------------------------------------------------------------
def section_d(data: dict) -> str:
    """The 1/sigma weight of std division on one batch of the initial policy."""
    mixed = len(data["sigma"]) - data["zero_var_groups"]
    bins = "；".join(f"σ ∈ ({b['lo']}, {b['hi']}]：{b['n']} 个 prompt，平均权重 GRPO {b['weight_grpo']:.3f}、"
                    f"Dr. GRPO {b['weight_dr_grpo']:.3f}，比值 {b['ratio']:.2f}" for b in data["bins"])
    dev = _exact_or(data["max_abs_ratio_minus_inv_sigma"], data["ratio_equals_inv_sigma_exact"], ".1e",
                    f"{data['dtype']} 舍入")
    params = run_parameters(data["config"], [], ("G", "B", "adv_eps", "task", "seeds"),
                            {"B": f"{len(data['sigma'])} 个组（初始策略，不训练）"})
    return (f"**看到的**：{len(data['sigma'])} 个组里 {data['zero_var_groups']} 个全对或全错（两种做法权重都为 0）；"
            f"在 {mixed} 个有对有错的组上，除以 std 后与只减均值的权重之比等于 $1/\\sigma$（最大偏差 {dev}）。{bins}。"
            "σ 小（几乎全对或全错）的 prompt 被放大得最多：这就是 Q2 中“除以组 std 等于按 $1/\\sigma$ 给 prompt "
            "重新加权”，也是 Dr. GRPO 去掉 std 的理由。放大是相对的：0/1 奖励下除以 std 后一个组的权重是 "
            f"$2\\sigma \\le 1$，并不大，只是只减均值时的 $2\\sigma^2$ 更小。{params}")


# ---- (e) ---------------------------------------------------------------------------------------------
def section_e(data: dict) -> str:
    """The estimators on one batch, and the paired final-accuracy comparison at each beta."""
    g, s, arms, pairs = data["G"], len(data["seeds"]), data["arms"], data["pairs"]
    names, betas = list(data["batch"]), data["kl_coefs"]
    exact = _exact_or(data["max_abs_dr_grpo_minus_scaled_rloo"], data["dr_grpo_equals_scaled_rloo_exact"], ".1e",
                      "float64 舍入")
    lines = [
        f"**看到的**：同一批 rollout 上（G = {g}），只减均值的优势与 $\\frac{{G-1}}{{G}}\\times$RLOO 优势的最大差为 "
        f"{exact}：两者只差常数因子 (G−1)/G；GRPO 与它们的差别在于除以 σ。",
        "",
        f"训练 {data['steps']} 步后全体 prompt 的准确率（{s} 个配对种子，均值 ± 样本标准差）：",
        "",
        "| β | " + " | ".join(ESTIMATORS[n] for n in names) + " |",
        "|---|" + "---|" * len(names),
    ]
    for beta in betas:
        lines.append(f"| {beta:g} | " + " | ".join(_pm(arms[f"{n}@{beta:g}"]["final_acc"]) for n in names) + " |")
    pair_keys = [k.split("@")[0] for k in pairs if k.endswith(f"@{betas[0]:g}")]
    lines += ["", "配对差（同一种子；95% CI，t 为配对 t 统计量）：", "",
              "| β | " + " | ".join(_pair_names(k) for k in pair_keys) + " |", "|---|" + "---|" * len(pair_keys)]
    for beta in betas:
        cells = [f"{p['mean']:+.3f} {_ci(p)}，t = {_num(p['t'], '.2f')}"
                 for p in (pairs[f"{k}@{beta:g}"] for k in pair_keys)]
        lines.append(f"| {beta:g} | " + " | ".join(cells) + " |")
    lines += ["", "- " + e_conclusion(data)]
    if all(f"dr_grpo-rloo@{b:g}" in pairs for b in betas):
        lines.append("- Dr. GRPO − RLOO（优势只差常数因子）：" + "；".join(
            f"β = {b:g} 时{_VERDICT_ZH[verdict(pairs[f'dr_grpo-rloo@{b:g}'])]}" for b in betas) + "。")
    lines.append("- " + run_parameters(data["config"], data["seeds"],
                                       ("G", "B", "K", "steps", "lr", "clip", "beta", "advantage", "aggregation",
                                        "adv_eps", "task", "seeds"),
                                       {"beta": "β ∈ {" + ", ".join(f"{b:g}" for b in betas) + "}",
                                        "advantage": "优势 " + " / ".join(ESTIMATORS[n] for n in names)}))
    return "\n".join(lines)


def e_conclusion(data: dict) -> str:
    """Which GRPO vs Dr. GRPO effect survives the beta = 0 control, in one sentence."""
    betas = data["kl_coefs"]
    with_kl, no_kl = [b for b in betas if b > 0], [b for b in betas if b == 0]
    if not with_kl or not no_kl or "grpo-dr_grpo@0" not in data["pairs"]:
        return "没有 β = 0 的 GRPO / Dr. GRPO 对照，无法区分 1/σ 加权与 PG/KL 比例的作用。"
    p_on, p_off = data["pairs"][f"grpo-dr_grpo@{with_kl[0]:g}"], data["pairs"]["grpo-dr_grpo@0"]
    on, off = verdict(p_on), verdict(p_off)
    d_on, d_off, b_on = p_on["mean"], p_off["mean"], f"{with_kl[0]:g}"
    real = ("positive", "negative")
    if "unknown" in (on, off):
        return "种子太少，无法判断 GRPO 与 Dr. GRPO 的差别是否超出噪声。"
    if on in real and off == "noise":
        return (f"GRPO − Dr. GRPO 在 β = {b_on} 时为 {d_on:+.3f}、超出噪声，在 β = 0 时为 {d_off:+.3f}、在噪声之内。"
                "β 固定时，除以 σ 同时放大了策略梯度项相对 KL 项的比例（σ ≤ 0.5，所以 1/σ ≥ 2）；β = 0 去掉这个混杂后"
                "差别不再可分辨，所以不能把它归于“1/σ 放大难题组”：留下来的是 PG/KL 比例的作用。")
    if on in real and off in real:
        return (f"GRPO − Dr. GRPO 在两种 β 下都超出噪声（β = {b_on}：{d_on:+.3f}，β = 0：{d_off:+.3f}）："
                "差别不只来自 PG/KL 比例，std 除法的 1/σ 加权本身也起作用。")
    if on == "noise" and off in real:
        return (f"GRPO − Dr. GRPO 只在 β = 0 时超出噪声（{d_off:+.3f}），β = {b_on} 时在噪声之内（{d_on:+.3f}）："
                "KL 项掩盖了 1/σ 加权的作用。")
    return (f"GRPO − Dr. GRPO 在两种 β 下都在种子噪声之内（β = {b_on}：{d_on:+.3f}，β = 0：{d_off:+.3f}）："
            "本任务里看不出 std 除法对最终准确率的作用，也就谈不上“1/σ 放大难题组所以 GRPO 更快”。")


def mostly(all_wrong: float, all_right: float) -> str:
    """Which kind of zero-variance group dominates, from the expected all-wrong / all-right fractions."""
    return "多为全错" if all_wrong > all_right else "多为全对"


# ---- the closing section -----------------------------------------------------------------------------
def summary(run: dict, sweep_b: dict, sweep_c: dict, data_d: dict, data_e: dict) -> str:
    """The closing section's body (its heading and the SUMMARY_ANCHOR are the markdown cell above it):
    what each experiment shows, with its numbers, tied to Q1–Q3 and the lesson's claims."""
    h, ps, sm = run["history"], run["per_seed"], run["summary"]
    n = len(h["step"]) - 1
    last = str(sweep_b["horizons"][-1])
    rk = sweep_b["ranking"][last]
    max_dev = max(abs(r["zero_var_measured"] - r["zero_var_theory"]) for r in sweep_b["table"])
    low = data_d["bins"][0] if data_d["bins"] else None
    lines = [
        "下面的数字都来自上面这次运行（由各节保存的 `assets/figs/demo_*.json` 生成）。",
        "",
        f"- **(a) GRPO 的工作机制（Q1）**：准确率 {h['acc'][0]:.2f} → {h['acc'][n]:.2f}（{n} 步；"
        f"{len(run['seeds'])} 个种子 {_pm(sm['final_acc'])}）。组内相对优势只在有对有错的组里非零：第 0 步零方差组占 "
        f"{h['zero_var_frac'][0]:.2f}（{mostly(ps['expected_all_wrong'][0], ps['expected_all_right'][0])}），"
        f"第 {n} 步占 {h['zero_var_frac'][n]:.2f}"
        f"（{mostly(ps['expected_all_wrong_end'][0], ps['expected_all_right_end'][0])}）；"
        f"{ps['stuck_end'][0]} 个先验很差的 prompt 到最后成功概率仍低于 {run['prompts']['stuck_p']}，"
        "几乎拿不到信号（课文“零方差分支”）。策略与参考策略的距离（β = "
        f"{run['config']['kl_coef']:g} 时）：每 token k3 中位数 "
        f"{ps['kl_median'][0]:.2f}，每个答案 token {ps['kl_answer'][0]:.2f}、草稿 token {ps['kl_scratch'][0]:.2f}"
        "（(a) 没有对照的 β，看不出 KL 项把策略拉回了多少）。",
        f"- **(b) 固定预算下的 group size（Q3）**：零方差比例与 $p^G+(1-p)^G$ 相符（最大偏差 {max_dev:.3f}）；"
        f"第 {last} 步平均准确率最高的是 G = {rk['order'][0]}。{best_claim(rk)}"
        "曲线还在上升，这个排序只对这个训练长度成立；G 小时零方差组多（上面的实测），"
        "G 大时一步覆盖的 prompt 少是否拖慢了学习，存下的数字没有单独测量（不确定）。",
    ]
    if sweep_c["gap_pairs"]:
        real = [_pair_names(k) for k, t in sweep_c["pairs_holm"]["tests"].items() if t["reject"]]
        lines.append("- **(c) 长度偏置（课文“常见误区”）**：在有对有错的组内比较答错与答对的长度，"
                     "再按种子配对比较聚合之间的差："
                     f"{c_comparisons(sweep_c)}。{c_conclusion(sweep_c)}"
                     "三种聚合的整体长度差" + ("校正后显著的有 " + "、".join(real) if real else "校正后都不显著")
                     + "。")
    if low is not None:
        dev = _exact_or(data_d["max_abs_ratio_minus_inv_sigma"], data_d["ratio_equals_inv_sigma_exact"], ".1e",
                        f"{data_d['dtype']} 舍入")
        lines.append("- **(d) 除以组 std = 按 $1/\\sigma$ 重新加权（Q2）**："
                     f"权重之比等于 $1/\\sigma$（最大偏差 {dev}）；"
                     f"σ ≤ {low['hi']} 的组被放大约 {low['ratio']:.1f} 倍"
                     "（相对只减均值；组权重本身 $2\\sigma$ 不超过 1）。")
    exact = _exact_or(data_e["max_abs_dr_grpo_minus_scaled_rloo"], data_e["dr_grpo_equals_scaled_rloo_exact"], ".1e",
                      "float64 舍入")
    pairs = "；".join(f"β = {b:g} 时 {_diff(data_e['pairs'][f'grpo-dr_grpo@{b:g}'])}" for b in data_e["kl_coefs"]
                      if f"grpo-dr_grpo@{b:g}" in data_e["pairs"])
    lines.append(f"- **(e) GRPO、Dr. GRPO 与 RLOO（课文“与 RLOO 的数学本质差异”、Q2）**：只减均值的优势 = "
                 f"(G−1)/G × RLOO 的优势（最大差 {exact}）。GRPO − Dr. GRPO 的最终准确率：{pairs}。"
                 + e_conclusion(data_e))
    return "\n".join(lines)


# ---- alt text of the figures -------------------------------------------------------------------------
def alt_a(run: dict) -> str:
    h, s = run["history"], len(run["seeds"])
    n = len(h["step"]) - 1
    return (f"图 (a)，种子 {run['seeds'][0]} 的 GRPO 训练曲线，共五幅。一：批内平均奖励与全体 prompt 准确率，准确率从 "
            f"{h['acc'][0]:.2f} 升到 {h['acc'][n]:.2f}，浅色带为 {s} 个种子的均值 ± 标准差。二：每 token 的 k3 KL，"
            "及答案、草稿、EOS 三类 token 各自的 KL。三：答对与答错回答的平均长度。四：零方差组比例的实测与理论 "
            "p^G+(1-p)^G。五：每个 prompt 训练前后的成功概率散点，虚线为 0.05。")


def alt_b(sweep: dict) -> str:
    return (f"图 (b)，固定预算 N = {sweep['budget']}、G 取 {', '.join(str(r['G']) for r in sweep['table'])}，"
            f"{len(sweep['seeds'])} 个种子。左：零方差组比例的实测与理论随 G 下降。"
            f"中：各 G 的准确率曲线与种子标准差带，共 {sweep['steps']} 步。"
            f"右：第 {' 步与第 '.join(map(str, sweep['horizons']))} 步的准确率随 G 的变化，误差棒为样本标准差。")


def alt_c(sweep: dict) -> str:
    return (f"图 (c)，三种损失聚合各 {len(sweep['seeds'])} 个种子。左：平均回答长度随训练步的变化，浅色带为种子标准差。"
            "中：组内长度差（答错减答对）随训练步的变化，虚线为 0。右：准确率曲线。")


def alt_d(data: dict) -> str:
    return (f"图 (d)，初始策略上 {len(data['sigma'])} 个组（G = {data['G']}）。"
            "左：每个 prompt 的权重 mean|A| 对组内标准差 σ，除以 std 的点落在 2σ 线上，"
            "只减均值的点落在 2σ² 线上。右：两者之比对 1/σ，落在对角线上。")


def alt_e(data: dict) -> str:
    betas = " 与 ".join(f"β = {b:g}" for b in data["kl_coefs"])
    return ("图 (e)。左：同一批 rollout 上 GRPO 与只减均值的优势对 RLOO 优势的散点，"
            "只减均值的点落在斜率 (G−1)/G 的直线上。"
            f"右两幅：{betas} 时 GRPO、Dr. GRPO、RLOO 的准确率曲线，浅色带为 {len(data['seeds'])} 个种子的标准差。")
