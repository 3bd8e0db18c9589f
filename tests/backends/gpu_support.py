"""Shared by test_cuda.py and test_hip.py: toolchain requirements (skip on a developer
machine, fail under CI=true), the emulated correctness check, non-default schedules and
shapes that reach every path of the GPU C-like emitter, and parallel compiles."""

from __future__ import annotations

import os
import shutil
import warnings
from concurrent.futures import ThreadPoolExecutor

import pytest
from backend_checks import LAYERNORM_LOOPED, VARIANT_SOFTMAX_ONLINE

from kevolve import api, ops
from kevolve.evaluate import check as ev
from kevolve.ir import interp
from kevolve.schedule import Trace

SEEDS = (0, 1)


def need(tool: str, why: str) -> str:
    """The tool's path; without it, skip (the reason is printed as a warning too) — or fail
    when CI=true: CI installs its toolchains, so a missing one is a broken setup."""
    path = shutil.which(tool)
    if path:
        return path
    msg = f"{tool} is not installed: {why}"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"CI=true and {msg}", pytrace=False)
    warnings.warn(f"skipping: {msg}", stacklevel=2)
    pytest.skip(msg)


def shapes(name: str, edges: bool = True) -> list[tuple[str, dict]]:
    d = ops.resolve(name)
    out = [("small", d.shape("small"))]
    if edges:
        out += [(f"edge{i}", dict(s)) for i, s in enumerate(d.edge_shapes)]
    return out


def lower(be, name: str, shape, moves: list[dict] | None = None):
    d = ops.resolve(name)
    sd = d.shape(shape)
    trace = None if moves is None else Trace.make(d.op_for(sd).name, moves)
    return api.lower(d.op_for(sd), trace, be, d.dims(sd))


def check_emulated(be, name: str, shape, moves: list[dict] | None = None,
                   seeds=SEEDS) -> list[str]:
    """Problems running `name` at `shape` through an emulated GPU backend (numpy in/out):
    NaN-poisoned outputs, fresh inputs per seed, float64 reference, inputs unchanged."""
    d = ops.resolve(name)
    sd = d.shape(shape)
    op = d.op_for(sd)
    kernel = be.build(lower(be, name, sd, moves))
    problems = []
    for seed in seeds:
        case = d.case(sd, 100 + seed)
        dims = interp.bind_dims(op, case.inputs, case.params)
        ins = ev.inputs_for(op, case.inputs)
        before = {k: v.copy() for k, v in ins.items()}
        outs = ev.alloc_outputs(op, dims)
        kernel(ins, outs, dict(case.params))
        if (changed := ev.unchanged(before, ins)) is not None:
            problems.append(f"seed {seed}: input {changed!r} was modified")
        r = ev.compare(op, outs, interp.run(op, case.inputs, case.params))
        if not r.ok:
            problems.append(f"seed {seed}: {r.message}")
    return problems


def check_launcher(be, name: str, shape, moves: list[dict] | None = None, seed: int = 0
                   ) -> list[str]:
    """Problems running through the GPU loaders' Python launch path (grid, guards, scratch,
    argument order) with torch CPU tensors, `be` built with loader="emulator"."""
    d = ops.resolve(name)
    sd = d.shape(shape)
    op = d.op_for(sd)
    kernel = be.build(lower(be, name, sd, moves))
    case = d.case(sd, 200 + seed)
    dims = interp.bind_dims(op, case.inputs, case.params)
    ins = ev.inputs_for(op, case.inputs, "torch", "cpu")
    outs = ev.alloc_outputs(op, dims, "torch", "cpu")
    kernel(ins, outs, dict(case.params))
    r = ev.compare(op, {k: ev.to_host(v) for k, v in outs.items()},
                   interp.run(op, case.inputs, case.params))
    return [] if r.ok else [r.message]


def parallel(fn, jobs) -> list:
    with ThreadPoolExecutor(max(2, os.cpu_count() or 2)) as ex:
        return list(ex.map(fn, jobs))


