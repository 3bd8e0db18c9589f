"""The cuda backend without a GPU: every library op compiles with nvcc (sm_90) and ptxas'
resource report is read back; the same source runs under kevolve's CPU emulation of CUDA
(threads, barriers, warp shuffles, WMMA) and matches the float64 reference on small and
edge shapes, default and non-default schedules; the layer-3 limits give named errors; and
`kevolve lower OP --backend cuda` works for every op. The H200 run is
benchmarks/gpu_check_c.py (see docs/backends.md)."""

from __future__ import annotations

import dataclasses
import re
import subprocess

import pytest
from click.testing import CliRunner
from gpu_support import (
    DOT_CASES,
    DTYPE_CASES,
    VARIANTS,
    VECTOR_CACHE,
    check_emulated,
    check_launcher,
    illegal,
    lower,
    need,
    parallel,
    ptx_of,
    shapes,
    vector_cache_cases,
    vector_cache_ptx_ok,
)

from kevolve import api, ops
from kevolve.backends.cstyle.gpu.block import GpuEmitter
from kevolve.backends.cuda import CudaBackend
from kevolve.backends.cuda.backend import CUDA_LANG
from kevolve.cli import main

EMU = CudaBackend(emulate=True)


@pytest.fixture(scope="module")
def nvcc() -> str:
    return need("nvcc", "the cuda backend compiles with the CUDA toolkit's nvcc")


@pytest.fixture(scope="module")
def gxx() -> str:
    return need("g++", "the CPU emulation of CUDA compiles with g++")


# -- nvcc ---------------------------------------------------------------------------------


def _build(job):
    name, preset = job
    be = CudaBackend()
    src = lower(be, name, preset)
    return name, preset, src, be.build(src)


def test_every_op_compiles_for_sm90_and_reports_resources(nvcc):
    jobs = [(n, p) for n in ops.names() for p in ("gpu", "small")]
    for name, preset, src, kern in parallel(_build, jobs):
        plan = src.meta["plan"]
        diag = kern.diagnostics["kernels"]
        assert set(diag) == {k.name for k in plan.kernels}, (name, preset, diag)
        for k in plan.kernels:
            d = diag[k.name]
            assert d["registers"] > 0, (name, preset, d)
            assert d["spill_stores"] == d["spill_loads"] == d["stack_frame"] == 0, \
                (name, preset, d)
            # ptxas' static shared memory is exactly what the layer-3 check accounted for
            b = GpuEmitter(plan, k, CudaBackend.lang)
            b.build()
            assert d["shared_bytes"] == b.shared_bytes, (name, preset, d, b.shared)
        assert kern.diagnostics["arch"] == "sm_90"


def test_gpu_preset_paths():
    paths = {n: lower(CudaBackend(), n, "gpu").meta["paths"] for n in
             ("gemm", "gemm_bias_gelu", "dot_interaction", "softmax", "embedding_bag")}
    assert paths["gemm"] == {"k_y": "dot-simt"}  # f32: exact fp32 FMAs, no tf32
    assert paths["gemm_bias_gelu"] == {"k_y": "dot-wmma"}
    assert paths["dot_interaction"] == {"k_Z": "dot-simt"}
    assert paths["softmax"] == {"k_y": "generic"}
    assert paths["embedding_bag"] == {"k_out": "generic"}


def test_bf16_gemm_uses_tensor_cores(nvcc, tmp_path):
    """The WMMA path reaches the tensor cores: bf16 mma instructions in the PTX."""
    src = lower(CudaBackend(), "gemm_bias_gelu", "gpu")
    cu = tmp_path / "k.cu"
    cu.write_text(src.text)
    subprocess.run([nvcc, "-arch=sm_90", "-ptx", "-o", str(tmp_path / "k.ptx"), str(cu)],
                   check=True, capture_output=True)
    ptx = (tmp_path / "k.ptx").read_text()
    assert re.search(r"wmma\.mma\.sync\.aligned\.row\.row\.m16n16k16\.f32\.bf16", ptx)


