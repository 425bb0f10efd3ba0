"""Token-level GRPO loss pieces: importance ratios, clipped surrogate, KL estimators, loss aggregation.

Shapes: N responses padded to T tokens; ``logp``, ``old_logp``, ``ref_logp``, ``mask``: (..., N, T);
``advantages``: (..., N) (one scalar per response, broadcast over its tokens). Leading dims (one per
stacked policy in the demo) are kept: an aggregation reduces (..., N, T) to (...).

Aggregations, one name each (docs/conventions.md maps them to verl's ``agg_loss`` modes and TRL's
``loss_type``; the names and two denominators differ from verl's):
- ``response_mean``: mean over each response's tokens, then over responses (original GRPO,
  DeepSeekMath arXiv 2402.03300, eq. 3; verl "seq-mean-token-mean", TRL "grpo").
- ``token_mean``: sum over all valid tokens / number of valid tokens (DAPO arXiv 2503.14476, §3.3;
  verl "token-mean", TRL "bnpo").
- ``fixed_length``: sum over all valid tokens / (N * max_len), a constant (Dr. GRPO arXiv 2503.20783;
  TRL "dr_grpo"). verl's "seq-mean-token-sum-norm" divides by max_len only, not by N: N times ours.
A response with no valid token (a group dropped by dynamic sampling) counts in no denominator.

KL estimators (Schulman, "Approximating KL divergence", 2020), per token, of KL(pi || pi_ref) from
tokens sampled from pi: ``k1`` = log(pi/pi_ref), ``k2`` = (log(pi/pi_ref))^2 / 2, ``k3`` (the lesson's,
DeepSeekMath eq. 4). Training uses k3; k1 and k2 are here to compare values (see ``k1_kl``).
"""
from __future__ import annotations

from collections.abc import Callable

import torch

from .registry import Registry

AggregationFn = Callable[[torch.Tensor, torch.Tensor, int | None], torch.Tensor]
LOSS_AGGREGATIONS: Registry[AggregationFn] = Registry("loss aggregation")
# Decorator: register ``fn(token_loss (N, T), mask (N, T), max_len) -> scalar`` under a name.
register_aggregation = LOSS_AGGREGATIONS.register


