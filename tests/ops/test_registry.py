"""The registry's shape: names, presets, dtype variants, and that it imports without torch."""

import json
import subprocess
import sys

import numpy as np
import pytest

from kevolve import ops
from kevolve.ops.base import PRESETS

ORDER = ["softmax", "log_softmax", "layernorm", "rmsnorm", "swish_add", "gemm",
         "gemm_bias_gelu", "embedding_bag", "embedding_bag_mean", "jagged_sum", "jagged_mean",
         "jagged_softmax", "jagged_to_padded_dense", "jagged_dense_elementwise_add",
         "dot_interaction"]

# The benchmark issue's GPU shapes, verbatim.
GPU = {
    "softmax": {"M": 8192, "N": 8192},
    "layernorm": {"M": 16384, "N": 4096, "dtype": "bf16"},
    "swish_add": {"n": 64 * 2**20, "dtype": "bf16"},
    "gemm_bias_gelu": {"M": 8192, "K": 4096, "N": 4096},
    "embedding_bag": {"V": 4 * 2**20, "D": 128, "B": 65536, "max_len": 32, "lengths": "full"},
    "jagged_sum": {"B": 16384, "D": 256, "max_len": 200, "lengths": "uniform"},
    "jagged_softmax": {"B": 4096, "D": 32, "max_len": 512, "lengths": "uniform"},
    "dot_interaction": {"B": 16384, "F": 27, "D": 128},
}
CPU = {
    "softmax": {"M": 4096, "N": 4096},
    "layernorm": {"M": 4096, "N": 4096, "dtype": "f32"},
    "rmsnorm": {"M": 4096, "N": 4096, "dtype": "f32"},
    "embedding_bag": {"V": 2**20, "D": 64, "B": 16384, "max_len": 20, "lengths": "full"},
    "jagged_sum": {"B": 4096, "D": 128, "max_len": 200, "lengths": "uniform"},
    "dot_interaction": {"B": 4096, "F": 27, "D": 64},
}


def test_names_in_order():
    assert ops.names() == ORDER
    assert list(ops.LIBRARY) == ORDER
    assert all(ops.LIBRARY[n].name == n == ops.LIBRARY[n].op.name for n in ORDER)


def test_get_unknown_lists_the_names():
    assert ops.get("softmax") is ops.LIBRARY["softmax"]
    with pytest.raises(KeyError) as e:
        ops.get("sofmax")
    assert "sofmax" in str(e.value) and "jagged_softmax" in str(e.value)


@pytest.mark.parametrize("name", sorted(GPU))
def test_gpu_shapes_are_the_issues(name):
    assert ops.get(name).shapes["gpu"] == GPU[name]


@pytest.mark.parametrize("name", sorted(CPU))
def test_cpu_shapes(name):
    assert ops.get(name).shapes["cpu"] == CPU[name]


@pytest.mark.parametrize("name", ORDER)
def test_presets_and_edges_are_plain_json(name):
    d = ops.get(name)
    assert set(d.shapes) == set(PRESETS)
    assert d.edge_shapes, "every op stresses some edge"
    for sd in list(d.shapes.values()) + list(d.edge_shapes):
        assert json.loads(json.dumps(sd)) == sd
        assert all(isinstance(v, (int, str)) for v in sd.values())
    assert d.doc


@pytest.mark.parametrize("name", ORDER)
def test_small_preset_is_tiny(name):
    c = ops.get(name).case("small")
    assert 0 < sum(a.size for a in c.inputs.values()) < 1000


def test_jagged_edges_cover_empty_and_long_segments():
    for name in ("embedding_bag", "embedding_bag_mean", "jagged_sum", "jagged_mean",
                 "jagged_softmax", "jagged_to_padded_dense", "jagged_dense_elementwise_add"):
        modes = {sd["lengths"] for sd in ops.get(name).edge_shapes}
        assert {"all_empty", "one_long", "full"} <= modes, name
        off = ops.get(name).case("small").inputs["offsets"]
        assert (np.diff(off) == 0).any(), f"{name}: small preset has no empty segment"


@pytest.mark.parametrize("name", ["layernorm", "rmsnorm", "swish_add"])
def test_dtype_variants_match_the_shape_dict(name):
    d = ops.get(name)
    for sd in list(d.shapes.values()) + list(d.edge_shapes):
        o = d.op_for(sd)
        assert {b.dtype.name for b in o.inputs} == {sd["dtype"]}
        assert o.output_buffers[0].dtype.name == sd["dtype"]
    assert d.op_for("gpu") is d.variants["bf16"] and d.op is d.variants["f32"]
    with pytest.raises(KeyError, match="i64"):
        d.op_for(dict(d.shapes["small"], dtype="i64"))


def test_single_dtype_ops_have_one_ir():
    assert ops.get("softmax").op_for("gpu") is ops.get("softmax").op


def test_unknown_preset():
    with pytest.raises(KeyError, match="small, cpu, gpu"):
        ops.get("gemm").case("tpu")


def test_imports_without_torch():
    code = "import sys, kevolve.ops; assert 'torch' not in sys.modules, 'torch imported'"
    subprocess.run([sys.executable, "-c", code], check=True)
