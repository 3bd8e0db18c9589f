"""Gathers and bags: rows picked from a table by index, alone or summed into bags (FBGEMM's
layout: bag b is indices[offsets[b]:offsets[b + 1]], possibly empty)."""

from kevolve.ir.builder import (
    axes,
    compute,
    dims,
    f32,
    i64,
    input,
    jagged_axis,
    max_,
    op,
    param,
    sum_,
)
from kevolve.ops import define, lengths

BAGS = {"small": {"V": 11, "D": 5, "B": 7, "max_len": 6},
        "cpu": {"V": 100000, "D": 64, "B": 4096, "max_len": 64},
        "gpu": {"V": 1000000, "D": 128, "B": 65536, "max_len": 128}}

# -- F.embedding: out[n, d] = table[ids[n], d] ----------------------------------------------
N, V, D = dims("N V D")
ids = input("ids", (N,), i64)
table = input("table", (V, D), f32)
n, d = axes("n d", N, D)
out = compute("out", (n, d), table[ids[n], d])

EMBEDDING = define(op("embedding", inputs=[ids, table], outputs=[out]),
                   presets={"small": {"N": 9, "V": 11, "D": 5},
                            "cpu": {"N": 65536, "V": 100000, "D": 64},
                            "gpu": {"N": 1 << 20, "V": 1000000, "D": 128}},
                   reference="F.embedding", doc="out[n, :] = table[ids[n], :]")

# -- token + position embeddings: out[b, s, d] = tok[ids[b, s], d] + pos[s, d] ---------------
B, S, V, D = dims("B S V D")
ids = input("ids", (B, S), i64)
tok = input("tok", (V, D), f32)
pos = input("pos", (S, D), f32)
b, s, d = axes("b s d", B, S, D)
out = compute("out", (b, s, d), tok[ids[b, s], d] + pos[s, d])


def _tok_pos(t, _):
    return t["tok"][t["ids"]] + t["pos"]


TOKEN_POS_EMBEDDING = define(
    op("token_pos_embedding", inputs=[ids, tok, pos], outputs=[out]),
    presets={"small": {"B": 3, "S": 7, "V": 11, "D": 5},
             "cpu": {"B": 32, "S": 512, "V": 32000, "D": 128},
             "gpu": {"B": 64, "S": 2048, "V": 128000, "D": 1024}},
    reference=_tok_pos, doc="out = tok[ids] + pos")

# -- weighted embedding bag: sum of w[l] * table[indices[l]] over bag b ---------------------
V, D, T, B = dims("V D T B")
table = input("table", (V, D), f32)
indices = input("indices", (T,), i64)
offsets = input("offsets", (B + 1,), i64)
weights = input("weights", (T,), f32)
b, d = axes("b d", B, D)
l = jagged_axis("l", start=offsets[b], end=offsets[b + 1], max_extent=param("max_len"),
                reduce=True)
out = compute("out", (b, d), sum_(weights[l] * table[indices[l], d], over=l))


def _weighted_bag(t, _):
    import torch.nn.functional as F

    return F.embedding_bag(t["indices"], t["table"], t["offsets"][:-1], mode="sum",
                           per_sample_weights=t["weights"])


WEIGHTED_EMBEDDING_BAG = define(
    op("weighted_embedding_bag", inputs=[table, indices, offsets, weights], outputs=[out]),
    presets=BAGS, reference=_weighted_bag, inputs={"offsets": lengths("skewed")},
    doc="out[b, :] = sum_{l in bag b} weights[l] * table[indices[l], :]")

# -- max-pooled embedding bag (an empty bag gives 0, as F.embedding_bag's max mode does) ----
V, D, T, B = dims("V D T B")
table = input("table", (V, D), f32)
indices = input("indices", (T,), i64)
offsets = input("offsets", (B + 1,), i64)
b, d = axes("b d", B, D)
l = jagged_axis("l", start=offsets[b], end=offsets[b + 1], max_extent=param("max_len"),
                reduce=True)
out = compute("out", (b, d), max_(table[indices[l], d], over=l))


def _max_bag(t, _):
    import torch.nn.functional as F

    return F.embedding_bag(t["indices"], t["table"], t["offsets"][:-1], mode="max")


EMBEDDING_BAG_MAX = define(
    op("embedding_bag_max", inputs=[table, indices, offsets], outputs=[out]),
    presets=BAGS, reference=_max_bag, doc="out[b, :] = max_{l in bag b} table[indices[l], :]")

# -- embedding bag backward: the table's gradient is a scatter-add ---------------------------
# Every index of bag b adds the bag's output gradient into its table row; rows that several
# bags (or one bag twice) pick add up, rows nobody picks stay 0. An accumulating stage says
# so directly: one add per (index, column), however the indices repeat.
V, D, T, B = dims("V D T B")
grad_out = input("grad_out", (B, D), f32)
indices = input("indices", (T,), i64)
offsets = input("offsets", (B + 1,), i64)
b, d = axes("b d", B, D)
l = jagged_axis("l", start=offsets[b], end=offsets[b + 1], max_extent=param("max_len"))
grad_table = compute("grad_table", (b, l, d), grad_out[b, d], store=(indices[l], d),
                     shape=(V, D), accumulate="sum")


def _bag_backward(t, p):
    import torch

    off = t["offsets"]
    bag = torch.repeat_interleave(torch.arange(off.numel() - 1, device=off.device), off.diff())
    g = t["grad_out"]
    return torch.zeros(p["V"], g.shape[1], dtype=g.dtype, device=g.device).index_add_(
        0, t["indices"], g[bag])


EMBEDDING_BAG_BACKWARD = define(
    op("embedding_bag_backward", inputs=[grad_out, indices, offsets], outputs=[grad_table]),
    presets=BAGS, reference=_bag_backward, inputs={"offsets": lengths("skewed")},
    doc="grad_table[indices[l], :] += grad_out[b, :] for every l in bag b (a scatter-add)")
