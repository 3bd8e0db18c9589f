"""Synthetic batches for the reference ranking models, generated on the device.

Lengths are skewed the way production features are: most bags and histories are short, a
few are long, some are empty (a user with no history, a feature with no value). Ids are
power-law distributed over the table (a few hot rows get most lookups), which is what
makes an embedding backward unbalanced.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


def skewed_lengths(g: torch.Generator, n: int, cap: int, mean: float, p_empty: float,
                   device) -> torch.Tensor:
    """Lognormal lengths with the given mean, capped at `cap`, a fraction `p_empty` zero."""
    sigma = 1.0
    mu = torch.log(torch.tensor(max(mean, 1e-3))) - sigma ** 2 / 2
    z = torch.randn(n, generator=g, device=device)
    lens = torch.exp(mu.to(device) + sigma * z).round().clamp(0, cap).long()
    empty = torch.rand(n, generator=g, device=device) < p_empty
    return torch.where(empty, torch.zeros_like(lens), lens)


def offsets_of(lengths: torch.Tensor) -> torch.Tensor:
    return torch.cat([lengths.new_zeros(1), torch.cumsum(lengths, 0)])


def power_law_ids(g: torch.Generator, n: int, rows: int, device, alpha: float = 3.0
                  ) -> torch.Tensor:
    """Ids in [0, rows): u**alpha * rows concentrates lookups on the first rows."""
    u = torch.rand(n, generator=g, device=device)
    return (u.pow(alpha) * rows).long().clamp_(max=rows - 1)


@dataclass(frozen=True)
class DLRMBatch:
    dense: torch.Tensor              # [B, num_dense]
    indices: tuple[torch.Tensor, ...]
    offsets: tuple[torch.Tensor, ...]  # [B + 1] each (include_last_offset)
    labels: torch.Tensor             # [B]

    def args(self):
        return self.dense, list(self.indices), list(self.offsets)


@dataclass(frozen=True)
class SeqBatch:
    events: torch.Tensor     # [T] event ids
    offsets: torch.Tensor    # [B + 1]
    user: torch.Tensor       # [B, num_user]
    labels: torch.Tensor

    def args(self):
        return self.events, self.offsets, self.user


def dlrm_batch(cfg, batch: int, seed: int, device) -> DLRMBatch:
    g = torch.Generator(device=device).manual_seed(seed)
    idx, off = [], []
    for rows, cap in zip(cfg.rows, cfg.caps, strict=True):
        lens = skewed_lengths(g, batch, cap, mean=max(cap / 4, 1.0), p_empty=0.05,
                              device=device)
        o = offsets_of(lens)
        idx.append(power_law_ids(g, int(o[-1]), rows, device))
        off.append(o)
    dense = torch.randn(batch, cfg.num_dense, generator=g, device=device)
    labels = (torch.rand(batch, generator=g, device=device) < 0.1).float()
    return DLRMBatch(dense, tuple(idx), tuple(off), labels)


def seq_batch(cfg, batch: int, seed: int, device) -> SeqBatch:
    g = torch.Generator(device=device).manual_seed(seed)
    lens = skewed_lengths(g, batch, cfg.max_len, mean=cfg.mean_len, p_empty=0.1,
                          device=device)
    off = offsets_of(lens)
    events = power_law_ids(g, int(off[-1]), cfg.rows, device)
    user = torch.randn(batch, cfg.num_user, generator=g, device=device)
    labels = (torch.rand(batch, generator=g, device=device) < 0.1).float()
    return SeqBatch(events, off, user, labels)
