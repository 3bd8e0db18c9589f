"""Accumulating stores (`compute(..., accumulate="sum")`): the reference interpreter adds
every point into `out[store]` as np.add.at does (repeated indices add up, untouched
elements are 0), the builder refuses what has no meaning or no atomic add, and the text
form shows `+=`."""

from __future__ import annotations

import numpy as np
import pytest

from kevolve.ir.builder import (
    axes,
    bf16,
    compute,
    const,
    dims,
    f16,
    f32,
    i32,
    i64,
    input,
    jagged_axis,
    op,
    param,
    reduce_axis,
    sum_,
)
from kevolve.ir.errors import SpecError
from kevolve.ir.interp import run
from kevolve.ir.nodes import tiling_dims
from kevolve.ir.printer import op_text


def _hist(dtype=i64):
    K, C = dims("K C")
    lab = input("labels", (K,), i64)
    (k,) = axes("k", K)
    h = compute("h", (k,), const(1, dtype), store=(lab[k],), shape=(C,), accumulate="sum")
    return op("hist", inputs=[lab], outputs=[h])


def _index_add():
    M, N, K = dims("M N K")
    x = input("x", (M, N), f32)
    idx = input("index", (K,), i64)
    src = input("source", (K, N), f32)
    r, j = axes("r j", K, N)
    added = compute("added", (r, j), src[r, j], store=(idx[r], j), shape=(M, N),
                    accumulate="sum")
    i, c = axes("i c", M, N)
    return op("index_add", inputs=[x, idx, src], outputs=[
        compute("y", (i, c), x[i, c] + added[i, c])])


@pytest.mark.parametrize("k,c", [(0, 5), (1, 1), (13, 3), (211, 7), (97, 101)])
def test_histogram_counts_repeated_labels(k, c):
    rng = np.random.default_rng(k * 1000 + c)
    labels = rng.integers(0, c, size=k)
    got = run(_hist(), {"labels": labels}, {"C": c})["h"]
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got, np.bincount(labels, minlength=c))


@pytest.mark.parametrize("m,n,k", [(1, 1, 1), (5, 3, 0), (7, 5, 31), (2, 13, 97)])
def test_index_add_matches_numpy_add_at(m, n, k):
    rng = np.random.default_rng(m * 100 + k)
    x = rng.standard_normal((m, n))
    idx = rng.integers(0, m, size=k)  # with k > m, rows repeat
    src = rng.standard_normal((k, n))
    want = x.copy()
    np.add.at(want, idx, src)
    got = run(_index_add(), {"x": x, "index": idx, "source": src})["y"]
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def test_accumulating_over_a_jagged_axis_and_through_a_reduction():
    """Each bag's gradient row adds into every table row the bag picks (an embedding
    bag's backward), and a body may reduce before it adds."""
    V, D, T, B = dims("V D T B")
    g = input("g", (B, D), f32)
    ind = input("indices", (T,), i64)
    off = input("offsets", (B + 1,), i64)
    b, d = axes("b d", B, D)
    l_ = jagged_axis("l", start=off[b], end=off[b + 1], max_extent=param("max_len"))
    q = reduce_axis("q", D)
    gt = compute("gt", (b, l_, d), g[b, d] + sum_(g[b, q], over=q), store=(ind[l_], d),
                 shape=(V, D), accumulate="sum")
    o = op("bag_bwd", inputs=[g, ind, off], outputs=[gt])
    rng = np.random.default_rng(3)
    lengths = np.array([2, 0, 3, 1])
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    ind_ = rng.integers(0, 5, size=offsets[-1])
    gv = rng.standard_normal((4, 3))
    got = run(o, {"g": gv, "indices": ind_, "offsets": offsets}, {"V": 5, "max_len": 3})["gt"]
    want = np.zeros((5, 3))
    bag = np.repeat(np.arange(4), lengths)
    np.add.at(want, ind_, gv[bag] + gv[bag].sum(axis=1, keepdims=True))
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def test_text_form_and_tiling_dims():
    text = op_text(_hist())
    assert "h[labels[k]] += 1:i64" in text
    assert "-> h: i64[C]" in text
    # the zeroing kernel runs over the whole buffer: its size is a dim lowering needs
    assert tiling_dims(_hist()) == ["C", "K"]


def test_an_integer_accumulator_of_i32():
    got = run(_hist(i32), {"labels": np.array([2, 2, 0])}, {"C": 3})["h"]
    np.testing.assert_array_equal(got, [1, 0, 2])


def _spec_error(fn) -> SpecError:
    with pytest.raises(SpecError) as e:
        fn()
    return e.value


def test_refusals_name_the_stage_and_line():
    K, C = dims("K C")
    src = input("src", (K,), f32)
    idx = input("idx", (K,), i64)
    (k,) = axes("k", K)
    e = _spec_error(lambda: compute("h", (k,), src[k], accumulate="sum"))
    assert e.stage == "h" and "needs store= and shape=" in e.message
    assert e.loc and e.loc.endswith(str(e.line)) and "test_accumulate.py" in e.loc
    e = _spec_error(lambda: compute("h", (k,), src[k], store=(idx[k],), accumulate="sum"))
    assert "needs store= and shape=" in e.message
    e = _spec_error(lambda: compute("h", (k,), src[k], store=(idx[k],), shape=(C,),
                                    accumulate="max"))
    assert "unknown accumulate mode 'max'" in e.message and "sum" in e.hint
    for t in (bf16, f16):
        half = input("half", (K,), t)
        e = _spec_error(lambda h=half: compute("h", (k,), h[k], store=(idx[k],),
                                               shape=(C,), accumulate="sum"))
        assert f"cannot store {t}" in e.message and "f32" in e.hint
    # a float store index is refused as for any stage
    e = _spec_error(lambda: compute("h", (k,), src[k], store=(src[k],), shape=(C,),
                                    accumulate="sum"))
    assert "store index is not an integer" in e.message
