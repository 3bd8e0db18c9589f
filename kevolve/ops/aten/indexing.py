"""Indexing: gather, index_select, take, embedding, embedding_bag (sum, mean, max over
FBGEMM-style offsets), scatter_add, index_add and bincount, masked_fill, one_hot. A load
inside an index is a gather; a scatter-add is an accumulating store (`accumulate="sum"`):
each source adds into the element its index names, O(sources) work however the indices
repeat."""

from __future__ import annotations

from ...ir.builder import (
    axes,
    cast,
    compute,
    const,
    dims,
    eq,
    f32,
    i64,
    input,
    jagged_axis,
    max_,
    maximum,
    ne,
    op,
    param,
    sum_,
    where,
)
from ..spec import domain
from ._entry import at_least, entry


def _ops():
    M, N, K = dims("M N K")
    out = []
    x = input("x", (M, N), f32)
    idx = input("index", (M, K), i64)
    i, k = axes("i k", M, K)
    out.append((op("gather", inputs=[x, idx], outputs=[compute(
        "y", (i, k), x[i, idx[i, k]])]),
        lambda t, p: __import__("torch").gather(t["x"], 1, t["index"]), None))
    idx0 = input("index", (K, N), i64)
    k0, j0 = axes("k j", K, N)
    out.append((op("gather_dim0", inputs=[x, idx0], outputs=[compute(
        "y", (k0, j0), x[idx0[k0, j0], j0])]),
        lambda t, p: __import__("torch").gather(t["x"], 0, t["index"]), None))
    iv = input("index", (K,), i64)
    kk, jj = axes("k j", K, N)
    out.append((op("index_select", inputs=[x, iv], outputs=[compute(
        "y", (kk, jj), x[iv[kk], jj])]), lambda t, p: t["x"].index_select(0, t["index"]), None))
    ii, kc = axes("i k", M, K)
    out.append((op("index_select_dim1", inputs=[x, iv], outputs=[compute(
        "y", (ii, kc), x[ii, iv[kc]])]), lambda t, p: t["x"].index_select(1, t["index"]), None))
    V, D, B, S = dims("V D B S")
    table = input("weight", (V, D), f32)
    ids = input("input", (B,), i64)
    b, d = axes("b d", B, D)
    out.append((op("embedding", inputs=[ids, table], outputs=[compute(
        "y", (b, d), table[ids[b], d])]), "F.embedding", None))
    ids2 = input("input", (B, S), i64)
    b2, s2, d2 = axes("b s d", B, S, D)
    out.append((op("embedding_2d", inputs=[ids2, table], outputs=[compute(
        "y", (b2, s2, d2), table[ids2[b2, s2], d2])]), "F.embedding", None))
    # scatter-add along dim 1 and index_add along dim 0: the sources add into a buffer
    # that starts at 0 (one kernel, atomics), then a pointwise stage adds x
    src = input("src", (M, K), f32)
    i4, r4 = axes("i r", M, K)
    sc = compute("scattered", (i4, r4), src[i4, r4], store=(i4, idx[i4, r4]), shape=(M, N),
                 accumulate="sum")
    ic, c = axes("i c", M, N)
    out.append((op("scatter_add", inputs=[x, idx, src], outputs=[compute(
        "y", (ic, c), x[ic, c] + sc[ic, c])]),
        lambda t, p: __import__("torch").scatter_add(t["x"], 1, t["index"], t["src"]), None))
    src0 = input("source", (K, N), f32)
    r5, j5 = axes("r j", K, N)
    added = compute("added", (r5, j5), src0[r5, j5], store=(iv[r5], j5), shape=(M, N),
                    accumulate="sum")
    v0, j1 = axes("v j", M, N)
    out.append((op("index_add", inputs=[x, iv, src0], outputs=[compute(
        "y", (v0, j1), x[v0, j1] + added[v0, j1])]),
        lambda t, p: t["x"].index_add(0, t["index"], t["source"]), None))
    # a histogram of K labels into C bins (C >= every label), counted as int64 like torch
    C2 = param("C")
    lab2 = input("input", (K,), i64)
    (k6,) = axes("k", K)
    out.append((op("bincount", inputs=[lab2], outputs=[compute(
        "y", (k6,), const(1, i64), store=(lab2[k6],), shape=(C2,), accumulate="sum")]),
        lambda t, p: __import__("torch").bincount(t["input"], minlength=p["C"]), None))
    mask = input("mask", (M, N), f32)
    i3, j3 = axes("i j", M, N)
    out.append((op("masked_fill", inputs=[x, mask], outputs=[compute(
        "y", (i3, j3), where(ne(mask[i3, j3], 0.0), -1.5, x[i3, j3]))]),
        lambda t, p: t["x"].masked_fill(t["mask"] != 0, -1.5),
        {"mask": domain(0.0, 1.0, integer=True)}))
    flat = input("index", (K,), i64)
    (kt,) = axes("k", K)
    out.append((op("take", inputs=[x, flat], outputs=[compute(
        "y", (kt,), x[flat[kt] // N, flat[kt] % N])]), "torch.take", None))
    C = param("C")
    lab = input("labels", (N,), i64)
    n1, c1 = axes("n c", N, C)
    out.append((op("one_hot", inputs=[lab], outputs=[compute(
        "y", (n1, c1), where(eq(lab[n1], c1), 1.0, 0.0))]),
        lambda t, p: __import__("torch").nn.functional.one_hot(t["labels"], p["C"]), None))
    return out


def embedding_bag_op(mode: str):
    V, D, T, B = dims("V D T B")
    table = input("weight", (V, D), f32)
    ind = input("input", (T,), i64)
    offsets = input("offsets", (B + 1,), i64)
    b, d = axes("b d", B, D)
    l_ = jagged_axis("l", start=offsets[b], end=offsets[b + 1], max_extent=param("max_len"),
                     reduce=True)
    row = table[ind[l_], d]
    if mode == "max":
        body = max_(row, over=l_)
    else:
        body = sum_(row, over=l_)
        if mode == "mean":
            body = body / cast(maximum(offsets[b + 1] - offsets[b], 1), f32)
    return op(f"embedding_bag_{mode}", inputs=[ind, table, offsets], outputs=[
        compute("y", (b, d), body)])


def _bag_ref(mode):
    def ref(t, p):
        import torch.nn.functional as F

        return F.embedding_bag(t["input"], t["weight"], t["offsets"], mode=mode,
                               include_last_offset=True)
    ref.__qualname__ = f"F.embedding_bag(mode={mode!r})"
    return ref


OPS = {}
for _o, _ref, _doms in _ops():
    OPS[_o.name] = entry(_o, _ref, inputs=_doms, edges=at_least(_o, {}))
for _m in ("sum", "mean", "max"):
    _o = embedding_bag_op(_m)
    OPS[_o.name] = entry(_o, _bag_ref(_m))