def _tile2(op_name: str, stage: str, bi: int, bj: int, bk: int, extra=()) -> tuple:
    return (op_name, [
        {"m": "split", "stage": stage, "axis": "i", "size": bi, "into": ["io", "ii"]},
        {"m": "split", "stage": stage, "axis": "j", "size": bj, "into": ["jo", "ji"]},
        {"m": "reorder", "stage": stage, "order": ["io", "jo", "ii", "ji"]},
        {"m": "bind", "stage": stage, "axis": "io", "to": "grid"},
        {"m": "bind", "stage": stage, "axis": "jo", "to": "grid"},
        *extra])


# Non-default schedules: looped, online and lane-split reductions, 2-d tiles with per-row
# shared arrays, sequential kernel loops, the tiled dot path with a fused epilogue at a
# compute_at, jagged splits, triangles, thread binding, vector hints.
VARIANTS: dict[str, tuple[str, list[dict]]] = {
    "softmax_looped": ("softmax", [
        {"m": "bind", "stage": "y", "axis": "i", "to": "grid"},
        {"m": "inline", "stage": "e"},
        {"m": "compute_at", "stage": "mx", "at": ["y", "i"]},
        {"m": "compute_at", "stage": "s", "at": ["y", "i"]},
        {"m": "split", "stage": "mx", "axis": "k", "size": 16},
        {"m": "split", "stage": "s", "axis": "k", "size": 16},
        {"m": "launch", "num_warps": 2}]),
    "softmax_online": ("softmax", VARIANT_SOFTMAX_ONLINE),
    "softmax_rows_online": ("softmax", [  # online over per-row arrays (lanes per point)
        {"m": "split", "stage": "y", "axis": "i", "size": 4, "into": ["io", "ii"]},
        {"m": "bind", "stage": "y", "axis": "io", "to": "grid"},
        {"m": "inline", "stage": "e"},
        {"m": "compute_at", "stage": "mx", "at": ["y", "io"]},
        {"m": "compute_at", "stage": "s", "at": ["y", "io"]},
        {"m": "reduction", "stage": "s", "strategy": "online"}]),
    "log_softmax_split_row": ("log_softmax", [
        {"m": "bind", "stage": "y", "axis": "i", "to": "grid"},
        {"m": "split", "stage": "y", "axis": "j", "size": 32, "into": ["jo", "ji"]},
        {"m": "compute_at", "stage": "mx", "at": ["y", "i"]},
        {"m": "compute_at", "stage": "s", "at": ["y", "i"]},
        {"m": "split", "stage": "mx", "axis": "k", "size": 8},
        {"m": "split", "stage": "s", "axis": "k", "size": 32}]),
    "layernorm_looped": ("layernorm", [*LAYERNORM_LOOPED, {"m": "launch", "num_warps": 2}]),
    "rmsnorm_2d_tile": ("rmsnorm", [
        {"m": "split", "stage": "y", "axis": "i", "size": 2, "into": ["io", "ii"]},
        {"m": "bind", "stage": "y", "axis": "io", "to": "grid"},
        {"m": "compute_at", "stage": "rstd", "at": ["y", "io"]}]),
    "swish_add_vector": ("swish_add", [
        {"m": "split", "stage": "out", "axis": "i", "size": 64, "into": ["io", "ii"]},
        {"m": "bind", "stage": "out", "axis": "io", "to": "grid"},
        {"m": "vectorize", "stage": "out", "axis": "ii", "width": 4},
        {"m": "bind", "stage": "out", "axis": "ii", "to": "threads"}]),
    "gemm_tiled_dot": _tile2("gemm", "y", 16, 16, 16, [
        {"m": "split", "stage": "y", "axis": "k", "size": 16},
        {"m": "launch", "num_warps": 4, "group_m": 2}]),
    "gemm_small_tiles": _tile2("gemm", "y", 4, 8, 4, [
        {"m": "split", "stage": "y", "axis": "k", "size": 4}]),
    "gemm_bias_gelu_epilogue": _tile2("gemm_bias_gelu", "y", 16, 32, 16, [
        {"m": "compute_at", "stage": "acc", "at": ["y", "jo"]},
        {"m": "split", "stage": "acc", "axis": "k", "size": 16}]),
    "embedding_bag_split_bag": ("embedding_bag", [
        {"m": "bind", "stage": "out", "axis": "b", "to": "grid"},
        {"m": "split", "stage": "out", "axis": "l", "size": 2}]),
    "jagged_sum_split_segment": ("jagged_sum", [
        {"m": "bind", "stage": "out", "axis": "b", "to": "grid"},
        {"m": "split", "stage": "out", "axis": "d", "size": 2, "into": ["do", "di"]},
        {"m": "split", "stage": "out", "axis": "l", "size": 4}]),
    "jagged_softmax_looped": ("jagged_softmax", [
        {"m": "bind", "stage": "y", "axis": "b", "to": "grid"},
        {"m": "compute_at", "stage": "mx", "at": ["y", "b"]},
        {"m": "compute_at", "stage": "s", "at": ["y", "b"]},
        {"m": "split", "stage": "mx", "axis": "k", "size": 4},
        {"m": "split", "stage": "s", "axis": "k", "size": 4}]),
    "jagged_to_padded_dense_tiles": ("jagged_to_padded_dense", [
        {"m": "bind", "stage": "out", "axis": "b", "to": "grid"},
        {"m": "split", "stage": "out", "axis": "j", "size": 4, "into": ["jo", "ji"]}]),
    "softmax_three_kernels": ("softmax", [  # producers at root: scratch buffers, 3 launches
        {"m": "bind", "stage": "y", "axis": "i", "to": "grid"},
        {"m": "bind", "stage": "mx", "axis": "i", "to": "grid"},
        {"m": "bind", "stage": "s", "axis": "i", "to": "grid"},
        {"m": "inline", "stage": "e"}]),
    "dot_interaction_grid_i": ("dot_interaction", [
        {"m": "bind", "stage": "Z", "axis": "b", "to": "grid"},
        {"m": "bind", "stage": "Z", "axis": "i", "to": "grid"}]),
}