def test_running_needs_a_gpu_loader_and_says_which(nvcc):
    torch = pytest.importorskip("torch")
    try:
        import cupy  # noqa: F401
        pytest.skip("CuPy is installed: the loader would try a GPU")
    except ImportError:
        pass
    try:
        import cuda.bindings  # noqa: F401
        pytest.skip("cuda-python is installed: the loader would try a GPU")
    except ImportError:
        pass
    kern = api.build(lower(CudaBackend(), "softmax", "small"))
    x = torch.ones(6, 50)
    with pytest.raises(ImportError, match="CuPy.*cuda-python"):
        kern({"x": x}, {"y": torch.empty_like(x)}, {})


# -- the emulated CUDA source ---------------------------------------------------------------


@pytest.mark.parametrize("name", ops.names())
def test_emulated_matches_reference(gxx, name):
    for label, sd in shapes(name):
        assert not check_emulated(EMU, name, sd), (name, label, sd)


@pytest.mark.parametrize("label", sorted(VARIANTS))
def test_emulated_variants(gxx, label):
    name, moves = VARIANTS[label]
    for sl, sd in shapes(name)[:3]:
        assert not check_emulated(EMU, name, sd, moves, seeds=(0,)), (label, sl, sd)


@pytest.mark.parametrize("name,shape", DOT_CASES + DTYPE_CASES,
                         ids=[f"{n}-{'x'.join(str(v) for v in s.values())}"
                              for n, s in DOT_CASES + DTYPE_CASES])
def test_emulated_dot_and_dtype_cases(gxx, name, shape):
    if name in ("gemm", "gemm_bias_gelu", "dot_interaction"):
        assert lower(EMU, name, shape).meta["paths"] != {"k_y": "generic"}
    assert not check_emulated(EMU, name, shape), (name, shape)


def test_emulated_batched_contraction(gxx):
    """Several samples per program turn dot_interaction into a batched (rank-3) dot in the
    plan; the C-family builder has no batched path and takes the generic one, correctly."""
    import backend_checks as bc

    name, _, moves, own = bc.VARIANTS["dot_interaction_batched_dot"]
    for label, sd in own:
        assert not check_emulated(EMU, name, sd, moves, seeds=(0,)), (label, sd)


def test_emulator_sees_wrong_lane_arithmetic(gxx):
    """Mutation check: the emulator executes the shuffles, so a wrong butterfly offset makes
    the (otherwise passing) softmax wrong."""
    src = lower(EMU, "softmax", "small")
    text, n = re.subn(r"__shfl_xor_sync\(0xffffffffu, (\w+), 16, 32\)",
                      r"__shfl_xor_sync(0xffffffffu, \1, 0, 32)", src.text)
    assert n >= 2
    bad = dataclasses.replace(src, text=text)
    assert bad.hash != src.hash
    kern = EMU.build(bad)
    import numpy as np

    from kevolve.evaluate import check as ev
    from kevolve.ir import interp
    d = ops.get("softmax")
    case = d.case("small", seed=3)
    outs = ev.alloc_outputs(d.op, interp.bind_dims(d.op, case.inputs))
    kern(ev.inputs_for(d.op, case.inputs), outs, {})
    assert not ev.compare(d.op, outs, interp.run(d.op, case.inputs)).ok
    assert np.isfinite(outs["y"]).all()


@pytest.mark.parametrize("name", ops.names())
def test_python_launcher_drives_the_emulated_kernels(gxx, name):
    """The launch path the H200 uses (Python grid and guard expressions, scratch tensors,
    pointer and dim order, one launch per kernel) on torch CPU tensors: only the last call
    differs (the emulator's kv_emu_<kernel> instead of CuPy's RawKernel)."""
    pytest.importorskip("torch")
    be = CudaBackend(loader="emulator")
    for label, sd in shapes(name)[:2]:
        assert not check_launcher(be, name, sd), (name, label)


