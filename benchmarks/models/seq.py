"""A sequence-learning ranking model in plain PyTorch: each user's jagged history of events
(FBGEMM format: values [T, D] with offsets [B + 1], empty histories allowed) is embedded,
pooled by jagged multi-head attention (a softmax over each history), normed and fed with
the most recent events (jagged to padded dense; histories are newest first) and user
features through gelu MLPs.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn


@dataclass(frozen=True)
class SeqConfig:
    rows: int = 2_000_000   # event vocabulary
    dim: int = 128
    heads: int = 4
    max_len: int = 256      # longest history
    mean_len: float = 40.0
    recent: int = 32        # the newest events (first in a history) kept as a dense block
    recent_dim: int = 32
    num_user: int = 16
    hidden: tuple[int, ...] = (512, 256)

    def scaled(self, scale: int) -> SeqConfig:
        from dataclasses import replace
        return replace(self, rows=max(self.rows // scale, 8),
                       max_len=max(self.max_len // max(scale // 100, 1), self.recent))


def segment_ids(offsets: torch.Tensor, total: int) -> torch.Tensor:
    lengths = offsets[1:] - offsets[:-1]
    return torch.repeat_interleave(torch.arange(lengths.numel(), device=offsets.device),
                                   lengths, output_size=total)


class JaggedSoftmax(nn.Module):
    """Softmax of values [T, H] over each segment, per column."""

    def forward(self, values: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
        ids = segment_ids(offsets, values.shape[0])
        mx = torch.segment_reduce(values, "max", offsets=offsets, axis=0)
        e = torch.exp(values - mx[ids])
        s = torch.segment_reduce(e, "sum", offsets=offsets, axis=0)
        return e / s[ids]


class JaggedSum(nn.Module):
    """Sum of values [T, D] over each segment: [B, D] (0 for an empty segment)."""

    def forward(self, values: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
        return torch.segment_reduce(values, "sum", offsets=offsets, axis=0)


class JaggedToDense(nn.Module):
    """The first `max_len` rows of each segment as [B, max_len, D], zero padded."""

    def __init__(self, max_len: int):
        super().__init__()
        self.max_len = max_len

    def forward(self, values: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
        ids = segment_ids(offsets, values.shape[0])
        pos = torch.arange(values.shape[0], device=values.device) - offsets[ids]
        # rows past max_len land in one spare slot that is cut off (no data-dependent shape)
        out = values.new_zeros((offsets.numel() - 1, self.max_len + 1, values.shape[1]))
        out = out.index_put((ids, pos.clamp(max=self.max_len)), values)
        return out[:, :self.max_len]


class SeqModel(nn.Module):
    def __init__(self, cfg: SeqConfig):
        super().__init__()
        self.cfg = cfg
        self.events = nn.Embedding(cfg.rows, cfg.dim)
        nn.init.uniform_(self.events.weight, -0.05, 0.05)
        self.score = nn.Linear(cfg.dim, cfg.heads)
        self.softmax = JaggedSoftmax()
        self.pool = JaggedSum()
        self.recent_proj = nn.Linear(cfg.dim, cfg.recent_dim)
        self.to_dense = JaggedToDense(cfg.recent)
        self.recent_w = nn.Parameter(torch.randn(cfg.recent, cfg.recent_dim) / cfg.recent)
        self.user = nn.Linear(cfg.num_user, 64)
        width = cfg.dim + cfg.recent_dim + 64
        self.norm = nn.LayerNorm(width)
        layers: list[nn.Module] = []
        for a, b in zip((width, *cfg.hidden), cfg.hidden, strict=False):
            layers += [nn.Linear(a, b), nn.GELU()]
        layers.append(nn.Linear(cfg.hidden[-1], 1))
        self.mlp = nn.Sequential(*layers)

    def forward(self, events, offsets, user):
        v = self.events(events)                                    # [T, D]
        w = self.softmax(self.score(v), offsets)                   # [T, H]
        t, h = w.shape
        weighted = (v.view(t, h, -1) * w.unsqueeze(-1)).reshape(t, -1)
        pooled = self.pool(weighted, offsets)                      # [B, D]
        recent = self.to_dense(self.recent_proj(v), offsets)       # [B, L, r]
        recent = (recent * self.recent_w).sum(1)                   # [B, r]
        x = torch.cat([pooled, recent, torch.nn.functional.gelu(self.user(user))], dim=1)
        return self.mlp(self.norm(x)).squeeze(1)