# Shapes whose default schedules take the tiled dot path (tiles of 16 and more), with
# masked edges: SIMT for f32, WMMA (CUDA) or SIMT (HIP) for bf16.
DOT_CASES = [
    ("gemm", {"M": 130, "K": 100, "N": 70}),
    ("gemm", {"M": 256, "K": 64, "N": 128}),
    ("gemm_bias_gelu", {"M": 130, "K": 100, "N": 70}),
    ("gemm_bias_gelu", {"M": 128, "K": 48, "N": 256}),
    ("dot_interaction", {"B": 3, "F": 27, "D": 128}),
    ("dot_interaction", {"B": 2, "F": 20, "D": 40}),
]
# Storage dtypes and long rows on the generic path.
DTYPE_CASES = [
    ("layernorm", {"M": 3, "N": 4096, "dtype": "bf16"}),
    ("rmsnorm", {"M": 3, "N": 1000, "dtype": "f16"}),
    ("softmax", {"M": 2, "N": 20000}),
]


def illegal(name: str, moves: list[dict], be, shape="small") -> Exception:
    """The MoveError that lowering `moves` for `be` raises (fails if none)."""
    from kevolve.schedule.errors import MoveError
    with pytest.raises(MoveError) as e:
        lower(be, name, shape, moves)
    return e.value


def _rows(stage: str, axis: str, *stats: str, warps: int = 2) -> list[dict]:
    """One program per row, the row statistics computed at the top of each program."""
    return [{"m": "bind", "stage": stage, "axis": axis, "to": "grid"},
            *[{"m": "compute_at", "stage": s, "at": [stage, axis]} for s in stats],
            {"m": "launch", "num_warps": warps}]


def _vec(stage: str, axis: str, width: int) -> dict:
    return {"m": "vectorize", "stage": stage, "axis": axis, "width": width}


def _cache(stage: str, buffer: str) -> dict:
    return {"m": "cache", "stage": stage, "buffer": buffer, "scope": "shared"}


_SOFTMAX = [{"m": "inline", "stage": "e"}, *_rows("y", "i", "mx", "s")]
_SINGLE = [{"m": "reduction", "stage": s, "strategy": "single"} for s in ("mx", "s")]
_JAGGED = {"uniform": {"B": 5, "D": 8, "max_len": 9, "lengths": "uniform"},
           "masked_long": {"B": 6, "D": 12, "max_len": 25, "lengths": "one_long"},
           "empty": {"B": 5, "D": 8, "max_len": 6, "lengths": "all_empty"}}
