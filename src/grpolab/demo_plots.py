"""Figures of the demo notebook's sections (a)-(e), each saved as demo_<name>.png with the numbers it is
drawn from in demo_<name>.json beside it. The figure is drawn from the rounded numbers as stored, so
the committed PNG can be redrawn from the committed JSON (tests do)."""
from __future__ import annotations

import html
import json
import os
from collections.abc import Callable
from pathlib import Path

import numpy as np

from .experiments import round_floats
from .figures import plt, save_figure, use_style

COLORS = ["#4C72B0", "#DD8452", "#55A868", "#C44E52", "#8172B3"]


SECTIONS: dict[str, str] = {"a": "training", "b": "group_size", "c": "length_bias", "d": "std_weight",
                            "e": "grpo_vs_rloo"}  # section letter -> file stem demo_<stem>.{json,png}


def stored(data: dict) -> dict:
    """data as it is stored: floats rounded to 4 digits, NaN as None, through a JSON round trip."""
    return json.loads(json.dumps(round_floats(data)))


def save_section(name: str, data: dict, plot: Callable[[dict], plt.Figure], out_dir: str | Path) -> tuple[dict, Path]:
    """Write demo_<name>.json (the stored numbers) and demo_<name>.png drawn from exactly those numbers.

    Returns (stored data, PNG path): the caller writes its text from the stored data too."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    data = stored(data)
    (out / f"demo_{name}.json").write_text(json.dumps(data, indent=1) + "\n")
    return data, save_figure(plot(data), out / f"demo_{name}.png")


def figure_markdown(path: str | Path, alt: str, start: str | Path = ".") -> str:
    """The figure as a Markdown output: an <img> with its alt text and the PNG by its path from `start`
    (the notebook's folder), e.g. `<img src="../assets/figs/demo_training.png" alt="图 (a)…">`.

    Not text/html: one such output anywhere in a notebook makes Quarto add require.js and jQuery from a
    CDN (quarto-cli src/core/jupyter/widgets.ts, extractJupyterWidgetDependencies). Not image/png: Quarto
    takes an image output's alt only from the cell options fig-cap/fig-alt (src/core/jupyter/jupyter.ts,
    mdImageOutput), which cannot hold text computed from the run, and nbconvert writes "No description has
    been provided for this image". Not `![alt](src)`: an image alone in a paragraph is a pandoc implicit
    figure, which Quarto's HTML shows with the text as a caption and no alt (rdevguide PR #275)."""
    src = Path(os.path.relpath(path, start)).as_posix()
    return f'<img src="{html.escape(src)}" alt="{html.escape(alt)}" style="max-width: 100%"/>'


def _band(ax: plt.Axes, curve: dict, color: str, label: str | None = None, alpha: float = 0.15) -> None:
    """A seed-mean line with a mean ± sd band (sd may be None where fewer than 2 seeds)."""
    m = np.array(curve["mean"], dtype=float)
    sd = np.array([np.nan if v is None else v for v in curve["sd"]], dtype=float)
    steps = np.arange(len(m))
    ax.plot(steps, m, color=color, label=label)
    ax.fill_between(steps, m - sd, m + sd, color=color, alpha=alpha, linewidth=0)


def _values(xs: list) -> np.ndarray:
    return np.array([np.nan if v is None else v for v in xs], dtype=float)


def plot_training(run: dict) -> plt.Figure:
    """(a) reward and accuracy (with the seed band), KL by token kind, lengths, zero-variance fraction,
    and each prompt's success probability before vs after training."""
    use_style()
    h = run["history"]
    steps = np.array(h["step"])
    fig, ax = plt.subplots(1, 5, figsize=(16.0, 3.2))
    ax[0].plot(steps, h["reward"], color=COLORS[0], alpha=0.5, label="批内平均奖励")
    ax[0].plot(steps, h["acc"], color=COLORS[1], label="全体 prompt 准确率")
    _band(ax[0], run["bands"]["acc"], "gray", f"{len(run['seeds'])} 个种子")
    ax[0].set_title("奖励")
    ax[1].plot(steps, _values(h["kl"]), color=COLORS[2], label="全部 token")
    for key, color, label in (("kl_answer", COLORS[0], "答案 token"), ("kl_scratch", COLORS[4], "草稿 token"),
                              ("kl_eos", COLORS[3], "EOS")):
        ax[1].plot(steps, _values(h[key]), color=color, lw=0.8, alpha=0.8, label=label)
    ax[1].set_title("k3 KL(π‖π_ref)，每 token")
    ax[2].plot(steps, _values(h["len_correct"]), color=COLORS[2], label="答对")
    ax[2].plot(steps, _values(h["len_incorrect"]), color=COLORS[3], label="答错")
    ax[2].set_title("回答长度")
    ax[3].plot(steps, h["zero_var_frac"], color=COLORS[4], label="实测")
    ax[3].plot(steps, h["zero_var_theory"], color="black", ls="--", lw=1,
               label="理论 p^G+(1-p)^G")
    ax[3].set_title("零方差组比例")
    for a in ax[:4]:
        a.set_xlabel("训练步")
        a.legend(fontsize=7)
    pr = run["prompts"]
    ax[4].scatter(pr["p_start"], pr["p_end"], s=10, color=COLORS[0])
    ax[4].axvline(pr["stuck_p"], color="gray", ls=":", lw=1)
    ax[4].axhline(pr["stuck_p"], color="gray", ls=":", lw=1)
    ax[4].set_xscale("log")
    ax[4].set_xlabel("训练前 p_q")
    ax[4].set_ylabel("训练后 p_q")
    ax[4].set_title("每个 prompt 的成功概率")
    fig.tight_layout()
    return fig


