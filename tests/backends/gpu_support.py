"""Shared by test_cuda.py and test_hip.py: toolchain requirements (skip on a developer
machine, fail under CI=true), the emulated correctness check, non-default schedules and
shapes that reach every path of the GPU C-like emitter, and parallel compiles."""

from __future__ import annotations

import os
import shutil
import warnings
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from kevolve import api, ops
from kevolve.agent import evaluate as ev
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
    d = ops.get(name)
    out = [("small", d.shape("small"))]
    if edges:
        out += [(f"edge{i}", dict(s)) for i, s in enumerate(d.edge_shapes)]
    return out


def lower(be, name: str, shape, moves: list[dict] | None = None):
    d = ops.get(name)
    sd = d.shape(shape)
    trace = None if moves is None else Trace.make(name, moves)
    return api.lower(d.op_for(sd), trace, be, d.dims(sd))


def check_emulated(be, name: str, shape, moves: list[dict] | None = None,
                   seeds=SEEDS) -> list[str]:
    """Problems running `name` at `shape` through an emulated GPU backend (numpy in/out):
    NaN-poisoned outputs, fresh inputs per seed, float64 reference, inputs unchanged."""
    d = ops.get(name)
    sd = d.shape(shape)
    op = d.op_for(sd)
    kernel = be.build(lower(be, name, sd, moves))
    problems = []
    for seed in seeds:
        case = d.make(sd, np.random.default_rng(100 + seed))
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
    d = ops.get(name)
    sd = d.shape(shape)
    op = d.op_for(sd)
    kernel = be.build(lower(be, name, sd, moves))
    case = d.make(sd, np.random.default_rng(200 + seed))
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
    "softmax_online": ("softmax", [
        {"m": "bind", "stage": "y", "axis": "i", "to": "grid"},
        {"m": "inline", "stage": "e"},
        {"m": "split", "stage": "y", "axis": "j", "size": 16, "into": ["jo", "ji"]},
        {"m": "split", "stage": "s", "axis": "k", "size": 16},
        {"m": "compute_at", "stage": "mx", "at": ["y", "i"]},
        {"m": "compute_at", "stage": "s", "at": ["y", "i"]},
        {"m": "reduction", "stage": "s", "strategy": "online"}]),
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
    "layernorm_looped": ("layernorm", [
        {"m": "bind", "stage": "y", "axis": "i", "to": "grid"},
        {"m": "split", "stage": "y", "axis": "j", "size": 16, "into": ["jo", "ji"]},
        {"m": "inline", "stage": "rstd"},
        {"m": "compute_at", "stage": "mean", "at": ["y", "i"]},
        {"m": "compute_at", "stage": "var", "at": ["y", "i"]},
        {"m": "split", "stage": "mean", "axis": "k", "size": 16},
        {"m": "split", "stage": "var", "axis": "k", "size": 16},
        {"m": "launch", "num_warps": 2}]),
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
