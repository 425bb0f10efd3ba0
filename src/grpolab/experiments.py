"""The demo's experiments (a)-(e) as plain functions, so the notebook stays thin and tests can call them.

Each returns a JSON-able dict of the numbers its figure and its text are made from; ``round_floats``
fixes their precision before they are stored beside the figure. Configs are passed in explicitly.
The seeds of one comparison train as one batched run (``train.train_population``); a comparison
across seeds is paired: seed s means the same secret answers and the same initial policy in every arm.
Spreads are sample standard deviations (ddof = 1) with t-based 95% confidence intervals; a paired
difference also carries its two-sided t-test p-value, and where several comparisons back one claim
("G = 4 is best") their p-values are Holm-adjusted (``holm``). Every result stores the config it ran
with (``config``) and the seeds; flags such as ``..._exact`` are decided on the unrounded values.
"""
from __future__ import annotations

import contextlib
import dataclasses
import math
import multiprocessing
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor

import numpy as np
import torch
from scipy import stats

from .advantages import compute_advantages, group_std
from .toy import ToyTask
from .train import GRPOConfig, build_policy, member_answers, resolve_device, sample_rollout, train_population

# Two-sided 95% quantiles t_{0.975, df} of Student's t, df = 1..30 (standard tables).
T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145,
        2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048,
        2.045, 2.042)
STUCK_P = 0.05  # a prompt with success probability below this is "stuck all-wrong" (p^8 < 1e-10)


