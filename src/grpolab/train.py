"""The GRPO training loop on the toy task: config, rollout, reward, advantage, loss, update, log.

One step: sample G responses for each of B prompts from pi_old (all B*G in one batch), score them,
compute group advantages, then K inner updates of the clipped surrogate plus beta * k3 KL to a frozen
reference policy, with the gradient norm clipped to ``max_grad_norm`` (1.0 by default, as verl's
``actor.grad_clip`` and TRL's ``max_grad_norm``). Simplified against DeepSeekMath (arXiv 2402.03300):
the toy policy is a GRU, the reference is the initial policy (never refreshed), and DAPO's dynamic
sampling only drops groups.

Seeds train as one batched run: ``train_population(configs)`` stacks one policy per config along a
leading dimension (``toy.GRUPolicy``) and steps them together; the configs may differ only in
``PER_MEMBER_FIELDS``. ``train(cfg)`` is the one-member case. Each member has its own generator, Adam
state and gradient-norm clip, so members never mix; a member's run equals a lone run of its config up
to float rounding (batched matmuls of another shape may round differently). Runs on CUDA when
``device="auto"`` finds one, else on CPU; nothing else changes.
"""
from __future__ import annotations

import copy
import dataclasses
import math
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field

import torch
from tqdm.auto import tqdm

from .advantages import compute_advantages, keep_informative_groups, zero_variance_groups
from .losses import (
    GSPO_EPS_HIGH,
    GSPO_EPS_LOW,
    aggregate_loss,
    clipped_surrogate,
    k3_kl,
    sequence_log_ratio,
    token_log_ratio,
)
from .toy import GRUPolicy, ToyTask, member_uniforms, reward_fn

RATIO_LEVELS = ("token", "sequence")
PER_MEMBER_FIELDS = ("seed", "task", "advantage", "aggregation", "kl_coef")  # task: its seed only
LOG_FORMAT = ("step {step:4d} | reward {reward:.3f} | acc {acc:.3f} | kl {kl:.4f} | clip {clip:>5}"
              " | len+ {len_correct:5.2f} len- {len_incorrect:5.2f} | zero-var {zero_var_frac:.2f}")


@dataclass(frozen=True)
class GRPOConfig:
    """Everything one training run depends on. B = batch_prompts, G = group_size, K = inner_updates."""

    task: ToyTask = field(default_factory=ToyTask)
    steps: int = 100
    batch_prompts: int = 32
    group_size: int = 8
    inner_updates: int = 2
    lr: float = 0.01
    eps_low: float = 0.2
    eps_high: float = 0.28  # DAPO clip-higher (arXiv 2503.14476, §3.1)
    seq_eps_low: float = GSPO_EPS_LOW  # GSPO's own range for its sequence ratio (see losses.py)
    seq_eps_high: float = GSPO_EPS_HIGH
    kl_coef: float = 0.01
    max_grad_norm: float | None = 1.0  # None: no clipping
    advantage: str = "grpo"
    aggregation: str = "response_mean"
    ratio_level: str = "token"  # "sequence" = GSPO (arXiv 2507.18071)
    dynamic_sampling: bool = False
    adv_eps: float = 1e-8
    hidden: int = 64
    embed: int = 32
    prior_scale: float = 2.0
    eos_bias: float = -1.0
    seed: int = 0
    device: str = "auto"


def resolve_device(device: str) -> torch.device:
    """'auto' -> cuda if available else cpu; anything else is passed to torch.device."""
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(device)


def config_dict(cfg: GRPOConfig) -> dict:
    """cfg as a plain JSON-able dict (task included)."""
    return asdict(cfg)