def plot_group_sweep(sweep: dict) -> plt.Figure:
    """(b) zero-variance fraction measured vs theory, accuracy curves with seed bands, and accuracy at
    each horizon per G."""
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
        _band(ax[1], c["acc"], COLORS[i], f"G={g}, B={sweep['budget'] // int(g)}")
    ax[1].set_xlabel("训练步")
    ax[1].set_title(f"全体 {sweep['num_prompts']} 个 prompt 的准确率")
    ax[1].legend(fontsize=7)
    for i, hzn in enumerate(sweep["horizons"]):
        acc = [r["acc"][str(hzn)] for r in table]
        ax[2].errorbar(gs, [a["mean"] for a in acc], yerr=_values([a["sd"] for a in acc]), fmt="o-", capsize=3,
                       color=COLORS[i], label=f"第 {hzn} 步")
    ax[2].set_xscale("log", base=2)
    ax[2].set_xlabel("G")
    ax[2].legend(fontsize=8)
    ax[2].set_title(f"准确率（N=B×G={sweep['budget']}，{len(sweep['seeds'])} 个种子）")
    fig.tight_layout()
    return fig


def plot_length_bias(sweep: dict) -> plt.Figure:
    """(c) mean response length and the within-group gap per aggregation (seed bands), and accuracy."""
    use_style()
    fig, ax = plt.subplots(1, 3, figsize=(14.0, 3.4))
    for i, (mode, d) in enumerate(sweep["modes"].items()):
        _band(ax[0], d["curves"]["len_mean"], COLORS[i], mode)
        _band(ax[1], d["curves"]["gap_within"], COLORS[i], mode)
        _band(ax[2], d["curves"]["acc"], COLORS[i], mode)
    ax[1].axhline(0.0, color="black", ls="--", lw=1)
    ax[0].set_title(f"平均回答长度（{len(sweep['seeds'])} 个种子）")
    ax[1].set_title("组内长度差：答错 − 答对")
    ax[2].set_title("准确率")
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
    """(e) GRPO and Dr. GRPO advantages against RLOO's on one batch, and accuracy curves at each beta."""
    use_style()
    b = data["batch"]
    fig, ax = plt.subplots(1, 1 + len(data["kl_coefs"]), figsize=(5.0 * (1 + len(data["kl_coefs"])), 3.4),
                           squeeze=False)
    ax = ax[0]
    ax[0].scatter(b["rloo"], b["grpo"], s=12, color=COLORS[0], label="GRPO")
    ax[0].scatter(b["rloo"], b["dr_grpo"], s=12, color=COLORS[1], label="只减均值")
    lim = max(abs(v) for v in b["rloo"]) or 1.0
    g = data["G"]
    ax[0].plot([-lim, lim], [-lim * (g - 1) / g, lim * (g - 1) / g], "k--", lw=1, label=f"y=({g}-1)/{g}·x")
    ax[0].set_xlabel("RLOO 优势")
    ax[0].set_title("同一批 rollout 的优势")
    ax[0].legend(fontsize=7)
    for j, beta in enumerate(data["kl_coefs"]):
        for i, name in enumerate(b):
            _band(ax[1 + j], data["arms"][f"{name}@{beta:g}"]["acc"], COLORS[i], name)
        ax[1 + j].set_xlabel("训练步")
        ax[1 + j].set_title(f"准确率，β = {beta:g}（种子均值 ± 标准差）")
        ax[1 + j].legend(fontsize=8)
    fig.tight_layout()
    return fig
