"""Figures of the demo notebook's sections (a)-(e), each saved as demo_<name>.png with the numbers it is
drawn from in demo_<name>.json beside it (rounded; tests compare these numbers, not PNG bytes)."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from .experiments import round_floats
from .figures import plt, save_figure, use_style

COLORS = ["#4C72B0", "#DD8452", "#55A868", "#C44E52", "#8172B3"]


def save_section(name: str, fig: plt.Figure, data: dict, out_dir: str | Path) -> Path:
    """Write demo_<name>.png and demo_<name>.json (floats rounded to 4 digits); returns the PNG path."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"demo_{name}.json").write_text(json.dumps(round_floats(data), indent=1, sort_keys=True) + "\n")
    return save_figure(fig, out / f"demo_{name}.png")


def plot_training(run: dict) -> plt.Figure:
    """(a) reward and exact accuracy, KL, lengths of correct/incorrect responses, zero-variance fraction."""
    use_style()
    h = run["history"]
    steps = np.array(h["step"])
    fig, ax = plt.subplots(1, 4, figsize=(13.0, 3.2))
    ax[0].plot(steps, h["reward"], color=COLORS[0], alpha=0.5, label="批内平均奖励")
    ax[0].plot(steps, h["acc"], color=COLORS[1], label="全体 prompt 准确率")
    ax[0].set_title("奖励")
    ax[1].plot(steps, h["kl"], color=COLORS[2])
    ax[1].set_title("k3 KL(π‖π_ref)，每 token")
    ax[2].plot(steps, h["len_correct"], color=COLORS[2], label="答对")
    ax[2].plot(steps, h["len_incorrect"], color=COLORS[3], label="答错")
    ax[2].set_title("回答长度")
    ax[3].plot(steps, h["zero_var_frac"], color=COLORS[4], label="实测")
    ax[3].plot(steps, h["zero_var_theory"], color="black", ls="--", lw=1, label="理论 p^G+(1-p)^G")
    ax[3].set_title("零方差组比例")
    for a in ax:
        a.set_xlabel("训练步")
    for a in (ax[0], ax[2], ax[3]):
        a.legend(fontsize=8)
    fig.tight_layout()
    return fig


def plot_group_sweep(sweep: dict) -> plt.Figure:
    """(b) zero-variance fraction measured vs theory, and accuracy curves with seed spread, per G."""
    use_style()
    table = sweep["table"]
    fig, ax = plt.subplots(1, 3, figsize=(13.0, 3.4))
    gs = [r["G"] for r in table]
    ax[0].plot(gs, [r["zero_var_measured"] for r in table], "o-", label="实测")
    ax[0].plot(gs, [r["zero_var_theory"] for r in table], "k--", label="理论")
    ax[0].set_xscale("log", base=2)
    ax[0].set_xlabel("G")
    ax[0].set_title("零方差组比例（全程平均）")
    ax[0].legend(fontsize=8)
    for i, (g, c) in enumerate(sweep["curves"].items()):
        m, s = np.array(c["acc_mean"]), np.array(c["acc_std"])
        ax[1].plot(m, color=COLORS[i], label=f"G={g}, B={sweep['budget'] // int(g)}")
        ax[1].fill_between(np.arange(len(m)), m - s, m + s, color=COLORS[i], alpha=0.15)
    ax[1].set_xlabel("训练步")
    ax[1].set_title(f"全体 {sweep['num_prompts']} 个 prompt 的准确率")
    ax[1].legend(fontsize=7)
    final = [r["final_acc"] for r in table]
    ax[2].errorbar(gs, [f["mean"] for f in final], yerr=[f["std"] for f in final], fmt="o-", capsize=3)
    ax[2].set_xscale("log", base=2)
    ax[2].set_xlabel("G")
    ax[2].set_title(f"最终准确率（N=B×G={sweep['budget']}，{len(sweep['seeds'])} 个种子）")
    fig.tight_layout()
    return fig


def plot_length_bias(sweep: dict) -> plt.Figure:
    """(c) lengths of correct (solid) and incorrect (dashed) responses per aggregation, and accuracy."""
    use_style()
    fig, ax = plt.subplots(1, 2, figsize=(11.0, 3.4))
    for i, (mode, d) in enumerate(sweep["modes"].items()):
        ax[0].plot(d["len_correct_mean"], color=COLORS[i], label=f"{mode} " + "答对")
        ax[0].plot(d["len_incorrect_mean"], color=COLORS[i], ls="--", label=f"{mode} " + "答错")
        ax[1].plot(d["acc_mean"], color=COLORS[i], label=mode)
    ax[0].set_title(f"回答长度（{len(sweep['seeds'])} 个种子平均）")
    ax[1].set_title("准确率")
    for a in ax:
        a.set_xlabel("训练步")
        a.legend(fontsize=7)
    fig.tight_layout()
    return fig


def plot_std_weighting(data: dict) -> plt.Figure:
    """(d) per-prompt weight mean|A| against group sigma, with and without std division."""
    use_style()
    sigma = np.array(data["sigma"])
    fig, ax = plt.subplots(1, 2, figsize=(10.0, 3.4))
    ax[0].scatter(sigma, data["weight_grpo"], s=14, color=COLORS[0], label="除以 std（GRPO）")
    ax[0].scatter(sigma, data["weight_dr_grpo"], s=14, color=COLORS[1],
                  label="只减均值（Dr. GRPO）")
    grid = np.linspace(0.0, 0.5, 51)
    ax[0].plot(grid, 2 * grid, "k:", lw=1, label="2σ")
    ax[0].plot(grid, 2 * grid**2, "k--", lw=1, label="2σ²")
    ax[0].set_xlabel("组内标准差 σ")
    ax[0].set_title(f"每个 prompt 的权重 mean|A|（G={data['G']}）")
    ax[0].legend(fontsize=7)
    ax[1].scatter(data["one_over_sigma_mixed"], data["ratio_grpo_over_dr_mixed"], s=14, color=COLORS[2])
    ax[1].set_xlabel("1/σ")
    ax[1].set_title("权重之比 GRPO / Dr. GRPO")
    fig.tight_layout()
    return fig


def plot_advantage_comparison(data: dict) -> plt.Figure:
    """(e) GRPO and Dr. GRPO advantages against RLOO's on one batch, and accuracy curves."""
    use_style()
    b = data["batch"]
    fig, ax = plt.subplots(1, 2, figsize=(10.0, 3.4))
    ax[0].scatter(b["rloo"], b["grpo"], s=12, color=COLORS[0], label="GRPO")
    ax[0].scatter(b["rloo"], b["dr_grpo"], s=12, color=COLORS[1], label="只减均值")
    lim = max(abs(v) for v in b["rloo"]) or 1.0
    g = data["G"]
    ax[0].plot([-lim, lim], [-lim * (g - 1) / g, lim * (g - 1) / g], "k--", lw=1, label=f"y=({g}-1)/{g}·x")
    ax[0].set_xlabel("RLOO 优势")
    ax[0].set_title("同一批 rollout 的优势")
    ax[0].legend(fontsize=7)
    for i, (name, c) in enumerate(data["curves"].items()):
        m, s = np.array(c["acc_mean"]), np.array(c["acc_std"])
        ax[1].plot(m, color=COLORS[i], label=name)
        ax[1].fill_between(np.arange(len(m)), m - s, m + s, color=COLORS[i], alpha=0.15)
    ax[1].set_xlabel("训练步")
    ax[1].set_title("准确率（种子均值 ± 标准差）")
    ax[1].legend(fontsize=8)
    fig.tight_layout()
    return fig
