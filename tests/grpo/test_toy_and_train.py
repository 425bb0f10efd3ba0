"""Toy task, stacked policy and training loop: structure, equivalences, determinism, a CPU learning run."""
import dataclasses
import json

import pytest
import torch
from torch import nn

from grpolab.experiments import demo_configs, seed_configs
from grpolab.toy import GRUPolicy, ToyTask, member_uniforms, parameter_count, reward_fn
from grpolab.train import (
    GRPOConfig,
    MemberAdam,
    build_policy,
    clip_grad_norms,
    grpo_update,
    sample_rollout,
    start_run,
    train,
    train_population,
)

CPU = torch.device("cpu")


def sample(policy: GRUPolicy, prompts: torch.Tensor, seeds) -> tuple[torch.Tensor, torch.Tensor]:
    gens = [torch.Generator().manual_seed(s) for s in seeds]
    return policy.sample(prompts, member_uniforms(gens, prompts.shape[1], policy.task.max_len, CPU))


def test_policy_is_tiny():
    policy = GRUPolicy(ToyTask(num_prompts=1024), seeds=[0, 1])
    assert parameter_count(policy) < 1_000_000
    assert parameter_count(policy) * 2 == sum(p.numel() for p in policy.parameters())


def test_samples_are_answer_then_digits_then_eos():
    task = ToyTask(num_prompts=16, max_len=8)
    policy = build_policy(GRPOConfig(task=task), CPU)
    tokens, mask = sample(policy, torch.arange(16).repeat_interleave(4).unsqueeze(0), [0])
    tokens, mask = tokens[0], mask[0]
    lengths = mask.sum(1)
    assert tokens.shape == mask.shape == (64, 8)
    assert bool((tokens[:, 0] != task.eos).all()), "the first token is always an answer digit"
    for row, m, n in zip(tokens.tolist(), mask.tolist(), lengths.tolist(), strict=True):
        assert m == [True] * n + [False] * (8 - n)  # mask is a prefix
        assert all(t != task.eos for t in row[: n - 1])
        assert n == 8 or row[n - 1] == task.eos
    assert len(set(lengths.tolist())) > 2, "lengths vary"


def test_sampling_follows_the_policy_distribution():
    """Inverse-CDF sampling from per-member uniforms draws the first token with the exact probabilities."""
    task = ToyTask(num_prompts=1, num_digits=4, max_len=1)
    policy = build_policy(GRPOConfig(task=task, prior_scale=1.0), CPU)
    with torch.no_grad():
        probs = torch.softmax(policy.first_logits(torch.zeros(1, 1, dtype=torch.long))[0, 0], -1)
    tokens, _ = sample(policy, torch.zeros(1, 40_000, dtype=torch.long), [3])
    freq = torch.bincount(tokens[0, :, 0], minlength=5).double() / 40_000
    assert float(freq[task.eos]) == 0.0
    assert torch.allclose(freq, probs.double(), atol=0.01)


