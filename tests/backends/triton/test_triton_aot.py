"""Ahead-of-time Triton compilation without a GPU: every library op with its default
schedule at the `gpu` preset compiles for H100/H200 (cuda:90) and MI300 (hip:gfx942), and
the resource diagnostics (registers, spills, shared memory) are parsed from ptxas and the
AMDGCN metadata. Compiles go to a fresh Triton cache so they are real every run."""

from __future__ import annotations

import importlib.util
import os
import re
import textwrap

import pytest
from backend_checks import gemm_tiles

from kevolve import ops
from kevolve.backends.base import KernelSource
from kevolve.backends.triton import TritonBackend
from kevolve.backends.triton.aot import (
    AotError,
    amdgcn_info,
    compile_aot,
    gpu_target,
    parse_ptxas,
    specialize,
)
from kevolve.plan import lower
from kevolve.schedule import Trace, apply_trace, default_trace

pytestmark = [
    pytest.mark.skipif(importlib.util.find_spec("triton") is None, reason="needs triton"),
    pytest.mark.skipif(os.environ.get("TRITON_INTERPRET") == "1",
                       reason="Triton's interpreter is on in this process: no compiler"),
]

TARGETS = ("cuda:90", "hip:gfx942")
ASM = {"cuda:90": {"ptx", "cubin"}, "hip:gfx942": {"amdgcn", "hsaco"}}


@pytest.fixture(scope="module", autouse=True)
def fresh_triton_cache(tmp_path_factory):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TRITON_CACHE_DIR", str(tmp_path_factory.mktemp("triton-cache")))
        yield


_SOURCES: dict[str, KernelSource] = {}


def gpu_source(name: str) -> KernelSource:
    """The op's default schedule at the gpu preset, rendered (dims only: no inputs made)."""
    if name not in _SOURCES:
        d = ops.get(name)
        op, dims = d.op_for("gpu"), d.dims("gpu")
        plan = lower(apply_trace(op, default_trace(op, dims)), dims)
        _SOURCES[name] = TritonBackend().render(plan)
    return _SOURCES[name]


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("name", ops.names())
def test_library_op_compiles_with_diagnostics(name, target):
    src = gpu_source(name)
    try:
        res = compile_aot(src, target)
    except AotError as e:
        pytest.fail(f"{name} does not compile for {target}:\n{e}")
    plan = src.meta["plan"]
    assert set(res) == {k.name for k in plan.kernels}
    for kname, info in res.items():
        assert ASM[target] <= set(info["asm"]), info["asm"]
        # the launch options are the ones the module's own launcher passes
        m = re.search(rf"{kname}\[grid\]\(.*num_warps=(\d+), num_stages=(\d+)\)", src.text)
        assert m, f"no launch line for {kname}"
        assert (info["num_warps"], info["num_stages"]) == (int(m[1]), int(m[2]))
        assert isinstance(info["shared"], int) and info["shared"] >= 0
        if target.startswith("cuda"):
            assert 0 < info["registers"] <= 255, info
            for k in ("spill_stores", "spill_loads", "stack_frame", "shared_bytes"):
                assert isinstance(info[k], int) and info[k] >= 0, (k, info)
        else:
            assert 0 < info["vgpr_count"] <= 512 and info["sgpr_count"] > 0, info
            for k in ("vgpr_spill_count", "sgpr_spill_count", "lds", "scratch"):
                assert isinstance(info[k], int) and info[k] >= 0, (k, info)
        dtypes = {b.name: b.dtype.name for b in plan.op.inputs}
        for arg, ty in info["signature"].items():
            if arg[2:] in dtypes:
                want = {"f32": "*fp32", "bf16": "*bf16", "i64": "*i64"}[dtypes[arg[2:]]]
                assert ty == want, (arg, ty)


def test_offsets_are_32_bit_when_every_buffer_is_small():
    """Half the registers for offset tiles when the shape class allows it; a launch guard
    refuses a larger call, and a shape class with a buffer of 2**30 elements or more keeps
    64-bit offsets. Both compile for cuda:90."""
    d = ops.get("softmax")
    srcs = {}
    for label, sd in (("small", {"M": 1024, "N": 1024}), ("huge", {"M": 32768, "N": 32768})):
        op, dims = d.op_for(sd), d.dims(sd)
        srcs[label] = TritonBackend().render(lower(apply_trace(op, default_trace(op, dims)),
                                                   dims))
        assert set(compile_aot(srcs[label], "cuda:90")) == {"k_y"}
    assert "pid = tl.program_id(0)\n" in srcs["small"].text
    assert "x: under 1073741824 elements (32-bit offsets)" in srcs["small"].text
    assert "pid = tl.program_id(0).to(tl.int64)" in srcs["huge"].text
    assert "32-bit offsets" not in srcs["huge"].text


