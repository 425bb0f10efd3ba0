"""Advantage estimators: vectorised (B, G) versions against the lesson's pure-Python reference."""
import math
from fractions import Fraction

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from grpolab.advantages import (
    ADVANTAGE_ESTIMATORS,
    compute_advantages,
    group_advantages_reference,
    group_std,
    keep_informative_groups,
)

rewards_groups = st.integers(1, 8).flatmap(
    lambda g: st.lists(
        st.lists(st.one_of(st.sampled_from([0.0, 1.0, 0.5]), st.floats(-10, 10, allow_nan=False, width=32)),
                 min_size=g, max_size=g),
        min_size=1, max_size=6,
    )
)


@settings(max_examples=200, deadline=None)
@given(rewards_groups)
def test_grpo_equals_lesson_reference_on_every_group(groups):
    got = compute_advantages(torch.tensor(groups, dtype=torch.float64), "grpo")
    for row, group in zip(got.tolist(), groups, strict=True):
        std = math.sqrt(sum((r - sum(group) / len(group)) ** 2 for r in group) / len(group))
        if abs(std - 1e-8) < 1e-12:  # on the guard's edge the two summation orders may disagree
            continue
        ref = group_advantages_reference(group)
        assert row == pytest.approx(ref, abs=1e-9)


@settings(max_examples=200, deadline=None)
@given(rewards_groups.filter(lambda gs: len(gs[0]) >= 2))
def test_centred_advantages_are_rloo_scaled_by_g_minus_1_over_g(groups):
    r = torch.tensor(groups, dtype=torch.float64)
    g = r.shape[1]
    centred = compute_advantages(r, "dr_grpo")
    rloo = compute_advantages(r, "rloo")
    assert torch.allclose(centred, (g - 1) / g * rloo, atol=1e-9)


def test_rloo_matches_plain_loop():
    r = [[1.0, 0.0, 0.0, 1.0], [0.3, 0.9, 0.1, 0.2]]
    got = compute_advantages(torch.tensor(r, dtype=torch.float64), "rloo").tolist()
    for row, group in zip(got, r, strict=True):
        ref = [x - (sum(group) - x) / (len(group) - 1) for x in group]
        assert row == pytest.approx(ref, abs=1e-12)


@pytest.mark.parametrize("group", [[0.95] * 64, [0.1] * 3, [2.0, 2.0], [1.0], [0.0] * 8, [1.0] * 16])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_constant_groups_give_exact_zeros(group, dtype):
    got = compute_advantages(torch.tensor([group], dtype=dtype), "grpo")
    assert got.tolist() == [[0.0] * len(group)]
    assert group_advantages_reference(group) == [0.0] * len(group)


def test_lesson_worked_example():
    got = compute_advantages(torch.tensor([[1.0, 2.0, 3.0], [0.0, 1.0, 0.0]], dtype=torch.float64), "grpo")
    assert got[0].tolist() == pytest.approx([-math.sqrt(1.5), 0.0, math.sqrt(1.5)], abs=1e-12)
    assert abs(float(got[0].sum())) < 1e-12
    assert compute_advantages(torch.tensor([[0.0, 1.0]]), "grpo").tolist() == [[-1.0, 1.0]]


def test_population_std_not_sample_std():
    assert float(group_std(torch.tensor([[1.0, 2.0, 3.0]]))[0]) == pytest.approx(math.sqrt(2 / 3))


def test_empty_group_is_rejected():
    with pytest.raises(ValueError, match="group cannot be empty"):
        group_advantages_reference([])
    with pytest.raises(ValueError, match=r"\(B, G\)"):
        compute_advantages(torch.zeros(3, 0), "grpo")


def test_unknown_estimator_lists_valid_names():
    with pytest.raises(ValueError, match="dr_grpo, grpo, rloo"):
        compute_advantages(torch.zeros(2, 2), "ppo")
    assert set(ADVANTAGE_ESTIMATORS) == {"grpo", "dr_grpo", "rloo"}


def test_dynamic_sampling_keeps_only_mixed_groups():
    r = torch.tensor([[0.0, 0.0, 0.0], [1.0, 0.0, 1.0], [1.0, 1.0, 1.0]])
    assert keep_informative_groups(r).tolist() == [False, True, False]


def exact_z_scores(group: list[float]) -> list[float]:
    """z-scores of the given float64 values in exact rational arithmetic (only the final sqrt rounds)."""
    values = [Fraction(x) for x in group]
    mean = sum(values) / len(values)
    std = Fraction(math.sqrt(sum((v - mean) ** 2 for v in values) / len(values)))
    return [float((v - mean) / std) for v in values]


@settings(max_examples=50, deadline=None)
@given(st.floats(-1e7, 1e7),
       st.lists(st.floats(0, 1), min_size=2, max_size=16).filter(lambda xs: max(xs) - min(xs) > 0.1))
def test_shifted_variance_keeps_its_digits_at_large_offsets(offset, noise):
    """1e6-scale rewards that differ by ~1e-6: the library stays exact, the textbook formula does not."""
    group = [offset + 1e-6 * x for x in noise]  # spread >= 1e-7 stays above the guard's eps = 1e-8
    got = compute_advantages(torch.tensor([group], dtype=torch.float64), "grpo")[0].tolist()
    assert got == pytest.approx(exact_z_scores(group), abs=1e-9)


def test_textbook_two_pass_formula_loses_digits_where_the_shifted_one_does_not():
    group = [1e6 + 1e-6 * x for x in (0.1, 0.7, 0.2, 0.9, 0.4, 0.3, 0.8, 0.5)]
    exact = exact_z_scores(group)
    textbook = group_advantages_reference(group)  # the lesson's exercise: mean first, then r - mean
    shifted = compute_advantages(torch.tensor([group], dtype=torch.float64), "grpo")[0].tolist()
    assert max(abs(a - b) for a, b in zip(textbook, exact, strict=True)) > 1e-6
    assert max(abs(a - b) for a, b in zip(shifted, exact, strict=True)) < 1e-12


def test_estimators_accept_leading_member_dims():
    r = torch.rand(3, 4, 8, generator=torch.Generator().manual_seed(0)).round()
    for name in ADVANTAGE_ESTIMATORS:
        stacked = compute_advantages(r, name)
        for s in range(3):
            assert torch.equal(stacked[s], compute_advantages(r[s], name)), name
    assert group_std(r).shape == (3, 4) and keep_informative_groups(r).shape == (3, 4)
