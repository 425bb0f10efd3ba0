"""GRPO maths and a toy GRPO training loop for lesson 11 (advantages, loss aggregation, ratios, KL).

Modules: advantages (estimators by name), losses (aggregations by name, ratios, clipped surrogate, k3),
toy (task, reward, GRU policy), train (config and loop), experiments (demo sections b-e),
figures (Figure 11-1, ``python -m grpolab.figures``), demo_plots (demo figures).
"""
from .advantages import ADVANTAGE_ESTIMATORS, compute_advantages, group_advantages_reference
from .losses import LOSS_AGGREGATIONS, aggregate_loss, clipped_surrogate, k3_kl, sequence_log_ratio
from .train import GRPOConfig, train

__all__ = [
    "ADVANTAGE_ESTIMATORS", "LOSS_AGGREGATIONS", "GRPOConfig", "aggregate_loss", "clipped_surrogate",
    "compute_advantages", "group_advantages_reference", "k3_kl", "sequence_log_ratio", "train",
]
