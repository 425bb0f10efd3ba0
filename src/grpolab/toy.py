"""A toy verifiable task and a tiny autoregressive GRU policy for the GRPO demo.

Task ("secret-answer lookup"): prompt q in [0, P) has a secret answer digit a(q) drawn at random, so
prompts share no solution. A response is an answer digit, then free "scratch" digits, then EOS, at most
``max_len`` tokens. Reward = 1 if the first token equals a(q), else 0 (rule-based, verifiable). The
reward ignores everything after the answer, so response length is free of the reward: exactly the
setting where a loss aggregation's length bias can show (Dr. GRPO arXiv 2503.20783, §3.1).

Policy: prompt embedding as the GRU's initial state, token embeddings as inputs, a linear head over
digits + EOS. A trainable per-prompt ``prior`` added to the first position's logits plays the part of
a pretrained model's beliefs: initialised N(0, prior_scale), it makes some prompts start all-right,
some all-wrong and most mixed. EOS is not allowed as the first token (a response has an answer).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn


@dataclass(frozen=True)
class ToyTask:
    """The task's sizes and its seed; ``answers(device)`` gives the secret answers (P,)."""

    num_prompts: int = 256
    num_digits: int = 8
    max_len: int = 16
    seed: int = 0

    @property
    def eos(self) -> int:
        return self.num_digits

    @property
    def bos(self) -> int:
        return self.num_digits + 1

    def answers(self, device: torch.device | str = "cpu") -> torch.Tensor:
        gen = torch.Generator().manual_seed(10_000 + self.seed)
        return torch.randint(0, self.num_digits, (self.num_prompts,), generator=gen).to(device)


def reward_fn(task: ToyTask, prompts: torch.Tensor, tokens: torch.Tensor, mask: torch.Tensor,
              answers: torch.Tensor) -> torch.Tensor:
    """1.0 where the first (answer) token equals the prompt's secret answer, else 0.0. Length-free.

    prompts: (N,), tokens: (N, T), mask: (N, T) (unused: the answer is always present), answers: (P,).
    Returns (N,).
    """
    return (tokens[:, 0] == answers[prompts]).float()


class GRUPolicy(nn.Module):
    """Tiny autoregressive policy. Vocabulary: digits 0..D-1, EOS = D (output), BOS = D+1 (input only)."""

    def __init__(self, task: ToyTask, hidden: int = 64, embed: int = 32, prior_scale: float = 2.0,
                 eos_bias: float = -1.0):
        super().__init__()
        self.task = task
        d = task.num_digits
        self.prompt_embed = nn.Embedding(task.num_prompts, hidden)
        self.token_embed = nn.Embedding(d + 2, embed)
        self.gru = nn.GRU(embed, hidden, batch_first=True)
        self.head = nn.Linear(hidden, d + 1)
        self.prior = nn.Embedding(task.num_prompts, d + 1)
        with torch.no_grad():
            nn.init.normal_(self.prompt_embed.weight, std=0.5)
            nn.init.normal_(self.prior.weight, std=prior_scale)
            self.head.bias[d] = eos_bias  # sets the initial length distribution

    def _mask_first(self, logits: torch.Tensor, position: int) -> torch.Tensor:
        if position == 0:
            logits = logits.clone()
            logits[..., self.task.eos] = float("-inf")
        return logits

    def first_logits(self, prompts: torch.Tensor) -> torch.Tensor:
        """Logits (N, D+1) of the first (answer) token; EOS masked to -inf."""
        h0 = self.prompt_embed(prompts).unsqueeze(0)  # (1, N, H)
        bos = torch.full((prompts.shape[0], 1), self.task.bos, device=prompts.device)
        out, _ = self.gru(self.token_embed(bos), h0)  # (N, 1, H)
        return self._mask_first(self.head(out[:, 0]) + self.prior(prompts), 0)

    def success_prob(self, prompts: torch.Tensor, answers: torch.Tensor) -> torch.Tensor:
        """Exact P(reward = 1 | prompt) under the policy, (N,): softmax of the first logits at a(q)."""
        probs = torch.softmax(self.first_logits(prompts), dim=-1)  # (N, D+1)
        return probs.gather(1, answers[prompts].unsqueeze(1)).squeeze(1)

    def log_probs(self, prompts: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
        """Teacher-forced log pi(token_t | prompt, tokens_<t). prompts: (N,), tokens: (N, T) -> (N, T).

        Padding positions hold EOS; their values are meaningless and must be masked by the caller.
        """
        n, t = tokens.shape
        h0 = self.prompt_embed(prompts).unsqueeze(0)  # (1, N, H)
        bos = torch.full((n, 1), self.task.bos, device=tokens.device)
        inputs = torch.cat([bos, tokens[:, :-1]], dim=1)  # (N, T)
        out, _ = self.gru(self.token_embed(inputs), h0)  # (N, T, H)
        logits = self.head(out)  # (N, T, D+1)
        logits[:, 0] = self._mask_first(logits[:, 0] + self.prior(prompts), 0)
        logp = torch.log_softmax(logits, dim=-1)
        return logp.gather(2, tokens.unsqueeze(2)).squeeze(2)  # (N, T)

    @torch.no_grad()
    def sample(self, prompts: torch.Tensor, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        """Sample one response per prompt, all N in one batch. Returns tokens (N, T), mask (N, T).

        mask marks the response's tokens including its EOS; padding after EOS is EOS with mask 0. A
        response that reaches max_len without EOS is cut there (its length is max_len).
        """
        n, t_max, eos = prompts.shape[0], self.task.max_len, self.task.eos
        h = self.prompt_embed(prompts).unsqueeze(0)  # (1, N, H)
        inp = torch.full((n, 1), self.task.bos, device=prompts.device)
        tokens = torch.full((n, t_max), eos, dtype=torch.long, device=prompts.device)
        mask = torch.zeros((n, t_max), dtype=torch.bool, device=prompts.device)
        alive = torch.ones(n, dtype=torch.bool, device=prompts.device)
        prior = self.prior(prompts)
        for t in range(t_max):
            out, h = self.gru(self.token_embed(inp), h)
            logits = self.head(out[:, 0])  # (N, D+1)
            if t == 0:
                logits = self._mask_first(logits + prior, 0)
            tok = torch.multinomial(torch.softmax(logits, dim=-1), 1, generator=generator).squeeze(1)  # (N,)
            tok = torch.where(alive, tok, torch.full_like(tok, eos))
            tokens[:, t] = tok
            mask[:, t] = alive
            alive = alive & (tok != eos)
            if not bool(alive.any()):
                break
            inp = tok.unsqueeze(1)
        return tokens, mask
