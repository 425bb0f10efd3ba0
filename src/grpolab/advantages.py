"""Group-relative advantage estimators, chosen by name.

All estimators map rewards ``(..., B, G)`` (B prompts, G sampled responses each; any leading dims,
e.g. one per stacked policy) to advantages of the same shape; groups are the last dimension.

- ``grpo``: z-score inside each group with the *population* std (DeepSeekMath, arXiv 2402.03300,
  §4.1.2: "normalized by subtracting the group average and dividing by the group standard deviation"),
  plus an explicit zero-variance guard ``std < eps -> 0``. The guard is this lesson's rule, not the
  paper's (the paper writes no guard; implementations add ``+ eps`` to the std instead): a constant
  group gives exact zeros rather than ``0 / eps``.
- ``dr_grpo``: centre only, no std division (Dr. GRPO, arXiv 2503.20783, §3.1).
- ``rloo``: leave-one-out baseline ``r_i - mean_{j != i} r_j`` (Ahmadian et al., arXiv 2402.14740).

DAPO's dynamic sampling (arXiv 2503.14476, §3.2) is offered as ``keep_informative_groups``: drop
groups whose rewards are all equal. Simplification: DAPO re-samples to refill the batch; we only drop.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import torch

from .registry import Registry

AdvantageFn = Callable[[torch.Tensor, float], torch.Tensor]
ADVANTAGE_ESTIMATORS: Registry[AdvantageFn] = Registry("advantage estimator")
# Decorator: register an estimator ``fn(rewards (B, G), eps) -> (B, G)`` under a name.
register_advantage = ADVANTAGE_ESTIMATORS.register


def _check_groups(rewards: torch.Tensor) -> None:
    if rewards.dim() < 2 or rewards.shape[-1] == 0:
        raise ValueError(f"rewards must have shape (B, G) with G >= 1, got {tuple(rewards.shape)}")


def _shifted(rewards: torch.Tensor) -> torch.Tensor:
    """Rewards in float64 minus each group's first reward. (..., B, G) -> (..., B, G).

    Differences and spreads are unchanged by a shift, but at a large offset (rewards near 1e6 that
    differ by 1e-6) the textbook two-pass formula loses the spread's digits in ``r - mean``, because
    the mean itself is rounded at the offset's scale. After subtracting one member of the group the
    values are small and exact (Sterbenz: r_i - r_0 is exact when r_i and r_0 are within 2x), so the
    mean and variance keep their digits; a constant group becomes exact zeros. This is the "shifted
    data" variance algorithm (Chan, Golub & LeVeque 1983). The lesson's exercise keeps the textbook
    formula (``group_advantages_reference``); the two agree at ordinary reward scales.
    """
    _check_groups(rewards)
    r = rewards.double()
    return r - r[..., :1]


def group_std(rewards: torch.Tensor) -> torch.Tensor:
    """Population std of each group, computed in float64 on shifted rewards. (..., B, G) -> (..., B).

    float64 so that a constant group such as 64 copies of 0.95 gives std 0 < eps, as in the
    pure-Python reference; in float32 the rounding of the mean alone can exceed eps = 1e-8.
    """
    d = _shifted(rewards)
    return ((d - d.mean(dim=-1, keepdim=True)) ** 2).mean(dim=-1).sqrt()


def zero_variance_groups(rewards: torch.Tensor, eps: float = 1e-8) -> torch.Tensor:
    """Boolean (..., B): True where the group's population std is below eps (all rewards equal)."""
    return group_std(rewards) < eps


@register_advantage("grpo")
def grpo_advantages(rewards: torch.Tensor, eps: float = 1e-8) -> torch.Tensor:
    """(r - mean) / std per group, population std; groups with std < eps get exact zeros. (..., B, G)."""
    d = _shifted(rewards)
    centred = d - d.mean(dim=-1, keepdim=True)  # (..., B, G)
    std = (centred**2).mean(dim=-1, keepdim=True).sqrt()  # (..., B, 1)
    flat = std < eps  # the lesson's explicit zero-variance branch
    safe_std = torch.where(flat, torch.ones_like(std), std)
    adv = torch.where(flat, torch.zeros_like(d), centred / safe_std)
    return adv.to(rewards.dtype)


@register_advantage("dr_grpo")
def dr_grpo_advantages(rewards: torch.Tensor, eps: float = 1e-8) -> torch.Tensor:
    """r - mean per group, no std division (Dr. GRPO). eps is unused. (..., B, G)."""
    d = _shifted(rewards)
    return (d - d.mean(dim=-1, keepdim=True)).to(rewards.dtype)


@register_advantage("rloo")
def rloo_advantages(rewards: torch.Tensor, eps: float = 1e-8) -> torch.Tensor:
    """r_i - mean of the other G-1 rewards; a group of one gets 0. eps is unused. (..., B, G)."""
    d = _shifted(rewards)
    g = rewards.shape[-1]
    if g == 1:
        return torch.zeros_like(rewards)
    loo_mean = (d.sum(dim=-1, keepdim=True) - d) / (g - 1)  # (..., B, G)
    return (d - loo_mean).to(rewards.dtype)


def compute_advantages(rewards: torch.Tensor, estimator: str = "grpo", eps: float = 1e-8) -> torch.Tensor:
    """Advantages (..., B, G) from rewards (..., B, G) with the estimator registered as ``estimator``."""
    return ADVANTAGE_ESTIMATORS.lookup(estimator)(rewards, eps)


def keep_informative_groups(rewards: torch.Tensor, eps: float = 1e-8) -> torch.Tensor:
    """DAPO dynamic-sampling filter: boolean (..., B) that keeps groups with std >= eps."""
    return ~zero_variance_groups(rewards, eps)


def group_advantages_reference(rewards: Sequence[float], eps: float = 1e-8) -> list[float]:
    """The lesson's pure-Python exercise, verbatim: the reference the tensor version is tested against."""
    if not rewards:
        raise ValueError("group cannot be empty")
    mean = sum(rewards) / len(rewards)
    var = sum((r - mean) ** 2 for r in rewards) / len(rewards)
    std = math.sqrt(var)
    if std < eps:
        return [0.0] * len(rewards)
    return [(r - mean) / std for r in rewards]
