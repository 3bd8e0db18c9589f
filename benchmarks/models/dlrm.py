"""A DLRM-style ranking model in plain PyTorch: sparse features pooled by embedding bags,
dense features through a bottom MLP, pairwise dot interaction, top MLP.

Sizes follow production DLRMs (tables of millions of rows, dimension 128); `scale` divides
the table rows for machines without the memory (the CPU tests use a small scale).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn


@dataclass(frozen=True)
class DLRMConfig:
    rows: tuple[int, ...] = (4_000_000, 2_000_000, 1_000_000, 1_000_000, 500_000, 100_000,
                             50_000, 10_000)
    caps: tuple[int, ...] = (32, 16, 64, 8, 32, 4, 16, 1)  # longest bag per table
    dim: int = 128
    num_dense: int = 13
    bottom: tuple[int, ...] = (512, 256)
    top: tuple[int, ...] = (1024, 1024, 512, 256)

    def scaled(self, scale: int) -> DLRMConfig:
        from dataclasses import replace
        return replace(self, rows=tuple(max(r // scale, 8) for r in self.rows))


def mlp(sizes: list[int], last_act: bool) -> nn.Sequential:
    layers: list[nn.Module] = []
    for k in range(len(sizes) - 1):
        layers.append(nn.Linear(sizes[k], sizes[k + 1]))
        if k < len(sizes) - 2 or last_act:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


class DotInteraction(nn.Module):
    """Z[b] = the strict lower triangle of X[b] X[b]^T, flattened: [B, F(F-1)/2]."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        f = x.shape[1]
        z = torch.bmm(x, x.transpose(1, 2))
        li, lj = torch.tril_indices(f, f, offset=-1, device=x.device)
        return z[:, li, lj]


class DLRM(nn.Module):
    def __init__(self, cfg: DLRMConfig):
        super().__init__()
        self.cfg = cfg
        self.embeddings = nn.ModuleList(
            nn.EmbeddingBag(r, cfg.dim, mode="sum", include_last_offset=True)
            for r in cfg.rows)
        for e in self.embeddings:
            nn.init.uniform_(e.weight, -0.05, 0.05)
        self.bottom = mlp([cfg.num_dense, *cfg.bottom, cfg.dim], last_act=True)
        self.interaction = DotInteraction()
        f = len(cfg.rows) + 1
        self.top = mlp([cfg.dim + f * (f - 1) // 2, *cfg.top, 1], last_act=False)

    def forward(self, dense, indices, offsets):
        x = self.bottom(dense)
        pooled = [e(i, o) for e, i, o in zip(self.embeddings, indices, offsets, strict=True)]
        feats = torch.stack([x, *pooled], dim=1)
        z = self.interaction(feats)
        return self.top(torch.cat([x, z], dim=1)).squeeze(1)