def reference_gru_log_probs(task: ToyTask, seed: int, prompts: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
    """The policy of `seed` rebuilt from torch's own modules (nn.GRU), teacher-forced: (N, T)."""
    torch.manual_seed(seed)
    d = task.num_digits
    prompt_embed, token_embed = nn.Embedding(task.num_prompts, 64), nn.Embedding(d + 2, 32)
    gru, head, prior = nn.GRU(32, 64, batch_first=True), nn.Linear(64, d + 1), nn.Embedding(task.num_prompts, d + 1)
    with torch.no_grad():
        nn.init.normal_(prompt_embed.weight, std=0.5)
        nn.init.normal_(prior.weight, std=2.0)
        head.bias[d] = -1.0
        inputs = torch.cat([torch.full((len(prompts), 1), task.bos), tokens[:, :-1]], dim=1)
        out, _ = gru(token_embed(inputs), prompt_embed(prompts).unsqueeze(0))
        logits = head(out)
        logits[:, 0] = logits[:, 0] + prior(prompts)
        logits[:, 0, d] = float("-inf")
        return torch.log_softmax(logits, -1).gather(2, tokens.unsqueeze(2)).squeeze(2)


def test_stacked_gru_equals_torch_gru_for_every_member():
    task = ToyTask(num_prompts=32)
    policy = GRUPolicy(task, seeds=[0, 5])
    prompts = torch.arange(32).repeat(2, 2)  # (2, 64)
    tokens, mask = sample(policy, prompts, [0, 5])
    with torch.no_grad():
        got = policy.log_probs(prompts, tokens, mask)
    for s, seed in enumerate((0, 5)):
        want = reference_gru_log_probs(task, seed, prompts[s], tokens[s])
        assert float(((got[s] - want).abs() * mask[s]).max()) < 1e-5
        assert float(got[s][~mask[s]].abs().max()) == 0.0, "padding is 0"


def test_log_probs_match_exact_success_probability_at_first_token():
    task = ToyTask(num_prompts=4)
    policy = build_policy(GRPOConfig(task=task), CPU)
    prompts = torch.arange(4).unsqueeze(0)
    answers = task.answers().unsqueeze(0)
    tokens = answers.unsqueeze(-1).repeat(1, 1, 3)  # (1, 4, 3)
    with torch.no_grad():
        first = policy.log_probs(prompts, tokens, torch.ones_like(tokens, dtype=torch.bool))[..., 0].exp()
        exact = policy.success_prob(prompts, answers)
    assert torch.allclose(first, exact, atol=1e-6)


def test_a_member_does_not_depend_on_the_other_members():
    task = ToyTask(num_prompts=32)
    prompts = torch.randint(0, 32, (3, 96), generator=torch.Generator().manual_seed(1))
    trio, solo = GRUPolicy(task, seeds=[4, 7, 9]), GRUPolicy(task, seeds=[7])
    tokens, mask = sample(trio, prompts, [4, 7, 9])
    tokens1, mask1 = sample(solo, prompts[1:2], [7])
    assert torch.equal(tokens[1:2], tokens1) and torch.equal(mask[1:2], mask1)
    with torch.no_grad():
        assert torch.allclose(trio.log_probs(prompts, tokens, mask)[1:2], solo.log_probs(prompts[1:2], tokens1, mask1),
                              atol=1e-6)


def test_population_member_follows_its_solo_run():
    cfg = GRPOConfig(task=ToyTask(num_prompts=32), steps=3, batch_prompts=8, group_size=4, device="cpu")
    pop = train_population(seed_configs(cfg, [3, 1, 2]))
    solo = train(seed_configs(cfg, [1])[0])
    for key in ("reward", "acc", "kl", "grad_norm", "len_mean"):
        assert pop.histories[1][key][1:] == pytest.approx(solo.history[key][1:], abs=1e-5), key


def test_reward_is_first_token_match():
    task = ToyTask(num_prompts=3, num_digits=4)
    answers = torch.tensor([1, 2, 3])
    tokens = torch.tensor([[1, 0, 4], [0, 2, 4], [3, 4, 4]])
    mask = torch.ones_like(tokens, dtype=torch.bool)
    assert reward_fn(task, torch.arange(3), tokens, mask, answers).tolist() == [1.0, 0.0, 1.0]


def test_initial_groups_are_mostly_all_wrong_with_some_mixed_and_a_few_all_right():
    cfg = demo_configs()["a"]
    with torch.no_grad():
        p = build_policy(cfg, CPU).success_prob(torch.arange(128).unsqueeze(0), cfg.task.answers().unsqueeze(0))[0]
    g = cfg.group_size
    all_wrong, all_right = float(((1 - p) ** g).mean()), float((p**g).mean())
    assert all_wrong > 0.5 and 0.001 < all_right < 0.05 and 1 - all_wrong - all_right > 0.3


def test_training_is_deterministic_under_a_seed():
    """Bit for bit, two runs on the same machine (the only place a sampled trajectory can be compared)."""
    cfg = GRPOConfig(task=ToyTask(num_prompts=32), steps=3, batch_prompts=8, group_size=4, device="cpu")
    a, b = train(cfg), train(cfg)
    assert json.dumps(a.history) == json.dumps(b.history) and a.p_end == b.p_end
    pa, pb = train_population(seed_configs(cfg, [0, 1])), train_population(seed_configs(cfg, [0, 1]))
    assert json.dumps(pa.histories) == json.dumps(pb.histories)


def test_unknown_names_fail_before_training():
    with pytest.raises(ValueError, match="valid"):
        train(GRPOConfig(advantage="nope", device="cpu"))
    with pytest.raises(ValueError, match="valid"):
        train(GRPOConfig(aggregation="nope", device="cpu"))
    with pytest.raises(ValueError, match="valid: token, sequence"):
        train(GRPOConfig(ratio_level="nope", device="cpu"))


def test_population_configs_may_differ_only_in_member_fields():
    cfg = GRPOConfig(task=ToyTask(num_prompts=16), steps=1, batch_prompts=4, group_size=4, device="cpu")
    with pytest.raises(ValueError, match="'lr'"):
        train_population([cfg, dataclasses.replace(cfg, lr=0.1)])
    with pytest.raises(ValueError, match="task.seed"):
        train_population([cfg, dataclasses.replace(cfg, task=ToyTask(num_prompts=32))])
    mixed = [cfg, dataclasses.replace(cfg, advantage="rloo", aggregation="token_mean", kl_coef=0.0, seed=3)]
    assert len(train_population(mixed).histories) == 2


@pytest.mark.parametrize("changes", [{"ratio_level": "sequence"}, {"dynamic_sampling": True},
                                     {"advantage": "rloo", "aggregation": "fixed_length"}, {"max_grad_norm": None}])
def test_variants_run(changes):
    cfg = GRPOConfig(task=ToyTask(num_prompts=16), steps=2, batch_prompts=4, group_size=4, device="cpu", **changes)
    h = train(cfg).history
    assert len(h["reward"]) == 3 and h["grad_norm"][1] > 0


def test_step_zero_logs_zero_kl_and_no_update():
    h = train(GRPOConfig(task=ToyTask(num_prompts=16), steps=1, batch_prompts=4, group_size=4, device="cpu")).history
    assert h["kl"][0] == 0.0, "pi_old is the reference at step 0"
    assert all(v != v for v in (h["clip_frac"][0], h["loss"][0], h["grad_norm"][0])), "NaN: no update at step 0"


# ---- the optimizer and the gradient clip ------------------------------------------------------------
def test_member_adam_equals_torch_adam_per_member():
    gen = torch.Generator().manual_seed(0)
    stacked = torch.randn(2, 5, 3, generator=gen).requires_grad_()
    ours = MemberAdam([stacked], lr=0.01)
    singles = [stacked[s].detach().clone().requires_grad_() for s in range(2)]
    theirs = [torch.optim.Adam([p], lr=0.01) for p in singles]
    for _ in range(5):
        grad = torch.randn(2, 5, 3, generator=gen)
        stacked.grad = grad.clone()
        ours.step(torch.tensor([True, True]))
        for s in range(2):
            singles[s].grad = grad[s].clone()
            theirs[s].step()
    for s in range(2):
        assert torch.allclose(stacked[s], singles[s], atol=1e-6)


def test_member_adam_leaves_inactive_members_alone():
    p = torch.zeros(3, 4, requires_grad=True)
    opt = MemberAdam([p], lr=0.1)
    p.grad = torch.ones(3, 4)
    opt.step(torch.tensor([True, False, True]))
    assert p[1].abs().max() == 0 and p[0].abs().min() > 0
    assert opt.steps.tolist() == [1.0, 0.0, 1.0]


def test_gradient_norm_clip_matches_torch_per_member():
    gen = torch.Generator().manual_seed(0)
    params = [torch.zeros(3, 4, 5, requires_grad=True), torch.zeros(3, 7, requires_grad=True)]
    grads = [torch.randn(p.shape, generator=gen) * torch.tensor([0.01, 1.0, 30.0]).view(-1, *[1] * (p.dim() - 1))
             for p in params]
    for p, g in zip(params, grads, strict=True):
        p.grad = g.clone()
    norms = clip_grad_norms(params, max_norm=1.0)
    for s in range(3):
        member = [g[s].clone().requires_grad_() for g in grads]
        for m in member:
            m.grad = m.detach().clone()
        want = torch.nn.utils.clip_grad_norm_(member, max_norm=1.0)
        assert float(norms[s]) == pytest.approx(float(want), rel=1e-6)
        for p, m in zip(params, member, strict=True):
            assert torch.allclose(p.grad[s], m.grad, atol=1e-7)
    assert float(norms[0]) < 1.0 and float(norms[2]) > 1.0, "one member below the clip, one above"


def test_a_member_whose_groups_are_all_dropped_takes_no_step():
    cfg = GRPOConfig(task=ToyTask(num_prompts=16, num_digits=2), batch_prompts=4, group_size=4, dynamic_sampling=True,
                     device="cpu")
    run = start_run(seed_configs(cfg, [0, 1]))
    rollout = sample_rollout(run.policy, cfg, run.generators, run.answers)
    rollout.rewards[1] = 1.0  # member 1: every group all-right -> nothing kept
    rollout.rewards[0, 0] = torch.tensor([1.0, 0.0, 0.0, 1.0])  # member 0 keeps at least one group
    before = [p.detach().clone() for p in run.policy.parameters()]
    out = grpo_update(run.policy, run.reference, run.optimizer, run.cfgs, rollout)
    assert out["keep"][1].sum() == 0 and out["keep"][0].sum() > 0
    after = list(run.policy.parameters())
    assert all(torch.equal(b[1], a[1]) for b, a in zip(before, after, strict=True)), "member 1 unchanged"
    assert any(not torch.equal(b[0], a[0]) for b, a in zip(before, after, strict=True)), "member 0 moved"


@pytest.mark.slow
def test_cpu_smoke_run_reward_rises():
    cfg = dataclasses.replace(demo_configs(device="cpu")["a"], steps=100)
    h = train(cfg).history
    start, end = sum(h["reward"][:5]) / 5, sum(h["reward"][-10:]) / 10
    assert h["acc"][0] <= 0.3 and start <= 0.3
    assert h["acc"][-1] >= 0.6 and end >= 0.6