def test_python_launcher_scratch_and_guards(gxx):
    torch = pytest.importorskip("torch")
    be = CudaBackend(loader="emulator")
    name, moves = VARIANTS["softmax_three_kernels"]
    src = lower(be, name, "small", moves)
    assert [k["name"] for k in src.meta["launch"]] == ["k_mx", "k_s", "k_y"]
    assert [s["name"] for s in src.meta["scratch"]] == ["mx", "s"]
    assert not check_launcher(be, name, {"M": 3, "N": 300}, moves)
    # lowered for N=50 (one tile of 64): a row of 100 fails the shape guard, by name
    kern = be.build(lower(be, "softmax", "small"))
    x = torch.randn(2, 100)
    with pytest.raises(ValueError, match="must fit one tile of 64.*another shape class"):
        kern({"x": x}, {"y": torch.empty_like(x)}, {})


# -- vectorize and cache --------------------------------------------------------------------


@pytest.mark.parametrize("label", sorted(VECTOR_CACHE))
def test_emulated_vector_cache_variants(gxx, label):
    """Per-thread vector accesses and shared-memory tiles, on fresh inputs against the
    reference: at the variant's own shapes (exact and masked tiles, empty and long jagged
    segments) the CUDA source must contain what the moves ask for (so an ignored move
    fails); at the op's edge shapes a width that does not divide falls back to scalar code."""
    cases = [c for c in vector_cache_cases() if c[0].split("/")[0] == label]

    def one(case):
        cid, name, moves, sd, marks = case
        text = lower(EMU, name, sd, moves).text
        return cid, [m for m in marks if m not in text], \
            check_emulated(EMU, name, sd, moves, seeds=(0, 1))
    for cid, missing, problems in parallel(one, cases):
        assert not missing, (cid, "not in the source", missing)
        assert not problems, (cid, problems)


def _vc_build(case):
    cid, name, moves, sd, _ = case
    be = CudaBackend()
    src = lower(be, name, sd, moves)
    return cid, src, be.build(src)


def test_vector_cache_variants_compile_for_sm90(nvcc, tmp_path):
    """nvcc compiles every variant; ptxas' report is parsed (no spills, no stack: the lane
    arrays live in registers; static shared memory, tiles included, exactly as layer 3
    counts it) and the PTX has the vector and shared accesses the source asks for."""
    results = parallel(_vc_build, vector_cache_cases(edges=False))
    ptxs = parallel(lambda r: ptx_of(r[1].text, nvcc, tmp_path), results)
    for (cid, src, kern), ptx in zip(results, ptxs):
        plan = src.meta["plan"]
        for k in plan.kernels:
            d = kern.diagnostics["kernels"][k.name]
            assert d["registers"] > 0, (cid, d)
            assert d["spill_stores"] == d["spill_loads"] == d["stack_frame"] == 0, (cid, d)
            b = GpuEmitter(plan, k, CudaBackend.lang)
            b.build()
            assert d["shared_bytes"] == b.shared_bytes, (cid, d, b.shared)
        assert not vector_cache_ptx_ok(src.text, ptx), (cid, vector_cache_ptx_ok(src.text, ptx))


_SWISH = [{"m": "split", "stage": "out", "axis": "i", "size": 64, "into": ["io", "ii"]},
          {"m": "bind", "stage": "out", "axis": "io", "to": "grid"}]


@pytest.mark.parametrize("dtype,width,vtype,count", [
    ("f32", 2, "float2", 1), ("f32", 4, "float4", 1), ("f32", 8, "float4", 2),
    ("bf16", 2, "__nv_bfloat162", 1), ("bf16", 4, "kv_bf16x4", 1), ("bf16", 8, "kv_bf16x8", 1),
    ("f16", 2, "__half2", 1), ("f16", 8, "kv_f16x8", 1)])
def test_vector_types_come_from_the_language(dtype, width, vtype, count):
    assert vtype in CUDA_LANG.vectors[dtype].values()
    moves = _SWISH + [{"m": "vectorize", "stage": "out", "axis": "ii", "width": width}]
    text = lower(CudaBackend(), "swish_add", {"n": 512, "dtype": dtype}, moves).text
    assert f"kv_vcopy<{vtype}>" in text
    assert f"vector loads x ({count} x {vtype}), y ({count} x {vtype}); store out " \
        f"({count} x {vtype})" in text