def test_a_gram_contraction_loads_its_tile_once():
    """dot_interaction's X . X^T: the B operand is A's tile transposed, not a second load
    (with one sample per program and with a batch of samples); gemm's two buffers load
    twice. All compile for cuda:90."""
    import backend_checks as bc

    d = ops.get("dot_interaction")
    sd = d.shape("gpu")
    op, dims = d.op_for(sd), d.dims(sd)
    batched = bc.VARIANTS["dot_interaction_batched_dot"][2]
    for moves in (None, batched):
        trace = default_trace(op, dims) if moves is None else Trace.make(op.name, moves)
        src = TritonBackend().render(lower(apply_trace(op, trace), dims))
        assert src.text.count("tl.load(p_X") == 1, src.text
        assert re.search(r"b\d+ = tl\.trans\(a\d+(, \(0, 2, 1\))?\)", src.text), src.text
        compile_aot(src, "cuda:90")
    assert gpu_source("gemm").text.count("tl.load(") == 2


def test_keep_asm_returns_the_texts():
    res = compile_aot(gpu_source("softmax"), "cuda:90", keep_asm=True)
    text = res["k_y"]["text"]
    assert ".target sm_90a" in text["ptx"] and "tt.func" in text["ttir"]


def test_the_ptxas_is_chosen_as_the_backend_chooses_it(tmp_path, monkeypatch):
    """A ptxas named by path is the one that assembles and reports (a wrapper that logs its
    calls and runs the real one), and its version is in the result."""
    from triton.backends.nvidia import compiler

    from kevolve.backends.triton import ptxas

    real = compiler.get_ptxas(90).path
    log, wrapper = tmp_path / "calls.log", tmp_path / "ptxas"
    wrapper.write_text(f'#!/bin/sh\necho "$@" >> {log}\nexec {real} "$@"\n')
    wrapper.chmod(0o755)
    monkeypatch.setenv(ptxas.ENV, real)  # restored afterwards
    try:
        res = compile_aot(gpu_source("softmax"), "cuda:90", ptxas=str(wrapper))["k_y"]
        assert os.environ[ptxas.ENV] == str(wrapper)
    finally:
        compiler.get_ptxas_version.cache_clear()
    assert res["ptxas_version"] == ptxas.version(real)
    assert "-v --gpu-name sm_90a" in log.read_text()
    with pytest.raises(ValueError, match="is not an executable file"):
        compile_aot(gpu_source("softmax"), "cuda:90", ptxas=str(tmp_path / "none"))
    assert "ptxas_version" not in compile_aot(gpu_source("softmax"), "hip:gfx942")["k_y"]


def test_signature_mirrors_the_launchers_specialization():
    op = ops.get("softmax").op
    args = ["p_x", "p_y", "d_M", "d_N"]
    sig, consts, attrs = specialize(args, op, {"M": 1, "N": 3_000_000_001})
    assert sig == {"p_x": "*fp32", "p_y": "*fp32", "d_M": "constexpr", "d_N": "i64"}
    assert consts == {(2,): 1}
    assert attrs == {(0,): [["tt.divisibility", 16]], (1,): [["tt.divisibility", 16]]}
    sig, consts, attrs = specialize(args, op, {"M": 48, "N": 50})
    assert sig["d_M"] == sig["d_N"] == "i32" and not consts
    assert (2,) in attrs and (3,) not in attrs
    sig, _, _ = specialize(args, op, {})  # dims the shape class does not fix
    assert sig["d_M"] == "i32"
    with pytest.raises(AotError, match="neither a buffer pointer"):
        specialize(["p_nope"], op, {})


def test_constexpr_dims_are_compiled_in():
    """launch constexpr_dims: the kernel takes those dims as tl.constexpr, the AOT signature
    fixes their values, and the compiled kernel needs no more registers than without."""
    d = ops.get("dot_interaction")
    op, dims = d.op_for("gpu"), d.dims("gpu")
    moves = [{"m": "split", "stage": "Z", "axis": "b", "size": 2, "into": ["bo", "bi"]},
             {"m": "bind", "stage": "Z", "axis": "bo", "to": "grid"},
             {"m": "split", "stage": "Z", "axis": "d", "size": 32},
             {"m": "launch", "num_warps": 2, "dot_precision": "tf32x3"}]
    regs = {}
    for cx in ([], ["F", "D"]):
        ms = moves[:-1] + [{**moves[-1], **({"constexpr_dims": cx} if cx else {})}]
        plan = lower(apply_trace(op, Trace.make(op.name, ms)), dims)
        src = TritonBackend().render(plan)
        res = compile_aot(src, "cuda:90")["k_Z"]
        if cx:
            assert "def k_Z(p_X, p_Z, d_B, d_D: tl.constexpr, d_F: tl.constexpr)" in src.text
            assert res["signature"]["d_D"] == res["signature"]["d_F"] == "constexpr"
            assert res["signature"]["d_B"] == "i32"
        else:
            assert "tl.constexpr" not in src.text
        regs[bool(cx)] = res["registers"]
    assert regs[True] <= regs[False], regs



