"""The GRPO training loop on the toy task: config, rollout, reward, advantage, loss, update, log.

One step: sample G responses for each of B prompts from pi_old (all B*G in one batch), score them,
compute group advantages, then K inner updates of the clipped surrogate plus beta * k3 KL to a frozen
reference policy. Simplified against DeepSeekMath (arXiv 2402.03300): the toy policy is a GRU, the
reference is the initial policy (never refreshed), and DAPO's dynamic sampling only drops groups.
Runs on CUDA when ``device="auto"`` finds one, else on CPU; nothing else changes.
"""
from __future__ import annotations

import copy
import time
from dataclasses import asdict, dataclass, field

import torch
from tqdm.auto import tqdm

from .advantages import compute_advantages, keep_informative_groups, zero_variance_groups
from .losses import aggregate_loss, clipped_surrogate, k3_kl, sequence_log_ratio, token_log_ratio
from .toy import GRUPolicy, ToyTask, reward_fn

RATIO_LEVELS = ("token", "sequence")
LOG_FORMAT = ("step {step:4d} | reward {reward:.3f} | acc {acc:.3f} | kl {kl:.4f} | clip {clip_frac:.3f}"
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
    kl_coef: float = 0.01
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


@dataclass
class TrainResult:
    """history: metric name -> one value per step (step 0 = before any update). wall_s: loop time."""

    config: GRPOConfig
    policy: GRUPolicy
    history: dict[str, list[float]]
    wall_s: float
    device: str


def build_policy(cfg: GRPOConfig, device: torch.device) -> GRUPolicy:
    """The initial policy for cfg.seed, built without touching the caller's global RNG state."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(cfg.seed)
        policy = GRUPolicy(cfg.task, cfg.hidden, cfg.embed, cfg.prior_scale, cfg.eos_bias)
    return policy.to(device)


def _masked_mean(x: torch.Tensor, keep: torch.Tensor) -> float:
    return float(x[keep].float().mean()) if bool(keep.any()) else float("nan")


def train(cfg: GRPOConfig, progress: bool = False, log_every: int = 0) -> TrainResult:
    """Run cfg.steps GRPO steps and return the per-step history (see LOG_FORMAT for the metrics)."""
    # ---- config -------------------------------------------------------------------------------
    if cfg.ratio_level not in RATIO_LEVELS:
        raise ValueError(f"unknown ratio_level {cfg.ratio_level!r}; valid: {', '.join(RATIO_LEVELS)}")
    if cfg.batch_prompts > cfg.task.num_prompts:
        raise ValueError(f"batch_prompts={cfg.batch_prompts} > task.num_prompts={cfg.task.num_prompts}")
    compute_advantages(torch.zeros(1, 1), cfg.advantage)  # fail early on unknown names
    aggregate_loss(torch.zeros(1, 1), torch.ones(1, 1), cfg.aggregation)
    device = resolve_device(cfg.device)
    b, g = cfg.batch_prompts, cfg.group_size
    policy = build_policy(cfg, device)
    reference = copy.deepcopy(policy).requires_grad_(False)
    optimizer = torch.optim.Adam(policy.parameters(), lr=cfg.lr)
    answers = cfg.task.answers(device)
    all_prompts = torch.arange(cfg.task.num_prompts, device=device)
    gen = torch.Generator(device=device).manual_seed(cfg.seed)
    history: dict[str, list[float]] = {}
    start = time.perf_counter()

    for step in tqdm(range(cfg.steps + 1), disable=not progress, desc=f"GRPO {cfg.advantage}", leave=False):
        # ---- rollout: G responses for each of B prompts, one batch of N = B*G from pi_old ----------
        prompt_ids = torch.randperm(cfg.task.num_prompts, generator=gen, device=device)[:b]  # (B,)
        prompts = prompt_ids.repeat_interleave(g)  # (N,)
        policy.eval()
        tokens, mask = policy.sample(prompts, gen)  # (N, T), (N, T)
        with torch.no_grad():
            ref_logp = reference.log_probs(prompts, tokens) if cfg.kl_coef else None  # (N, T)
            p_success = policy.success_prob(prompt_ids, answers)  # (B,) exact, for the theory curve
            acc = float(policy.success_prob(all_prompts, answers).mean())

        # ---- reward ---------------------------------------------------------------------------
        rewards = reward_fn(cfg.task, prompts, tokens, mask, answers).view(b, g)  # (B, G)
        lengths = mask.sum(dim=1).float()  # (N,)

        # ---- advantage --------------------------------------------------------------------------
        advantages = compute_advantages(rewards, cfg.advantage, cfg.adv_eps).reshape(-1)  # (N,)
        zero_var = zero_variance_groups(rewards, cfg.adv_eps)  # (B,)
        keep = torch.ones(b * g, dtype=torch.bool, device=device)
        if cfg.dynamic_sampling:
            keep = keep_informative_groups(rewards, cfg.adv_eps).repeat_interleave(g)  # (N,)

        # ---- loss and update: K inner clipped-surrogate steps (none at step 0: it is the baseline) --
        kl_value, clip_value, loss_value = float("nan"), float("nan"), float("nan")
        inner = cfg.inner_updates if step > 0 and bool(keep.any()) else 0
        policy.train()
        for k in range(inner):
            logp = policy.log_probs(prompts[keep], tokens[keep])  # (n, T)
            if k == 0:
                old_logp = logp.detach()  # pi_old = the policy that sampled; ratio is 1 at k = 0
            m = mask[keep]
            if cfg.ratio_level == "token":
                surrogate, clipped = clipped_surrogate(token_log_ratio(logp, old_logp), advantages[keep],
                                                       cfg.eps_low, cfg.eps_high)  # (n, T)
                policy_loss = aggregate_loss(surrogate, m, cfg.aggregation, cfg.task.max_len)
                clip_frac = float((clipped & m).sum() / m.sum())
            else:  # GSPO: one geometric-mean ratio per response, (n,)
                seq_lr = sequence_log_ratio(logp, old_logp, m)
                surrogate, clipped = clipped_surrogate(seq_lr, advantages[keep], cfg.eps_low, cfg.eps_high)
                policy_loss = surrogate.mean()
                clip_frac = float(clipped.float().mean())
            loss = policy_loss
            if ref_logp is not None:
                kl = k3_kl(logp, ref_logp[keep])  # (n, T)
                loss = loss + cfg.kl_coef * aggregate_loss(kl, m, cfg.aggregation, cfg.task.max_len)
            elif k == 0:  # beta = 0: KL is still logged, against the frozen reference, without a gradient
                with torch.no_grad():
                    kl = k3_kl(logp, reference.log_probs(prompts[keep], tokens[keep]))
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            if k == 0:
                kl_value = float((kl.detach() * m).sum() / m.sum())  # KL of pi_old, token mean
                clip_value, loss_value = clip_frac, float(loss.detach())
            else:
                clip_value = clip_frac  # report the last inner step's clip fraction

        # ---- log ------------------------------------------------------------------------------
        correct = rewards.reshape(-1) > 0.5
        row = {
            "step": step,
            "reward": float(rewards.mean()),
            "acc": acc,
            "kl": kl_value,
            "clip_frac": clip_value,
            "loss": loss_value,
            "len_correct": _masked_mean(lengths, correct),
            "len_incorrect": _masked_mean(lengths, ~correct),
            "len_mean": float(lengths.mean()),
            "zero_var_frac": float(zero_var.float().mean()),
            "zero_var_theory": float((p_success**g + (1 - p_success) ** g).mean()),
        }
        for key, value in row.items():
            history.setdefault(key, []).append(value)
        if log_every and step % log_every == 0:
            tqdm.write(LOG_FORMAT.format(**row))

    return TrainResult(cfg, policy, history, time.perf_counter() - start, str(device))


def config_dict(cfg: GRPOConfig) -> dict:
    """cfg as a plain JSON-able dict (task included)."""
    return asdict(cfg)
