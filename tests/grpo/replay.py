"""One GRPO update replayed on a stored rollout: the part of training that is exact on every CPU.

files/replay_step1.json holds the rollout of step 1 of the demo's default run (seed 0; sampled from
the initial policy, since step 0 makes no update) and what one update on it gives. Sampling can flip
a token where float rounding differs between CPUs, and a flipped token changes the rest of a run; an
update on a fixed rollout cannot flip anything, so its result is compared to 1e-5 on any machine.

    .venv/bin/python tests/grpo/replay.py    # rewrite files/replay_step1.json after a deliberate change
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import torch

from grpolab.experiments import demo_configs
from grpolab.train import GRPOConfig, Rollout, grpo_update, sample_rollout, start_run

FILE = Path(__file__).with_name("files") / "replay_step1.json"


def config() -> GRPOConfig:
    return demo_configs(device="cpu")["a"]


def step1_rollout(cfg: GRPOConfig) -> dict:
    """The rollout the training loop draws at step 1, as plain lists."""
    run = start_run([cfg])
    for _ in range(2):  # step 0, then step 1: sample_rollout is the generator's only consumer
        rollout = sample_rollout(run.policy, cfg, run.generators, run.answers)
    return {"prompt_ids": rollout.prompt_ids.tolist(), "prompts": rollout.prompts.tolist(),
            "tokens": rollout.tokens.tolist(), "mask": rollout.mask.int().tolist(), "rewards": rollout.rewards.tolist()}


def replay(cfg: GRPOConfig, stored: dict) -> dict:
    """One update (K inner steps) of the initial policy on a stored rollout; the numbers it gives."""
    run = start_run([cfg])
    rollout = Rollout(torch.tensor(stored["prompt_ids"]), torch.tensor(stored["prompts"]),
                      torch.tensor(stored["tokens"]), torch.tensor(stored["mask"]).bool(),
                      torch.tensor(stored["rewards"]))
    out = grpo_update(run.policy, run.reference, run.optimizer, run.cfgs, rollout)
    mask = rollout.mask & out["keep"].unsqueeze(-1)
    with torch.no_grad():
        p_after = run.policy.success_prob(torch.arange(cfg.task.num_prompts).unsqueeze(0), run.answers)
    return {"loss": float(out["loss"][0]), "grad_norm": float(out["grad_norm"][0]),
            "clip_frac": float(out["clip_frac"][0]), "kl": float((out["kl_tokens"] * mask).sum() / mask.sum()),
            "p_after": p_after[0].tolist()}


def record(cfg: GRPOConfig) -> dict:
    rollout = step1_rollout(cfg)
    return {"rollout": rollout, "after": replay(cfg, rollout)}


def main() -> int:
    torch.set_num_threads(1)
    FILE.parent.mkdir(exist_ok=True)
    FILE.write_text(json.dumps(record(config())) + "\n")
    print(f"wrote {FILE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
