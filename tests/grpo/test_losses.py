"""Loss aggregation, ratios, clipped surrogate and k3 KL against the lesson's numbers and plain loops."""
import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from grpolab.losses import (
    GSPO_EPS_HIGH,
    GSPO_EPS_LOW,
    LOSS_AGGREGATIONS,
    aggregate_loss,
    clipped_surrogate,
    k3_kl,
    sequence_log_ratio,
    token_log_ratio,
)


def padded(rows, width):
    """(values (N, width), mask (N, width)) from ragged rows."""
    vals = torch.zeros(len(rows), width, dtype=torch.float64)
    mask = torch.zeros(len(rows), width, dtype=torch.bool)
    for i, row in enumerate(rows):
        vals[i, : len(row)] = torch.tensor(row, dtype=torch.float64)
        mask[i, : len(row)] = True
    return vals, mask


def test_lesson_aggregation_numbers():
    loss, mask = padded([[2.0], [0.0, 0.0, 0.0]], width=4)
    assert float(aggregate_loss(loss, mask, "response_mean")) == 1.0
    assert float(aggregate_loss(loss, mask, "token_mean")) == 0.5
    assert float(aggregate_loss(loss, mask, "fixed_length", max_len=4)) == 0.25


def test_padding_values_are_ignored():
    loss, mask = padded([[2.0], [0.0, 0.0, 0.0]], width=4)
    loss[~mask] = 1e6
    assert float(aggregate_loss(loss, mask, "response_mean")) == 1.0


@settings(max_examples=100, deadline=None)
@given(st.lists(st.lists(st.floats(-5, 5, allow_nan=False), min_size=1, max_size=6), min_size=1, max_size=5))
def test_aggregations_equal_plain_loops(rows):
    loss, mask = padded(rows, width=6)
    assert float(aggregate_loss(loss, mask, "response_mean")) == pytest.approx(
        sum(sum(r) / len(r) for r in rows) / len(rows), abs=1e-9)
    assert float(aggregate_loss(loss, mask, "token_mean")) == pytest.approx(
        sum(map(sum, rows)) / sum(map(len, rows)), abs=1e-9)
    assert float(aggregate_loss(loss, mask, "fixed_length", max_len=6)) == pytest.approx(
        sum(map(sum, rows)) / (len(rows) * 6), abs=1e-9)


def test_unknown_aggregation_lists_valid_names():
    with pytest.raises(ValueError, match="fixed_length, response_mean, token_mean"):
        aggregate_loss(torch.zeros(1, 1), torch.ones(1, 1), "seq_sum")
    assert set(LOSS_AGGREGATIONS) == {"response_mean", "token_mean", "fixed_length"}


def test_gspo_sequence_ratio_is_geometric_mean():
    old = torch.zeros(1, 3, dtype=torch.float64)
    logp = torch.tensor([[math.log(4.0), math.log(0.25), 123.0]], dtype=torch.float64)
    mask = torch.tensor([[True, True, False]])
    assert float(torch.exp(sequence_log_ratio(logp, old, mask))[0]) == pytest.approx(1.0, abs=1e-12)
    token_ratios = torch.exp(token_log_ratio(logp, old))[mask]
    assert float(token_ratios.mean()) == 2.125


def test_gspo_ratio_of_long_sequence_does_not_underflow():
    logp = torch.full((1, 5000), -0.01)
    ratio = torch.exp(sequence_log_ratio(logp, torch.zeros_like(logp), torch.ones_like(logp, dtype=torch.bool)))
    assert float(ratio[0]) == pytest.approx(math.exp(-0.01), rel=1e-5)


@settings(max_examples=200, deadline=None)
@given(st.floats(-1.5, 1.5), st.floats(-3, 3), st.floats(0.05, 0.4), st.floats(0.05, 0.4))
def test_clipped_surrogate_equals_ppo_formula(log_ratio, adv, eps_low, eps_high):
    loss, clipped = clipped_surrogate(torch.tensor([[log_ratio]], dtype=torch.float64),
                                      torch.tensor([adv], dtype=torch.float64), eps_low, eps_high)
    ratio = math.exp(log_ratio)
    ref = -min(ratio * adv, min(max(ratio, 1 - eps_low), 1 + eps_high) * adv)
    assert float(loss[0, 0]) == pytest.approx(ref, abs=1e-9)
    assert bool(clipped[0, 0]) == (min(max(ratio, 1 - eps_low), 1 + eps_high) * adv < ratio * adv)


def test_clip_higher_lets_positive_advantages_rise_further():
    lr = torch.tensor([[math.log(1.25)]])
    _, sym = clipped_surrogate(lr, torch.tensor([1.0]), 0.2, 0.2)
    _, high = clipped_surrogate(lr, torch.tensor([1.0]), 0.2, 0.28)
    assert bool(sym[0, 0]) and not bool(high[0, 0])


def test_clipped_tokens_get_no_gradient():
    lr = torch.tensor([[math.log(1.5), 0.0]], requires_grad=True)
    loss, _ = clipped_surrogate(lr, torch.tensor([1.0]), 0.2, 0.2)
    loss.sum().backward()
    assert lr.grad.tolist()[0][0] == 0.0 and lr.grad.tolist()[0][1] != 0.0


