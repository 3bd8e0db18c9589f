"""The jagged ops against FBGEMM's own CPU kernels (fbgemm-gpu-cpu), an oracle independent of
both the interpreter and our torch baselines. FBGEMM's CPU jagged kernels take float32 only
(float64 raises "not implemented for 'Double'"), so the comparison is at f32 tolerance."""

import fbgemm_gpu  # noqa: F401  (registers torch.ops.fbgemm; a dev dependency, never skipped)
import numpy as np
import pytest
import torch

from kevolve import ops
from kevolve.ir import interp

FB = torch.ops.fbgemm
TOL = dict(rtol=1e-5, atol=1e-5)
SEEDS = (0, 1)


def shapes(name, keep=lambda sd: True):
    d = ops.get(name)
    return [pytest.param(sd, id="small" if k == 0 else sd["lengths"] + f"-{k}")
            for k, sd in enumerate((d.shapes["small"],) + d.edge_shapes) if keep(sd)]


def run_both(name, sd, seed):
    d = ops.get(name)
    c = d.case(sd, seed)
    got = interp.run(d.op, c.inputs, c.params)
    t = {k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in c.inputs.items()}
    return got, t, c.params.get("max_len", sd["max_len"])


def close(got, want):
    w = want.detach().numpy()
    assert got.shape == w.shape
    np.testing.assert_allclose(got, w, **TOL)


@pytest.mark.parametrize("sd", shapes("jagged_to_padded_dense"))
def test_jagged_to_padded_dense(sd):
    for seed in SEEDS:
        got, t, L = run_both("jagged_to_padded_dense", sd, seed)
        close(got["out"], FB.jagged_to_padded_dense(t["values"], [t["offsets"]], [L], 0.0))


@pytest.mark.parametrize("sd", shapes("jagged_dense_elementwise_add"))
def test_jagged_dense_elementwise_add(sd):
    for seed in SEEDS:
        got, t, _ = run_both("jagged_dense_elementwise_add", sd, seed)
        want, _ = FB.jagged_dense_elementwise_add_jagged_output(
            t["values"], [t["offsets"]], t["dense"])
        close(got["out"], want)


@pytest.mark.parametrize("sd", shapes("jagged_softmax"))
def test_jagged_softmax(sd):
    for seed in SEEDS:
        got, t, L = run_both("jagged_softmax", sd, seed)
        want, _ = FB.jagged_softmax(t["values"], t["offsets"], L)
        close(got["y"], want)


def _weighted_segment_sum(weights, values, offsets, max_len):
    """FBGEMM has no plain jagged sum on CPU; jagged_jagged_bmm(x, y)[b] = x_b^T y_b is one
    when x is a column of per-row weights."""
    return FB.jagged_jagged_bmm(weights[:, None], values, offsets, max_len)[:, 0, :]


@pytest.mark.parametrize("sd", shapes("jagged_sum"))
def test_jagged_sum(sd):
    for seed in SEEDS:
        got, t, L = run_both("jagged_sum", sd, seed)
        v = t["values"]
        close(got["out"], _weighted_segment_sum(torch.ones(v.shape[0]), v, t["offsets"], L))


@pytest.mark.parametrize("sd", shapes("jagged_mean"))
def test_jagged_mean(sd):
    for seed in SEEDS:
        got, t, L = run_both("jagged_mean", sd, seed)
        off = t["offsets"]
        lengths = off[1:] - off[:-1]
        w = (1.0 / lengths.to(torch.float32)).repeat_interleave(lengths)
        close(got["out"], _weighted_segment_sum(w, t["values"], off, L))


def _tbe(V, D, mode):
    """FBGEMM's table-batched embedding bag (the kernel DLRM serves with), one table, CPU."""
    from fbgemm_gpu.split_embedding_configs import SparseType
    from fbgemm_gpu.split_table_batched_embeddings_ops_common import (
        EmbeddingLocation,
        PoolingMode,
    )
    from fbgemm_gpu.split_table_batched_embeddings_ops_training import (
        ComputeDevice,
        SplitTableBatchedEmbeddingBagsCodegen,
    )

    pooling = {"sum": PoolingMode.SUM, "mean": PoolingMode.MEAN}[mode]
    return SplitTableBatchedEmbeddingBagsCodegen(
        [(V, D, EmbeddingLocation.HOST, ComputeDevice.CPU)], pooling_mode=pooling,
        weights_precision=SparseType.FP32)


# TBE asserts embedding_dim % 4 == 0, so the odd-width edge shape is compared with torch only.
@pytest.mark.parametrize("name, mode", [("embedding_bag", "sum"), ("embedding_bag_mean", "mean")])
@pytest.mark.parametrize("sd", shapes("embedding_bag", keep=lambda sd: sd["D"] % 4 == 0))
def test_embedding_bag_tbe(name, mode, sd):
    for seed in SEEDS:
        got, t, _ = run_both(name, sd, seed)
        tbe = _tbe(sd["V"], sd["D"], mode)
        with torch.no_grad():
            tbe.split_embedding_weights()[0].copy_(t["table"])
            want = tbe(t["indices"], t["offsets"])
        close(got["out"], want)


def test_padded_dense_truncates_long_segments_like_fbgemm():
    """A segment longer than max_len is cut at max_len (no jagged axis: j runs to max_len)."""
    d = ops.get("jagged_to_padded_dense")
    rng = np.random.default_rng(0)
    offsets = np.array([0, 9, 9, 12])
    values = rng.standard_normal((12, 3)).astype(np.float32)
    got = interp.run(d.op, {"values": values, "offsets": offsets}, {"max_len": 4})["out"]
    want = FB.jagged_to_padded_dense(torch.from_numpy(values), [torch.from_numpy(offsets)],
                                     [4], 0.0)
    close(got, want)
    np.testing.assert_array_equal(got[0], values[:4])
