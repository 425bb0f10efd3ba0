"""Group-relative advantage estimators, chosen by name.

All estimators map rewards ``(B, G)`` (B prompts, G sampled responses each) to advantages ``(B, G)``.

- ``grpo``: z-score inside each group with the *population* std, and an explicit zero-variance guard
  ``std < eps -> 0`` exactly as the lesson teaches (DeepSeekMath, arXiv 2402.03300, §4.1). Note: not
  ``(r - mean) / (std + eps)``; a constant group gives exact zeros.
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
    if rewards.dim() != 2 or rewards.shape[1] == 0:
        raise ValueError(f"rewards must have shape (B, G) with G >= 1, got {tuple(rewards.shape)}")


def group_std(rewards: torch.Tensor) -> torch.Tensor:
    """Population std of each group, computed in float64. rewards: (B, G) -> (B,) float64.

    float64 so that a constant group such as 64 copies of 0.95 gives std ~1e-16 < eps, as in the
    pure-Python reference; in float32 the rounding of the mean alone can exceed eps = 1e-8.
    """
    _check_groups(rewards)
    r = rewards.double()
    mean = r.mean(dim=1, keepdim=True)  # (B, 1)
    return ((r - mean) ** 2).mean(dim=1).sqrt()  # (B,)


def zero_variance_groups(rewards: torch.Tensor, eps: float = 1e-8) -> torch.Tensor:
    """Boolean (B,): True where the group's population std is below eps (all rewards equal)."""
    return group_std(rewards) < eps


@register_advantage("grpo")
def grpo_advantages(rewards: torch.Tensor, eps: float = 1e-8) -> torch.Tensor:
    """(r - mean) / std per group, population std; groups with std < eps get exact zeros. (B, G)."""
    r = rewards.double()
    mean = r.mean(dim=1, keepdim=True)  # (B, 1)
    std = group_std(rewards).unsqueeze(1)  # (B, 1)
    flat = std < eps  # (B, 1): the lesson's explicit zero-variance branch
    safe_std = torch.where(flat, torch.ones_like(std), std)
    adv = torch.where(flat, torch.zeros_like(r), (r - mean) / safe_std)
    return adv.to(rewards.dtype)


@register_advantage("dr_grpo")
def dr_grpo_advantages(rewards: torch.Tensor, eps: float = 1e-8) -> torch.Tensor:
    """r - mean per group, no std division (Dr. GRPO). eps is unused. (B, G)."""
    _check_groups(rewards)
    r = rewards.double()
    return (r - r.mean(dim=1, keepdim=True)).to(rewards.dtype)


@register_advantage("rloo")
def rloo_advantages(rewards: torch.Tensor, eps: float = 1e-8) -> torch.Tensor:
    """r_i - mean of the other G-1 rewards; a group of one gets 0. eps is unused. (B, G)."""
    _check_groups(rewards)
    g = rewards.shape[1]
    if g == 1:
        return torch.zeros_like(rewards)
    r = rewards.double()
    loo_mean = (r.sum(dim=1, keepdim=True) - r) / (g - 1)  # (B, G)
    return (r - loo_mean).to(rewards.dtype)


def compute_advantages(rewards: torch.Tensor, estimator: str = "grpo", eps: float = 1e-8) -> torch.Tensor:
    """Advantages (B, G) from rewards (B, G) with the estimator registered as ``estimator``."""
    return ADVANTAGE_ESTIMATORS.lookup(estimator)(rewards, eps)


def keep_informative_groups(rewards: torch.Tensor, eps: float = 1e-8) -> torch.Tensor:
    """DAPO dynamic-sampling filter: boolean (B,) that keeps groups with std >= eps."""
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
