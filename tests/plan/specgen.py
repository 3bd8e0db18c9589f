"""Random valid operators for property tests of default schedules.

A *recipe* is a small JSON-able dict of choices (drawn by the hypothesis strategy
`recipes()`); `build(recipe)` turns it into an Op, shapes and an input maker. Recipes, not
Ops, cross process boundaries (the Triton interpreter runs in a subprocess of its own).

Families: pointwise chains (broadcast operands, powers, selects, -inf constants),
reductions over any subset of axes (a 0-d output when all), reduce-then-normalize over any
axis (a producer computed in its consumer's program), gathers, jagged segment reductions
and jagged elementwise ops (with empty segments), contractions with or without an
epilogue (thin ones too: matrix-vector), and several outputs of one op."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from kevolve.ir import builder as kb
from kevolve.ir.nodes import Op

SMALL_SIZES = (1, 2, 3, 5, 7, 13, 17, 31, 64, 129)  # sizes 1, primes, powers of two
LARGE_SIZES = (4096, 65536, 1 << 20)
UNARY = ("exp_neg_abs", "tanh", "sigmoid", "abs", "sqrt1", "neg", "square", "cube", "pow15")
BINARY = ("add", "mul", "sub", "max", "min", "where")
REDUCERS = ("sum", "max", "min", "mean")
KINDS = ("pointwise", "reduce", "normalize", "gather", "jagged_reduce", "jagged_pointwise",
         "contract", "multi")


@dataclass(frozen=True)
class Built:
    op: Op
    small: dict  # dims for correctness runs
    large: dict  # dims for legality at real sizes
    params: dict  # scalar params (max_len) for the small run


def _unary(name: str, x):
    return {"exp_neg_abs": lambda: kb.exp(-kb.abs_(x)), "tanh": lambda: kb.tanh(x),
            "sigmoid": lambda: kb.sigmoid(x), "abs": lambda: kb.abs_(x),
            "sqrt1": lambda: kb.sqrt(kb.abs_(x) + 1.0), "neg": lambda: -x,
            "square": lambda: x ** 2, "cube": lambda: x ** 3,
            "pow15": lambda: (kb.abs_(x) + 0.5) ** 1.5}[name]()


def _binary(name: str, a, b):
    return {"add": lambda: a + b, "mul": lambda: a * b, "sub": lambda: a - b,
            "max": lambda: kb.maximum(a, b), "min": lambda: kb.minimum(a, b),
            "where": lambda: kb.where(a > 0.0, a, b)}[name]()


def _reduce(name: str, body, over, count):
    if name == "mean":
        return kb.sum_(body, over=over) / kb.cast(count, kb.f32)
    return {"sum": kb.sum_, "max": kb.max_, "min": kb.min_}[name](body, over=over)


def build(r: dict) -> Built:
    return globals()[f"_build_{r['kind']}"](r)


def _dims(n: int, r: dict) -> tuple[list, dict, dict]:
    names = ["D0", "D1", "D2"][:n]
    ds = [kb.dims(x) for x in names]
    small = {x: r["sizes"][k] for k, x in enumerate(names)}
    large = {x: r["large"][k] for k, x in enumerate(names)}
    return ds, small, large


def _build_pointwise(r):
    n = r["rank"]
    ds, small, large = _dims(n, r)
    x = kb.input("x", tuple(ds), kb.f32)
    bshape = tuple(ds[-1:]) if r["broadcast"] else tuple(ds)
    y = kb.input("y", bshape, kb.f32)
    ax = kb.axes(" ".join(f"a{k}" for k in range(n)), *ds)
    v = x[ax]
    for u in r["unary"]:
        v = _unary(u, v)
    yv = y[ax[-1]] if r["broadcast"] else y[ax]
    v = _binary(r["binary"], v, yv)
    if r["neg_inf"]:
        v = kb.maximum(v, kb.const(float("-inf"), kb.f32))
    out = kb.compute("out", ax, v)
    return Built(kb.op("pw", inputs=[x, y], outputs=[out]), small, large, {})


def _build_reduce(r):
    n = r["rank"]
    ds, small, large = _dims(n, r)
    x = kb.input("x", tuple(ds), kb.f32)
    red = sorted(set(r["over"]))
    keep = [k for k in range(n) if k not in red]
    sp = kb.axes(" ".join(f"a{k}" for k in keep), *[ds[k] for k in keep]) if keep else ()
    rd = [kb.reduce_axis(f"r{k}", ds[k]) for k in red]
    idx, si, ri = [], iter(sp), iter(rd)
    for k in range(n):
        idx.append(next(ri) if k in red else next(si))
    body = x[tuple(idx)]
    if r["prologue"]:
        body = _unary(r["prologue"], body)
    count = 1
    for k in red:
        count = ds[k] * count if count != 1 else ds[k]
    v = _reduce(r["reducer"], body, tuple(rd), count)
    if r["epilogue"]:
        v = v * 0.5 + 1.0
    out = kb.compute("out", tuple(sp), v)
    return Built(kb.op("red", inputs=[x], outputs=[out]), small, large, {})


def _build_normalize(r):
    n = r["rank"]
    ds, small, large = _dims(n, r)
    x = kb.input("x", tuple(ds), kb.f32)
    a = r["over"][0] % n
    ax = kb.axes(" ".join(f"a{k}" for k in range(n)), *ds)
    keep = [ax[k] for k in range(n) if k != a]
    rk = kb.reduce_axis("r", ds[a])
    ridx = tuple(rk if k == a else ax[k] for k in range(n))
    stat = kb.compute("stat", tuple(keep), _reduce(r["reducer"], x[ridx], rk, ds[a]))
    v = x[ax] - stat[tuple(keep)] if r["reducer"] != "sum" else \
        x[ax] / (kb.abs_(stat[tuple(keep)]) + 1.0)
    out = kb.compute("out", ax, v)
    return Built(kb.op("norm", inputs=[x], outputs=[out]), small, large, {})


def _build_gather(r):
    ds, small, large = _dims(2, r)
    V, D = ds
    N = kb.dims("N")
    small["N"], large["N"] = r["sizes"][2], r["large"][2]
    table = kb.input("table", (V, D), kb.f32)
    idx = kb.input("idx", (N,), kb.i64)
    n, d = kb.axes("n d", N, D)
    v = table[idx[n], d]
    if r["unary"]:
        v = _unary(r["unary"][0], v)
    out = kb.compute("out", (n, d), v)
    return Built(kb.op("gather", inputs=[table, idx], outputs=[out]), small, large, {})


def _jagged_inputs(r):
    T, B, D = kb.dims("T B D")
    values = kb.input("values", (T, D), kb.f32)
    offsets = kb.input("offsets", (B + 1,), kb.i64)
    small = {"B": r["sizes"][0], "D": r["sizes"][1], "max_len": r["max_len"]}
    large = {"B": r["large"][0], "D": min(r["large"][1], 512), "max_len": 256,
             "T": r["large"][0] * 128}
    return T, B, D, values, offsets, small, large


def _build_jagged_reduce(r):
    T, B, D, values, offsets, small, large = _jagged_inputs(r)
    b, d = kb.axes("b d", B, D)
    ml = kb.param("max_len")
    l_ = kb.jagged_axis("l", start=offsets[b], end=offsets[b + 1], max_extent=ml, reduce=True)
    body = values[l_, d]
    if r["prologue"]:
        body = _unary(r["prologue"], body)
    cnt = kb.maximum(offsets[b + 1] - offsets[b], 1)
    if r["reducer"] == "mean":
        v = kb.sum_(body, over=l_) / kb.cast(cnt, kb.f32)
    else:
        v = _reduce(r["reducer"], body, l_, None)
    out = kb.compute("out", (b, d), v)
    return Built(kb.op("jred", inputs=[values, offsets], outputs=[out]), small, large,
                 {"max_len": r["max_len"]})


def _build_jagged_pointwise(r):
    T, B, D, values, offsets, small, large = _jagged_inputs(r)
    dense = kb.input("dense", (B, kb.param("max_len"), D), kb.f32)
    b, d = kb.axes("b d", B, D)
    ml = kb.param("max_len")
    l_ = kb.jagged_axis("l", start=offsets[b], end=offsets[b + 1], max_extent=ml)
    v = _binary(r["binary"], values[l_, d], dense[b, l_ - offsets[b], d])
    out = kb.compute("out", (b, l_, d), v, shape=(T, D), store=(l_, d))
    return Built(kb.op("jpw", inputs=[values, offsets, dense], outputs=[out]), small, large,
                 {"max_len": r["max_len"]})


def _build_contract(r):
    ds, small, large = _dims(3, r)
    M, K, N = ds
    if r["thin"]:
        small["D2"] = large["D2"] = 1
    dt = kb.bf16 if r["bf16"] else kb.f32
    A = kb.input("A", (M, K), dt)
    W = kb.input("W", (K, N), dt)
    i, j = kb.axes("i j", M, N)
    k = kb.reduce_axis("k", K)
    a, w = A[i, k], W[k, j]
    if r["bf16"]:
        a, w = kb.cast(a, kb.f32), kb.cast(w, kb.f32)
    acc = kb.sum_(a * w, over=k)
    ins = [A, W]
    if r["epilogue"]:
        bias = kb.input("bias", (N,), kb.f32)
        ins.append(bias)
        acc = acc * 0.5 + bias[j]
    out = kb.compute("out", (i, j), acc, dtype=dt)
    return Built(kb.op("mm", inputs=ins, outputs=[out]), small, large, {})


def _build_multi(r):
    ds, small, large = _dims(2, r)
    M, N = ds
    x = kb.input("x", (M, N), kb.f32)
    res = kb.input("res", (M, N), kb.f32)
    i, j = kb.axes("i j", M, N)
    k = kb.reduce_axis("k", N)
    h = kb.compute("h", (i, j), x[i, j] + res[i, j])
    ms = kb.compute("ms", (i,), kb.sum_(h[i, k] * h[i, k], over=k) / kb.cast(N, kb.f32))
    y = kb.compute("y", (i, j), h[i, j] * kb.rsqrt(ms[i] + 1e-5))
    return Built(kb.op("addnorm", inputs=[x, res], outputs=[h, y]), small, large, {})


def recipes():
    """The hypothesis strategy over recipes."""
    from hypothesis import strategies as st

    sizes = st.lists(st.sampled_from(SMALL_SIZES), min_size=3, max_size=3)
    large = st.lists(st.sampled_from(LARGE_SIZES), min_size=3, max_size=3)
    unary = st.lists(st.sampled_from(UNARY), max_size=3)
    opt_unary = st.one_of(st.just(""), st.sampled_from(UNARY))
    common = {"sizes": sizes, "large": large}
    fam = {
        "pointwise": {"rank": st.integers(1, 3), "unary": unary, "broadcast": st.booleans(),
                      "binary": st.sampled_from(BINARY), "neg_inf": st.booleans()},
        "reduce": {"rank": st.integers(1, 3), "over": st.lists(st.integers(0, 2), min_size=1,
                                                                max_size=3),
                   "reducer": st.sampled_from(REDUCERS), "prologue": opt_unary,
                   "epilogue": st.booleans()},
        "normalize": {"rank": st.integers(1, 3), "over": st.lists(st.integers(0, 2),
                                                                   min_size=1, max_size=1),
                      "reducer": st.sampled_from(("sum", "max"))},
        "gather": {"unary": st.lists(st.sampled_from(UNARY), max_size=1)},
        "jagged_reduce": {"reducer": st.sampled_from(REDUCERS), "prologue": opt_unary,
                          "max_len": st.sampled_from((1, 3, 7, 20))},
        "jagged_pointwise": {"binary": st.sampled_from(BINARY),
                             "max_len": st.sampled_from((1, 3, 7, 20))},
        "contract": {"thin": st.booleans(), "bf16": st.booleans(), "epilogue": st.booleans()},
        "multi": {},
    }

    def one(kind):
        extra = dict(fam[kind])
        if kind == "reduce":
            # reduce axes must exist: drawn as positions below the rank
            return st.fixed_dictionaries({"kind": st.just(kind), **common, **extra}).map(
                lambda r: {**r, "over": [o % r["rank"] for o in r["over"]]})
        return st.fixed_dictionaries({"kind": st.just(kind), **common, **extra})

    return st.sampled_from(KINDS).flatmap(one)


def make_inputs(built: Built, rng) -> dict[str, np.ndarray]:
    """Random inputs at `built.small`: normal floats, in-range gather indices, offsets with
    an empty segment and one at max_len (values sized to the offsets)."""
    from kevolve.ir.interp import eval_int

    op, dims, params = built.op, dict(built.small), built.params
    out: dict[str, np.ndarray] = {}
    names = {b.name for b in op.inputs}
    if "offsets" in names:
        nb, cap = dims["B"], params["max_len"]
        lens = rng.integers(0, cap + 1, size=nb)
        lens[rng.integers(0, nb)] = 0
        lens[rng.integers(0, nb)] = cap
        out["offsets"] = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
        dims["T"] = int(out["offsets"][-1])
    for b in op.inputs:
        if b.name in out:
            continue
        shape = tuple(eval_int(e, {**dims, **params}) for e in b.shape)
        if b.name == "idx":
            out[b.name] = rng.integers(0, dims["D0"], size=shape).astype(np.int64)
            continue
        x = rng.standard_normal(shape).astype(np.float32)
        if b.dtype.name == "bf16":
            from kevolve.ops.base import round_bf16
            x = round_bf16(x)
        out[b.name] = x
    return out


def lowering_dims(built: Built, which: str) -> dict:
    """Dims (and params) to lower for: the small run's, or the large legality shapes."""
    d = dict(built.small if which == "small" else built.large)
    if which == "small" and "B" in d and "T" not in d:
        d["T"] = d["B"] * d["max_len"]  # a bound: lowering only needs the shape class
    return d