@pytest.mark.parametrize("target", TARGETS)
def test_persistent_programs_loop_over_tiles_and_compile(target):
    """launch persistent: the kernel body sits in a loop over tiles that starts at the
    program's id and steps by the number of programs, the launcher starts at most
    `persistent` programs per multiprocessor, and the kernel compiles for both GPUs (the
    interpreter tests check the results)."""
    d = ops.get("gemm_bias_gelu")
    op, dims = d.op_for("gpu"), d.dims("gpu")
    moves = [*gemm_tiles(128, 128, 64),
             {"m": "launch", "num_warps": 8, "group_m": 8, "persistent": 2}]
    plan = lower(apply_trace(op, Trace.make(op.name, moves)), dims)
    text = TritonBackend().render(plan).text
    body = text[text.index("def k_y("):text.index("def launch(")]
    assert "for tile in tl.range(tl.program_id(0), " in body and \
        ", tl.num_programs(0)):" in body
    assert body.count("tl.program_id(0)") == 1  # the tile, not the program, picks the tile
    assert "grid = (min(grid[0], 2 * _multiprocessors(dev)),)" in text
    res = compile_aot(TritonBackend().render(plan), target)["k_y"]
    assert ASM[target] <= set(res["asm"]), res["asm"]
    if target.startswith("cuda"):
        assert res["spill_stores"] == 0, res
    one = lower(apply_trace(op, Trace.make(op.name, moves[:-1] + [{"m": "launch",
                                                                    "num_warps": 8}])), dims)
    assert "tl.range" not in TritonBackend().render(one).text

def test_targets():
    assert gpu_target("cuda:90") == gpu_target("cuda:90")
    t = gpu_target("cuda:90")
    assert (t.backend, t.arch, t.warp_size) == ("cuda", 90, 32)
    t = gpu_target("hip:gfx942")
    assert (t.backend, t.arch, t.warp_size) == ("hip", "gfx942", 64)
    assert gpu_target("hip:gfx1100").warp_size == 32
    assert gpu_target("hip:gfx90a").warp_size == 64
    for bad in ("cuda", "cuda:sm90", "hip:mi300", "metal:1"):
        with pytest.raises(ValueError, match="unknown target"):
            gpu_target(bad)


def test_compile_error_names_kernel_and_target():
    good = gpu_source("softmax")
    text = textwrap.dedent("""\
        import triton
        import triton.language as tl


        @triton.jit
        def k_y(p_x, p_y, d_M, d_N):
            r = tl.arange(0, 48)  # not a power of two
            tl.store(p_y + r, tl.load(p_x + r))
        """)
    bad = KernelSource("triton", "softmax", "python", text, "launch", meta=good.meta)
    with pytest.raises(AotError, match=r"(?s)k_y for cuda:90: .*power of 2"):
        compile_aot(bad, "cuda:90")


def test_only_triton_sources():
    src = KernelSource("cpu", "softmax", "c", "int x;", "kv_launch", meta={"plan": None})
    with pytest.raises(ValueError, match="Triton sources"):
        compile_aot(src, "cuda:90")


PTXAS_LOG = """\
ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'k_Z' for 'sm_90a'
ptxas info    : Function properties for k_Z
    200 bytes stack frame, 196 bytes spill stores, 224 bytes spill loads
ptxas info    : Used 255 registers, used 1 barriers, 2048 bytes smem, 400 bytes cmem[0]
"""


def test_parse_ptxas():
    info = parse_ptxas(PTXAS_LOG)
    assert {k: info[k] for k in ("registers", "spill_stores", "spill_loads", "stack_frame",
                                 "shared_bytes", "barriers")} == {
        "registers": 255, "spill_stores": 196, "spill_loads": 224, "stack_frame": 200,
        "shared_bytes": 2048, "barriers": 1}
    with pytest.raises(AotError, match="no register count"):
        parse_ptxas("ptxas fatal   : something else")


AMDGCN_TAIL = """\
; NumVgprs: 51
; Occupancy: 8
amdhsa.kernels:
  - .args: []
    .group_segment_fixed_size: 1024
    .private_segment_fixed_size: 16
    .sgpr_count:     52
    .sgpr_spill_count: 0
    .vgpr_count:     51
    .vgpr_spill_count: 3
"""


def test_parse_amdgcn_metadata():
    assert amdgcn_info(AMDGCN_TAIL) == {"vgpr_count": 51, "sgpr_count": 52,
                                        "vgpr_spill_count": 3, "sgpr_spill_count": 0,
                                        "lds": 1024, "scratch": 16, "occupancy": 8}
    with pytest.raises(AotError, match="vgpr_count"):
        amdgcn_info("; nothing here")
