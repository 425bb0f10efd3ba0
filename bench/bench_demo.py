"""Benchmark of the lesson-11 GRPO demo: rollout and training speed, seeds batched vs one after the other,
and the whole demo notebook's wall and CPU time (target: at most 5 minutes on 2 CPU cores).

    python bench/bench_demo.py              # default CPU config (the demo's section a)
    python bench/bench_demo.py --gpu        # also a larger config (bigger policy, larger B*G) on CUDA
    python bench/bench_demo.py --no-notebook

Ratios are against baselines measured in the same run: batched rollout vs sampling one group at a time,
five seeds as one batched run vs five runs one after the other, and (with --gpu) the large config vs the
small one. Wall time on a shared machine depends on its load, so CPU seconds are printed beside it,
with the load average. No timing asserts anywhere; numbers are printed.
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

from grpolab.experiments import demo_configs, seed_configs
from grpolab.toy import member_uniforms, parameter_count
from grpolab.train import GRPOConfig, build_policy, resolve_device, train, train_population

ROOT = Path(__file__).resolve().parents[1]
LINE = "{name:<38} {value}"


def timed(fn, device: torch.device, repeats: int = 5) -> float:
    """Seconds per call of fn() (after one warm-up call)."""
    fn()
    if device.type == "cuda":
        torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(repeats):
        fn()
    if device.type == "cuda":
        torch.cuda.synchronize()
    return (time.perf_counter() - t) / repeats


def rollout_times(cfg: GRPOConfig) -> tuple[float, float]:
    """Seconds per step to sample B*G responses: all in one batch, and one group of G at a time."""
    device = resolve_device(cfg.device)
    policy = build_policy(cfg, device)
    gen = [torch.Generator(device=device).manual_seed(0)]
    g, n = cfg.group_size, cfg.batch_prompts * cfg.group_size
    prompts = torch.arange(cfg.batch_prompts, device=device).repeat_interleave(g).unsqueeze(0)  # (1, N)

    def sample(p: torch.Tensor) -> None:
        policy.sample(p, member_uniforms(gen, p.shape[1], cfg.task.max_len, device))

    batched = timed(lambda: sample(prompts), device)
    per_group = timed(lambda: [sample(prompts[:, i:i + g]) for i in range(0, n, g)], device)
    return batched, per_group


def train_figures(cfg: GRPOConfig, max_steps: int = 300) -> dict[str, float]:
    """steps/s of a full run, and the first step (and seconds) where the 5-step mean batch reward >= 0.8."""
    result = train(dataclasses.replace(cfg, steps=max_steps))
    h = result.history
    per_step = result.wall_s / len(h["step"])
    hit = next((s for s in range(4, len(h["reward"])) if sum(h["reward"][s - 4:s + 1]) / 5 >= 0.8), None)
    hit_acc = next((s for s, a in enumerate(h["acc"]) if a >= 0.8), None)
    return {"steps_per_s": 1 / per_step, "ms_per_step": 1000 * per_step, "cpu_ms_per_step": 1000 * result.cpu_s /
            len(h["step"]), "step_reward_0.8": hit, "s_reward_0.8": None if hit is None else hit * per_step,
            "step_acc_0.8": hit_acc, "final_acc": h["acc"][-1]}


def seeds_batched_vs_sequential(cfg: GRPOConfig, seeds: int = 5, steps: int = 30) -> None:
    """The demo's way to get seeds (one batched run) against running the seeds one after the other."""
    cfgs = seed_configs(dataclasses.replace(cfg, steps=steps), range(seeds))
    t, c = time.perf_counter(), time.process_time()
    for one in cfgs:
        train(one)
    seq_wall, seq_cpu = time.perf_counter() - t, time.process_time() - c
    pop = train_population(cfgs)
    print(LINE.format(name=f"{seeds} seeds x {steps + 1} steps, one by one",
                      value=f"{seq_wall:.1f} s wall, {seq_cpu:.1f} s CPU"))
    print(LINE.format(name=f"{seeds} seeds x {steps + 1} steps, one batched run",
                      value=f"{pop.wall_s:.1f} s wall, {pop.cpu_s:.1f} s CPU (batched is {seq_cpu / pop.cpu_s:.2f}x "
                            f"less CPU, {seq_wall / pop.wall_s:.2f}x less wall)"))


