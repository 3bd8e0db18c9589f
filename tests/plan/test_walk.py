"""The shared plan walk (kevolve/plan/walk.py): grid decoding covers every program once,
the walk visits every step once in level order, and the module signature and tile sizes
say what the plan holds."""

from __future__ import annotations

import itertools
from dataclasses import replace

import pytest

from kevolve import ops
from kevolve.plan import lower
from kevolve.plan.walk import (
    KernelWalk,
    grid_decode,
    levels,
    module_signature,
    tile_sizes,
)
from kevolve.schedule import apply_trace, default_trace


def _plan(name: str, preset: str = "small"):
    d = ops.get(name)
    op, dims = d.op_for(preset), d.dims(preset)
    return lower(apply_trace(op, default_trace(op, dims)), dims)


def _decode(k, counts: list[int], pid: int) -> tuple[int, ...]:
    """Run grid_decode's Python spelling for one program id."""
    env = {"pid": pid}
    for var, value in grid_decode(k, [str(c) for c in counts], div="//", minimum="min"):
        env[var] = eval(value, {"min": min}, env)  # noqa: S307  (our own arithmetic)
    return tuple(env[f"g_{lp.name}"] for lp in k.grid)


@pytest.mark.parametrize("counts", [(1, 1), (8, 8), (5, 3), (17, 4), (3, 11)])
@pytest.mark.parametrize("group_m", [None, 1, 4, 8])
def test_grid_decode_reaches_every_program_once(counts, group_m):
    k = _plan("gemm_bias_gelu", "gpu").kernels[0]
    assert len(k.grid) == 2
    k = replace(k, group_m=group_m)
    got = [_decode(k, list(counts), p) for p in range(counts[0] * counts[1])]
    assert sorted(got) == list(itertools.product(range(counts[0]), range(counts[1])))


def test_grid_decode_groups_rows_for_l2_reuse():
    k = replace(_plan("gemm_bias_gelu", "gpu").kernels[0], group_m=4)
    first = [_decode(k, [8, 8], p) for p in range(8)]
    assert {a for a, _ in first} == {0, 1, 2, 3}  # 4 rows walk the first columns together
    assert {b for _, b in first} == {0, 1}


class Recorder(KernelWalk):
    def __init__(self, plan, k):
        super().__init__(plan, k)
        self.events: list[tuple[str, str]] = []

    def open_grid(self, out):
        self.events.append(("grid", ""))
        return out

    def context(self):
        return {}

    def axis_value(self, m, ctx, out):
        self.events.append(("axis", m.axis.name))

    def open_seq(self, lvl, m, stride, ctx, out):
        assert stride >= 1 and lvl.name in m.loops
        self.events.append(("open", lvl.name))
        inner: list = []
        out.append(inner)
        return inner

    def close_seq(self, lvl, body):
        self.events.append(("close", lvl.name))

    def step(self, st, ctx, out):
        self.events.append(("step", st.stage.name))


@pytest.mark.parametrize("name", ["softmax", "layernorm", "gemm_bias_gelu", "jagged_sum"])
def test_the_walk_visits_every_step_once_in_level_order(name):
    plan = _plan(name)
    for k in plan.kernels:
        r = Recorder(plan, k)
        r.walk()
        assert r.events[0] == ("grid", "")
        want = [st.stage.name for _, steps in levels(k) for st in steps]
        assert [n for e, n in r.events if e == "step"] == want
        assert sorted(want) == sorted(st.stage.name for st in k.steps)
        seq = [lp.name for lp in k.loops if lp.role == "seq"]
        assert [n for e, n in r.events if e == "open"] == seq
        assert [n for e, n in r.events if e == "close"] == seq
        grid_only = [n for e, n in r.events if e == "axis"]
        assert all(r.events.index(("axis", a)) < r.events.index(("step", want[0]))
                   for a in grid_only)


def test_module_signature_lists_buffers_scratch_dims_and_guards():
    for name in ops.names():
        plan = _plan(name)
        sig = module_signature(plan)
        op = plan.op
        assert sig.names == tuple([b.name for b in op.inputs] + list(op.outputs))
        assert sig.every == sig.names + tuple(plan.scratch)
        assert [b.name for b in sig.scratch_buffers()] == list(plan.scratch)
        assert list(sig.guards) == [g for k in plan.kernels for g in k.guards]


def test_tile_sizes_of_a_contraction():
    k = _plan("gemm_bias_gelu", "gpu").kernels[0]
    dot = next(st for st in k.steps if st.strategy == "dot")
    sizes = tile_sizes(k, dot)
    blocks = {lp.pos: lp.size for lp in k.loops if lp.role == "block"}
    assert {p: sizes[p] for p in blocks} == blocks
    assert sizes[None] == max(lp.size for lp in dot.reduce_loops if lp.role == "block")
