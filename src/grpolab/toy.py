"""A toy verifiable task and a stack of tiny autoregressive GRU policies for the GRPO demo.

Task ("secret-answer lookup"): prompt q in [0, P) has a secret answer digit a(q) drawn at random, so
prompts share no solution. A response is an answer digit, then free "scratch" digits, then EOS, at most
``max_len`` tokens. Reward = 1 if the first token equals a(q), else 0 (rule-based, verifiable). The
reward ignores everything after the answer, so response length is free of the reward: exactly the
setting where a loss aggregation's length bias can show (Dr. GRPO arXiv 2503.20783, §3.1).

Policy: prompt embedding as the GRU's initial state, token embeddings as inputs, a linear head over
digits + EOS. A trainable per-prompt ``prior`` added to the first position's logits plays the part of
a pretrained model's beliefs: initialised N(0, prior_scale), it makes the prompts' success
probabilities spread from near 0 to near 1 (how many groups start all-wrong, all-right or mixed is
measured in the demo, section a). EOS is not allowed as the first token (a response has an answer).

Batching: ``GRUPolicy`` holds S independent policies ("members", one per seed) stacked along a leading
dimension, so the seeds of one comparison train as one batched run (``bmm`` over members) instead of
S runs one after the other. Member s is initialised exactly as a lone policy of its seed would be, and
nothing mixes members: each has its own weights, samples and optimizer state.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

import torch
import torch.nn.functional as F
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

    prompts: (..., N), tokens: (..., N, T), mask: (..., N, T) (unused: the answer is always present),
    answers: (..., P) with the same leading dims (one answer table per member). Returns (..., N).
    """
    return (tokens[..., 0] == answers.gather(-1, prompts)).float()


def _member_init(task: ToyTask, seed: int, hidden: int, embed: int, prior_scale: float,
                 eos_bias: float) -> list[torch.Tensor]:
    """One member's initial weights, drawn exactly as the single-policy modules (and in their order)."""
    d = task.num_digits
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        prompt_embed = nn.Embedding(task.num_prompts, hidden)
        token_embed = nn.Embedding(d + 2, embed)
        gru = nn.GRU(embed, hidden, batch_first=True)
        head = nn.Linear(hidden, d + 1)
        prior = nn.Embedding(task.num_prompts, d + 1)
        with torch.no_grad():
            nn.init.normal_(prompt_embed.weight, std=0.5)
            nn.init.normal_(prior.weight, std=prior_scale)
            head.bias[d] = eos_bias  # sets the initial length distribution
    return [prompt_embed.weight, token_embed.weight, gru.weight_ih_l0.t(), gru.bias_ih_l0,
            gru.weight_hh_l0.t(), gru.bias_hh_l0, head.weight.t(), head.bias, prior.weight]


def _log_softmax(logits: torch.Tensor) -> torch.Tensor:
    """log_softmax over the last dim as x - logsumexp(x): for a last dim of 9, 3x faster on CPU than
    torch.log_softmax (whose kernel vectorises along that dim)."""
    return logits - torch.logsumexp(logits, dim=-1, keepdim=True)


class _Weights(NamedTuple):
    """Weights derived once per forward pass (see GRUPolicy._weights)."""

    gates: torch.Tensor  # (S, D+2, 3H): x W_ih + b_ih (+ the r, z parts of b_hh) for every input token
    out: torch.Tensor  # (S, H, 3H + D+1): [W_hh | W_head]
    b_hn: torch.Tensor  # (S, 1, H)
    b_head: torch.Tensor  # (S, 1, D+1)


PARAM_NAMES = ("prompt_embed", "token_embed", "w_ih", "b_ih", "w_hh", "b_hh", "w_head", "b_head", "prior")


