"""Figure 11-1 (group rewards and their z-scored advantages) and the byte-stable figure helpers.

``python -m grpolab.figures [--out-dir assets/figs]`` writes ``grpo_reward_distribution.png``.
Byte-stable: Agg backend, fixed size and dpi, no Software/date metadata, data computed by grpolab.
Labels are Chinese, drawn with a Noto CJK font found by coursekit.fonts.cjk_font, the font set-up every
chart of the kit shares (it survives a matplotlib font cache older than the font); with no CJK font
installed drawing stops with FigureError (one line naming the package) instead of drawing boxes or English.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import torch  # noqa: E402

from coursekit.fonts import CJK_FAMILIES, FigureError, cjk_font  # noqa: E402, F401 (the kit's one font set-up)

from .advantages import compute_advantages, group_std  # noqa: E402

FIG_DPI = 110
FIGURE_11_1 = "grpo_reward_distribution.png"


def use_style() -> None:
    """Set rcParams for the course figures (a CJK font first; FigureError when there is none)."""
    plt.rcParams.update({
        "font.family": [cjk_font(), "DejaVu Sans"],
        "axes.unicode_minus": False,
        "font.size": 10,
        "axes.spines.top": False,
        "axes.spines.right": False,
        "svg.hashsalt": "grpolab",
    })


def save_figure(fig: plt.Figure, path: str | Path) -> Path:
    """Save a PNG without metadata that changes between runs, and close the figure."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=FIG_DPI, metadata={"Software": None})
    plt.close(fig)
    return path


# Four prompts, G = 8 responses each: what a rule-based grader typically returns.
EXAMPLE_GROUPS = {
    "混合组 3/8 答对": [1, 0, 0, 1, 0, 1, 0, 0],
    "难题 1/8 答对": [0, 0, 0, 0, 1, 0, 0, 0],
    "部分分": [0.2, 0.9, 0.5, 0.7, 0.1, 0.6, 0.4, 0.8],
    "全错（零方差）": [0, 0, 0, 0, 0, 0, 0, 0],
}


def draw_reward_distribution() -> plt.Figure:
    """Figure 11-1: rewards of four groups (top row) and their GRPO advantages (bottom row)."""
    use_style()
    names = list(EXAMPLE_GROUPS)
    rewards = torch.tensor(list(EXAMPLE_GROUPS.values()), dtype=torch.float64)  # (4, 8)
    adv = compute_advantages(rewards, "grpo")  # (4, 8)
    mean, std = rewards.mean(1), group_std(rewards)
    fig, axes = plt.subplots(2, 4, figsize=(10.0, 4.8), sharey="row")
    for j, name in enumerate(names):
        x = range(rewards.shape[1])
        top, bottom = axes[0, j], axes[1, j]
        top.bar(x, rewards[j].tolist(), color="#4C72B0")
        top.axhline(float(mean[j]), color="#DD8452", lw=1.5, ls="--")
        top.set_title(f"{name}\nμ={float(mean[j]):.2f}, σ={float(std[j]):.2f}", fontsize=9)
        colors = ["#55A868" if a > 0 else "#C44E52" for a in adv[j].tolist()]
        bottom.bar(x, adv[j].tolist(), color=colors)
        bottom.axhline(0.0, color="black", lw=0.8)
        if float(std[j]) < 1e-8:
            bottom.text(3.5, 0.4, "std < eps → 优势全为 0", ha="center", fontsize=8)
        for ax in (top, bottom):
            ax.set_xticks(list(x))
            ax.set_xticklabels([str(i + 1) for i in x], fontsize=7)
    axes[0, 0].set_ylabel("奖励 r_i")
    axes[1, 0].set_ylabel("优势 (r_i-μ)/σ")
    for ax in axes[1]:
        ax.set_xlabel("组内回答 i", fontsize=8)
    fig.suptitle("图 11-1：GRPO 组内相对优势（G=8，总体标准差，零方差组置零）", fontsize=11)
    fig.tight_layout()
    return fig


def figure_reward_distribution(out_dir: str | Path) -> Path:
    """Draw Figure 11-1 and write it to out_dir/grpo_reward_distribution.png."""
    return save_figure(draw_reward_distribution(), Path(out_dir) / FIGURE_11_1)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m grpolab.figures", description=__doc__.splitlines()[0])
    parser.add_argument("--out-dir", default="assets/figs", help="folder for the PNG (default: assets/figs)")
    args = parser.parse_args(argv)
    try:
        path = figure_reward_distribution(args.out_dir)
    except FigureError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