@settings(max_examples=200, deadline=None)
@given(st.floats(-20, 0), st.floats(-20, 0))
def test_k3_is_non_negative(logp, ref_logp):
    assert float(k3_kl(torch.tensor(logp, dtype=torch.float64), torch.tensor(ref_logp, dtype=torch.float64))) >= 0


def test_k3_is_unbiased_for_kl_under_sampling_from_pi():
    gen = torch.Generator().manual_seed(0)
    pi = torch.softmax(torch.randn(6, generator=gen).double(), 0)
    ref = torch.softmax(torch.randn(6, generator=gen).double(), 0)
    exact = float((pi * (pi.log() - ref.log())).sum())
    # exact expectation over the 6 outcomes
    assert float((pi * k3_kl(pi.log(), ref.log())).sum()) == pytest.approx(exact, abs=1e-12)
    # Monte Carlo with samples from pi
    x = torch.multinomial(pi, 200_000, replacement=True, generator=gen)
    mc = k3_kl(pi.log()[x], ref.log()[x])
    assert float(mc.mean()) == pytest.approx(exact, abs=4 * float(mc.std()) / math.sqrt(len(x)))


def test_k3_as_a_loss_follows_the_reverse_kl_gradient():
    """E_{x~pi}[grad k3(x)] = grad KL(pi_ref || pi), not grad KL(pi || pi_ref): k3's value estimates one
    divergence, its gradient (at fixed samples, as GRPO uses it) the other (exact, over all outcomes)."""
    gen = torch.Generator().manual_seed(1)
    logits = torch.randn(6, generator=gen, dtype=torch.float64, requires_grad=True)
    ref = torch.log_softmax(torch.randn(6, generator=gen, dtype=torch.float64), 0)

    def grad_of(f):
        (g,) = torch.autograd.grad(f(), logits)
        return g

    def logp():
        return torch.log_softmax(logits, 0)

    pi = torch.softmax(logits, 0).detach()
    k3_grad = grad_of(lambda: (pi * k3_kl(logp(), ref)).sum())  # expectation weights held fixed
    reverse = grad_of(lambda: (ref.exp() * (ref - logp())).sum())  # KL(pi_ref || pi)
    forward = grad_of(lambda: (torch.softmax(logits, 0) * (logp() - ref)).sum())  # KL(pi || pi_ref)
    assert torch.allclose(k3_grad, reverse, atol=1e-12)
    assert not torch.allclose(k3_grad, forward, atol=1e-3)


def test_log_ratios_are_clamped_before_exp():
    lr = torch.tensor([[1000.0, -1000.0, 0.1]], requires_grad=True)
    loss, _ = clipped_surrogate(lr, torch.tensor([-1.0]), 0.2, 0.28)
    loss.sum().backward()
    assert bool(torch.isfinite(loss).all()) and bool(torch.isfinite(lr.grad).all())
    assert lr.grad[0, 0] == 0.0 and lr.grad[0, 2] != 0.0, "beyond the clamp no gradient, inside unchanged"
    kl = k3_kl(torch.tensor([-200.0, 0.0]), torch.tensor([0.0, -200.0]))
    assert bool(torch.isfinite(kl).all())


def test_aggregations_keep_leading_dims_and_skip_empty_responses():
    gen = torch.Generator().manual_seed(0)
    loss = torch.randn(3, 4, 6, generator=gen, dtype=torch.float64)
    mask = torch.rand(3, 4, 6, generator=gen) < 0.7
    mask[..., 0] = True
    for mode in LOSS_AGGREGATIONS:
        stacked = aggregate_loss(loss, mask, mode, max_len=6)
        assert stacked.shape == (3,)
        for s in range(3):
            assert float(stacked[s]) == pytest.approx(float(aggregate_loss(loss[s], mask[s], mode, 6)), abs=1e-12)
        # a response with no valid token (a dropped group) changes nothing
        padded_mask = torch.cat([mask[0], torch.zeros(1, 6, dtype=torch.bool)])
        padded_loss = torch.cat([loss[0], torch.full((1, 6), float("nan"), dtype=torch.float64)])
        assert float(aggregate_loss(padded_loss, padded_mask, mode, 6)) == pytest.approx(float(stacked[0]), abs=1e-12)


def test_gspo_uses_its_papers_clip_range():
    from grpolab.train import GRPOConfig

    assert (GSPO_EPS_LOW, GSPO_EPS_HIGH) == (3e-4, 4e-4)
    cfg = GRPOConfig()
    assert (cfg.seq_eps_low, cfg.seq_eps_high) == (3e-4, 4e-4) and (cfg.eps_low, cfg.eps_high) == (0.2, 0.28)
    # a sequence ratio 1.001 is clipped by GSPO's range, never by the token range
    lr, adv = torch.tensor([math.log(1.001)]), torch.tensor([1.0])
    _, clipped_seq = clipped_surrogate(lr, adv, GSPO_EPS_LOW, GSPO_EPS_HIGH)
    _, clipped_tok = clipped_surrogate(lr, adv, 0.2, 0.28)
    assert bool(clipped_seq[0]) and not bool(clipped_tok[0])
