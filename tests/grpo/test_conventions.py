"""grpolab against transcriptions of its peers' formulas: every row of docs/conventions.md.

verl and TRL are heavy installs (ray, vllm, transformers, accelerate), so their formulas are
transcribed here line by line from the commits docs/conventions.md cites and read with the search
tool's read_file:

- VERL: volcengine/verl, verl/trainer/ppo/core_algos.py @ 012be9d9dcb7c38499f23616142870d2682757fc
  (compute_grpo_outcome_advantage, compute_rloo_outcome_advantage, agg_loss,
  compute_policy_loss_vanilla, compute_policy_loss_gspo, kl_penalty). ``verl_F.masked_mean`` lives in
  verl/utils/torch_functional.py, not read at that commit: transcribed as sum(x * mask) / sum(mask).
- TRL: huggingface/trl, trl/trainer/grpo_trainer.py @ 000bb3dbb6e3bd0288068c5ad73bb11e4f69dca1
  (GRPOTrainer._generate_and_score_completions: advantages; GRPOTrainer._compute_loss: clip, k3, loss_type).

Each test states the grpolab call that gives the peer's behaviour (the table's last column) and checks
it; where no call gives it, the test pins the difference the table names.
"""
import math
import re
from collections import defaultdict
from pathlib import Path

import pytest
import torch

from grpolab.advantages import compute_advantages
from grpolab.losses import (
    GSPO_EPS_HIGH,
    GSPO_EPS_LOW,
    KL_ESTIMATORS,
    aggregate_loss,
    clipped_surrogate,
    k1_kl,
    k2_kl,
    k3_kl,
    sequence_log_ratio,
)

ROOT = Path(__file__).resolve().parents[2]
CONVENTIONS = ROOT / "docs" / "conventions.md"
VERL_COMMIT = "012be9d9dcb7c38499f23616142870d2682757fc"
TRL_COMMIT = "000bb3dbb6e3bd0288068c5ad73bb11e4f69dca1"


# ---- transcriptions: verl ---------------------------------------------------------------------------
def verl_grpo_advantage(scores: torch.Tensor, index: list, epsilon: float = 1e-6,
                        norm_adv_by_std_in_grpo: bool = True) -> torch.Tensor:
    """compute_grpo_outcome_advantage's loop (outcome reward = one score per response)."""
    scores = scores.clone()
    id2score, id2mean, id2std = defaultdict(list), {}, {}
    for i in range(scores.shape[0]):
        id2score[index[i]].append(scores[i])
    for idx in id2score:
        if len(id2score[idx]) == 1:
            id2mean[idx], id2std[idx] = torch.tensor(0.0), torch.tensor(1.0)
        else:
            t = torch.stack(id2score[idx])
            id2mean[idx], id2std[idx] = torch.mean(t), torch.std(t)
    for i in range(scores.shape[0]):
        if norm_adv_by_std_in_grpo:
            scores[i] = (scores[i] - id2mean[index[i]]) / (id2std[index[i]] + epsilon)
        else:
            scores[i] = scores[i] - id2mean[index[i]]
    return scores


def verl_rloo_advantage(scores: torch.Tensor, index: list) -> torch.Tensor:
    """compute_rloo_outcome_advantage's loop."""
    scores = scores.clone()
    id2score, id2mean = defaultdict(list), {}
    for i in range(scores.shape[0]):
        id2score[index[i]].append(scores[i])
    for idx in id2score:
        id2mean[idx] = torch.tensor(0.0) if len(id2score[idx]) == 1 else torch.mean(torch.stack(id2score[idx]))
    for i in range(scores.shape[0]):
        n = len(id2score[index[i]])
        if n > 1:
            scores[i] = scores[i] * n / (n - 1) - id2mean[index[i]] * n / (n - 1)
    return scores