def round_floats(obj: object, ndigits: int = 4) -> object:
    """obj with every float rounded to ndigits decimals but never to fewer than ndigits significant
    digits (so 1e-8 and 4.77e-7 survive), NaN -> None, recursively through dicts and lists."""
    if isinstance(obj, float):
        if math.isnan(obj):
            return None
        if obj == 0.0 or math.isinf(obj):
            return obj
        return round(obj, max(ndigits, ndigits - 1 - math.floor(math.log10(abs(obj)))))
    if isinstance(obj, dict):
        return {k: round_floats(v, ndigits) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [round_floats(v, ndigits) for v in obj]
    return obj


def spread(values: Sequence[float]) -> dict:
    """n, mean, sd (ddof = 1), min, max and the t-based 95% CI of the mean; sd and CI are NaN for n < 2."""
    arr = np.asarray(values, dtype=float)
    n = len(arr)
    if n > len(T975) + 1:
        raise ValueError(f"spread: {n} values; the t table covers at most {len(T975) + 1}")
    sd = float(arr.std(ddof=1)) if n > 1 else float("nan")
    half = T975[n - 2] * sd / math.sqrt(n) if n > 1 else float("nan")
    mean = float(arr.mean())
    return {"n": n, "mean": mean, "sd": sd, "min": float(arr.min()), "max": float(arr.max()),
            "ci95": [mean - half, mean + half]}


def paired(a: Sequence[float], b: Sequence[float]) -> dict:
    """Paired difference a - b over seeds: spread() of the differences, the paired t statistic and its
    two-sided p-value (df = n - 1; NaN for n < 2, p = 1 when every difference is 0), ``positive`` = how
    many seeds have a - b > 0, and ``within_noise`` = the 95% CI contains 0 (None for n < 2)."""
    diff = np.asarray(a, dtype=float) - np.asarray(b, dtype=float)
    out = spread(diff.tolist())
    n, sd = out["n"], out["sd"]
    out["per_seed"] = diff.tolist()
    out["positive"] = int((diff > 0).sum())
    if n < 2:
        out["t"] = out["p"] = float("nan")
    elif sd > 0:
        out["t"] = out["mean"] / (sd / math.sqrt(n))
        out["p"] = float(2 * stats.t.sf(abs(out["t"]), df=n - 1))
    else:  # every seed gives the same difference: no spread to test against
        out["t"] = float("nan")
        out["p"] = 1.0 if out["mean"] == 0 else 0.0
    lo, hi = out["ci95"]
    out["within_noise"] = None if n < 2 else bool(lo <= 0.0 <= hi)
    return out


def holm(pairs: dict[str, dict], alpha: float = 0.05) -> dict:
    """Holm's step-down correction of the paired tests that back one claim (Holm 1979).

    Sorted by p ascending, the i-th (0-based) of m tests is rejected when p_(j) <= alpha / (m - j) for
    every j <= i. Returns {"alpha", "m", "tests": {name: {"p", "p_holm", "reject"}}} with the adjusted
    p_holm = max_{j <= i} min(1, (m - j) p_(j)); a NaN p (too few seeds) is never rejected.
    """
    names = sorted(pairs, key=lambda k: (math.isnan(pairs[k]["p"]), pairs[k]["p"]))
    m, running, out = len(names), 0.0, {}
    for j, name in enumerate(names):
        p = pairs[name]["p"]
        running = float("nan") if math.isnan(p) or math.isnan(running) else max(running, min(1.0, (m - j) * p))
        out[name] = {"p": p, "p_holm": running, "reject": bool(running <= alpha)}
    return {"alpha": alpha, "m": m, "tests": {k: out[k] for k in pairs}}


def seed_configs(cfg: GRPOConfig, seeds: Sequence[int], **changes) -> list[GRPOConfig]:
    """cfg once per seed, the seed applied to both the run and the task's secret answers."""
    return [dataclasses.replace(cfg, task=dataclasses.replace(cfg.task, seed=s), seed=s, **changes) for s in seeds]


@contextlib.contextmanager
def _nan_is_fine() -> Iterator[None]:
    """Silence numpy's 'mean of empty slice' warnings: NaN is the intended result there."""
    with warnings.catch_warnings(), np.errstate(invalid="ignore"):
        warnings.simplefilter("ignore", category=RuntimeWarning)
        yield


def _curve(rows: np.ndarray) -> dict:
    """Seed mean and sd (ddof = 1) per step of an (S, steps+1) array (NaN-aware)."""
    with _nan_is_fine():
        sd = np.nanstd(rows, axis=0, ddof=1) if rows.shape[0] > 1 else np.full(rows.shape[1], np.nan)
        return {"mean": np.nanmean(rows, axis=0).tolist(), "sd": sd.tolist()}


def _stack(histories: list[dict], key: str) -> np.ndarray:
    return np.array([h[key] for h in histories], dtype=float)  # (S, steps+1)


# ---- (a) the GRPO run, with its seed spread ---------------------------------------------------------
def training_run(cfg: GRPOConfig, seeds: Sequence[int], progress: bool = False) -> dict:
    """Train cfg for every seed as one batched run. 'history' is the first seed's full run (the one the
    text narrates); 'bands' and 'per_seed' give the seed spread of the statistics the text quotes."""
    seeds = list(seeds)
    r = train_population(seed_configs(cfg, seeds), progress=progress)
    hs, g = r.histories, cfg.group_size
    steps = np.arange(1, cfg.steps + 1)  # steps with an update
    kl = _stack(hs, "kl")[:, 1:]
    p0, p1 = np.array(r.p_start), np.array(r.p_end)  # (S, P)
    zv_gap = _stack(hs, "zero_var_frac") - _stack(hs, "zero_var_theory")
    per_seed = {
        "final_acc": _stack(hs, "acc")[:, -1].tolist(),
        "kl_median": np.median(kl, axis=1).tolist(),
        "kl_p10": np.percentile(kl, 10, axis=1).tolist(),
        "kl_p90": np.percentile(kl, 90, axis=1).tolist(),
        "kl_max": kl.max(axis=1).tolist(),
        "kl_argmax_step": steps[kl.argmax(axis=1)].tolist(),
        "zero_var_gap_mean": zv_gap.mean(axis=1).tolist(),
        "zero_var_step0": _stack(hs, "zero_var_frac")[:, 0].tolist(),
        "expected_all_wrong": ((1 - p0) ** g).mean(axis=1).tolist(),
        "expected_all_right": (p0**g).mean(axis=1).tolist(),
        "expected_all_wrong_end": ((1 - p1) ** g).mean(axis=1).tolist(),
        "expected_all_right_end": (p1**g).mean(axis=1).tolist(),
        "stuck_end": (p1 < STUCK_P).sum(axis=1).tolist(),
        "stuck_end_started_stuck": ((p1 < STUCK_P) & (p0 < STUCK_P)).sum(axis=1).tolist(),
        "stuck_start": (p0 < STUCK_P).sum(axis=1).tolist(),
    }
    with _nan_is_fine():
        for kind in ("answer", "scratch", "eos"):
            per_seed[f"kl_{kind}"] = np.nanmean(_stack(hs, f"kl_{kind}")[:, 1:], axis=1).tolist()
            per_seed[f"kl_share_{kind}"] = np.nanmean(_stack(hs, f"kl_share_{kind}")[:, 1:], axis=1).tolist()
    return {
        "config": dataclasses.asdict(cfg), "seeds": seeds, "history": hs[0],
        "pairs": {"kl_answer-kl_scratch": paired(per_seed["kl_answer"], per_seed["kl_scratch"])},
        "bands": {k: _curve(_stack(hs, k)) for k in ("acc", "kl", "zero_var_frac", "len_mean")},
        "per_seed": per_seed,
        "summary": {k: spread(v) for k, v in per_seed.items()},
        "prompts": {"p_start": r.p_start[0], "p_end": r.p_end[0], "stuck_p": STUCK_P},
    }


# ---- (b) fixed rollout budget N = B*G ----------------------------------------------------------------
def group_size_sweep(cfg: GRPOConfig, seeds: Sequence[int], group_sizes: Sequence[int] = (2, 4, 8, 16, 32),
                     budget: int = 256, horizons: Sequence[int] | None = None, progress: bool = False) -> dict:
    """Train with B = budget // G prompts per step for each G (one batched run of all seeds per G).

    Per G: measured zero-variance fraction (mean over steps and seeds) against its theory mean_q p_q^G +
    (1 - p_q)^G with p_q the policy's exact success probability; accuracy on the whole prompt set per
    seed at each horizon (default: half-way and the end); at each horizon the G with the highest mean
    accuracy is compared, paired by seed, with every other G, and the G - 1 tests that back "this G is
    best" are Holm-corrected together; accuracy curves (seed mean, sd).
    """
    seeds = list(seeds)
    horizons = sorted(set(horizons or (cfg.steps // 2, cfg.steps)))
    rows, curves, acc_at = [], {}, {}
    for g in group_sizes:
        hs = train_population(seed_configs(cfg, seeds, group_size=g, batch_prompts=budget // g),
                              progress=progress).histories
        acc, zv, zt = _stack(hs, "acc"), _stack(hs, "zero_var_frac"), _stack(hs, "zero_var_theory")
        acc_at[g] = {h: acc[:, h].tolist() for h in horizons}
        rows.append({"G": g, "B": budget // g, "zero_var_measured": float(zv.mean()),
                     "zero_var_theory": float(zt.mean()),
                     "zero_var_measured_step0": float(zv[:, 0].mean()), "zero_var_theory_step0": float(zt[:, 0].mean()),
                     "acc": {str(h): spread(acc[:, h].tolist()) for h in horizons},
                     "acc_per_seed": {str(h): acc[:, h].tolist() for h in horizons},
                     "late_rise": spread((acc[:, -1] - acc[:, max(0, cfg.steps - 20)]).tolist())})
        curves[str(g)] = {"acc": _curve(acc), "zero_var": _curve(zv), "zero_var_theory": _curve(zt)}
    ranking = {}
    for h in horizons:
        order = sorted(group_sizes, key=lambda g: -float(np.mean(acc_at[g][h])))
        best_vs = {str(g): paired(acc_at[order[0]][h], acc_at[g][h]) for g in order[1:]}
        ranking[str(h)] = {"order": order, "best_vs": best_vs, "holm": holm(best_vs)}
    return {"config": dataclasses.asdict(cfg), "budget": budget, "seeds": seeds, "num_prompts": cfg.task.num_prompts,
            "steps": cfg.steps, "horizons": horizons, "table": rows, "ranking": ranking, "curves": curves}


# ---- (c) loss aggregation and response length ------------------------------------------------------
def aggregation_sweep(cfg: GRPOConfig, seeds: Sequence[int],
                      modes: Sequence[str] = ("response_mean", "token_mean", "fixed_length"),
                      progress: bool = False) -> dict:
    """Lengths under each loss aggregation, all modes and seeds as one batched run.

    Within-group gap: in each group that has both correct and incorrect responses, mean length of the
    incorrect minus mean length of the correct ones; averaged over those groups, then over steps (per
    seed). Dr. GRPO's length bias is a claim about response-mean against the other modes, so it is
    tested as the paired (by seed) difference of within-group gaps, response-mean minus each other
    mode, Holm-corrected over those comparisons (``gap_pairs``, ``gap_holm``). Final length: mean
    response length over the last 10 steps; every pair of modes is compared by seed, Holm-corrected
    over all pairs (``pairs``, ``pairs_holm``).
    """
    seeds = list(seeds)
    cfgs = [c for mode in modes for c in seed_configs(cfg, seeds, aggregation=mode)]
    hs = train_population(cfgs, progress=progress).histories
    s = len(seeds)
    out: dict = {"config": dataclasses.asdict(cfg), "seeds": seeds, "steps": cfg.steps, "modes": {}, "pairs": {},
                 "gap_pairs": {}}
    final_len, gap_per_seed = {}, {}
    with _nan_is_fine():
        for i, mode in enumerate(modes):
            part = hs[i * s:(i + 1) * s]
            gap = _stack(part, "len_gap_within")
            final_len[mode] = _stack(part, "len_mean")[:, -10:].mean(axis=1).tolist()
            gap_per_seed[mode] = np.nanmean(gap[:, 1:], axis=1).tolist()
            out["modes"][mode] = {
                "gap_within_per_seed": gap_per_seed[mode],
                "gap_within": spread(gap_per_seed[mode]),
                "mixed_groups": float(_stack(part, "mixed_groups").mean()),
                "final_len_per_seed": final_len[mode], "final_len": spread(final_len[mode]),
                "final_acc": spread(_stack(part, "acc")[:, -1].tolist()),
                "curves": {"len_mean": _curve(_stack(part, "len_mean")), "gap_within": _curve(gap),
                           "acc": _curve(_stack(part, "acc"))},
            }
    for i, a in enumerate(modes):
        for b in modes[i + 1:]:
            out["pairs"][f"{a}-{b}"] = paired(final_len[a], final_len[b])
    if "response_mean" in modes:
        for b in modes:
            if b != "response_mean":
                out["gap_pairs"][f"response_mean-{b}"] = paired(gap_per_seed["response_mean"], gap_per_seed[b])
    out["gap_holm"], out["pairs_holm"] = holm(out["gap_pairs"]), holm(out["pairs"])
    return out


# ---- (d) with vs without std division: weight per prompt against group sigma -------------------------
@torch.no_grad()
def std_weighting(cfg: GRPOConfig, num_groups: int = 128) -> dict:
    """Sample num_groups groups of G from the initial policy and measure each prompt's weight.

    Weight of a prompt = mean |A_i| over its group: the scale of the gradient it contributes.
    With 0/1 rewards, centre-only gives 2 sigma^2 and z-scoring gives 2 sigma: a 1/sigma boost.
    """
    cfg = dataclasses.replace(cfg, batch_prompts=min(num_groups, cfg.task.num_prompts))
    rollout = _initial_rollout(cfg)
    rewards = rollout.rewards[0]  # (B, G)
    sigma = group_std(rewards).float()  # (B,)
    w_grpo = compute_advantages(rewards, "grpo").abs().mean(1)  # (B,)
    w_dr = compute_advantages(rewards, "dr_grpo").abs().mean(1)  # (B,)
    mixed = sigma > 0
    ratio, inv = (w_grpo[mixed] / w_dr[mixed]), (1 / sigma[mixed])
    bins = []
    for lo, hi in ((0.0, 0.25), (0.25, 0.4), (0.4, 0.51)):
        sel = (sigma > lo) & (sigma <= hi)
        if bool(sel.any()):
            bins.append({"lo": lo, "hi": hi, "n": int(sel.sum()), "weight_grpo": float(w_grpo[sel].mean()),
                         "weight_dr_grpo": float(w_dr[sel].mean()),
                         "ratio": float(w_grpo[sel].mean() / w_dr[sel].mean())})
    dev = float((ratio - inv).abs().max()) if bool(mixed.any()) else 0.0
    return {"config": dataclasses.asdict(cfg), "G": cfg.group_size, "sigma": sigma.tolist(),
            "weight_grpo": w_grpo.tolist(),
            "weight_dr_grpo": w_dr.tolist(), "ratio_grpo_over_dr_mixed": ratio.tolist(),
            "one_over_sigma_mixed": inv.tolist(), "zero_var_groups": int((~mixed).sum()),
            "max_abs_ratio_minus_inv_sigma": dev, "ratio_equals_inv_sigma_exact": dev == 0.0,
            "dtype": str(w_grpo.dtype).removeprefix("torch."), "bins": bins}


def _initial_rollout(cfg: GRPOConfig):
    """One rollout of cfg's batch from the initial policy of cfg.seed (generator seeded by cfg.seed)."""
    device = resolve_device(cfg.device)
    policy = build_policy(cfg, device)
    gen = torch.Generator(device=device).manual_seed(cfg.seed)
    return sample_rollout(policy, cfg, [gen], member_answers([cfg], device))


# ---- (e) GRPO vs Dr. GRPO vs RLOO, at beta = 0.01 and beta = 0 --------------------------------------
def advantage_comparison(cfg: GRPOConfig, seeds: Sequence[int],
                         estimators: Sequence[str] = ("grpo", "dr_grpo", "rloo"),
                         kl_coefs: Sequence[float] = (0.01, 0.0), progress: bool = False) -> dict:
    """Advantages of the estimators on one real batch; then every (beta, estimator, seed) as one batched
    run, with final accuracies paired by seed between estimators at each beta.

    beta is the control: with beta > 0, dividing by sigma also rescales the policy-gradient term
    against the fixed KL term, so a GRPO vs Dr. GRPO difference at beta = 0.01 may come from that
    rescaling rather than from the 1/sigma weighting of groups; at beta = 0 only the weighting is left.
    """
    seeds = list(seeds)
    rewards = _initial_rollout(cfg).rewards[0].double()  # (B, G)
    adv = {name: compute_advantages(rewards, name) for name in estimators}
    g = cfg.group_size
    dev = (float((adv["dr_grpo"] - (g - 1) / g * adv["rloo"]).abs().max())
           if {"dr_grpo", "rloo"} <= set(estimators) else None)
    out: dict = {"config": dataclasses.asdict(cfg), "G": g, "seeds": seeds, "steps": cfg.steps,
                 "kl_coefs": list(kl_coefs), "batch": {name: a.reshape(-1).tolist() for name, a in adv.items()},
                 "max_abs_dr_grpo_minus_scaled_rloo": dev,
                 "dr_grpo_equals_scaled_rloo_exact": None if dev is None else dev == 0.0,
                 "arms": {}, "pairs": {}}
    if not seeds:  # the batch comparison only
        return out
    arms = [(beta, name) for beta in kl_coefs for name in estimators]
    cfgs = [c for beta, name in arms for c in seed_configs(cfg, seeds, advantage=name, kl_coef=beta)]
    hs = train_population(cfgs, progress=progress).histories
    s = len(seeds)
    final = {}
    for i, (beta, name) in enumerate(arms):
        acc = _stack(hs[i * s:(i + 1) * s], "acc")
        final[(beta, name)] = acc[:, -1].tolist()
        out["arms"][f"{name}@{beta:g}"] = {"estimator": name, "kl_coef": beta, "acc": _curve(acc),
                                            "final_acc_per_seed": final[(beta, name)],
                                            "final_acc": spread(final[(beta, name)])}
    for beta in kl_coefs:
        for i, a in enumerate(estimators):
            for b in estimators[i + 1:]:
                out["pairs"][f"{a}-{b}@{beta:g}"] = paired(final[(beta, a)], final[(beta, b)])
    return out


# ---- running the sections -----------------------------------------------------------------------------
def _timed(threads: int, fn: Callable[..., dict], args: tuple) -> tuple[dict, float, float]:
    """fn(*args) with its wall and process-CPU seconds; in a worker process, with `threads` torch threads."""
    if threads:
        torch.set_num_threads(threads)
    t, c = time.perf_counter(), time.process_time()
    out = fn(*args)
    return out, time.perf_counter() - t, time.process_time() - c


def start_jobs(jobs: dict[str, tuple[Callable[..., dict], tuple]], workers: int = 1,
               threads: int = 1) -> tuple[dict[str, Callable[[], tuple[dict, float, float]]], Callable[[], None]]:
    """Start the demo's sections. Returns (name -> wait(), close()): wait() gives (result, wall_s, cpu_s).

    workers > 1: the jobs run in that many spawned worker processes (``threads`` torch threads each,
    1 by default: on this tiny model one thread per process is fastest), started in the order given,
    so list the longest first. Each job is deterministic on its own, so the results do not depend on
    the number of workers. workers = 1: each job runs in this process when its result is asked for.
    """
    if workers <= 1:
        cache: dict[str, tuple[dict, float, float]] = {}

        def lazy(name: str) -> Callable[[], tuple[dict, float, float]]:
            def wait() -> tuple[dict, float, float]:
                if name not in cache:
                    cache[name] = _timed(threads, *jobs[name])
                return cache[name]
            return wait
        return {name: lazy(name) for name in jobs}, lambda: None
    pool = ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn"))
    futures = {name: pool.submit(_timed, threads, fn, args) for name, (fn, args) in jobs.items()}
    return {name: fut.result for name, fut in futures.items()}, pool.shutdown


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
