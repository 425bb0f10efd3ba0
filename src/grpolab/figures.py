"""Figure 11-1 (group rewards and their z-scored advantages) and the byte-stable figure helpers.

``python -m grpolab.figures [--out-dir assets/figs]`` writes ``grpo_reward_distribution.png``.
Byte-stable: Agg backend, fixed size and dpi, no Software/date metadata, data computed by grpolab.
Chinese labels use a Noto CJK font when one is installed; otherwise English labels, no warnings.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import torch  # noqa: E402
from matplotlib import font_manager  # noqa: E402

from .advantages import compute_advantages, group_std  # noqa: E402

FIG_DPI = 110
CJK_FAMILIES = ("Noto Sans CJK SC", "Noto Sans CJK JP", "Noto Serif CJK SC", "WenQuanYi Zen Hei", "SimHei")
FIGURE_11_1 = "grpo_reward_distribution.png"


def cjk_font() -> str | None:
    """The first installed CJK font family from CJK_FAMILIES, or None."""
    installed = {f.name for f in font_manager.fontManager.ttflist}
    return next((name for name in CJK_FAMILIES if name in installed), None)


def use_style() -> bool:
    """Set rcParams for the course figures; True when Chinese labels can be drawn."""
    family = cjk_font()
    plt.rcParams.update({
        "font.family": [family, "DejaVu Sans"] if family else ["DejaVu Sans"],
        "axes.unicode_minus": False,
        "font.size": 10,
        "axes.spines.top": False,
        "axes.spines.right": False,
        "svg.hashsalt": "grpolab",
    })
    return family is not None


def text(zh: str, en: str, chinese: bool) -> str:
    """zh when a CJK font is available, else en."""
    return zh if chinese else en


def save_figure(fig: plt.Figure, path: str | Path) -> Path:
    """Save a PNG without metadata that changes between runs, and close the figure."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=FIG_DPI, metadata={"Software": None})
    plt.close(fig)
    return path


# Four prompts, G = 8 responses each: what a rule-based grader typically returns.
EXAMPLE_GROUPS = {
    ("混合组 3/8 答对", "mixed, 3/8 right"): [1, 0, 0, 1, 0, 1, 0, 0],
    ("难题 1/8 答对", "hard, 1/8 right"): [0, 0, 0, 0, 1, 0, 0, 0],
    ("部分分", "partial credit"): [0.2, 0.9, 0.5, 0.7, 0.1, 0.6, 0.4, 0.8],
    ("全错（零方差）", "all wrong (zero variance)"): [0, 0, 0, 0, 0, 0, 0, 0],
}


def figure_reward_distribution(out_dir: str | Path) -> Path:
    """Figure 11-1: rewards of four groups (top) and their GRPO advantages (bottom)."""
    chinese = use_style()
    names = [zh if chinese else en for zh, en in EXAMPLE_GROUPS]
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
            bottom.text(3.5, 0.4, text("std < eps → 优势全为 0", "std < eps → all zero", chinese),
                        ha="center", fontsize=8)
        for ax in (top, bottom):
            ax.set_xticks(list(x))
            ax.set_xticklabels([str(i + 1) for i in x], fontsize=7)
    axes[0, 0].set_ylabel(text("奖励 r_i", "reward r_i", chinese))
    axes[1, 0].set_ylabel(text("优势 (r_i-μ)/σ", "advantage (r_i-μ)/σ", chinese))
    for ax in axes[1]:
        ax.set_xlabel(text("组内回答 i", "response i", chinese), fontsize=8)
    fig.suptitle(text("图 11-1：GRPO 组内相对优势（G=8，总体标准差，零方差组置零）",
                      "Fig. 11-1: GRPO group-relative advantages (G=8, population std, zero-variance guard)",
                      chinese), fontsize=11)
    fig.tight_layout()
    return save_figure(fig, Path(out_dir) / FIGURE_11_1)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m grpolab.figures", description=__doc__.splitlines()[0])
    parser.add_argument("--out-dir", default="assets/figs", help="folder for the PNG (default: assets/figs)")
    args = parser.parse_args(argv)
    path = figure_reward_distribution(args.out_dir)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
