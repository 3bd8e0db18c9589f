"""Bulk copies on the Triton backend (`cache ... copy: bulk`, backends/triton/bulk.py): a
contraction operand's tile read through a host-made tensor descriptor (TMA on Hopper),
pointer tiles where the shape class rules the descriptor out, clear errors where the tile
is not one a descriptor reads, and the same values as the reference interpreter (the
library ops run in test_triton_interpret's gemm_bulk and gemm_bias_gelu_bulk variants;
here an op whose operands are both stored transposed)."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import backend_checks as bc
import pytest

from kevolve import api, ops
from kevolve.backends.triton import TritonBackend
from kevolve.schedule import MoveError, Trace
from kevolve.search.proposers import mutations as mu

REPO = Path(__file__).resolve().parents[3]
GPU = {"M": 8192, "K": 4096, "N": 4096}
BULK = {b: bc.bulk_copies("acc", b)[0] for b in ("A", "W")}


def _gelu_src(moves, dims=GPU, interpret=False):
    d = ops.get("gemm_bias_gelu")
    return api.lower(d.op, {"op": "gemm_bias_gelu", "moves": moves}, TritonBackend(
        interpret=interpret), dims)


def _tiles(bm=128, bn=256, bk=64):
    return bc.gemm_tiles(bm, bn, bk)


def test_both_operands_load_through_descriptors_the_launcher_makes():
    text = _gelu_src([*_tiles(), BULK["A"], BULK["W"]]).text
    assert "def k_y(p_A, p_W, p_bias, p_y, d_K, d_M, d_N, t_A_128x64, t_W_64x256):" in text
    assert re.search(r"a\d+ = t_A_128x64\.load\(\[g_io \* 128, s_ko_\d+ \* 64\]\)", text)
    assert re.search(r"b\d+ = t_W_64x256\.load\(\[s_ko_\d+ \* 64, g_jo \* 256\]\)", text)
    assert "tl.load(p_A" not in text and "tl.load(p_W" not in text
    assert 'TensorDescriptor.from_tensor(bufs["A"], [128, 64])' in text
    assert 'TensorDescriptor.from_tensor(bufs["W"], [64, 256])' in text
    assert "from triton.tools.tensor_descriptor import TensorDescriptor" in text
    assert "A: its bulk copy needs non-empty rows of a multiple of 16 bytes" in text


def test_one_operand_only_and_none_without_the_move():
    text = _gelu_src([*_tiles(), BULK["W"]]).text
    assert "t_W_64x256.load(" in text and "tl.load(p_A" in text and "t_A_" not in text
    plain = _gelu_src(_tiles()).text
    assert "TensorDescriptor" not in plain and ".load([" not in plain


def test_a_shape_class_with_rows_off_16_bytes_gets_pointer_tiles_for_that_operand():
    text = _gelu_src([*_tiles(), BULK["A"], BULK["W"]], {"M": 256, "K": 100, "N": 512}).text
    # A's rows are 100 bf16 = 200 bytes; W's 1024 bytes
    assert "# cache A (shared, bulk): its rows are 200 bytes at this shape class" in text
    assert "tl.load(p_A" in text and "t_A_" not in text and "t_W_64x256.load(" in text


@pytest.mark.parametrize("moves,decisions,at,words", [
    ([*_tiles(), {"m": "cache", "stage": "y", "buffer": "bias", "scope": "shared",
                  "copy": "bulk"}], {}, 7, ["not a contraction with 'bias'"]),
    ([*bc.gemm_tiles(128, 512, 64), BULK["W"]], {}, 7,
     ["512 lanes along axis 'j'", "over the copy engine's 256", "split 'j'"]),
    ([*bc.gemm_tiles(32, 32, 8), BULK["A"]], {}, 7,
     ["does not lower stage 'acc' to a tl.dot", "at least 16 lanes"]),
], ids=["not_an_operand", "box_over_256", "not_a_dot"])
def test_tiles_a_descriptor_cannot_read_are_errors_at_the_cache_move(moves, decisions, at,
                                                                      words):
    with pytest.raises(MoveError) as e:
        _gelu_src(moves)
    assert e.value.code == "backend.bulk_copy" and e.value.move_index == at, e.value
    for w in words:
        assert w in str(e.value), str(e.value)
    assert "copy: bulk" in e.value.hint or "split" in e.value.hint


def test_a_batched_contraction_is_refused():
    d = ops.get("dot_interaction")
    name, _, moves, own = bc.VARIANTS["dot_interaction_batched_dot"]
    moves = [*moves, {"m": "cache", "stage": "Z", "buffer": "X", "scope": "shared",
                      "copy": "bulk"}]
    with pytest.raises(MoveError) as e:
        api.lower(d.op, {"op": name, "moves": moves}, TritonBackend(), own[0][1])
    assert e.value.code == "backend.bulk_copy" and "batched contraction" in str(e.value)


def test_backends_without_a_copy_engine_take_the_same_trace():
    """A trace with bulk copies stays portable: the CPU backend ignores cache moves, CUDA
    stages the tile with its threads (gpu_support's softmax_cache_bulk)."""
    moves = [*_tiles(16, 16, 16), BULK["A"], BULK["W"]]
    d = ops.get("gemm_bias_gelu")
    for be in ("cpu", "cuda"):
        src = api.lower(d.op, {"op": "gemm_bias_gelu", "moves": moves}, be, d.dims("small"))
        assert "TensorDescriptor" not in src.text


@pytest.mark.skipif(importlib.util.find_spec("triton") is None, reason="needs triton")
def test_on_sm90_the_operands_are_tma_copies():
    from kevolve.backends.triton.aot import compile_aot

    src = _gelu_src([*_tiles(), BULK["A"], BULK["W"], {"m": "launch", "num_warps": 8,
                                                        "num_stages": 3}])
    info = compile_aot(src, "cuda:90", keep_asm=True)["k_y"]
    ptx = info["text"]["ptx"]
    assert "cp.async.bulk.tensor.2d" in ptx
    assert "cp.async.cg.shared.global" not in ptx  # no pointer tile of an operand left
    assert info["signature"]["t_A_128x64"] == "tensordesc<bf16[128, 64]>"
    plain = compile_aot(_gelu_src([*_tiles(), {"m": "launch", "num_warps": 8}]), "cuda:90",
                        keep_asm=True)["k_y"]["text"]["ptx"]
    assert "cp.async.bulk.tensor" not in plain


def test_the_bulk_mutation_toggles_operands_only_where_the_backend_has_a_copy_engine():
    import random

    d = ops.get("gemm_bias_gelu")
    t = Trace.make("gemm_bias_gelu", _tiles())
    assert mu.contraction_operands(d.op) == [("acc", "A"), ("acc", "W")]
    assert mu.toggle_bulk_copy(t, random.Random(0), d.op, {"bulk_copy": False}) is None
    seen = set()
    for seed in range(20):
        child = mu.toggle_bulk_copy(t, random.Random(seed), d.op, {"bulk_copy": True})
        (new,) = [m.to_dict() for m in child.moves][len(t.moves):]
        assert new["copy"] == "bulk" and new["scope"] == "shared" and new["stage"] == "acc"
        seen.add(new["buffer"])
        back = mu.toggle_bulk_copy(child, random.Random(seed), d.op, {"bulk_copy": True})
        assert back.moves == t.moves
        _gelu_src([m.to_dict() for m in child.moves])  # legal on Triton
    assert seen == {"A", "W"}
    soft = ops.get("softmax")
    assert mu.toggle_bulk_copy(Trace.make("softmax", []), random.Random(0), soft.op,
                               {"bulk_copy": True}) is None


SCRIPT = textwrap.dedent("""
    import json, sys
    import numpy as np
    import torch
    sys.path.insert(0, sys.argv[1])
    import backend_checks as bc
    from kevolve import api
    from kevolve.backends.triton import TritonBackend
    from kevolve.ir.builder import axes, cast, compute, dims, f32, input, op, reduce_axis, sum_
    from kevolve.ir.interp import run as reference

    M, K, N = dims("M K N")
    A = input("A", (K, M), "bf16")   # A stored transposed: y = A^T B^T
    B = input("B", (N, K), "bf16")
    i, j = axes("i j", M, N)
    k = reduce_axis("k", K)
    y = compute("y", (i, j), sum_(cast(A[k, i], f32) * cast(B[j, k], f32), over=k))
    o = op("tt_gemm", inputs=[A, B], outputs=[y])
    moves = [*bc.dot_tiles(32, 32, 16), *bc.bulk_copies("y", "A", "B")]
    out = []
    be = TritonBackend(interpret=True)
    for sd in json.loads(sys.argv[2]):
        src = api.lower(o, {"op": "tt_gemm", "moves": moves}, be, sd)
        kern = be.build(src)
        for seed in range(3):
            rng = np.random.default_rng(seed)
            host = {"A": rng.standard_normal((sd["K"], sd["M"])).astype(np.float32),
                    "B": rng.standard_normal((sd["N"], sd["K"])).astype(np.float32)}
            host = {n: torch.tensor(v).to(torch.bfloat16).float().numpy()
                    for n, v in host.items()}
            ins = {n: torch.tensor(v).to(torch.bfloat16) for n, v in host.items()}
            outs = {"y": torch.full((sd["M"], sd["N"]), float("nan"))}
            kern(ins, outs, {})
            ref = reference(o, host, {})
            out.append({"shape": sd, "bulk": ".load([" in src.text, "problems": bc.compare(
                o, {"y": outs["y"].double().numpy()}, ref)})
    print(json.dumps(out))
""")


@pytest.mark.skipif(importlib.util.find_spec("triton") is None
                    or importlib.util.find_spec("torch") is None, reason="needs triton and torch")
def test_transposed_operands_through_descriptors_match_the_reference_interpreter():
    """Both operands are read in memory order through their descriptors and transposed
    after the load; tails in every dim (zero-filled past the ends), fresh inputs per seed,
    NaN-poisoned outputs."""
    shapes = [{"M": 40, "K": 24, "N": 72}, {"M": 64, "K": 32, "N": 32}]
    p = subprocess.run([sys.executable, "-c", SCRIPT, str(Path(__file__).resolve().parents[1]),
                        json.dumps(shapes)], capture_output=True, text=True, timeout=600,
                       cwd=REPO, env=dict(os.environ, TRITON_INTERPRET="1",
                                          PYTHONPATH=str(REPO)))
    assert p.returncode == 0, p.stderr[-3000:]
    res = json.loads(p.stdout.splitlines()[-1])
    assert len(res) == 6 and all(r["bulk"] for r in res)
    for r in res:
        assert not r["problems"], r


# -- an output written in bulk (cache y on stage y) and the pipeline across tiles --------

def _store(parts: int = 1) -> dict:
    return bc.bulk_store("y", parts)


@pytest.mark.parametrize("parts,width", [(1, 256), (2, 128), (4, 64)])
def test_the_output_is_written_through_descriptors_in_its_pieces(parts, width):
    text = _gelu_src([*_tiles(), BULK["A"], BULK["W"], _store(parts)]).text
    arg = f"t_y_128x{width}"
    assert f"t_W_64x256, {arg}):" in text
    assert f'TensorDescriptor.from_tensor(bufs["y"], [128, {width}])' in text
    stores = re.findall(rf"{arg}\.store\(\[g_io \* 128, g_jo \* 256(?: \+ (\d+))?\], ", text)
    assert [int(s or 0) for s in stores] == [q * width for q in range(parts)]
    assert "tl.store(p_y" not in text
    assert "y: its bulk copy needs non-empty rows of a multiple of 16 bytes" in text


def test_output_rows_off_16_bytes_at_the_shape_class_get_pointer_stores():
    text = _gelu_src([*_tiles(), BULK["A"], _store(2)], {"M": 256, "K": 64, "N": 100}).text
    assert "# cache y (shared, bulk): its rows are 200 bytes at this shape class" in text
    assert "tl.store(p_y" in text and "t_y_" not in text and "t_A_128x64.load(" in text


@pytest.mark.parametrize("moves,words", [
    ([*_tiles(), _store(64)], ["256 lanes along its last axis", "64 parts",
                               "16 bytes or more", "fewer parts"]),
    ([*_tiles(), {"m": "cache", "stage": "acc", "buffer": "acc", "scope": "shared",
                  "copy": "bulk"}], ["computed inside kernel 'k_y'", "stays in the program"]),
], ids=["pieces_under_16_bytes", "not_the_kernel_root"])
def test_outputs_a_descriptor_cannot_write_are_errors_at_the_cache_move(moves, words):
    with pytest.raises(MoveError) as e:
        _gelu_src(moves)
    assert e.value.code == "backend.bulk_copy" and e.value.move_index == 7, e.value
    for w in words:
        assert w in str(e.value) + (e.value.hint or ""), (w, str(e.value), e.value.hint)


def test_the_pipeline_across_tiles_flattens_the_persistent_tile_loop():
    launch = {"m": "launch", "persistent": 1, "pipeline": "across_tiles"}
    text = _gelu_src([*_tiles(), BULK["A"], BULK["W"], launch]).text
    assert re.search(r"for tile in tl\.range\(tl\.program_id\(0\), .+, tl\.num_programs\(0\), "
                     r"flatten=True\):", text)
    within = _gelu_src([*_tiles(), {**launch, "pipeline": "tile"}]).text
    assert "flatten" not in within and "for tile in tl.range(" in within
    # CUDA has no copy engine here and ignores the pipeline: the same trace, threads write
    cuda = api.lower(ops.get("gemm_bias_gelu").op, {"op": "gemm_bias_gelu", "moves": [
        *bc.gemm_tiles(32, 64, 32), launch, _store(2)]}, "cuda", GPU).text
    assert "cache y (shared)" in cuda and "y[" in cuda and "Descriptor" not in cuda


def test_the_write_mutation_toggles_a_2d_output_where_the_backend_has_a_copy_engine():
    import random

    d = ops.get("gemm_bias_gelu")
    t = Trace.make("gemm_bias_gelu", _tiles())
    assert mu.toggle_bulk_write(t, random.Random(0), d.op, {"bulk_copy": False}) is None
    parts = set()
    for seed in range(12):
        child = mu.toggle_bulk_write(t, random.Random(seed), d.op, {"bulk_copy": True})
        (new,) = [m.to_dict() for m in child.moves][len(t.moves):]
        assert (new["stage"], new["buffer"], new["copy"]) == ("y", "y", "bulk")
        parts.add(new["parts"])
        assert "t_y_128x" in _gelu_src([m.to_dict() for m in child.moves]).text
        back = mu.toggle_bulk_write(child, random.Random(seed), d.op, {"bulk_copy": True})
        assert back.moves == t.moves
    assert parts == {1, 2, 4}
