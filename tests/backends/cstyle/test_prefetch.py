"""The prefetch move: C fetches gathered rows ahead (guarded), other backends ignore it,
and results are unchanged."""

from __future__ import annotations

import pytest

import kevolve
import kevolve.api
from kevolve.evaluate import check as ev
from kevolve.ir.interp import bind_dims, run
from kevolve.ops import get
from kevolve.schedule import MoveError, Trace


def trace(distance: int) -> Trace:
    return Trace.make("embedding_bag", [
        {"m": "bind", "stage": "out", "axis": "b", "to": "grid"},
        {"m": "prefetch", "stage": "out", "buffer": "table", "distance": distance}])


@pytest.mark.parametrize("distance", [1, 8, 40])
def test_c_prefetches_gathered_rows_and_stays_correct(distance):
    d = get("embedding_bag")
    for shape in [d.shape("small"), *d.edge_shapes]:
        case = d.case(shape, distance)
        dims = bind_dims(d.op, case.inputs, case.params)
        src = kevolve.lower(d.op, trace(distance), "cpu", dims)
        assert "__builtin_prefetch(&p_table[" in src.text
        assert f"{distance})) < (d_T)" in src.text  # index loads stay in bounds
        k = kevolve.build(src)
        ins = ev.inputs_for(d.op, case.inputs)
        outs = ev.alloc_outputs(d.op, dims)
        k(ins, outs, case.params)
        chk = ev.compare(d.op, outs, run(d.op, case.inputs, case.params))
        assert chk.ok, chk.message


def test_tile_backends_ignore_prefetch():
    d = get("embedding_bag")
    dims = d.dims("small")
    plain = Trace.make("embedding_bag", [{"m": "bind", "stage": "out", "axis": "b",
                                          "to": "grid"}])
    for be in ("triton", "numba"):
        with_pf = kevolve.lower(d.op, trace(8), be, dims).text
        without = kevolve.lower(d.op, plain, be, dims).text
        assert "prefetch" not in with_pf
        assert with_pf == without


def test_prefetch_needs_a_gather():
    d = get("jagged_sum")
    bad = Trace.make("jagged_sum", [{"m": "prefetch", "stage": "out", "buffer": "values"}])
    with pytest.raises(MoveError) as e:
        kevolve.api.schedule(d.op, bad)
    assert e.value.code == "semantics.prefetch_not_gather" and e.value.move_index == 0