def test_vectors_fall_back_to_scalar_code_and_say_why():
    name, moves, _ = VECTOR_CACHE["softmax_vector"]
    text = lower(CudaBackend(), name, {"M": 6, "N": 50}, moves).text
    assert "kv_vcopy" not in text
    assert "vectorize j x4: scalar code for stage y (j's extent 50 is not a multiple of 4)" \
        in text
    name, moves, _ = VECTOR_CACHE["jagged_sum_vector"]
    text = lower(CudaBackend(), name, {"B": 5, "D": 3, "max_len": 6, "lengths": "full"},
                 moves).text
    assert "kv_vcopy" not in text and "d's extent 3 is not a multiple of 4" in text


def test_each_load_is_vectorized_only_where_aligned(gxx):
    """Per load: rows of a length W does not divide, or a first lane off a multiple of W,
    stay scalar (with the reason in the source); the others and the store are vectors; the
    result matches the reference either way."""
    import numpy as np

    from kevolve.ir import interp
    from kevolve.ir.builder import axes, compute, dims, f32, input, op
    from kevolve.schedule import Trace

    M, N = dims("M N")
    x, w = input("x", (M, N + 1), f32), input("w", (N + 4,), f32)
    i, j = axes("i j", M, N)
    y = compute("y", (i, j), x[i, j] + w[j + 4] * w[j + 1])
    o = op("shifted", inputs=[x, w], outputs=[y])
    moves = [{"m": "bind", "stage": "y", "axis": "i", "to": "grid"},
             {"m": "vectorize", "stage": "y", "axis": "j", "width": 4}]
    src = api.lower(o, Trace.make("shifted", moves), EMU, {"M": 3, "N": 8})
    assert "vector loads w (1 x float4); store y (1 x float4); scalar: x: rows of 9 " \
        "elements, not a multiple of 4; w: first lane not a multiple of 4 elements" in src.text
    kern = EMU.build(src)
    rng = np.random.default_rng(7)
    ins = {"x": rng.standard_normal((3, 9)).astype(np.float32),
           "w": rng.standard_normal(12).astype(np.float32)}
    out = {"y": np.full((3, 8), np.nan, np.float32)}
    kern(ins, out, {})
    np.testing.assert_allclose(out["y"], interp.run(o, ins)["y"], rtol=1e-5)


def test_vector_guards_refuse_other_shapes_and_misaligned_buffers(gxx):
    import numpy as np
    name, moves, _ = VECTOR_CACHE["softmax_vector"]
    kern = EMU.build(lower(EMU, name, {"M": 3, "N": 1000}, moves))
    x = np.random.default_rng(0).standard_normal((2, 996)).astype(np.float32)
    kern({"x": x}, {"y": np.empty_like(x)}, {})  # 996 = 4 x 249: same shape class
    x = np.ones((2, 998), np.float32)
    with pytest.raises(ValueError, match="multiple of 4 .vectorize.*another shape class"):
        kern({"x": x}, {"y": np.empty_like(x)}, {})
    name, moves, _ = VECTOR_CACHE["swish_add_vector_cache"]
    kern = EMU.build(lower(EMU, name, {"n": 256, "dtype": "f32"}, moves))
    x = np.ones(257, np.float32)[1:]  # 4 bytes past an aligned start: not on an 8-byte one
    with pytest.raises(ValueError, match="'x' must start on a 8-byte boundary"):
        kern({"x": x, "y": np.ones(256, np.float32)}, {"out": np.empty(256, np.float32)}, {})


def test_python_launcher_checks_alignment_per_call(gxx):
    torch = pytest.importorskip("torch")
    be = CudaBackend(loader="emulator")
    name, moves, own = VECTOR_CACHE["swish_add_vector_cache"]
    assert not check_launcher(be, name, own[0][1], moves)
    kern = be.build(lower(be, name, own[0][1], moves))
    y = torch.ones(256)
    with pytest.raises(ValueError, match="'x' must start on a 8-byte boundary"):
        kern({"x": torch.ones(257)[1:], "y": y}, {"out": torch.empty(256)}, {})


