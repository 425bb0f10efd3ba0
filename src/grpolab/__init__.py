"""GRPO maths and a toy GRPO training loop for lesson 11 (advantages, loss aggregation, ratios, KL)."""