def check_population(cfgs: Sequence[GRPOConfig]) -> GRPOConfig:
    """Validate configs that train as one batched run; returns the first (its shared fields rule).

    Raises ValueError naming the field when two configs differ outside PER_MEMBER_FIELDS, or on an
    unknown estimator, aggregation or ratio level.
    """
    if not cfgs:
        raise ValueError("train_population needs at least one config")
    first = cfgs[0]
    shared = {f.name for f in dataclasses.fields(GRPOConfig)} - set(PER_MEMBER_FIELDS)
    for cfg in cfgs:
        for name in sorted(shared):
            if getattr(cfg, name) != getattr(first, name):
                raise ValueError(f"configs of one population must agree on {name!r}: "
                                 f"{getattr(first, name)!r} != {getattr(cfg, name)!r}")
        if dataclasses.replace(cfg.task, seed=0) != dataclasses.replace(first.task, seed=0):
            raise ValueError(f"configs of one population may differ only in task.seed: {first.task} != {cfg.task}")
        compute_advantages(torch.zeros(1, 1), cfg.advantage)  # fail early on unknown names
        aggregate_loss(torch.zeros(1, 1), torch.ones(1, 1, dtype=torch.bool), cfg.aggregation)
    if first.ratio_level not in RATIO_LEVELS:
        raise ValueError(f"unknown ratio_level {first.ratio_level!r}; valid: {', '.join(RATIO_LEVELS)}")
    if first.batch_prompts > first.task.num_prompts:
        raise ValueError(f"batch_prompts={first.batch_prompts} > task.num_prompts={first.task.num_prompts}")
    return first


def build_policy(cfgs: GRPOConfig | Sequence[GRPOConfig], device: torch.device | str = "cpu") -> GRUPolicy:
    """The initial policies (one member per config, seeded by cfg.seed), without touching global RNG."""
    cfgs = [cfgs] if isinstance(cfgs, GRPOConfig) else list(cfgs)
    c = cfgs[0]
    policy = GRUPolicy(c.task, [cfg.seed for cfg in cfgs], c.hidden, c.embed, c.prior_scale, c.eos_bias)
    return policy.to(device)


def member_answers(cfgs: Sequence[GRPOConfig], device: torch.device) -> torch.Tensor:
    """Secret answers of each member's task, (S, P)."""
    return torch.stack([cfg.task.answers(device) for cfg in cfgs])


# ---- the optimizer: Adam per member --------------------------------------------------------------
class MemberAdam:
    """Adam (arXiv 1412.6980) with torch.optim.Adam's update, for parameters stacked along members.

    Each member keeps its own step count; ``step(active)`` updates only the members marked active (a
    member whose groups were all dropped by dynamic sampling takes no step, as in a lone run).
    """

    def __init__(self, params: Sequence[torch.Tensor], lr: float, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8):
        self.params, self.lr, self.betas, self.eps = list(params), lr, betas, eps
        self.exp_avg = [torch.zeros_like(p) for p in self.params]
        self.exp_avg_sq = [torch.zeros_like(p) for p in self.params]
        self.steps = torch.zeros(self.params[0].shape[0], dtype=torch.float64, device=self.params[0].device)

    def zero_grad(self) -> None:
        for p in self.params:
            p.grad = None

    @torch.no_grad()
    def step(self, active: torch.Tensor) -> None:
        """One Adam step for the members where active (S,) is True."""
        b1, b2 = self.betas
        self.steps += active.to(self.steps.dtype)
        t = self.steps.clamp(min=1.0)
        step_size = (self.lr / (1 - b1**t)).float()  # (S,)
        bc2_sqrt = (1 - b2**t).sqrt().float()
        for p, m, v in zip(self.params, self.exp_avg, self.exp_avg_sq, strict=True):
            shape = (-1,) + (1,) * (p.dim() - 1)
            act = active.view(shape)
            g = p.grad if p.grad is not None else torch.zeros_like(p)
            m.copy_(torch.where(act, m.lerp(g, 1 - b1), m))
            v.copy_(torch.where(act, v * b2 + (1 - b2) * g * g, v))
            denom = v.sqrt() / bc2_sqrt.view(shape) + self.eps
            p.copy_(torch.where(act, p - step_size.view(shape) * m / denom, p))


