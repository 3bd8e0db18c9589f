"""Shared material for the schedule tests: the library ops at their small presets, three
hand-written ops that exercise corners the library does not (a producer stored transposed;
two softmaxes folded online in one program; an accumulating stage read by a pointwise one),
and backends that only declare caps."""

from __future__ import annotations

from functools import cache
from pathlib import Path

from kevolve import ops
from kevolve.backends.base import Backend, Caps
from kevolve.ir.builder import (
    axes,
    axis,
    compute,
    dims,
    exp,
    f32,
    i64,
    input,
    max_,
    op,
    reduce_axis,
    sum_,
)
from kevolve.ir.interp import bind_dims
from kevolve.ir.nodes import Op
from kevolve.plan.model import Plan

LIBRARY = tuple(ops.names())
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def opdef(name: str):
    """A library op by name, or an ATen catalog op by its bare name (cumsum_last)."""
    return ops.get(name) if name in LIBRARY else ops.resolve(f"aten.{name}")


@cache
def small(name: str) -> tuple[Op, dict[str, int]]:
    """(op, dims) of a library op at its `small` preset, or of one of the ops below."""
    if name in EXTRA:
        return EXTRA[name]
    d = opdef(name)
    case = d.case("small")
    o = d.op_for("small")
    return o, bind_dims(o, case.inputs, case.params)


def _transposed_store() -> Op:
    """`a` iterates (i, j) but stores at (j, i); `y` reads it back at its own (j, i)."""
    M, N = dims("M N")
    x = input("x", (M, N), f32)
    i, j = axes("i j", M, N)
    a = compute("a", (i, j), x[i, j] * 2.0, shape=(N, M), store=(j, i))
    y = compute("y", (j, i), a[j, i] + 1.0)
    return op("tstore", inputs=[x], outputs=[y])


def _two_softmax() -> Op:
    """Two independent max/sum pairs feeding one output (two online folds in one kernel)."""
    M, N = dims("M N")
    x = input("x", (M, N), f32)
    z = input("z", (M, N), f32)
    i, j = axes("i j", M, N)
    k = reduce_axis("k", N)
    m1 = compute("m1", (i,), max_(x[i, k], over=k))
    s1 = compute("s1", (i,), sum_(exp(x[i, k] - m1[i]), over=k))
    m2 = compute("m2", (i,), max_(z[i, k], over=k))
    s2 = compute("s2", (i,), sum_(exp(z[i, k] - m2[i]), over=k))
    y = compute("y", (i, j), exp(x[i, j] - m1[i]) / s1[i] + exp(z[i, j] - m2[i]) / s2[i])
    return op("two_softmax", inputs=[x, z], outputs=[y])


def _part_out() -> Op:
    """Two outputs: `y` reads `h` at its own axes, but only its first N - 1 columns."""
    M, N = dims("M N")
    x = input("x", (M, N), f32)
    i, j = axes("i j", M, N)
    jj = axis("jj", N - 1)
    h = compute("h", (i, j), x[i, j] * 2.0)
    y = compute("y", (i, jj), h[i, jj] + 1.0)
    return op("part_out", inputs=[x], outputs=[h, y])


def _example(ref: str) -> tuple[Op, dict[str, int]]:
    """A spec file under examples/ at its small preset."""
    d = ops.resolve(str(EXAMPLES / ref))
    case = d.case("small")
    o = d.op_for("small")
    return o, bind_dims(o, case.inputs, case.params)


def _index_add() -> Op:
    """`added` adds each source row into the row its index names (an accumulating store, a
    kernel of its own); `y` reads it back pointwise."""
    M, N, K = dims("M N K")
    x = input("x", (M, N), f32)
    idx = input("index", (K,), i64)
    src = input("source", (K, N), f32)
    r, j = axes("r j", K, N)
    added = compute("added", (r, j), src[r, j] * 2.0, store=(idx[r], j), shape=(M, N),
                    accumulate="sum")
    v, j2 = axes("v j", M, N)
    y = compute("y", (v, j2), x[v, j2] + added[v, j2])
    return op("index_add", inputs=[x, idx, src], outputs=[y])


EXTRA: dict[str, tuple[Op, dict[str, int]]] = {
    "tstore": (_transposed_store(), {"M": 3, "N": 5}),
    "index_add": (_index_add(), {"M": 5, "N": 7, "K": 11}),
    "two_softmax": (_two_softmax(), {"M": 4, "N": 64}),
    # several outputs in one kernel (compute_at of an output)
    "fused_add_rmsnorm": _example("norms.py:FUSED_ADD_RMSNORM"),
    "layernorm_stats": _example("norms.py:LAYERNORM_STATS"),
    "part_out": (_part_out(), {"M": 3, "N": 5}),
}
ALL = LIBRARY + tuple(EXTRA)


class CapsOnly(Backend):
    """A backend that only declares capabilities: enough for the third legality layer."""

    def __init__(self, name: str, caps: Caps):
        self.name = name
        self.caps = caps


# The limits the cpu and triton backends declare (kept here so these tests do not depend on
# importing a backend's compiler-facing module).
CPU_LIKE = CapsOnly("cpu", Caps("cpu", max_tile_elems=1 << 16))
GPU_LIKE = CapsOnly("triton", Caps("cuda", max_tile_elems=1 << 17, max_warps=32,
                                   bind_targets=frozenset({"grid", "threads"})))


def check_plan_shape(plan: Plan) -> None:
    """Structural invariants every lowered plan keeps, whatever the schedule."""
    written = [b for k in plan.kernels for b in k.writes]  # roots and outputs stored beside
    assert set(plan.op.outputs) <= set(written)
    # each buffer written by one kernel, but an accumulating one's zeroing kernel before it
    assert all(plan.op.stage(b).accumulate is not None for b in set(written)
               if written.count(b) > 1)
    assert all(s.stage.name in plan.op.outputs for k in plan.kernels for s in k.steps
               if s.store_out)
    for k in plan.kernels:
        names = [s.stage.name for s in k.steps]
        assert len(names) == len(set(names)), names
        assert k.steps[-1].is_root and k.steps[-1].stage.name == k.root.name
        assert not any(s.is_root for s in k.steps[:-1])
        loops = {lp.name for lp in k.loops}
        roles = [lp.role for lp in k.loops]
        assert roles == sorted(roles, key=lambda r: r != "grid"), "grid loops come first"
        for s in k.steps:
            rl = {lp.name for lp in s.reduce_loops}
            for m in s.spatial:
                assert set(m.loops) <= loops, (s.stage.name, m.loops)
            for m in s.reduce:
                assert set(m.loops) <= rl
        blocks = [lp for lp in k.loops if lp.role == "block"]
        assert sorted(lp.pos for lp in blocks) == list(range(len(blocks)))
        assert k.rank >= len(blocks)
