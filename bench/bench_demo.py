"""Benchmark of the lesson-11 GRPO demo: steps/s, time to mean reward 0.8, and the demo notebook's wall time.

    python bench/bench_demo.py              # default CPU config (the demo's section a)
    python bench/bench_demo.py --gpu        # also a larger config (bigger policy, larger B*G) on CUDA
    python bench/bench_demo.py --no-notebook

Ratios are against baselines measured in the same run: batched rollout vs sampling one group at a time,
and (with --gpu) the large config vs the small one. No timing asserts anywhere; numbers are printed.
"""
from __future__ import annotations

import argparse
import dataclasses
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

from grpolab.experiments import demo_configs
from grpolab.train import GRPOConfig, build_policy, resolve_device, train

ROOT = Path(__file__).resolve().parents[1]
LINE = "{name:<34} {value}"


def rollout_times(cfg: GRPOConfig, repeats: int = 5) -> tuple[float, float]:
    """Seconds per step to sample B*G responses: all in one batch, and one group of G at a time."""
    device = resolve_device(cfg.device)
    policy = build_policy(cfg, device)
    gen = torch.Generator(device=device).manual_seed(0)
    prompts = torch.arange(cfg.batch_prompts, device=device).repeat_interleave(cfg.group_size)

    def timed(fn) -> float:
        fn()  # warm-up
        if device.type == "cuda":
            torch.cuda.synchronize()
        t = time.perf_counter()
        for _ in range(repeats):
            fn()
        if device.type == "cuda":
            torch.cuda.synchronize()
        return (time.perf_counter() - t) / repeats

    batched = timed(lambda: policy.sample(prompts, gen))
    per_group = timed(lambda: [policy.sample(prompts[i * cfg.group_size:(i + 1) * cfg.group_size], gen)
                               for i in range(cfg.batch_prompts)])
    return batched, per_group


def train_figures(cfg: GRPOConfig, max_steps: int = 300) -> dict[str, float]:
    """steps/s of a full run, and the first step (and seconds) where the 5-step mean batch reward >= 0.8."""
    result = train(dataclasses.replace(cfg, steps=max_steps))
    h = result.history
    per_step = result.wall_s / len(h["step"])
    hit = next((s for s in range(4, len(h["reward"])) if sum(h["reward"][s - 4:s + 1]) / 5 >= 0.8), None)
    hit_acc = next((s for s, a in enumerate(h["acc"]) if a >= 0.8), None)
    return {"steps_per_s": 1 / per_step, "ms_per_step": 1000 * per_step,
            "step_reward_0.8": hit, "s_reward_0.8": None if hit is None else hit * per_step,
            "step_acc_0.8": hit_acc, "final_acc": h["acc"][-1]}


def report(name: str, cfg: GRPOConfig) -> dict[str, float]:
    n_params = sum(p.numel() for p in build_policy(cfg, resolve_device(cfg.device)).parameters())
    batched, per_group = rollout_times(cfg)
    fig = train_figures(cfg)
    print(f"--- {name}: device={resolve_device(cfg.device)}, B={cfg.batch_prompts}, G={cfg.group_size}, "
          f"hidden={cfg.hidden}, params={n_params:,}")
    print(LINE.format(name="rollout, one batch of B*G", value=f"{1000 * batched:.1f} ms"))
    print(LINE.format(name="rollout, one group at a time", value=f"{1000 * per_group:.1f} ms "
                      f"(batched is {per_group / batched:.1f}x faster)"))
    print(LINE.format(name="training steps/s", value=f"{fig['steps_per_s']:.1f} ({fig['ms_per_step']:.1f} ms/step)"))
    s08 = "not reached"
    if fig["s_reward_0.8"] is not None:
        s08 = f"{fig['s_reward_0.8']:.1f} s (step {fig['step_reward_0.8']})"
    print(LINE.format(name="time to mean reward 0.8 (5-step)", value=s08))
    print(LINE.format(name="step where all-prompt acc >= 0.8", value=str(fig["step_acc_0.8"])))
    return fig


def notebook_wall_time(device: str) -> float:
    """Wall seconds of the whole demo notebook with its default config, run by papermill into a temp dir."""
    with tempfile.TemporaryDirectory() as tmp:
        t = time.perf_counter()
        subprocess.run([sys.executable, "-m", "papermill", str(ROOT / "lessons" / "lesson11_grpo_demo.ipynb"),
                        str(Path(tmp) / "out.ipynb"), "--cwd", str(ROOT / "lessons"), "--no-progress-bar",
                        "-p", "device", device, "-p", "fig_dir", str(Path(tmp) / "figs")],
                       check=True, capture_output=True)
        return time.perf_counter() - t


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpu", action="store_true", help="also run the large config on CUDA")
    parser.add_argument("--no-notebook", action="store_true", help="skip the whole-notebook wall time")
    parser.add_argument("--threads", type=int, default=1,
                        help="torch CPU threads (default 1: fastest for this tiny model, as in the notebook)")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    if args.gpu and not torch.cuda.is_available():
        print("--gpu: CUDA is not available", file=sys.stderr)
        return 2
    print(f"torch {torch.__version__}, {torch.get_num_threads()} CPU threads")
    device = "cuda" if args.gpu else "cpu"
    small = dataclasses.replace(demo_configs(device=device)["a"])
    base = report("small (demo section a)", small)
    if args.gpu:
        large = dataclasses.replace(small, hidden=256, embed=64, batch_prompts=128, group_size=16,
                                    task=dataclasses.replace(small.task, num_prompts=1024))
        big = report("large", large)
        ratio = big["ms_per_step"] / base["ms_per_step"]
        print(LINE.format(name="large vs small", value=f"{ratio:.2f}x time per step for "
                          f"{large.batch_prompts * large.group_size / (small.batch_prompts * small.group_size):.0f}x "
                          "the responses per step"))
    if not args.no_notebook:
        print(LINE.format(name="demo notebook wall time", value=f"{notebook_wall_time(device):.0f} s ({device})"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
