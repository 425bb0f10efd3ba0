"""Toy task, policy and training loop: structure, determinism and a CPU learning smoke run."""
import dataclasses
import json

import pytest
import torch

from grpolab.experiments import demo_configs
from grpolab.toy import GRUPolicy, ToyTask, reward_fn
from grpolab.train import GRPOConfig, build_policy, train


def test_policy_is_tiny():
    policy = GRUPolicy(ToyTask(num_prompts=1024))
    assert sum(p.numel() for p in policy.parameters()) < 1_000_000


def test_samples_are_answer_then_digits_then_eos():
    task = ToyTask(num_prompts=16, max_len=8)
    policy = build_policy(GRPOConfig(task=task), torch.device("cpu"))
    tokens, mask = policy.sample(torch.arange(16).repeat_interleave(4), torch.Generator().manual_seed(0))
    lengths = mask.sum(1)
    assert tokens.shape == mask.shape == (64, 8)
    assert bool((tokens[:, 0] != task.eos).all()), "the first token is always an answer digit"
    for row, m, n in zip(tokens.tolist(), mask.tolist(), lengths.tolist(), strict=True):
        assert m == [True] * n + [False] * (8 - n)  # mask is a prefix
        assert all(t != task.eos for t in row[: n - 1])
        assert n == 8 or row[n - 1] == task.eos
    assert len(set(lengths.tolist())) > 2, "lengths vary"


def test_log_probs_match_sampling_distribution_at_first_token():
    task = ToyTask(num_prompts=4)
    policy = build_policy(GRPOConfig(task=task), torch.device("cpu"))
    prompts = torch.arange(4)
    tokens = task.answers().unsqueeze(1).repeat(1, 3)  # (4, 3)
    with torch.no_grad():
        first = policy.log_probs(prompts, tokens)[:, 0].exp()
        exact = policy.success_prob(prompts, task.answers())
    assert torch.allclose(first, exact, atol=1e-6)


def test_reward_is_first_token_match():
    task = ToyTask(num_prompts=3, num_digits=4)
    answers = torch.tensor([1, 2, 3])
    tokens = torch.tensor([[1, 0, 4], [0, 2, 4], [3, 4, 4]])
    mask = torch.ones_like(tokens, dtype=torch.bool)
    assert reward_fn(task, torch.arange(3), tokens, mask, answers).tolist() == [1.0, 0.0, 1.0]


def test_initial_groups_are_mixed_all_wrong_and_all_right():
    cfg = dataclasses.replace(demo_configs()["a"], steps=0, batch_prompts=128)
    with torch.no_grad():
        probs = build_policy(cfg, torch.device("cpu")).success_prob(torch.arange(128), cfg.task.answers())
    g = cfg.group_size
    all_wrong, all_right = float(((1 - probs) ** g).mean()), float((probs**g).mean())
    assert all_wrong > 0.2 and all_right > 0.005 and 1 - all_wrong - all_right > 0.2
    assert int((probs**g > 0.3).sum()) >= 1, "at least one prompt is usually all-right"


def test_training_is_deterministic_under_a_seed():
    cfg = GRPOConfig(task=ToyTask(num_prompts=32), steps=3, batch_prompts=8, group_size=4, device="cpu")
    a, b = train(cfg).history, train(cfg).history
    assert json.dumps(a) == json.dumps(b)


def test_unknown_names_fail_before_training():
    with pytest.raises(ValueError, match="valid"):
        train(GRPOConfig(advantage="nope", device="cpu"))
    with pytest.raises(ValueError, match="valid"):
        train(GRPOConfig(aggregation="nope", device="cpu"))


@pytest.mark.parametrize("changes", [{"ratio_level": "sequence"}, {"dynamic_sampling": True},
                                     {"advantage": "rloo", "aggregation": "fixed_length"}])
def test_variants_run(changes):
    cfg = GRPOConfig(task=ToyTask(num_prompts=16), steps=2, batch_prompts=4, group_size=4, device="cpu", **changes)
    h = train(cfg).history
    assert len(h["reward"]) == 3


@pytest.mark.slow
def test_cpu_smoke_run_reward_rises():
    cfg = dataclasses.replace(demo_configs(device="cpu")["a"], steps=100)
    h = train(cfg).history
    start, end = sum(h["reward"][:5]) / 5, sum(h["reward"][-10:]) / 10
    assert h["acc"][0] <= 0.3 and start <= 0.3
    assert h["acc"][-1] >= 0.7 and end >= 0.7
