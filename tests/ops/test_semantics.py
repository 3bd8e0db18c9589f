"""Jagged semantics pinned with hand-made offsets: empty segments, rows outside every segment,
segments longer than max_extent, and the masked load that padding relies on."""

import numpy as np
import pytest

from kevolve import ops
from kevolve.ir import InterpError, interp
from kevolve.ir.builder import axes, compute, dims, f32, i64, input, op, param, where

OFFSETS = np.array([0, 3, 3, 5, 5, 9])  # segments 1 and 3 are empty
RNG = np.random.default_rng(11)
VALUES = RNG.standard_normal((9, 4)).astype(np.float32)


def segment_rows(offsets):
    return [slice(a, b) for a, b in zip(offsets[:-1], offsets[1:])]


@pytest.mark.parametrize("name, mean", [("jagged_sum", False), ("jagged_mean", True)])
def test_jagged_reduce_empty_segment_is_zero(name, mean):
    out = interp.run(ops.get(name).op, {"values": VALUES, "offsets": OFFSETS},
                     {"max_len": 4})["out"]
    for b, rows in enumerate(segment_rows(OFFSETS)):
        seg = VALUES[rows].astype(np.float64)
        want = np.zeros(4) if not len(seg) else seg.mean(0) if mean else seg.sum(0)
        np.testing.assert_allclose(out[b], want, rtol=1e-12, atol=1e-12)
    assert (out[[1, 3]] == 0).all() and (out[[0, 2, 4]] != 0).all()


@pytest.mark.parametrize("name, mean", [("embedding_bag", False), ("embedding_bag_mean", True)])
def test_embedding_bag_empty_bag_is_zero(name, mean):
    table = RNG.standard_normal((20, 4)).astype(np.float32)
    indices = np.array([3, 3, 19, 0, 7, 5, 5, 5, 12])
    out = interp.run(ops.get(name).op, {"table": table, "indices": indices,
                                        "offsets": OFFSETS}, {"max_len": 4})["out"]
    for b, rows in enumerate(segment_rows(OFFSETS)):
        seg = table[indices[rows]].astype(np.float64)
        want = np.zeros(4) if not len(seg) else seg.mean(0) if mean else seg.sum(0)
        np.testing.assert_allclose(out[b], want, rtol=1e-12, atol=1e-12)
    assert (out[[1, 3]] == 0).all()


def test_jagged_softmax_writes_only_segment_rows():
    """Rows 9..10 belong to no segment and empty segments own no rows: nothing is written
    there (the interpreter leaves unwritten elements NaN)."""
    values = np.concatenate([VALUES, RNG.standard_normal((2, 4)).astype(np.float32)]
                            ).astype(np.float64)
    y = interp.run(ops.get("jagged_softmax").op, {"values": values, "offsets": OFFSETS},
                   {"max_len": 4})["y"]
    assert y.shape == (11, 4)
    assert np.isnan(y[9:]).all() and not np.isnan(y[:9]).any()
    for rows in segment_rows(OFFSETS):
        if rows.stop > rows.start:
            e = np.exp(values[rows] - values[rows].max(0))
            np.testing.assert_allclose(y[rows], e / e.sum(0), rtol=1e-12)
            np.testing.assert_allclose(y[rows].sum(0), 1.0, rtol=1e-12)


def test_jagged_softmax_all_empty_writes_nothing():
    y = interp.run(ops.get("jagged_softmax").op,
                   {"values": np.zeros((0, 3), np.float32), "offsets": np.zeros(5, np.int64)},
                   {"max_len": 4})["y"]
    assert y.shape == (0, 3)


def _too_long(name):
    d = ops.get(name)
    c = d.case({"B": 4, "D": 2, "V": 10, "max_len": 6, "lengths": "one_long"}, seed=0)
    if name == "jagged_dense_elementwise_add":  # max_extent is dense's max_len dim
        ins = dict(c.inputs, dense=c.inputs["dense"][:, :5])
        return d.op, ins, {}
    return d.op, c.inputs, {"max_len": 5}


@pytest.mark.parametrize("name", ["embedding_bag", "embedding_bag_mean", "jagged_sum",
                                  "jagged_mean", "jagged_softmax",
                                  "jagged_dense_elementwise_add"])
def test_segment_longer_than_max_extent_raises(name):
    o, ins, params = _too_long(name)
    with pytest.raises(InterpError, match="max_extent"):
        interp.run(o, ins, params)
    # the same inputs within bounds run
    c = ops.get(name).case({"B": 4, "D": 2, "V": 10, "max_len": 6, "lengths": "one_long"}, 0)
    interp.run(o, c.inputs, c.params)


def _padded(guarded: bool):
    T, B, D = dims("T B D")
    values = input("values", (T, D), f32)
    offsets = input("offsets", (B + 1,), i64)
    b, j, d = axes("b j d", B, param("max_len"), D)
    x = values[offsets[b] + j, d]
    body = where(j < offsets[b + 1] - offsets[b], x, 0.0) if guarded else x
    return op("padded", [values, offsets], [compute("out", (b, j, d), body)])


def test_where_guards_a_load_and_only_a_guarded_one():
    """Padding reads past a segment's end only where where() discards the value (a masked
    load); the same read unguarded is an out-of-bounds error."""
    ins = {"values": VALUES, "offsets": OFFSETS}
    out = interp.run(_padded(True), ins, {"max_len": 4})["out"]
    assert out.shape == (5, 4, 4) and (out[1] == 0).all()
    np.testing.assert_array_equal(out[4], VALUES[5:9])
    with pytest.raises(InterpError, match="out of bounds"):
        interp.run(_padded(False), ins, {"max_len": 5})  # the last segment has 4 rows
    assert interp.run(_padded(True), ins, {"max_len": 5})["out"].shape == (5, 5, 4)
    empty = {"values": np.zeros((0, 4), np.float32), "offsets": np.zeros(3, np.int64)}
    assert (interp.run(_padded(True), empty, {"max_len": 2})["out"] == 0).all()


def test_dot_interaction_layout():
    X = RNG.standard_normal((2, 5, 3)).astype(np.float32)
    Z = interp.run(ops.get("dot_interaction").op, {"X": X})["Z"]
    assert Z.shape == (2, 10)
    pairs = [(i, j) for i in range(5) for j in range(i)]
    for k, (i, j) in enumerate(pairs):
        np.testing.assert_allclose(Z[:, k], (X[:, i].astype(float) * X[:, j]).sum(-1))