def clip_grad_norms(params: Sequence[torch.Tensor], max_norm: float | None) -> torch.Tensor:
    """Per-member global gradient norm (S,), measured before clipping; scales each member's gradients
    down to max_norm as torch.nn.utils.clip_grad_norm_ does for one model (coef = max_norm / (norm + 1e-6)).
    """
    grads = [p.grad for p in params if p.grad is not None]
    norms = torch.stack([g.pow(2).flatten(1).sum(1) for g in grads]).sum(0).sqrt()  # (S,)
    if max_norm is not None:
        coef = (max_norm / (norms + 1e-6)).clamp(max=1.0)
        for g in grads:
            g.mul_(coef.view((-1,) + (1,) * (g.dim() - 1)))
    return norms


# ---- one step's pieces -----------------------------------------------------------------------------
@dataclass
class Rollout:
    """One step's samples for S members: prompt_ids (S, B), prompts (S, N = B*G), tokens and mask
    (S, N, T), rewards (S, B, G)."""

    prompt_ids: torch.Tensor
    prompts: torch.Tensor
    tokens: torch.Tensor
    mask: torch.Tensor
    rewards: torch.Tensor


def sample_rollout(policy: GRUPolicy, cfg: GRPOConfig, generators: Sequence[torch.Generator],
                   answers: torch.Tensor) -> Rollout:
    """Draw B prompts per member and G responses per prompt, from each member's own generator."""
    device = answers.device
    b, g = cfg.batch_prompts, cfg.group_size
    prompt_ids = torch.stack([torch.randperm(cfg.task.num_prompts, generator=gen, device=device)[:b]
                              for gen in generators])  # (S, B)
    prompts = prompt_ids.repeat_interleave(g, dim=1)  # (S, N)
    tokens, mask = policy.sample(prompts, member_uniforms(generators, b * g, cfg.task.max_len, device))
    rewards = reward_fn(cfg.task, prompts, tokens, mask, answers).view(-1, b, g)  # (S, B, G)
    return Rollout(prompt_ids, prompts, tokens, mask, rewards)


def _by_member(names: Sequence[str], compute) -> torch.Tensor:
    """compute(name) for each distinct name, then member s takes the value of names[s] (first dim S)."""
    distinct = sorted(set(names))
    if len(distinct) == 1:
        return compute(distinct[0])
    values = torch.stack([compute(n) for n in distinct])  # (M, S, ...)
    pick = torch.tensor([distinct.index(n) for n in names], device=values.device)
    return values[pick, torch.arange(len(names), device=values.device)]


def _aggregate(token_loss: torch.Tensor, mask: torch.Tensor, modes: Sequence[str], max_len: int) -> torch.Tensor:
    """(S,) loss: member s's token_loss (S, N, T) aggregated with modes[s]."""
    return _by_member(modes, lambda mode: aggregate_loss(token_loss, mask, mode, max_len))


def member_advantages(rewards: torch.Tensor, cfgs: Sequence[GRPOConfig]) -> torch.Tensor:
    """Advantages (S, B, G) with each member's estimator."""
    return _by_member([c.advantage for c in cfgs], lambda name: compute_advantages(rewards, name, cfgs[0].adv_eps))


def grpo_update(policy: GRUPolicy, reference: GRUPolicy, optimizer: MemberAdam, cfgs: Sequence[GRPOConfig],
                rollout: Rollout, learn: bool = True) -> dict[str, torch.Tensor]:
    """Everything a step does after sampling: reference log-probs, advantages, the dynamic-sampling
    mask, then (if learn) K inner updates. Returns the (S,) metrics of policy_update (NaN when not
    learning), kl_tokens (S, N, T) of pi_old against the reference, and keep (S, N)."""
    cfg = cfgs[0]
    with torch.no_grad():
        ref_logp = reference.log_probs(rollout.prompts, rollout.tokens, rollout.mask)  # (S, N, T)
    advantages = member_advantages(rollout.rewards, cfgs).flatten(1)  # (S, N)
    keep = torch.ones_like(advantages, dtype=torch.bool)
    if cfg.dynamic_sampling:
        keep = keep_informative_groups(rollout.rewards, cfg.adv_eps).repeat_interleave(cfg.group_size, dim=1)
    if learn:
        return {**policy_update(policy, optimizer, cfgs, rollout, advantages, keep, ref_logp), "keep": keep}
    with torch.no_grad():  # pi_old is the reference at step 0, so k3 is exactly 0; measured anyway
        kl_tokens = k3_kl(policy.log_probs(rollout.prompts, rollout.tokens, rollout.mask), ref_logp)
    nan = torch.full((len(cfgs),), float("nan"), device=kl_tokens.device)
    return {"loss": nan, "grad_norm": nan, "clip_frac": nan, "kl_tokens": kl_tokens, "keep": keep}