def verl_agg_loss(loss_mat: torch.Tensor, loss_mask: torch.Tensor, mode: str) -> torch.Tensor:
    """agg_loss (token-mean-unbiased needs verl_F.masked_mean_unbiased, not transcribed)."""
    if mode == "token-mean":
        return (loss_mat * loss_mask).sum() / loss_mask.sum()
    if mode == "seq-mean-token-sum":
        return torch.mean(torch.sum(loss_mat * loss_mask, dim=-1))
    if mode == "seq-mean-token-mean":
        return torch.mean(torch.sum(loss_mat * loss_mask, dim=-1) / torch.sum(loss_mask, dim=-1))
    if mode == "seq-mean-token-sum-norm":
        return torch.sum(torch.sum(loss_mat * loss_mask, dim=-1)) / loss_mask.shape[-1]
    raise ValueError(mode)


def verl_pg_losses(old_log_prob, log_prob, advantages, clip_low, clip_high, clip_ratio_c=3.0):
    """compute_policy_loss_vanilla up to agg_loss: per-token losses with the dual clip."""
    negative_approx_kl = torch.clamp(log_prob - old_log_prob, min=-20.0, max=20.0)
    ratio = torch.exp(negative_approx_kl)
    pg_losses1 = -advantages * ratio
    pg_losses2 = -advantages * torch.clamp(ratio, 1 - clip_low, 1 + clip_high)
    clip_pg_losses1 = torch.maximum(pg_losses1, pg_losses2)
    pg_losses3 = -advantages * clip_ratio_c
    clip_pg_losses2 = torch.min(pg_losses3, clip_pg_losses1)
    return torch.where(advantages < 0, clip_pg_losses2, clip_pg_losses1)


def verl_kl_penalty(logprob: torch.Tensor, ref_logprob: torch.Tensor, kind: str) -> torch.Tensor:
    """kl_penalty for the estimators grpolab has."""
    if kind in ("kl", "k1"):
        return logprob - ref_logprob
    if kind in ("mse", "k2"):
        return 0.5 * (logprob - ref_logprob).square()
    if kind in ("low_var_kl", "k3"):
        kl = torch.clamp(ref_logprob - logprob, min=-20, max=20)
        return torch.clamp(torch.exp(kl) - kl - 1, min=-10, max=10)
    raise NotImplementedError(kind)


# ---- transcriptions: TRL ----------------------------------------------------------------------------
def trl_advantages(rewards: torch.Tensor, num_generations: int, scale_rewards: bool = True) -> torch.Tensor:
    """_generate_and_score_completions (the trainer refuses num_generations < 2 in __init__)."""
    if num_generations < 2:
        raise ValueError("GRPO requires at least 2 generations per prompt to calculate the advantages.")
    mean = rewards.view(-1, num_generations).mean(dim=1).repeat_interleave(num_generations, dim=0)
    std = rewards.view(-1, num_generations).std(dim=1).repeat_interleave(num_generations, dim=0)
    advantages = rewards - mean
    if scale_rewards:
        advantages = advantages / (std + 1e-4)
    return advantages


def trl_loss(per_token_logps, old_per_token_logps, ref_per_token_logps, advantages, completion_mask,
             epsilon_low, epsilon_high, beta, loss_type, max_completion_length):
    """_compute_loss (the non-Liger path)."""
    per_token_kl = torch.exp(ref_per_token_logps - per_token_logps) - (ref_per_token_logps - per_token_logps) - 1
    coef_1 = torch.exp(per_token_logps - old_per_token_logps)
    coef_2 = torch.clamp(coef_1, 1 - epsilon_low, 1 + epsilon_high)
    per_token_loss = -torch.min(coef_1 * advantages.unsqueeze(1), coef_2 * advantages.unsqueeze(1))
    if beta != 0.0:
        per_token_loss = per_token_loss + beta * per_token_kl
    if loss_type == "grpo":
        return ((per_token_loss * completion_mask).sum(-1) / completion_mask.sum(-1).clamp(min=1.0)).mean()
    if loss_type == "bnpo":
        return (per_token_loss * completion_mask).sum() / completion_mask.sum().clamp(min=1.0)
    if loss_type == "dr_grpo":
        return (per_token_loss * completion_mask).sum() / (per_token_loss.size(0) * max_completion_length)
    raise ValueError(loss_type)