class GRUPolicy(nn.Module):
    """S tiny autoregressive policies, one per seed. Vocabulary: digits 0..D-1, EOS = D, BOS = D+1 (input).

    Every parameter has a leading member dimension S: prompt_embed (S, P, H), token_embed (S, D+2, E),
    w_ih (S, E, 3H), w_hh (S, H, 3H), b_ih, b_hh (S, 3H), w_head (S, H, D+1), b_head (S, D+1),
    prior (S, P, D+1). The GRU cell is PyTorch's (gates r, z, n; arXiv 1406.1078), written out with
    ``bmm`` so that the S members run as one batch.
    """

    def __init__(self, task: ToyTask, seeds: Sequence[int] = (0,), hidden: int = 64, embed: int = 32,
                 prior_scale: float = 2.0, eos_bias: float = -1.0):
        super().__init__()
        if not seeds:
            raise ValueError("GRUPolicy needs at least one seed")
        self.task, self.hidden, self.num_members = task, hidden, len(seeds)
        members = [_member_init(task, s, hidden, embed, prior_scale, eos_bias) for s in seeds]
        for i, name in enumerate(PARAM_NAMES):
            self.register_parameter(name, nn.Parameter(torch.stack([m[i].detach() for m in members])))

    # ---- pieces of the GRU -------------------------------------------------------------------------
    def _lookup(self, table: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
        """Rows of a per-member table (S, R, C) at index (S, ...) -> (S, ..., C)."""
        s, r = table.shape[:2]
        offsets = (torch.arange(s, device=index.device) * r).view((s,) + (1,) * (index.dim() - 1))
        return F.embedding(index + offsets, table.reshape(s * r, -1))

    def _weights(self) -> _Weights:
        """Per-pass weights: the input gates of every token (a (S, D+2, 3H) table: the vocabulary is
        tiny, so x W_ih + b_ih is looked up, never multiplied), and [W_hh | W_head] as one matrix so
        one ``bmm`` per step gives both this step's logits and the next step's hidden gates."""
        hid = self.hidden
        b_rz, b_hn = self.b_hh.split([2 * hid, hid], dim=-1)
        bias = self.b_ih + F.pad(b_rz, (0, hid))  # r, z biases merge; b_hn stays inside r * (...)
        gates = torch.baddbmm(bias.unsqueeze(1), self.token_embed, self.w_ih)  # (S, D+2, 3H)
        return _Weights(gates, torch.cat([self.w_hh, self.w_head], dim=-1), b_hn.unsqueeze(1),
                        self.b_head.unsqueeze(1))

    def _project(self, w: _Weights, h: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """h (S, n, H) -> hidden gates h W_hh (S, n, 3H) for the next step, logits (S, n, D+1)."""
        gh, logits = torch.bmm(h, w.out).split([3 * self.hidden, self.task.num_digits + 1], dim=-1)
        return gh, logits + w.b_head

    def _cell(self, w: _Weights, gi: torch.Tensor, gh: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
        """One GRU step (PyTorch's gate equations): gi, gh (S, n, 3H), h (S, n, H) -> new h (S, n, H)."""
        hid = self.hidden
        gi_rz, gi_n = gi.split([2 * hid, hid], dim=-1)
        gh_rz, gh_n = gh.split([2 * hid, hid], dim=-1)
        r, z = torch.sigmoid(gi_rz + gh_rz).chunk(2, dim=-1)
        n = torch.sigmoid(2 * (gi_n + r * (gh_n + w.b_hn))) * 2 - 1  # tanh, 3x faster on CPU than torch.tanh
        return n + z * (h - n)  # = (1 - z) * n + z * h

    def _first_position(self, logits: torch.Tensor, prompts: torch.Tensor) -> torch.Tensor:
        """Logits of the answer position: add the prompt prior and forbid EOS. (S, n, D+1)."""
        logits = logits + self._lookup(self.prior, prompts)
        eos_mask = torch.zeros(logits.shape[-1], dtype=torch.bool, device=logits.device)
        eos_mask[self.task.eos] = True
        return logits.masked_fill(eos_mask, float("-inf"))

    def _start(self, w: _Weights, prompts: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Initial state h0 = prompt embedding (S, N, H) and its hidden gates (S, N, 3H)."""
        h = self._lookup(self.prompt_embed, prompts)
        return h, self._project(w, h)[0]

    # ---- what the training loop uses ---------------------------------------------------------------
    def first_logits(self, prompts: torch.Tensor) -> torch.Tensor:
        """Logits (S, N, D+1) of the first (answer) token for prompts (S, N); EOS masked to -inf."""
        w = self._weights()
        h, gh = self._start(w, prompts)
        h = self._cell(w, self._lookup(w.gates, torch.full_like(prompts, self.task.bos)), gh, h)
        return self._first_position(self._project(w, h)[1], prompts)

    def success_prob(self, prompts: torch.Tensor, answers: torch.Tensor) -> torch.Tensor:
        """Exact P(reward = 1 | prompt), (S, N): softmax of the first logits at a(q). answers: (S, P)."""
        probs = _log_softmax(self.first_logits(prompts)).exp()  # (S, N, D+1)
        return probs.gather(-1, answers.gather(-1, prompts).unsqueeze(-1)).squeeze(-1)

    def log_probs(self, prompts: torch.Tensor, tokens: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Teacher-forced log pi(token_t | prompt, tokens_<t) on the valid tokens; 0 where mask is False.

        prompts: (S, N), tokens: (S, N, T), mask: (S, N, T), a prefix per row -> (S, N, T).
        Packed: rows are sorted by length inside each member and step t runs only the first n_t rows,
        n_t = the most rows still alive at t in any member, so padding costs (almost) no compute.
        """
        s, n, t_max = tokens.shape
        sorted_len, order = torch.sort(mask.sum(-1), dim=1, descending=True, stable=True)  # (S, N)
        tok = tokens.gather(1, order.unsqueeze(-1).expand(-1, -1, t_max))
        pr = prompts.gather(1, order)
        envelope = sorted_len.max(dim=0).values  # (N,) non-increasing
        alive = (envelope.unsqueeze(1) > torch.arange(t_max, device=tokens.device)).sum(0).tolist()  # n_t
        inputs = torch.cat([torch.full_like(tok[:, :, :1], self.task.bos), tok[:, :, :-1]], dim=2)
        w = self._weights()
        h, gh = self._start(w, pr)
        columns = []
        for t in range(t_max):
            rows = alive[t]
            if rows == 0:
                columns.append(h.new_zeros((s, n)))
                continue
            h = self._cell(w, self._lookup(w.gates, inputs[:, :rows, t]), gh[:, :rows], h[:, :rows])
            gh, logits = self._project(w, h)  # (S, rows, 3H), (S, rows, D+1)
            if t == 0:
                logits = self._first_position(logits, pr[:, :rows])
            logp = _log_softmax(logits).gather(-1, tok[:, :rows, t:t + 1]).squeeze(-1)
            columns.append(F.pad(logp, (0, n - rows)))
        packed = torch.stack(columns, dim=2)
        packed = torch.where(mask.gather(1, order.unsqueeze(-1).expand(-1, -1, t_max)), packed, 0.0)
        inverse = torch.argsort(order, dim=1)
        return packed.gather(1, inverse.unsqueeze(-1).expand(-1, -1, t_max))  # (S, N, T), original order

    @torch.no_grad()
    def sample(self, prompts: torch.Tensor, uniforms: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Sample one response per prompt for every member. prompts: (S, N); uniforms: (S, N, T) in [0, 1).

        Token t of a row is drawn by inverse-CDF from uniforms[..., t] (one uniform per position,
        drawn by the caller from that member's own generator, so a member's samples do not depend on
        the other members). Returns tokens (S, N, T), mask (S, N, T): the response's tokens including
        its EOS; padding after EOS is EOS with mask 0. A response that reaches max_len without EOS is
        cut there (its length is max_len).
        """
        s, n = prompts.shape
        t_max, eos = self.task.max_len, self.task.eos
        tokens = torch.full((s, n, t_max), eos, dtype=torch.long, device=prompts.device)
        mask = torch.zeros((s, n, t_max), dtype=torch.bool, device=prompts.device)
        alive = torch.ones((s, n), dtype=torch.bool, device=prompts.device)
        w = self._weights()
        h, gh = self._start(w, prompts)
        inp = torch.full_like(prompts, self.task.bos)
        for t in range(t_max):
            h = self._cell(w, self._lookup(w.gates, inp), gh, h)
            gh, logits = self._project(w, h)
            if t == 0:
                logits = self._first_position(logits, prompts)
            cdf = _log_softmax(logits).exp().cumsum(dim=-1)  # (S, N, D+1)
            x = uniforms[:, :, t:t + 1] * cdf[..., -1:]
            tok = (cdf <= x).sum(dim=-1).clamp(max=eos - 1 if t == 0 else eos)  # (S, N)
            tok = torch.where(alive, tok, torch.full_like(tok, eos))
            tokens[:, :, t] = tok
            mask[:, :, t] = alive
            alive = alive & (tok != eos)
            if not bool(alive.any()):
                break
            inp = tok
        return tokens, mask


def parameter_count(policy: GRUPolicy) -> int:
    """Parameters of one member (the size of one policy)."""
    return sum(p.numel() for p in policy.parameters()) // policy.num_members


def member_uniforms(generators: Sequence[torch.Generator], n: int, t: int, device: torch.device) -> torch.Tensor:
    """(S, n, t) uniforms in [0, 1), member s from generators[s]."""
    return torch.stack([torch.rand((n, t), generator=g, device=device) for g in generators])