F4, F2, TILE = "kv_vcopy<float4>", "kv_vcopy<float2>", "__shared__ __align__(16) float kv_c0["

# Schedules that vectorize and cache (docs/backends.md, "Vector accesses" and "Shared
# tiles"): label -> (op, moves, [(shape label, shape, what the CUDA source must contain
# there)]). The shapes are exact and masked tiles whose extents the width divides, and
# jagged ones with empty and long segments; the op's small and edge shapes run too, where
# widths that do not divide fall back to scalar code (a comment in the source says so).
VECTOR_CACHE: dict[str, tuple[str, list[dict], list[tuple[str, dict, tuple[str, ...]]]]] = {
    "softmax_vector": ("softmax", [*_SOFTMAX, *_SINGLE, _vec("mx", "k", 4),
                                   _vec("s", "k", 4), _vec("y", "j", 4)],
                       [("exact", {"M": 3, "N": 64}, (F4,)),
                        ("masked", {"M": 3, "N": 1000}, (F4,))]),
    "softmax_cache": ("softmax", [*_SOFTMAX, _cache("mx", "x")],
                      [("exact", {"M": 3, "N": 64}, (TILE + "64]",)),
                       ("masked", {"M": 3, "N": 1000}, (TILE + "1024]",))]),
    # no copy engine on this path: a bulk copy is staged by the threads like any other
    "softmax_cache_bulk": ("softmax", [*_SOFTMAX, {**_cache("mx", "x"), "copy": "bulk"}],
                           [("masked", {"M": 3, "N": 1000}, (TILE + "1024]",))]),
    "softmax_cache_vector": ("softmax", [*_SOFTMAX, *_SINGLE, _vec("mx", "k", 4),
                                         _vec("y", "j", 4), _cache("mx", "x")],
                             [("masked", {"M": 3, "N": 1000}, (TILE, F4, "copied as"))]),
    "softmax_online_vector": ("softmax", [
        *VARIANTS["softmax_online"][1], _vec("s", "ki", 4), _vec("y", "ji", 4)],
        [("exact", {"M": 3, "N": 64}, (F4,)), ("masked", {"M": 2, "N": 1000}, (F4,))]),
    "layernorm_vector_cache": ("layernorm", [
        {"m": "inline", "stage": "rstd"}, *_rows("y", "i", "mean", "var"),
        *[{"m": "reduction", "stage": s, "strategy": "single"} for s in ("mean", "var")],
        _vec("mean", "k", 4), _vec("y", "j", 4), _cache("mean", "x"),
        _cache("y", "weight")],
        [("exact", {"M": 3, "N": 64, "dtype": "f32"}, (TILE, F4, "kv_c1[")),
         ("masked", {"M": 2, "N": 1000, "dtype": "f32"}, (TILE, F4)),
         ("bf16", {"M": 2, "N": 96, "dtype": "bf16"}, ("kv_vcopy<kv_bf16x4>",
                                                       "__nv_bfloat16 kv_c0["))]),
    "rmsnorm_vector": ("rmsnorm", [*_rows("y", "i", "rstd"),
                                   {"m": "reduction", "stage": "rstd", "strategy": "single"},
                                   _vec("rstd", "k", 8), _vec("y", "j", 8)],
                       [("bf16", {"M": 3, "N": 64, "dtype": "bf16"}, ("kv_vcopy<kv_bf16x8>",)),
                        ("masked", {"M": 2, "N": 200, "dtype": "f32"}, ("2 x float4",))]),
    "swish_add_vector_cache": ("swish_add", [
        {"m": "split", "stage": "out", "axis": "i", "size": 64, "into": ["io", "ii"]},
        {"m": "bind", "stage": "out", "axis": "io", "to": "grid"},
        _vec("out", "ii", 2), _cache("out", "x")],
        [("exact", {"n": 256, "dtype": "f32"}, (F2, TILE + "64]")),
         ("masked", {"n": 1000, "dtype": "f32"}, (F2, TILE)),
         ("f16", {"n": 130, "dtype": "f16"}, ("kv_vcopy<__half2>",))]),
    "jagged_sum_vector": ("jagged_sum", [
        {"m": "bind", "stage": "out", "axis": "b", "to": "grid"},
        {"m": "split", "stage": "out", "axis": "l", "size": 4}, _vec("out", "d", 4),
        {"m": "launch", "num_warps": 1}],
        [(k, v, (F4,)) for k, v in _JAGGED.items()]),
    "jagged_softmax_vector_cache": ("jagged_softmax", [
        *_rows("y", "b", "mx", "s"), _vec("y", "d", 2), _cache("mx", "values")],
        [(k, v, (F2, TILE)) for k, v in _JAGGED.items()]),
    "jagged_to_padded_dense_vector": ("jagged_to_padded_dense", [
        {"m": "bind", "stage": "out", "axis": "b", "to": "grid"},
        {"m": "split", "stage": "out", "axis": "j", "size": 4, "into": ["jo", "ji"]},
        _vec("out", "d", 4)],
        [(k, v, (F4,)) for k, v in _JAGGED.items()]),
    "jagged_dense_elementwise_add_vector_cache": ("jagged_dense_elementwise_add", [
        {"m": "bind", "stage": "out", "axis": "b", "to": "grid"},
        {"m": "split", "stage": "out", "axis": "l", "size": 4}, _vec("out", "d", 4),
        _cache("out", "dense")],
        [(k, v, (F4, TILE)) for k, v in _JAGGED.items()]),
    "embedding_bag_vector": ("embedding_bag", [
        {"m": "bind", "stage": "out", "axis": "b", "to": "grid"}, _vec("out", "d", 4),
        {"m": "launch", "num_warps": 1}],
        [("uniform", {"V": 30, "D": 8, "B": 9, "max_len": 7, "lengths": "uniform"}, (F4,)),
         ("empty", {"V": 10, "D": 12, "B": 6, "max_len": 4, "lengths": "all_empty"}, (F4,))]),
    "embedding_bag_cache": ("embedding_bag", [  # a gathered tile: rows indices[l]
        {"m": "bind", "stage": "out", "axis": "b", "to": "grid"}, _vec("out", "d", 4),
        _cache("out", "table")],
        [("uniform", {"V": 30, "D": 8, "B": 9, "max_len": 7, "lengths": "uniform"},
          (TILE, F4, "p_indices")),
         ("long", {"V": 30, "D": 4, "B": 7, "max_len": 25, "lengths": "one_long"}, (TILE,))]),
}