# ---- inputs -------------------------------------------------------------------------------------------
def groups(b: int = 6, g: int = 5, seed: int = 0) -> torch.Tensor:
    """(B, G) float64 rewards, none constant."""
    gen = torch.Generator().manual_seed(seed)
    return torch.rand(b, g, generator=gen, dtype=torch.float64) * 3


def flat(rewards: torch.Tensor) -> tuple[torch.Tensor, list[int]]:
    """verl's layout: one score per response and a group index per response."""
    b, g = rewards.shape
    return rewards.reshape(-1).clone(), [i // g for i in range(b * g)]


def token_batch(n: int = 6, t: int = 7, seed: int = 1, empty_row: bool = False):
    gen = torch.Generator().manual_seed(seed)
    lengths = torch.randint(1, t + 1, (n,), generator=gen)
    if empty_row:
        lengths[2] = 0
    mask = torch.arange(t).unsqueeze(0) < lengths.unsqueeze(1)
    loss = torch.randn(n, t, generator=gen, dtype=torch.float64)
    return loss, mask


# ---- advantage normalisation, std estimator, eps --------------------------------------------------------
def test_grpo_advantages_are_verls_and_trls_after_bessel_rescaling():
    """grpolab uses the population std (ddof 0) and no +eps; verl and TRL use torch.std (Bessel, ddof 1)
    plus eps (1e-6, 1e-4). grpolab x sqrt((G-1)/G) is their formula with eps = 0, and within eps/std of
    it with their eps."""
    r = groups()
    g = r.shape[1]
    ours = compute_advantages(r, "grpo") * math.sqrt((g - 1) / g)
    scores, index = flat(r)
    assert torch.allclose(ours.reshape(-1), verl_grpo_advantage(scores, index, epsilon=0.0), atol=1e-12)
    assert torch.allclose(ours.reshape(-1), trl_advantages(r.reshape(-1), g).double(), rtol=1e-3)
    std_b = r.std(dim=1).repeat_interleave(g)
    for eps, peer in ((1e-6, verl_grpo_advantage(scores, index)), (1e-4, trl_advantages(r.reshape(-1), g))):
        bound = ours.reshape(-1).abs() * eps / std_b * 1.001 + 1e-15
        assert bool(((ours.reshape(-1) - peer).abs() <= bound).all()), eps


def test_centre_only_and_rloo_match_both_peers():
    r = groups()
    scores, index = flat(r)
    dr = compute_advantages(r, "dr_grpo").reshape(-1)
    assert torch.allclose(dr, verl_grpo_advantage(scores, index, norm_adv_by_std_in_grpo=False), atol=1e-12)
    assert torch.allclose(dr, trl_advantages(r.reshape(-1), r.shape[1], scale_rewards=False), atol=1e-12)
    assert torch.allclose(compute_advantages(r, "rloo").reshape(-1), verl_rloo_advantage(scores, index), atol=1e-12)


def test_a_constant_float32_group_is_exactly_zero_only_in_grpolab():
    """64 copies of 0.95 in float32: the float32 mean differs from 0.95 by 6e-8 and torch.std gives
    6e-8, so verl's (r - mean) / (std + 1e-6) is 0.056 and TRL's / (std + 1e-4) is 6e-4, not 0.
    grpolab computes the std in float64 on shifted rewards and its guard std < eps gives exact zeros."""
    r = torch.full((1, 64), 0.95, dtype=torch.float32)
    assert torch.equal(compute_advantages(r, "grpo"), torch.zeros_like(r))
    scores, index = flat(r)
    verl = verl_grpo_advantage(scores, index).abs().max().item()
    trl = trl_advantages(r.reshape(-1), 64).abs().max().item()
    assert 0.01 < verl < 0.1 and 1e-4 < trl < 1e-3
    for values in ([0.1] * 3, [0.7] * 7, [1.0] * 8, [0.0] * 8):  # zero in every implementation
        r = torch.tensor([values], dtype=torch.float32)
        assert torch.equal(compute_advantages(r, "grpo"), torch.zeros_like(r))


def test_degenerate_groups_differ_by_convention():
    """G = 1: grpolab gives 0 (std 0 < eps; RLOO has no other sample); verl sets mean 0, std 1 and
    returns the raw score (GRPO and RLOO alike); TRL refuses num_generations < 2."""
    r = torch.tensor([[0.7], [1.0], [0.0]], dtype=torch.float64)
    scores, index = flat(r)
    for name in ("grpo", "dr_grpo", "rloo"):
        assert torch.equal(compute_advantages(r, name), torch.zeros_like(r)), name
    assert torch.allclose(verl_grpo_advantage(scores, index), scores / (1 + 1e-6))
    assert torch.equal(verl_rloo_advantage(scores, index), scores)
    with pytest.raises(ValueError, match="at least 2 generations"):
        trl_advantages(r.reshape(-1), 1)


# ---- loss aggregation ------------------------------------------------------------------------------------
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_aggregations_map_onto_verl_and_trl(seed):
    loss, mask = token_batch(seed=seed)
    n, t = loss.shape
    m = mask.double()
    rm, tm = aggregate_loss(loss, mask, "response_mean"), aggregate_loss(loss, mask, "token_mean")
    fl = aggregate_loss(loss, mask, "fixed_length", max_len=t)
    assert torch.allclose(rm, verl_agg_loss(loss, m, "seq-mean-token-mean"), atol=1e-12)
    assert torch.allclose(tm, verl_agg_loss(loss, m, "token-mean"), atol=1e-12)
    # verl's "seq-mean-token-sum-norm" divides the token sum by T only: N times grpolab's fixed_length
    assert torch.allclose(n * fl, verl_agg_loss(loss, m, "seq-mean-token-sum-norm"), atol=1e-12)
    assert not torch.allclose(fl, verl_agg_loss(loss, m, "seq-mean-token-sum-norm"))
    assert torch.allclose(aggregate_loss(loss, mask, "fixed_length", max_len=1),
                          verl_agg_loss(loss, m, "seq-mean-token-sum"), atol=1e-12)
    zeros = torch.zeros_like(loss)
    for mode, loss_type in (("response_mean", "grpo"), ("token_mean", "bnpo"), ("fixed_length", "dr_grpo")):
        # TRL with ratio 1 (old = current), beta 0: its per-token loss is -A; grpolab's surrogate is the same
        adv = torch.linspace(-1, 1, n, dtype=torch.float64)
        ours = aggregate_loss(clipped_surrogate(zeros, adv)[0], mask, mode, max_len=t)
        assert torch.allclose(ours, trl_loss(zeros, zeros, zeros, adv, m, 0.2, 0.2, 0.0, loss_type, t), atol=1e-12)


def test_an_empty_response_counts_differently():
    """A response with no valid token (a group dropped by dynamic sampling): grpolab's response_mean
    leaves it out of the mean; TRL's "grpo" counts it as a 0 (clamp(min=1)); verl's seq-mean-token-mean
    divides 0 by 0."""
    loss, mask = token_batch(empty_row=True)
    n = loss.shape[0]
    ours = aggregate_loss(loss, mask, "response_mean")
    per_row = (loss * mask).sum(-1) / mask.sum(-1).clamp(min=1)
    assert torch.allclose(ours, per_row.sum() / (n - 1))
    zeros = torch.zeros_like(loss)
    adv = torch.ones(n, dtype=torch.float64)
    trl = trl_loss(zeros, zeros, zeros, adv, mask.double(), 0.2, 0.2, 0.0, "grpo", loss.shape[1])
    assert torch.allclose(trl, torch.tensor(-(n - 1) / n, dtype=torch.float64))
    assert torch.isnan(verl_agg_loss(loss, mask.double(), "seq-mean-token-mean"))


# ---- clipping ---------------------------------------------------------------------------------------------
def test_clipping_matches_trl_and_verl_up_to_the_dual_clip():
    """grpolab's clipped surrogate (DAPO clip-higher, log-ratio clamped to +-20 as verl does) equals TRL's
    per-token loss and verl's except where verl's dual clip acts: A < 0 and ratio > clip_ratio_c = 3,
    where verl caps the loss at -3A. torch.minimum(ours, -3A) on A < 0 gives verl's."""
    log_ratio = torch.linspace(-2.0, 2.0, 41, dtype=torch.float64).unsqueeze(0).repeat(2, 1)
    adv = torch.tensor([0.8, -0.8], dtype=torch.float64)
    ours, _ = clipped_surrogate(log_ratio, adv, 0.2, 0.28)
    a = adv.unsqueeze(1).expand_as(log_ratio)
    verl = verl_pg_losses(torch.zeros_like(log_ratio), log_ratio, a, 0.2, 0.28)
    dual = (a < 0) & (log_ratio.exp() > 3.0)
    assert bool(dual.any())
    assert torch.allclose(ours[~dual], verl[~dual], atol=1e-12)
    assert bool((verl[dual] < ours[dual]).all())
    assert torch.allclose(torch.where(a < 0, torch.minimum(ours, -3.0 * a), ours), verl, atol=1e-12)
    mask = torch.ones_like(log_ratio)
    for row in range(2):
        trl = trl_loss(log_ratio[row:row + 1], torch.zeros_like(log_ratio[row:row + 1]), log_ratio[row:row + 1],
                       adv[row:row + 1], mask[row:row + 1], 0.2, 0.28, 0.0, "bnpo", 41)
        assert torch.allclose(trl, ours[row].mean(), atol=1e-12)


def verl_gspo_loss(old_log_prob, log_prob, advantages, response_mask, clip_low, clip_high):
    """compute_policy_loss_gspo: token-level combined ratio sg[s_i] * pi / sg[pi], seq-mean-token-mean."""
    negative_approx_kl = log_prob - old_log_prob
    seq_lengths = torch.sum(response_mask, dim=-1).clamp(min=1)
    negative_approx_kl_seq = torch.sum(negative_approx_kl * response_mask, dim=-1) / seq_lengths
    log_seq_importance_ratio = log_prob - log_prob.detach() + negative_approx_kl_seq.detach().unsqueeze(-1)
    seq_importance_ratio = torch.exp(torch.clamp(log_seq_importance_ratio, max=10.0))
    pg_losses1 = -advantages * seq_importance_ratio
    pg_losses2 = -advantages * torch.clamp(seq_importance_ratio, 1 - clip_low, 1 + clip_high)
    return verl_agg_loss(torch.maximum(pg_losses1, pg_losses2), response_mask, "seq-mean-token-mean")


def test_gspo_sequence_ratio_has_verls_value_and_gradient():
    """grpolab's GSPO (``ratio_level="sequence"``: one geometric-mean ratio per response, clipped, mean
    over responses) and verl's token-level form with stop-gradients give the same loss and the same
    gradient: d s_i = s_i * mean_t d log pi_t either way."""
    gen = torch.Generator().manual_seed(4)
    _, mask = token_batch(n=8, t=6, seed=5)
    logp = (-torch.rand(8, 6, generator=gen, dtype=torch.float64) * 2).requires_grad_(True)
    old = logp.detach() + torch.randn(8, 6, generator=gen, dtype=torch.float64) * 1e-3
    adv = torch.tensor([1.0, -1.0, 0.5, -0.5, 2.0, -2.0, 0.3, -0.3], dtype=torch.float64)
    ours, clipped = clipped_surrogate(sequence_log_ratio(logp, old, mask), adv, GSPO_EPS_LOW, GSPO_EPS_HIGH)
    assert bool(clipped.any()) and not bool(clipped.all()), "the case exercises both branches"
    (g_ours,) = torch.autograd.grad(ours.mean(), logp)
    verl = verl_gspo_loss(old, logp, adv.unsqueeze(-1).expand(8, 6), mask.double(), GSPO_EPS_LOW, GSPO_EPS_HIGH)
    (g_verl,) = torch.autograd.grad(verl, logp)
    assert torch.allclose(ours.mean(), verl, atol=1e-12)
    assert torch.allclose(g_ours, g_verl, atol=1e-12)


# ---- KL estimators ---------------------------------------------------------------------------------------
def test_kl_estimators_match_verls_and_trls_where_they_exist():
    logp = torch.linspace(-6.0, -0.1, 30, dtype=torch.float64)
    ref = torch.flip(logp, [0])
    assert torch.allclose(k1_kl(logp, ref), verl_kl_penalty(logp, ref, "k1"), atol=1e-12)
    assert torch.allclose(k2_kl(logp, ref), verl_kl_penalty(logp, ref, "k2"), atol=1e-12)
    # verl clamps k3's value to at most 10; grpolab does not (both clamp the log-ratio to +-20)
    verl_k3 = verl_kl_penalty(logp, ref, "k3")
    assert torch.allclose(k3_kl(logp, ref).clamp(max=10.0), verl_k3, atol=1e-12)
    assert float(k3_kl(logp, ref).max()) > 10.0 and float(verl_k3.max()) == 10.0
    zeros = torch.zeros_like(logp).unsqueeze(0)
    trl_kl = trl_loss(logp.unsqueeze(0), logp.unsqueeze(0), ref.unsqueeze(0), torch.zeros(1, dtype=torch.float64),
                      torch.ones_like(zeros), 0.2, 0.2, 1.0, "bnpo", 30)  # A = 0: only beta * k3 is left
    assert torch.allclose(trl_kl, k3_kl(logp, ref).mean(), atol=1e-12)
    assert set(KL_ESTIMATORS) == {"k1", "k2", "k3"}


def test_k1_and_k3_are_unbiased_values_but_k1_gives_no_gradient_as_a_loss():
    """Under x ~ pi: E[k1] = E[k3] = KL(pi || pi_ref) exactly; E[k2] is not. Differentiated at the
    samples, E[grad k1] = sum_x pi(x) grad log pi(x) = grad sum_x pi(x) = 0: why grpolab trains with k3."""
    logits = torch.tensor([0.3, -1.2, 2.0, 0.1], dtype=torch.float64, requires_grad=True)
    ref = torch.log_softmax(torch.tensor([1.0, 0.0, -0.5, 0.4], dtype=torch.float64), 0)
    logp = torch.log_softmax(logits, 0)
    pi = logp.exp().detach()
    exact = float((pi * (logp.detach() - ref)).sum())
    assert float((pi * k1_kl(logp.detach(), ref)).sum()) == pytest.approx(exact, abs=1e-12)
    assert float((pi * k3_kl(logp.detach(), ref)).sum()) == pytest.approx(exact, abs=1e-12)
    assert float((pi * k2_kl(logp.detach(), ref)).sum()) != pytest.approx(exact, abs=1e-3)
    (grad,) = torch.autograd.grad((pi * k1_kl(logp, ref)).sum(), logits)
    assert torch.allclose(grad, torch.zeros_like(grad), atol=1e-12)


# ---- the table itself ------------------------------------------------------------------------------------
def test_the_conventions_table_covers_every_topic_and_cites_the_transcribed_commits():
    text = CONVENTIONS.read_text(encoding="utf-8")
    for topic in ("优势归一化", "std 估计", "eps", "退化组", "损失聚合", "裁剪", "KL 估计"):
        assert re.search(rf"^\| \*\*{re.escape(topic)}", text, re.M), topic
    assert f"volcengine/verl/blob/{VERL_COMMIT}/verl/trainer/ppo/core_algos.py" in text
    assert f"huggingface/trl/blob/{TRL_COMMIT}/trl/trainer/grpo_trainer.py" in text
    assert "tests/grpo/test_conventions.py" in text
    lesson = (ROOT / "lessons" / "lesson11_grpo.qmd").read_text(encoding="utf-8")
    assert "docs/conventions.md" in lesson, "the lesson links the table"
