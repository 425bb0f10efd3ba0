"""GRPO maths and a toy GRPO training loop for lesson 11 (advantages, loss aggregation, ratios, KL).

Modules: advantages (estimators by name), losses (aggregations by name, ratios, clipped surrogate, KL k1/k2/k3),
toy (task, reward, stacked GRU policies), train (config and loop; seeds train as one batched run),
experiments (demo sections a-e), figures (Figure 11-1, ``python -m grpolab.figures``), demo_plots
(demo figures), demo_text (the demo's text, written from its stored numbers).
"""
from .advantages import ADVANTAGE_ESTIMATORS, compute_advantages, group_advantages_reference
from .losses import KL_ESTIMATORS, LOSS_AGGREGATIONS, aggregate_loss, clipped_surrogate, k3_kl, sequence_log_ratio
from .train import GRPOConfig, train, train_population

__all__ = [
    "ADVANTAGE_ESTIMATORS", "KL_ESTIMATORS", "LOSS_AGGREGATIONS", "GRPOConfig", "aggregate_loss", "clipped_surrogate",
    "compute_advantages", "group_advantages_reference", "k3_kl", "sequence_log_ratio", "train", "train_population",
]