def policy_update(policy: GRUPolicy, optimizer: MemberAdam, cfgs: Sequence[GRPOConfig], rollout: Rollout,
                  advantages: torch.Tensor, keep: torch.Tensor, ref_logp: torch.Tensor) -> dict[str, torch.Tensor]:
    """K inner steps of clipped surrogate + beta * k3 on one rollout, all members at once.

    advantages: (S, N); keep: (S, N) responses that take part (dynamic sampling); ref_logp: (S, N, T).
    Returns per-member (S,) loss, grad_norm (first inner step), clip_frac (last inner step) and
    kl_tokens (S, N, T): k3 of pi_old against the reference on every token (first inner step).
    """
    cfg = cfgs[0]
    mask = rollout.mask & keep.unsqueeze(-1)  # (S, N, T)
    active = keep.any(dim=1)  # (S,)
    kl_coef = torch.tensor([c.kl_coef for c in cfgs], device=mask.device)  # (S,)
    modes = [c.aggregation for c in cfgs]
    out: dict[str, torch.Tensor] = {}
    old_logp = None
    for k in range(cfg.inner_updates):
        logp = policy.log_probs(rollout.prompts, rollout.tokens, rollout.mask)  # (S, N, T)
        if old_logp is None:
            old_logp = logp.detach()  # pi_old = the policy that sampled; ratio is 1 at k = 0
        if cfg.ratio_level == "token":
            surrogate, clipped = clipped_surrogate(token_log_ratio(logp, old_logp), advantages,
                                                   cfg.eps_low, cfg.eps_high)  # (S, N, T)
            policy_loss = _aggregate(surrogate, mask, modes, cfg.task.max_len)
            clip_frac = (clipped & mask).sum(dim=(1, 2)) / mask.sum(dim=(1, 2)).clamp(min=1)
        else:  # GSPO: one geometric-mean ratio per response, (S, N)
            seq_lr = sequence_log_ratio(logp, old_logp, rollout.mask)
            surrogate, clipped = clipped_surrogate(seq_lr, advantages, cfg.seq_eps_low, cfg.seq_eps_high)
            kept = keep.sum(dim=1).clamp(min=1)
            policy_loss = torch.where(keep, surrogate, 0.0).sum(dim=1) / kept
            clip_frac = (clipped & keep).sum(dim=1) / kept
        kl = k3_kl(logp, ref_logp)  # (S, N, T)
        kl_loss = _aggregate(kl, mask, modes, cfg.task.max_len)
        loss = policy_loss + kl_coef * kl_loss  # (S,)
        optimizer.zero_grad()
        loss.sum().backward()  # members share no parameters: each gets its own loss's gradient
        norms = clip_grad_norms(optimizer.params, cfg.max_grad_norm)
        optimizer.step(active)
        if k == 0:
            out.update(loss=loss.detach(), grad_norm=norms, kl_tokens=kl.detach())
        out["clip_frac"] = clip_frac.float()
    return out


# ---- logging ---------------------------------------------------------------------------------------
def _masked_mean(x: torch.Tensor, keep: torch.Tensor, dims: tuple[int, ...]) -> torch.Tensor:
    """Mean of x over dims where keep; NaN where nothing is kept."""
    return torch.where(keep, x, 0.0).sum(dim=dims) / keep.sum(dim=dims)