def report(name: str, cfg: GRPOConfig) -> dict[str, float]:
    batched, per_group = rollout_times(cfg)
    fig = train_figures(cfg)
    print(f"--- {name}: device={resolve_device(cfg.device)}, B={cfg.batch_prompts}, G={cfg.group_size}, "
          f"hidden={cfg.hidden}, params={parameter_count(build_policy(cfg, resolve_device(cfg.device))):,}")
    print(LINE.format(name="rollout, one batch of B*G", value=f"{1000 * batched:.1f} ms"))
    print(LINE.format(name="rollout, one group at a time", value=f"{1000 * per_group:.1f} ms "
                      f"(batched is {per_group / batched:.1f}x faster)"))
    print(LINE.format(name="training steps/s", value=f"{fig['steps_per_s']:.1f} "
                      f"({fig['ms_per_step']:.1f} ms/step wall, {fig['cpu_ms_per_step']:.1f} ms/step CPU)"))
    s08 = "not reached"
    if fig["s_reward_0.8"] is not None:
        s08 = f"{fig['s_reward_0.8']:.1f} s (step {fig['step_reward_0.8']})"
    print(LINE.format(name="time to mean reward 0.8 (5-step)", value=s08))
    print(LINE.format(name="step where all-prompt acc >= 0.8", value=str(fig["step_acc_0.8"])))
    return fig


def notebook_times(device: str, workers: int) -> tuple[float, float]:
    """Wall seconds and CPU seconds (this process's children: papermill, the kernel, its workers) of the
    whole demo notebook with its default config, run by papermill into a temp dir."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    with tempfile.TemporaryDirectory() as tmp:
        t = time.perf_counter()
        params = ["-p", "device", device, "-p", "workers", str(workers), "-p", "fig_dir", str(Path(tmp) / "figs")]
        subprocess.run([sys.executable, "-m", "papermill", str(ROOT / "lessons" / "lesson11_grpo_demo.ipynb"),
                        str(Path(tmp) / "out.ipynb"), "--cwd", str(ROOT / "lessons"), "--no-progress-bar", *params],
                       check=True, capture_output=True)
        wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpu", action="store_true", help="also run the large config on CUDA")
    parser.add_argument("--no-notebook", action="store_true", help="skip the whole-notebook timing")
    parser.add_argument("--threads", type=int, default=1,
                        help="torch CPU threads (default 1: fastest for this tiny model, as in the notebook)")
    parser.add_argument("--workers", type=int, default=2, help="the notebook's worker processes (default 2)")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    if args.gpu and not torch.cuda.is_available():
        print("--gpu: CUDA is not available", file=sys.stderr)
        return 2
    print(f"torch {torch.__version__}, {torch.get_num_threads()} CPU threads, {os.cpu_count()} cores, "
          f"load average {os.getloadavg()[0]:.1f} at start")
    device = "cuda" if args.gpu else "cpu"
    small = demo_configs(device=device)["a"]
    base = report("small (demo section a)", small)
    seeds_batched_vs_sequential(small)
    if args.gpu:
        large = dataclasses.replace(small, hidden=256, embed=64, batch_prompts=128, group_size=16,
                                    task=dataclasses.replace(small.task, num_prompts=1024))
        big = report("large", large)
        ratio = big["ms_per_step"] / base["ms_per_step"]
        print(LINE.format(name="large vs small", value=f"{ratio:.2f}x time per step for "
                          f"{large.batch_prompts * large.group_size / (small.batch_prompts * small.group_size):.0f}x "
                          "the responses per step"))
    if not args.no_notebook:
        wall, cpu = notebook_times(device, args.workers)
        print(LINE.format(name="demo notebook", value=f"{wall:.0f} s wall, {cpu:.0f} s CPU ({device}, "
                          f"{args.workers} worker processes; target <= 300 s wall on 2 cores)"))
    print(f"load average {os.getloadavg()[0]:.1f} at the end")
    return 0


if __name__ == "__main__":
    sys.exit(main())
