"""On a CUDA machine: does the demo's GRPO maths and training behave on the GPU as on the CPU?

Run on demand where CUDA is present (`.venv/bin/python bench/bench_cuda.py`); prints one line per check
and exits 1 if any check fails. Sampled trajectories are never compared across devices (the GPU's
random streams and reductions differ); what is compared is what must agree:

1. advantages (grpo, dr_grpo, rloo) of the same rewards on CPU and CUDA, float32 and float64, including a
   constant float32 group, which must give exactly 0 on both;
2. one GRPO update of the initial policy on the stored step-1 rollout (tests/grpo/files/replay_step1.json)
   on CUDA against the stored CPU numbers (to 1e-4: different kernels, same maths);
3. a fresh default run of section (a) on CUDA, 5 seeds batched, against the committed seed spread
   (assets/figs/demo_training.json), with the same 99.9% prediction interval the CPU test uses;
4. steps per second of section (a)'s config on CPU (1 thread) and CUDA, as a ratio.
"""
from __future__ import annotations

import json
import math
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "src"), str(ROOT / "tests" / "grpo")]

from replay import FILE as REPLAY_FILE  # noqa: E402

from grpolab.advantages import compute_advantages  # noqa: E402
from grpolab.experiments import demo_configs, seed_configs  # noqa: E402
from grpolab.train import Rollout, grpo_update, start_run, train_population  # noqa: E402

T9995 = {4: 8.610}  # two-sided 99.9% t quantile, 4 degrees of freedom (5 seeds)
failures: list[str] = []


def check(name: str, ok: bool, detail: str) -> None:
    print(f"{'ok  ' if ok else 'FAIL'} {name}: {detail}")
    if not ok:
        failures.append(name)


def advantages_agree() -> None:
    gen = torch.Generator().manual_seed(0)
    rewards = torch.randint(0, 2, (64, 8), generator=gen).double()
    rewards[0] = 1.0  # a constant group
    for dtype in (torch.float32, torch.float64):
        for est in ("grpo", "dr_grpo", "rloo"):
            cpu = compute_advantages(rewards.to(dtype), est)
            gpu = compute_advantages(rewards.to(dtype).cuda(), est).cpu()
            diff = float((cpu - gpu).abs().max())
            const_zero = bool((gpu[0] == 0).all()) and bool((cpu[0] == 0).all())
            check(f"advantages {est} {dtype}", diff <= 1e-6 and const_zero,
                  f"max |cpu - cuda| = {diff:.2e}, constant group exactly 0 on both: {const_zero}")


def replay_on_cuda() -> None:
    stored = json.loads(REPLAY_FILE.read_text())
    cfg = demo_configs(device="cuda")["a"]
    run = start_run([cfg])
    r = stored["rollout"]
    dev = torch.device("cuda")
    rollout = Rollout(torch.tensor(r["prompt_ids"], device=dev), torch.tensor(r["prompts"], device=dev),
                      torch.tensor(r["tokens"], device=dev), torch.tensor(r["mask"], device=dev).bool(),
                      torch.tensor(r["rewards"], device=dev))
    out = grpo_update(run.policy, run.reference, run.optimizer, run.cfgs, rollout)
    mask = rollout.mask & out["keep"].unsqueeze(-1)
    got = {"loss": float(out["loss"][0]), "grad_norm": float(out["grad_norm"][0]),
           "clip_frac": float(out["clip_frac"][0]), "kl": float((out["kl_tokens"] * mask).sum() / mask.sum())}
    for key, value in got.items():
        want = stored["after"][key]
        check(f"one update on the stored rollout: {key}", abs(value - want) <= 1e-4,
              f"cuda {value:.6e}, stored cpu {want:.6e}")


def run_within_committed_spread() -> float:
    committed = json.loads((ROOT / "assets" / "figs" / "demo_training.json").read_text())
    per_seed = committed["per_seed"]["final_acc"]
    cfg = demo_configs(device="cuda")["a"]
    seeds = list(range(len(per_seed)))
    t = time.perf_counter()
    result = train_population(seed_configs(cfg, seeds))
    wall = time.perf_counter() - t
    finals = [h["acc"][-1] for h in result.histories]
    n = len(per_seed)
    half = T9995[n - 1] * statistics.stdev(per_seed) * math.sqrt(1 + 1 / n)
    mean = statistics.fmean(per_seed)
    inside = [abs(v - mean) <= max(half, 0.01) for v in finals]
    learns = all(h["acc"][-1] > h["acc"][0] + 0.3 for h in result.histories)
    check("section (a) on cuda: final accuracy of each seed in the committed CPU seeds' 99.9% interval",
          all(inside) and learns, f"cuda {np.round(finals, 3).tolist()}, committed mean {mean:.3f} ± {half:.3f}")
    return cfg.steps / wall


def steps_per_second(device: str, steps: int = 30) -> float:
    cfg = demo_configs(device=device, steps=steps)["a"]
    t = time.perf_counter()
    train_population(seed_configs(cfg, range(5)))
    return steps / (time.perf_counter() - t)


def main() -> int:
    if not torch.cuda.is_available():
        print("bench_cuda: CUDA is not available on this machine", file=sys.stderr)
        return 2
    torch.set_num_threads(1)
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}")
    advantages_agree()
    replay_on_cuda()
    run_within_committed_spread()
    cpu, gpu = steps_per_second("cpu"), steps_per_second("cuda")
    print(f"section (a), 5 seeds batched: cpu {cpu:.1f} steps/s, cuda {gpu:.1f} steps/s ({gpu / cpu:.2f}x)")
    print(f"{len(failures)} failed" if failures else "all CUDA checks passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