def step_metrics(cfg: GRPOConfig, rollout: Rollout, p_all: torch.Tensor, kl_tokens: torch.Tensor,
                 keep: torch.Tensor) -> dict[str, torch.Tensor]:
    """Per-member (S,) metrics of one step (see LOG_FORMAT; NaN where a quantity is undefined).

    kl_* split the k3 of the kept tokens by kind: the answer token (position 0), EOS, and the scratch
    tokens between them; kl_share_* is each kind's share of the KL summed over tokens.
    """
    g = cfg.group_size
    mask, tokens = rollout.mask, rollout.tokens
    lengths = mask.sum(dim=-1).float()  # (S, N)
    correct = rollout.rewards.flatten(1) > 0.5  # (S, N)
    m = mask & keep.unsqueeze(-1)
    answer = torch.zeros_like(m)
    answer[..., 0] = True
    answer &= m
    eos = m & (tokens == cfg.task.eos)
    scratch = m & ~answer & ~eos
    total_kl = torch.where(m, kl_tokens, 0.0).sum(dim=(1, 2))
    len_g = lengths.view(-1, cfg.batch_prompts, g)
    cor_g = correct.view(-1, cfg.batch_prompts, g)
    n_cor = cor_g.sum(-1)
    mixed = (n_cor > 0) & (n_cor < g)  # (S, B)
    gap = (_masked_mean(len_g, ~cor_g, (2,)) - _masked_mean(len_g, cor_g, (2,)))  # (S, B), NaN if unmixed
    p_batch = p_all.gather(1, rollout.prompt_ids)  # (S, B)
    row = {
        "reward": rollout.rewards.mean(dim=(1, 2)),
        "acc": p_all.mean(dim=1),
        "kl": _masked_mean(kl_tokens, m, (1, 2)),
        "kl_answer": _masked_mean(kl_tokens, answer, (1, 2)),
        "kl_scratch": _masked_mean(kl_tokens, scratch, (1, 2)),
        "kl_eos": _masked_mean(kl_tokens, eos, (1, 2)),
        "kl_share_answer": torch.where(answer, kl_tokens, 0.0).sum(dim=(1, 2)) / total_kl,
        "kl_share_scratch": torch.where(scratch, kl_tokens, 0.0).sum(dim=(1, 2)) / total_kl,
        "kl_share_eos": torch.where(eos, kl_tokens, 0.0).sum(dim=(1, 2)) / total_kl,
        "len_correct": _masked_mean(lengths, correct, (1,)),
        "len_incorrect": _masked_mean(lengths, ~correct, (1,)),
        "len_mean": lengths.mean(dim=1),
        "len_gap_within": _masked_mean(torch.nan_to_num(gap), mixed, (1,)),
        "mixed_groups": mixed.float().mean(dim=1),
        "zero_var_frac": zero_variance_groups(rollout.rewards, cfg.adv_eps).float().mean(dim=1),
        "zero_var_theory": (p_batch**g + (1 - p_batch) ** g).mean(dim=1),
    }
    return {k: v.float() for k, v in row.items()}


def format_log(row: dict[str, float | None]) -> str:
    """One log line (LOG_FORMAT) from one step's metrics, live (NaN) or stored (None for NaN). Step 0
    makes no update, so its clip fraction prints as '-'."""
    vals = {k: float("nan") if v is None else v for k, v in row.items()}
    clip = "-" if math.isnan(vals["clip_frac"]) else f"{vals['clip_frac']:.3f}"
    return LOG_FORMAT.format(clip=clip, **{k: v for k, v in vals.items() if k != "clip"})


# ---- the loop --------------------------------------------------------------------------------------
@dataclass
class PopulationResult:
    """histories[s]: metric -> one value per step for member s (step 0 = before any update).
    p_start / p_end: (S, P) exact success probability of every prompt before and after training.
    wall_s / cpu_s: the loop's wall-clock and process CPU seconds."""

    configs: list[GRPOConfig]
    policy: GRUPolicy
    histories: list[dict[str, list[float]]]
    p_start: list[list[float]]
    p_end: list[list[float]]
    wall_s: float
    cpu_s: float
    device: str