def test_cache_scope_local_and_refusals():
    name, moves, _ = VECTOR_CACHE["softmax_cache"]
    local = [dict(m, scope="local") if m["m"] == "cache" else m for m in moves]
    text = lower(CudaBackend(), name, "small", local).text
    assert "cache x (local): registers" in text and "kv_c0" not in text
    e = illegal("jagged_sum", [{"m": "bind", "stage": "out", "axis": "b", "to": "grid"},
                               {"m": "split", "stage": "out", "axis": "l", "size": 4},
                               {"m": "cache", "stage": "out", "buffer": "values",
                                "scope": "shared"}], CudaBackend())
    assert e.code == "backend.cache" and "looped reduction" in e.message
    assert "drop the split" in e.hint
    e = illegal("softmax", [*moves[:-1], {"m": "cache", "stage": "y", "buffer": "s",
                                          "scope": "shared"}], CudaBackend())
    assert e.code == "backend.cache" and "computed in the same program" in e.message
    e = illegal("softmax", [*moves[:-1], {"m": "cache", "stage": "y", "buffer": "e",
                                          "scope": "shared"}], CudaBackend())
    assert e.code == "backend.cache" and "inlined" in e.message


def test_shared_memory_limit_counts_cached_tiles():
    name, moves, _ = VECTOR_CACHE["softmax_cache"]
    lower(CudaBackend(), name, {"M": 2, "N": 8192}, moves)  # 32 KiB tile: fits
    e = illegal(name, moves, CudaBackend(), {"M": 2, "N": 16384})
    assert e.code == "backend.shared_memory" and "kv_c0 65536 B" in e.message
    assert "49152" in e.message


# -- layer 3 --------------------------------------------------------------------------------


def test_threads_per_block_limit_is_named():
    e = illegal("softmax", [{"m": "bind", "stage": "y", "axis": "i", "to": "grid"},
                            {"m": "launch", "num_warps": 64}], CudaBackend())
    assert e.code == "backend.threads_per_block"
    assert "2048" in e.message and "1024" in e.message and "32" in e.hint


def test_shared_memory_limit_is_named():
    name, moves = ("gemm", [
        {"m": "split", "stage": "y", "axis": "i", "size": 256, "into": ["io", "ii"]},
        {"m": "split", "stage": "y", "axis": "j", "size": 256, "into": ["jo", "ji"]},
        {"m": "reorder", "stage": "y", "order": ["io", "jo", "ii", "ji"]},
        {"m": "bind", "stage": "y", "axis": "io", "to": "grid"},
        {"m": "bind", "stage": "y", "axis": "jo", "to": "grid"},
        {"m": "split", "stage": "y", "axis": "k", "size": 64}])
    e = illegal(name, moves, CudaBackend(), "gpu")
    assert e.code == "backend.shared_memory"
    assert "49152" in e.message and "kv_As" in e.message and "smaller" in e.hint


def test_wavefront_limit_is_named():
    e = illegal("swish_add", [
        {"m": "split", "stage": "out", "axis": "i", "size": 16, "into": ["io", "ii"]},
        {"m": "bind", "stage": "out", "axis": "io", "to": "grid"},
        {"m": "bind", "stage": "out", "axis": "ii", "to": "threads"}], CudaBackend())
    assert e.code == "backend.wavefront" and "32" in e.message


# -- the CLI --------------------------------------------------------------------------------


def test_lower_cli_every_op():
    runner = CliRunner()
    for name in ops.names():
        r = runner.invoke(main, ["lower", name, "--backend", "cuda"])
        assert r.exit_code == 0, (name, r.output)
        assert "__global__" in r.output and "__launch_bounds__" in r.output, name
        assert "extern \"C\" int kv_launch" in r.output, name
