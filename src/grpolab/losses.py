"""Token-level GRPO loss pieces: importance ratios, clipped surrogate, k3 KL, loss aggregation.

Shapes: N responses padded to T tokens; ``logp``, ``old_logp``, ``ref_logp``, ``mask``: (N, T);
``advantages``: (N,) (one scalar per response, broadcast over its tokens).

Aggregations (one name each, as verl's ``agg_loss`` modes):
- ``response_mean``: mean over each response's tokens, then over responses (original GRPO,
  DeepSeekMath arXiv 2402.03300, eq. 3).
- ``token_mean``: sum over all valid tokens / number of valid tokens (DAPO arXiv 2503.14476, §3.3).
- ``fixed_length``: sum over all valid tokens / (N * max_len), a constant (Dr. GRPO arXiv 2503.20783).
"""
from __future__ import annotations

from collections.abc import Callable

import torch

from .registry import Registry

AggregationFn = Callable[[torch.Tensor, torch.Tensor, int | None], torch.Tensor]
LOSS_AGGREGATIONS: Registry[AggregationFn] = Registry("loss aggregation")
# Decorator: register ``fn(token_loss (N, T), mask (N, T), max_len) -> scalar`` under a name.
register_aggregation = LOSS_AGGREGATIONS.register


@register_aggregation("response_mean")
def response_mean(token_loss: torch.Tensor, mask: torch.Tensor, max_len: int | None = None) -> torch.Tensor:
    """Per-response token mean, then mean over responses. Every response weighs the same."""
    m = mask.to(token_loss.dtype)
    per_response = (token_loss * m).sum(dim=1) / m.sum(dim=1).clamp(min=1.0)  # (N,)
    return per_response.mean()


@register_aggregation("token_mean")
def token_mean(token_loss: torch.Tensor, mask: torch.Tensor, max_len: int | None = None) -> torch.Tensor:
    """All valid tokens of the batch weigh the same: sum / number of valid tokens."""
    m = mask.to(token_loss.dtype)
    return (token_loss * m).sum() / m.sum().clamp(min=1.0)


@register_aggregation("fixed_length")
def fixed_length(token_loss: torch.Tensor, mask: torch.Tensor, max_len: int | None = None) -> torch.Tensor:
    """Token sum / (N * max_len); max_len defaults to T, the padded width."""
    m = mask.to(token_loss.dtype)
    length = token_loss.shape[1] if max_len is None else max_len
    return (token_loss * m).sum() / (token_loss.shape[0] * length)


def aggregate_loss(
    token_loss: torch.Tensor, mask: torch.Tensor, mode: str = "response_mean", max_len: int | None = None
) -> torch.Tensor:
    """Scalar loss from token_loss (N, T) and mask (N, T) with the aggregation registered as ``mode``."""
    fn = LOSS_AGGREGATIONS.lookup(mode)
    if token_loss.shape != mask.shape:
        raise ValueError(f"token_loss {tuple(token_loss.shape)} and mask {tuple(mask.shape)} differ")
    return fn(token_loss, mask, max_len)


def token_log_ratio(logp: torch.Tensor, old_logp: torch.Tensor) -> torch.Tensor:
    """log(pi/pi_old) per token. (N, T) -> (N, T)."""
    return logp - old_logp


def sequence_log_ratio(logp: torch.Tensor, old_logp: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """GSPO's sequence ratio in log space: mean of token log-ratios over valid tokens, (N,).

    exp() of it is the geometric mean of the token ratios (GSPO arXiv 2507.18071, eq. 7); computing it in
    log space avoids the under/overflow of a product of many ratios.
    """
    m = mask.to(logp.dtype)
    return ((logp - old_logp) * m).sum(dim=1) / m.sum(dim=1).clamp(min=1.0)  # (N,)


def clipped_surrogate(
    log_ratio: torch.Tensor, advantages: torch.Tensor, eps_low: float = 0.2, eps_high: float = 0.2
) -> tuple[torch.Tensor, torch.Tensor]:
    """PPO clipped surrogate as a loss to minimise, with DAPO's clip-higher (separate eps_low/eps_high).

    log_ratio: (N, T) token log-ratios, or (N,) GSPO sequence log-ratios; advantages: (N,).
    Returns (loss, clipped), both shaped like log_ratio; ``clipped`` marks where the clip is active.
    """
    adv = advantages.reshape(advantages.shape + (1,) * (log_ratio.dim() - 1))  # (N, 1) or (N,)
    ratio = torch.exp(log_ratio)
    clipped_ratio = ratio.clamp(1.0 - eps_low, 1.0 + eps_high)
    unclipped_obj = ratio * adv
    clipped_obj = clipped_ratio * adv
    loss = -torch.minimum(unclipped_obj, clipped_obj)
    clipped = (clipped_obj < unclipped_obj).detach()  # the min picked the clipped branch
    return loss, clipped


def k3_kl(logp: torch.Tensor, ref_logp: torch.Tensor) -> torch.Tensor:
    """k3 estimator of KL(pi || pi_ref) per token: pi_ref/pi - log(pi_ref/pi) - 1 >= 0. (N, T).

    Unbiased for KL(pi || pi_ref) when tokens are sampled from pi (Schulman, "Approximating KL
    divergence", 2020; used by DeepSeekMath eq. 4).
    """
    log_r = ref_logp - logp
    return torch.exp(log_r) - log_r - 1.0