@dataclass
class TrainResult:
    """One run: history (metric -> one value per step), p_start / p_end (P,), timings, device."""

    config: GRPOConfig
    policy: GRUPolicy
    history: dict[str, list[float]]
    p_start: list[float]
    p_end: list[float]
    wall_s: float
    cpu_s: float
    device: str


@dataclass
class RunState:
    """A population at its start: the policies, the frozen reference, the optimizer, the secret
    answers (S, P) and one generator per member (seeded by its cfg.seed)."""

    cfgs: list[GRPOConfig]
    policy: GRUPolicy
    reference: GRUPolicy
    optimizer: MemberAdam
    answers: torch.Tensor
    generators: list[torch.Generator]


def start_run(cfgs: Sequence[GRPOConfig]) -> RunState:
    """Validate cfgs and build everything step 0 needs."""
    cfgs = list(cfgs)
    cfg = check_population(cfgs)
    device = resolve_device(cfg.device)
    policy = build_policy(cfgs, device)
    return RunState(cfgs, policy, copy.deepcopy(policy).requires_grad_(False),
                    MemberAdam(list(policy.parameters()), lr=cfg.lr), member_answers(cfgs, device),
                    [torch.Generator(device=device).manual_seed(c.seed) for c in cfgs])


def train_population(cfgs: Sequence[GRPOConfig], progress: bool = False, log_every: int = 0) -> PopulationResult:
    """Run cfg.steps GRPO steps for every config as one batched run; one history per config."""
    # ---- config -------------------------------------------------------------------------------
    run = start_run(cfgs)
    cfgs, cfg, policy, answers, generators = run.cfgs, run.cfgs[0], run.policy, run.answers, run.generators
    device = answers.device
    s, p = len(cfgs), cfg.task.num_prompts
    all_prompts = torch.arange(p, device=device).expand(s, p)
    histories: list[dict[str, list[float]]] = [{} for _ in cfgs]
    p_start: list[list[float]] = []
    start, cpu_start = time.perf_counter(), time.process_time()

    for step in tqdm(range(cfg.steps + 1), disable=not progress, desc=f"GRPO x{s}", leave=False):
        # ---- rollout and reward: G responses for each of B prompts per member, one batch -----------
        rollout = sample_rollout(policy, cfg, generators, answers)
        with torch.no_grad():
            p_all = policy.success_prob(all_prompts, answers)  # (S, P) exact, for acc and the theory curve
        if step == 0:
            p_start = p_all.tolist()
        # ---- advantage, loss and update (none at step 0: it is the baseline) -------------------------
        update = grpo_update(policy, run.reference, run.optimizer, cfgs, rollout, learn=step > 0)
        kl_tokens, keep = update.pop("kl_tokens"), update.pop("keep")

        # ---- log ------------------------------------------------------------------------------
        row = {"step": torch.full((s,), float(step), device=device),
               **step_metrics(cfg, rollout, p_all, kl_tokens, keep), **update}
        names = list(row)
        values = torch.stack([row[n].float() for n in names]).T.tolist()  # (S, metrics), one sync
        for member, vals in zip(histories, values, strict=True):
            for name, v in zip(names, vals, strict=True):
                member.setdefault(name, []).append(int(v) if name == "step" else v)
        if log_every and step % log_every == 0:
            for c, member in zip(cfgs, histories, strict=True):
                tqdm.write(("" if s == 1 else f"[seed {c.seed}] ") + format_log({k: v[-1] for k, v in member.items()}))

    with torch.no_grad():
        p_end = policy.success_prob(all_prompts, answers).tolist()
    return PopulationResult(cfgs, policy, histories, p_start, p_end, time.perf_counter() - start,
                            time.process_time() - cpu_start, str(device))


def train(cfg: GRPOConfig, progress: bool = False, log_every: int = 0) -> TrainResult:
    """Run cfg.steps GRPO steps for one config (a population of one)."""
    r = train_population([cfg], progress=progress, log_every=log_every)
    return TrainResult(cfg, r.policy, r.histories[0], r.p_start[0], r.p_end[0], r.wall_s, r.cpu_s, r.device)
