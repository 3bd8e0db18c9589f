"""A reduce axis whose extent follows a jagged axis of its stage (a prefix sum within each
segment, tests/plan/specs/defects.py:segment_prefix), on every backend that runs here;
Triton's interpreter runs in a process of its own (opcheck.check_interpreted)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import opcheck
import pytest

from kevolve.backends.registry import get
from kevolve.ir.specfile import load_op

SPECS = Path(__file__).parent / "specs" / "defects.py"
BACKENDS = ("cpu", "numba", "mtia", "triton", "cuda")


def spec(name: str):
    return load_op(f"{SPECS}:{name}")


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("lens", [[3, 0, 5, 1, 0], [0], [2, 0]])
def test_a_reduce_axis_following_a_segment_stays_inside_it(backend, lens):
    """A prefix sum within each segment (kk over [start, l]): Triton masked kk by its own
    bound only, so lanes of l past the segment's end read past it, past the buffer at the
    last segment (a segfault in the interpreter with no rows at all)."""
    kw = {"emulate": True} if backend == "cuda" else {}
    off = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)

    def make(rng):
        return {"values": rng.standard_normal((int(off[-1]), 3)).astype(np.float32),
                "offsets": off}

    dims = {"Bs": len(lens), "Ds": 3, "Ts": int(off[-1])}
    params = {"max_len": max(max(lens), 1)}
    if backend == "triton":
        assert not opcheck.check_interpreted(spec("segment_prefix"), dims, params, make=make)
        return
    assert not opcheck.check(spec("segment_prefix"), dims, get(backend, **kw),
                             params=params, make=make)