def _masked_sum(token_loss: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Sum over valid tokens, (..., N, T) -> (..., N); padding values (even inf or nan) are ignored."""
    return torch.where(mask, token_loss, torch.zeros_like(token_loss)).sum(dim=-1)


def _responses(mask: torch.Tensor) -> torch.Tensor:
    """Number of responses with at least one valid token, (..., N, T) -> (...), at least 1."""
    return mask.any(dim=-1).sum(dim=-1).clamp(min=1)


@register_aggregation("response_mean")
def response_mean(token_loss: torch.Tensor, mask: torch.Tensor, max_len: int | None = None) -> torch.Tensor:
    """Per-response token mean, then mean over responses. Every response weighs the same."""
    per_response = _masked_sum(token_loss, mask) / mask.sum(dim=-1).clamp(min=1)  # (..., N)
    return per_response.sum(dim=-1) / _responses(mask)


@register_aggregation("token_mean")
def token_mean(token_loss: torch.Tensor, mask: torch.Tensor, max_len: int | None = None) -> torch.Tensor:
    """All valid tokens of the batch weigh the same: sum / number of valid tokens."""
    return _masked_sum(token_loss, mask).sum(dim=-1) / mask.sum(dim=(-2, -1)).clamp(min=1)


@register_aggregation("fixed_length")
def fixed_length(token_loss: torch.Tensor, mask: torch.Tensor, max_len: int | None = None) -> torch.Tensor:
    """Token sum / (N * max_len); max_len defaults to T, the padded width."""
    length = token_loss.shape[-1] if max_len is None else max_len
    return _masked_sum(token_loss, mask).sum(dim=-1) / (_responses(mask) * length)


def aggregate_loss(
    token_loss: torch.Tensor, mask: torch.Tensor, mode: str = "response_mean", max_len: int | None = None
) -> torch.Tensor:
    """Loss (...) from token_loss (..., N, T) and mask (..., N, T) with the aggregation named ``mode``.

    For the usual (N, T) input the result is a scalar.
    """
    fn = LOSS_AGGREGATIONS.lookup(mode)
    if token_loss.shape != mask.shape:
        raise ValueError(f"token_loss {tuple(token_loss.shape)} and mask {tuple(mask.shape)} differ")
    return fn(token_loss, mask, max_len)


def token_log_ratio(logp: torch.Tensor, old_logp: torch.Tensor) -> torch.Tensor:
    """log(pi/pi_old) per token. (N, T) -> (N, T)."""
    return logp - old_logp


def sequence_log_ratio(logp: torch.Tensor, old_logp: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """GSPO's sequence ratio in log space: mean of token log-ratios over valid tokens, (..., N).

    exp() of it is the geometric mean of the token ratios (GSPO arXiv 2507.18071, eq. 7); computing it in
    log space avoids the under/overflow of a product of many ratios.
    """
    return _masked_sum(logp - old_logp, mask) / mask.sum(dim=-1).clamp(min=1)  # (..., N)


# GSPO's clip range for its sequence-level ratio: the paper's experiments set the left and right
# clipping ranges of its eq. 5 to 3e-4 and 4e-4 (arXiv 2507.18071). The length-normalised ratio moves
# far less than a token ratio, so the token-level range 0.2 / 0.28 would almost never clip it.
GSPO_EPS_LOW, GSPO_EPS_HIGH = 3e-4, 4e-4
# exp() of a log-ratio is clamped to [-MAX_LOG_RATIO, MAX_LOG_RATIO] first, as verl does (its
# ``compute_policy_loss`` clamps ``negative_approx_kl`` to +-20): one stale token can no longer give an
# inf ratio or a nan gradient; beyond the clamp the ratio gets no gradient.
MAX_LOG_RATIO = 20.0


def clipped_surrogate(
    log_ratio: torch.Tensor, advantages: torch.Tensor, eps_low: float = 0.2, eps_high: float = 0.2
) -> tuple[torch.Tensor, torch.Tensor]:
    """PPO clipped surrogate as a loss to minimise, with DAPO's clip-higher (separate eps_low/eps_high).

    log_ratio: (..., N, T) token log-ratios, or (..., N) GSPO sequence log-ratios; advantages: (..., N).
    The log-ratio is clamped to +-MAX_LOG_RATIO before exp().
    Returns (loss, clipped), both shaped like log_ratio; ``clipped`` marks where the clip is active.
    """
    adv = advantages.reshape(advantages.shape + (1,) * (log_ratio.dim() - advantages.dim()))
    ratio = torch.exp(log_ratio.clamp(-MAX_LOG_RATIO, MAX_LOG_RATIO))
    clipped_ratio = ratio.clamp(1.0 - eps_low, 1.0 + eps_high)
    unclipped_obj = ratio * adv
    clipped_obj = clipped_ratio * adv
    loss = -torch.minimum(unclipped_obj, clipped_obj)
    clipped = (clipped_obj < unclipped_obj).detach()  # the min picked the clipped branch
    return loss, clipped


def k1_kl(logp: torch.Tensor, ref_logp: torch.Tensor) -> torch.Tensor:
    """k1 per token: log(pi/pi_ref), shape of logp; unbiased for KL(pi || pi_ref) under sampling from pi
    but negative on some tokens (high variance). Not a training penalty here: differentiated at the
    sampled tokens (no score-function term) its expected gradient is E_pi[grad log pi] = 0 (tested in
    tests/grpo/test_conventions.py), so ``beta * k1`` would pull nothing towards pi_ref."""
    return logp - ref_logp


def k2_kl(logp: torch.Tensor, ref_logp: torch.Tensor) -> torch.Tensor:
    """k2 per token: (log(pi/pi_ref))^2 / 2 >= 0, shape of logp; biased, low variance (verl "mse"/"k2")."""
    return 0.5 * (logp - ref_logp) ** 2


def k3_kl(logp: torch.Tensor, ref_logp: torch.Tensor) -> torch.Tensor:
    """k3 per token: pi_ref/pi - log(pi_ref/pi) - 1 >= 0, shape of logp (Schulman, "Approximating KL
    divergence", 2020; DeepSeekMath eq. 4). The log-ratio is clamped to +-MAX_LOG_RATIO first.

    As a *value*, its mean over tokens sampled from pi is an unbiased estimate of KL(pi || pi_ref): that
    is what the demo logs. As a *loss* it is a different thing: differentiating k3 at the sampled tokens
    (no score-function term, as GRPO does) gives, in expectation, the gradient of the reverse divergence
    KL(pi_ref || pi), not of KL(pi || pi_ref) (tested in tests/grpo/test_losses.py; see Tang & Munos,
    "On a few pitfalls in KL divergence gradient estimation for RL", arXiv 2506.09477).
    """
    log_r = (ref_logp - logp).clamp(-MAX_LOG_RATIO, MAX_LOG_RATIO)
    return torch.exp(log_r) - log_r - 1.0


KL_ESTIMATORS = {"k1": k1_kl, "k2": k2_kl, "k3": k3_kl}  # name -> fn(logp, ref_logp) per token