def vector_cache_cases(edges: bool = True) -> list[tuple[str, str, list[dict], dict, tuple]]:
    """(id, op, moves, shape, markers) for every VECTOR_CACHE variant at its own shapes
    (markers required) and, with `edges`, the op's small and edge shapes (no markers)."""
    out = []
    for label, (name, moves, own) in VECTOR_CACHE.items():
        out += [(f"{label}/{sl}", name, moves, sd, marks) for sl, sd, marks in own]
        if edges:
            out += [(f"{label}/{sl}", name, moves, sd, ()) for sl, sd in shapes(name)]
    return out


def ptx_of(text: str, nvcc: str, where, include=()) -> str:
    """The PTX nvcc makes of a module's source for sm_90 (`include`: HIP-on-CUDA)."""
    import hashlib
    import subprocess
    from pathlib import Path
    stem = Path(where) / hashlib.sha256(text.encode()).hexdigest()[:16]
    stem.with_suffix(".cu").write_text(text)
    subprocess.run([nvcc, "-arch=sm_90", "-ptx", "-x", "cu", *[f"-I{p}" for p in include],
                    "-o", str(stem.with_suffix(".ptx")), str(stem.with_suffix(".cu"))],
                   check=True, capture_output=True)
    return stem.with_suffix(".ptx").read_text()


def vector_cache_ptx_ok(text: str, ptx: str) -> list[str]:
    """What the PTX lacks that the source asked for: a vector load or store (`.v2`/`.v4`)
    for every kv_vcopy, shared-memory accesses for every cached tile."""
    import re
    bad = []
    if "kv_vcopy<" in text and not re.search(r"(ld|st)\.(global|shared)(\.nc)?\.v[24]\.", ptx):
        bad.append("no vector load or store in the PTX")
    if "kv_c0[" in text and not re.search(r"ld\.shared", ptx):
        bad.append("no shared-memory load in the PTX")
    return bad
