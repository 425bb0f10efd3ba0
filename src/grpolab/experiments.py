"""The demo's experiments (b)-(e) as plain functions, so the notebook stays thin and tests can call them.

Each returns a JSON-able dict of the numbers its figure is drawn from; ``round_floats`` fixes their
precision before they are stored beside the figure. Configs are passed in explicitly.
"""
from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

import numpy as np
import torch

from .advantages import compute_advantages, group_std
from .toy import reward_fn
from .train import GRPOConfig, build_policy, resolve_device, train


def round_floats(obj: object, ndigits: int = 4) -> object:
    """obj with every float rounded to ndigits (NaN -> None), recursively through dicts and lists."""
    if isinstance(obj, float):
        return None if math.isnan(obj) else round(obj, ndigits)
    if isinstance(obj, dict):
        return {k: round_floats(v, ndigits) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [round_floats(v, ndigits) for v in obj]
    return obj


def _spread(values: Sequence[float]) -> dict[str, float]:
    arr = np.asarray(values, dtype=float)
    return {"mean": float(arr.mean()), "std": float(arr.std()), "min": float(arr.min()), "max": float(arr.max())}


def _seed_cfg(cfg: GRPOConfig, seed: int, **changes) -> GRPOConfig:
    """cfg with seed applied to both the run and the task's secret answers."""
    task = dataclasses.replace(cfg.task, seed=seed)
    return dataclasses.replace(cfg, task=task, seed=seed, **changes)


# ---- (a) one GRPO run ------------------------------------------------------------------------------
def training_run(cfg: GRPOConfig, progress: bool = False) -> dict:
    """History of one run: reward, acc, KL, clip fraction, lengths, zero-variance fraction per step."""
    result = train(cfg, progress=progress)
    return {"config": dataclasses.asdict(cfg), "history": result.history, "wall_s": result.wall_s,
            "device": result.device}


# ---- (b) fixed rollout budget N = B*G ----------------------------------------------------------------
def group_size_sweep(cfg: GRPOConfig, group_sizes: Sequence[int] = (2, 4, 8, 16, 32), budget: int = 256,
                     seeds: Sequence[int] = (0, 1, 2), progress: bool = False) -> dict:
    """Train with B = budget // G prompts per step for each G and seed.

    Per G: measured zero-variance fraction (mean over steps and seeds), its theory mean_q p_q^G +
    (1 - p_q)^G with p_q the policy's exact success probability on the sampled prompts, and the final
    accuracy over the whole prompt set (mean, std, min, max over seeds); curves are seed means.
    """
    rows, curves = [], {}
    for g in group_sizes:
        runs = [train(_seed_cfg(cfg, s, group_size=g, batch_prompts=budget // g), progress=progress)
                for s in seeds]
        acc = np.array([r.history["acc"] for r in runs])  # (S, steps+1)
        zv = np.array([r.history["zero_var_frac"] for r in runs])
        zv_theory = np.array([r.history["zero_var_theory"] for r in runs])
        rows.append({"G": g, "B": budget // g, "zero_var_measured": float(zv.mean()),
                     "zero_var_theory": float(zv_theory.mean()),
                     "zero_var_measured_step0": float(zv[:, 0].mean()),
                     "zero_var_theory_step0": float(zv_theory[:, 0].mean()),
                     "final_acc": _spread(acc[:, -1].tolist())})
        curves[str(g)] = {"acc_mean": acc.mean(0).tolist(), "acc_std": acc.std(0).tolist(),
                          "zero_var_mean": zv.mean(0).tolist(), "zero_var_theory_mean": zv_theory.mean(0).tolist()}
    return {"budget": budget, "seeds": list(seeds), "num_prompts": cfg.task.num_prompts, "table": rows,
            "curves": curves}


# ---- (c) loss aggregation and response length ------------------------------------------------------
def aggregation_sweep(cfg: GRPOConfig, modes: Sequence[str] = ("response_mean", "token_mean", "fixed_length"),
                      seeds: Sequence[int] = (0, 1, 2), progress: bool = False) -> dict:
    """Lengths of correct and incorrect responses during training under each loss aggregation.

    Summary per mode: the gap len(incorrect) - len(correct) averaged over steps where groups are mixed
    (steps with both kinds present), per seed and its spread; final mean length and accuracy.
    """
    out: dict = {"seeds": list(seeds), "modes": {}}
    for mode in modes:
        runs = [train(_seed_cfg(cfg, s, aggregation=mode), progress=progress) for s in seeds]
        len_c = np.array([r.history["len_correct"] for r in runs], dtype=float)  # (S, steps+1)
        len_i = np.array([r.history["len_incorrect"] for r in runs], dtype=float)
        gaps = [float(np.nanmean(len_i[k, 1:] - len_c[k, 1:])) for k in range(len(runs))]
        out["modes"][mode] = {
            "len_correct_mean": np.nanmean(len_c, axis=0).tolist(),
            "len_incorrect_mean": np.nanmean(len_i, axis=0).tolist(),
            "acc_mean": np.mean([r.history["acc"] for r in runs], axis=0).tolist(),
            "gap_incorrect_minus_correct": _spread(gaps),
            "gap_per_seed": gaps,
            "final_len": _spread([float(np.mean(r.history["len_mean"][-10:])) for r in runs]),
            "final_acc": _spread([r.history["acc"][-1] for r in runs]),
        }
    return out


# ---- (d) with vs without std division: weight per prompt against group sigma -------------------------
@torch.no_grad()
def std_weighting(cfg: GRPOConfig, num_groups: int = 128) -> dict:
    """Sample num_groups groups of G from the initial policy and measure each prompt's weight.

    Weight of a prompt = mean |A_i| over its group: the scale of the gradient it contributes.
    With 0/1 rewards, centre-only gives 2 sigma^2 and z-scoring gives 2 sigma: a 1/sigma boost.
    """
    device = resolve_device(cfg.device)
    policy = build_policy(cfg, device)
    answers = cfg.task.answers(device)
    gen = torch.Generator(device=device).manual_seed(cfg.seed)
    b = min(num_groups, cfg.task.num_prompts)
    prompts = torch.randperm(cfg.task.num_prompts, generator=gen, device=device)[:b].repeat_interleave(cfg.group_size)
    tokens, mask = policy.sample(prompts, gen)
    rewards = reward_fn(cfg.task, prompts, tokens, mask, answers).view(b, cfg.group_size)  # (B, G)
    sigma = group_std(rewards).float()  # (B,)
    w_grpo = compute_advantages(rewards, "grpo").abs().mean(1)  # (B,)
    w_dr = compute_advantages(rewards, "dr_grpo").abs().mean(1)  # (B,)
    mixed = sigma > 0
    return {"G": cfg.group_size, "sigma": sigma.tolist(), "weight_grpo": w_grpo.tolist(),
            "weight_dr_grpo": w_dr.tolist(),
            "ratio_grpo_over_dr_mixed": (w_grpo[mixed] / w_dr[mixed]).tolist(),
            "one_over_sigma_mixed": (1 / sigma[mixed]).tolist(),
            "zero_var_groups": int((~mixed).sum())}


# ---- (e) GRPO vs RLOO -------------------------------------------------------------------------------
def advantage_comparison(cfg: GRPOConfig, estimators: Sequence[str] = ("grpo", "dr_grpo", "rloo"),
                         seeds: Sequence[int] = (0, 1, 2), progress: bool = False) -> dict:
    """Advantages of the three estimators on one real batch, and training curves (seed mean, std)."""
    device = resolve_device(cfg.device)
    policy = build_policy(cfg, device)
    answers = cfg.task.answers(device)
    gen = torch.Generator(device=device).manual_seed(cfg.seed)
    prompts = torch.randperm(cfg.task.num_prompts, generator=gen, device=device)[: cfg.batch_prompts]
    prompts = prompts.repeat_interleave(cfg.group_size)
    tokens, mask = policy.sample(prompts, gen)
    rewards = reward_fn(cfg.task, prompts, tokens, mask, answers)
    rewards = rewards.view(cfg.batch_prompts, cfg.group_size).double()  # (B, G)
    adv = {name: compute_advantages(rewards, name) for name in estimators}
    g = cfg.group_size
    centred_vs_rloo = float((adv["dr_grpo"] - (g - 1) / g * adv["rloo"]).abs().max())
    out: dict = {"G": g, "batch": {name: a.reshape(-1).tolist() for name, a in adv.items()},
                 "max_abs_dr_grpo_minus_scaled_rloo": centred_vs_rloo, "curves": {}}
    for name in estimators if seeds else ():  # no seeds: the batch comparison only
        runs = [train(_seed_cfg(cfg, s, advantage=name), progress=progress) for s in seeds]
        acc = np.array([r.history["acc"] for r in runs])
        out["curves"][name] = {"acc_mean": acc.mean(0).tolist(), "acc_std": acc.std(0).tolist(),
                               "final_acc": _spread(acc[:, -1].tolist())}
    return out


# ---- the demo's configurations --------------------------------------------------------------------
def demo_configs(device: str = "cpu", steps: int = 150, batch: int = 32, group_size: int = 8,
                 variant: str = "grpo", seed: int = 0, sweep_steps: int = 80,
                 length_steps: int = 120) -> dict[str, GRPOConfig]:
    """The configs of the demo notebook's sections, by section letter.

    a, d, e: 128 prompts, 8 answer digits, a prior that makes some prompts start all-right/all-wrong.
    b: 512 prompts that share no solution, so covering few prompts per step costs something.
    c: 2 answer digits (accuracy starts at 50%), 1024 prompts and a small lr so groups stay mixed
       for long, beta = 0 so only the aggregation acts on length.
    """
    from .toy import ToyTask

    base = GRPOConfig(task=ToyTask(num_prompts=128, num_digits=8, seed=seed), steps=steps,
                      batch_prompts=batch, group_size=group_size, advantage=variant, seed=seed, device=device)
    return {
        "a": base,
        "b": dataclasses.replace(base, task=ToyTask(num_prompts=512, seed=seed), steps=sweep_steps),
        "c": dataclasses.replace(base, task=ToyTask(num_prompts=1024, num_digits=2, seed=seed), steps=length_steps,
                                 lr=0.003, kl_coef=0.0, prior_scale=0.5),
        "d": dataclasses.replace(base, group_size=16),
        "e": dataclasses.replace(base, steps=sweep_steps),
    }
