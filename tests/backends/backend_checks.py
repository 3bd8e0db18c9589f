"""Shared correctness checks for backend tests (imported by the test modules and by the
Triton interpreter driver, which runs in a subprocess).

One check = one op, one schedule, one shape: lower for that shape class, build once, then
for each seed run on fresh random inputs with outputs pre-filled with NaN, and compare with
the float64 reference interpreter by dtype tolerance. An element the reference leaves NaN
(no stage writes it) is don't-care; everywhere else NaN never passes. Inputs must come back
unchanged."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from kevolve import ops
from kevolve.ir.interp import bind_dims, output_shapes
from kevolve.ir.interp import run as reference
from kevolve.plan import lower
from kevolve.schedule import Trace, apply_trace, default_trace

SEEDS = (0, 1, 2)
# (rtol, atol): atol is scaled by the output's largest finite reference magnitude (>= 1).
TOL = {"f32": (1e-4, 1e-5), "f16": (2e-3, 2e-3), "bf16": (2e-2, 2e-2), "f64": (1e-9, 1e-9),
       "i64": (0.0, 0.0), "i32": (0.0, 0.0), "i8": (0.0, 0.0), "bool": (0.0, 0.0)}
INT_POISON = -(2 ** 31) + 7  # what an integer output holds until the kernel writes it
# the same for 8-bit outputs (a bool output unwritten reads True where False is expected)
POISON_8 = {"i8": -77, "bool": True}
SEED_BASE = 1000  # seeds differ from the ones other suites use


def shapes(name: str) -> list[tuple[str, dict]]:
    """The `small` preset and every edge shape of a library op, labelled."""
    d = ops.resolve(name)
    return [("small", d.shape("small"))] + [(f"edge{i}", dict(s))
                                            for i, s in enumerate(d.edge_shapes)]


def plan_for(op, dims: dict, moves: list[dict] | None = None, backend=None):
    """Default schedule (or `moves`) lowered for `dims`; the backend's caps check runs too."""
    trace = default_trace(op, dims) if moves is None else Trace.make(op.name, moves)
    sched = apply_trace(op, trace)
    plan = lower(sched, dims)
    if backend is not None:
        backend.check(sched, plan)
    return plan


def compare(op, got: dict[str, np.ndarray], ref: dict[str, np.ndarray]) -> list[str]:
    problems = []
    for name in op.outputs:
        dtype = op.stage(name).out.dtype.name
        g, r = np.asarray(got[name], dtype=np.float64), np.asarray(ref[name], dtype=np.float64)
        if g.shape != r.shape:
            problems.append(f"{name}: shape {g.shape}, expected {r.shape}")
            continue
        care = ~np.isnan(r)
        if not care.any():
            continue
        bad_nan = care & np.isnan(g)
        if bad_nan.any():
            idx = tuple(int(x) for x in np.argwhere(bad_nan)[0])
            problems.append(f"{name}: {int(bad_nan.sum())} of {int(care.sum())} elements NaN "
                            f"(unwritten or poisoned) where the reference is finite, first at "
                            f"{idx}")
            continue
        rtol, atol = TOL[dtype]
        finite = care & np.isfinite(r)
        scale = max(1.0, float(np.max(np.abs(r[finite]), initial=0.0)))
        err = np.abs(g - r)
        inf_mismatch = care & ~np.isfinite(r) & (g != r)
        over = finite & (err > atol * scale + rtol * np.abs(r))
        if over.any() or inf_mismatch.any():
            where = over | inf_mismatch
            idx = tuple(int(x) for x in np.argwhere(where)[0])
            problems.append(f"{name} ({dtype}): {int(where.sum())} of {int(care.sum())} "
                            f"elements off, max |err| {float(np.max(err[finite], initial=0)):.3g}"
                            f"; first at {idx}: got {g[idx]!r}, expected {r[idx]!r}")
    return problems


def host_inputs(op, case) -> dict[str, np.ndarray]:
    return {b.name: np.ascontiguousarray(case.inputs[b.name], dtype=b.dtype.np)
            for b in op.inputs}


def to_lib(op, host: dict[str, np.ndarray], lib: str) -> dict:
    if lib == "numpy":
        return {k: v.copy() for k, v in host.items()}

    from kevolve.ops.base import torch_inputs

    return torch_inputs(op, ops.Case(host))


def nan_outputs(op, dims: dict, lib: str) -> dict:
    shapes_ = output_shapes(op, dims)
    poison = {n: np.nan if op.stage(n).out.dtype.is_float else
              POISON_8.get(op.stage(n).out.dtype.name, INT_POISON) for n in op.outputs}
    if lib == "numpy":
        return {n: np.full(shapes_[n], poison[n], dtype=op.stage(n).out.dtype.np)
                for n in op.outputs}
    import torch

    tt = {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16,
          "i64": torch.int64, "i32": torch.int32, "i8": torch.int8, "bool": torch.bool}
    return {n: torch.full(shapes_[n], poison[n], dtype=tt[op.stage(n).out.dtype.name])
            for n in op.outputs}


def to_host(x) -> np.ndarray:
    if isinstance(x, np.ndarray):
        return x
    return x.detach().to("cpu").double().numpy() if x.is_floating_point() else \
        x.detach().to("cpu").numpy()


def check(backend, name: str, shape: dict, moves: list[dict] | None = None,
          seeds=SEEDS, call_shape: dict | None = None) -> list[str]:
    """Problems found running `name` on `backend` at `shape` (empty: all good). With
    `call_shape`, the kernel lowered for `shape` is called with inputs of `call_shape`."""
    d = ops.resolve(name)
    op = d.op_for(shape)
    lib = backend.tensor_lib
    kernel = backend.build(backend.render(plan_for(op, d.dims(shape), moves, backend)))
    problems = []
    for seed in seeds:
        case = d.case(d.shape(call_shape or shape), SEED_BASE + seed)
        host = host_inputs(op, case)
        dims = bind_dims(op, host, case.params)
        ins = to_lib(op, host, lib)
        outs = nan_outputs(op, dims, lib)
        kernel(ins, outs, dict(case.params))
        for k, v in ins.items():
            if not np.array_equal(to_host(v), host[k].astype(to_host(v).dtype),
                                  equal_nan=host[k].dtype.kind == "f"):
                problems.append(f"seed {seed}: input {k!r} was modified")
        ref = reference(op, host, case.params)
        problems += [f"seed {seed}: {p}" for p in
                     compare(op, {k: to_host(v) for k, v in outs.items()}, ref)]
    return problems


# One row per program, the row in chunks of 16 (mean and var computed in the program).
LAYERNORM_LOOPED = [
    {"m": "bind", "stage": "y", "axis": "i", "to": "grid"},
    {"m": "split", "stage": "y", "axis": "j", "size": 16, "into": ["jo", "ji"]},
    {"m": "inline", "stage": "rstd"},
    {"m": "compute_at", "stage": "mean", "at": ["y", "i"]},
    {"m": "compute_at", "stage": "var", "at": ["y", "i"]},
    {"m": "split", "stage": "mean", "axis": "k", "size": 16},
    {"m": "split", "stage": "var", "axis": "k", "size": 16}]

def _grid_tiles(bm: int, bn: int) -> list[dict]:
    """y[i, j] on bm x bn tiles, one program per tile."""
    return [{"m": "split", "stage": "y", "axis": "i", "size": bm, "into": ["io", "ii"]},
            {"m": "split", "stage": "y", "axis": "j", "size": bn, "into": ["jo", "ji"]},
            {"m": "reorder", "stage": "y", "order": ["io", "jo", "ii", "ji"]},
            {"m": "bind", "stage": "y", "axis": "io", "to": "grid"},
            {"m": "bind", "stage": "y", "axis": "jo", "to": "grid"}]


def dot_tiles(bm: int, bn: int, bk: int) -> list[dict]:
    """A contraction y[i, j] = sum_k (gemm) on bm x bn tiles, reduced in bk steps."""
    return [*_grid_tiles(bm, bn), {"m": "split", "stage": "y", "axis": "k", "size": bk}]


def gemm_tiles(bm: int, bn: int, bk: int) -> list[dict]:
    """gemm_bias_gelu on bm x bn tiles of y, its contraction computed at the tile in bk
    steps (so the epilogue fuses into the dot's program)."""
    return [*_grid_tiles(bm, bn), {"m": "compute_at", "stage": "acc", "at": ["y", "jo"]},
            {"m": "split", "stage": "acc", "axis": "k", "size": bk}]


def bulk_copies(stage: str, *buffers: str) -> list[dict]:
    """`cache` moves copying these buffers' tiles in bulk for `stage`."""
    return [{"m": "cache", "stage": stage, "buffer": b, "scope": "shared", "copy": "bulk"}
            for b in buffers]


def bulk_store(stage: str, parts: int = 1) -> dict:
    """The `cache` move writing `stage`'s own output in bulk, in `parts` pieces."""
    return {"m": "cache", "stage": stage, "buffer": stage, "scope": "shared", "copy": "bulk",
            "parts": parts}


BULK_AW = bulk_copies("acc", "A", "W")

VARIANT_SOFTMAX_ONLINE = [
    {"m": "bind", "stage": "y", "axis": "i", "to": "grid"},
    {"m": "inline", "stage": "e"},
    {"m": "split", "stage": "y", "axis": "j", "size": 16, "into": ["jo", "ji"]},
    {"m": "split", "stage": "s", "axis": "k", "size": 16},
    {"m": "compute_at", "stage": "mx", "at": ["y", "i"]},
    {"m": "compute_at", "stage": "s", "at": ["y", "i"]},
    {"m": "reduction", "stage": "s", "strategy": "online"}]

# Non-default schedules, one or two per op family: looped and online reductions, 2-d tiles,
# split jagged reductions, tiles smaller than the row. label -> (op, a reduction strategy
# the lowered plan must contain (so the variant really exercises it), moves).
VARIANTS: dict[str, tuple[str, str, list[dict]]] = {
    "softmax_looped": ("softmax", "looped", [
        {"m": "bind", "stage": "y", "axis": "i", "to": "grid"},
        {"m": "inline", "stage": "e"},
        {"m": "compute_at", "stage": "mx", "at": ["y", "i"]},
        {"m": "compute_at", "stage": "s", "at": ["y", "i"]},
        {"m": "split", "stage": "mx", "axis": "k", "size": 16},
        {"m": "split", "stage": "s", "axis": "k", "size": 16}]),
    "softmax_online": ("softmax", "online", VARIANT_SOFTMAX_ONLINE),
    "log_softmax_split_row": ("log_softmax", "looped", [
        {"m": "bind", "stage": "y", "axis": "i", "to": "grid"},
        {"m": "split", "stage": "y", "axis": "j", "size": 32, "into": ["jo", "ji"]},
        {"m": "compute_at", "stage": "mx", "at": ["y", "i"]},
        {"m": "compute_at", "stage": "s", "at": ["y", "i"]},
        {"m": "split", "stage": "mx", "axis": "k", "size": 8},
        {"m": "split", "stage": "s", "axis": "k", "size": 32}]),
    "layernorm_looped": ("layernorm", "looped", [*LAYERNORM_LOOPED,
                                                 {"m": "launch", "num_warps": 2}]),
    "rmsnorm_2d_tile": ("rmsnorm", "single", [
        {"m": "split", "stage": "y", "axis": "i", "size": 2, "into": ["io", "ii"]},
        {"m": "bind", "stage": "y", "axis": "io", "to": "grid"},
        {"m": "compute_at", "stage": "rstd", "at": ["y", "io"]}]),
    "swish_add_small_tile": ("swish_add", "none", [
        {"m": "split", "stage": "out", "axis": "i", "size": 64, "into": ["io", "ii"]},
        {"m": "bind", "stage": "out", "axis": "io", "to": "grid"},
        {"m": "vectorize", "stage": "out", "axis": "ii", "width": 4}]),
    "gemm_tiled_dot": ("gemm", "dot", [*dot_tiles(16, 16, 16),
                                       {"m": "launch", "num_warps": 4, "group_m": 2}]),
    "gemm_small_tiles": ("gemm", "looped", dot_tiles(4, 8, 4)),
    "gemm_bias_gelu_epilogue": ("gemm_bias_gelu", "dot", gemm_tiles(16, 16, 16)),
    "embedding_bag_split_bag": ("embedding_bag", "looped", [
        {"m": "bind", "stage": "out", "axis": "b", "to": "grid"},
        {"m": "split", "stage": "out", "axis": "l", "size": 2}]),
    "jagged_sum_split_segment": ("jagged_sum", "looped", [
        {"m": "bind", "stage": "out", "axis": "b", "to": "grid"},
        {"m": "split", "stage": "out", "axis": "d", "size": 2, "into": ["do", "di"]},
        {"m": "split", "stage": "out", "axis": "l", "size": 4}]),
    "jagged_softmax_looped": ("jagged_softmax", "looped", [
        {"m": "bind", "stage": "y", "axis": "b", "to": "grid"},
        {"m": "compute_at", "stage": "mx", "at": ["y", "b"]},
        {"m": "compute_at", "stage": "s", "at": ["y", "b"]},
        {"m": "split", "stage": "mx", "axis": "k", "size": 4},
        {"m": "split", "stage": "s", "axis": "k", "size": 4}]),
    "jagged_to_padded_dense_tiles": ("jagged_to_padded_dense", "none", [
        {"m": "bind", "stage": "out", "axis": "b", "to": "grid"},
        {"m": "split", "stage": "out", "axis": "j", "size": 4, "into": ["jo", "ji"]}]),
    "dot_interaction_grid_i": ("dot_interaction", "single", [
        {"m": "bind", "stage": "Z", "axis": "b", "to": "grid"},
        {"m": "bind", "stage": "Z", "axis": "i", "to": "grid"}]),
    # one sample per program, a contraction of X with itself (Triton loads the tile once)
    "dot_interaction_gram": ("dot_interaction", "dot", [
        {"m": "bind", "stage": "Z", "axis": "b", "to": "grid"},
        {"m": "split", "stage": "Z", "axis": "d", "size": 16}],
        [("B3F27D40", {"B": 3, "F": 27, "D": 40}), ("B2F16D16", {"B": 2, "F": 16, "D": 16})]),
    # several samples per program: a batched contraction (rank-3 tile, batch first); at
    # its own shapes, since the small preset's F=6 gives tiles too small for a dot
    "dot_interaction_batched_dot": ("dot_interaction", "dot", [
        {"m": "split", "stage": "Z", "axis": "b", "size": 2, "into": ["bo", "bi"]},
        {"m": "bind", "stage": "Z", "axis": "bo", "to": "grid"},
        {"m": "split", "stage": "Z", "axis": "d", "size": 16},
        {"m": "launch", "num_warps": 2, "dot_precision": "tf32x3"}],
        [("B5F20D40", {"B": 5, "F": 20, "D": 40}), ("B4F27D64", {"B": 4, "F": 27, "D": 64}),
         ("B1F17D16", {"B": 1, "F": 17, "D": 16})]),
    # the same with F and D compiled in (Triton constexpr; the C family passes them)
    "dot_interaction_constexpr": ("dot_interaction", "dot", [
        {"m": "split", "stage": "Z", "axis": "b", "size": 2, "into": ["bo", "bi"]},
        {"m": "bind", "stage": "Z", "axis": "bo", "to": "grid"},
        {"m": "split", "stage": "Z", "axis": "d", "size": 16},
        {"m": "launch", "num_warps": 2, "dot_precision": "tf32x3",
         "constexpr_dims": ["F", "D"]}],
        [("B5F20D40", {"B": 5, "F": 20, "D": 40}), ("B3F17D16", {"B": 3, "F": 17, "D": 16})]),
    "layernorm_constexpr": ("layernorm", "looped", [*LAYERNORM_LOOPED,
                                                    {"m": "launch", "constexpr_dims": ["N"]}]),
    # persistent programs (Triton's interpreter counts 4 multiprocessors): fewer programs
    # than tiles, each taking every n-th tile of the grid
    "gemm_bias_gelu_persistent": ("gemm_bias_gelu", "dot", [
        *gemm_tiles(16, 16, 16), {"m": "launch", "group_m": 2, "persistent": 1}],
        [("M70K33N90", {"M": 70, "K": 33, "N": 90}), ("M13K7N100", {"M": 13, "K": 7, "N": 100}),
         ("M1K1N1", {"M": 1, "K": 1, "N": 1})]),
    # both operands copied in bulk (Triton: tensor descriptors, zero-filled past the
    # buffer's end, so tails in every dim; shapes with rows not a multiple of 16 bytes get
    # pointer tiles for that operand; other backends copy with threads)
    "gemm_bias_gelu_bulk": ("gemm_bias_gelu", "dot", [
        *gemm_tiles(32, 32, 32), *BULK_AW, {"m": "launch", "persistent": 1}],
        [("M40K48N72", {"M": 40, "K": 48, "N": 72}), ("M64K64N64", {"M": 64, "K": 64, "N": 64}),
         ("M13K7N100", {"M": 13, "K": 7, "N": 100})]),
    "gemm_bulk": ("gemm", "dot", [*dot_tiles(16, 16, 16), *bulk_copies("y", "A", "W")],
        [("M40K20N36", {"M": 40, "K": 20, "N": 36}), ("M13K7N100", {"M": 13, "K": 7, "N": 100})]),
    # the output written in bulk too, in 4 pieces, and the tile loop pipelined across tiles;
    # N=100 (200-byte rows) falls back to pointer stores and W to pointer tiles
    "gemm_bias_gelu_bulk_store": ("gemm_bias_gelu", "dot", [
        *gemm_tiles(32, 64, 32), *BULK_AW, bulk_store("y", 4),
        {"m": "launch", "persistent": 1, "pipeline": "across_tiles"}],
        [("M40K48N72", {"M": 40, "K": 48, "N": 72}), ("M64K64N136", {"M": 64, "K": 64, "N": 136}),
         ("M13K7N100", {"M": 13, "K": 7, "N": 100})]),
    "gemm_bulk_store": ("gemm", "dot", [*dot_tiles(16, 32, 16), *bulk_copies("y", "A", "W"),
                                        bulk_store("y", 2)],
        [("M40K20N36", {"M": 40, "K": 20, "N": 36}), ("M16K16N64", {"M": 16, "K": 16, "N": 64})]),
    "softmax_online_persistent": ("softmax", "online", [
        *VARIANT_SOFTMAX_ONLINE, {"m": "launch", "persistent": 1}],
        [("M37N50", {"M": 37, "N": 50}), ("M3N1000", {"M": 3, "N": 1000})]),
    "jagged_sum_persistent": ("jagged_sum", "looped", [
        {"m": "bind", "stage": "out", "axis": "b", "to": "grid"},
        {"m": "split", "stage": "out", "axis": "d", "size": 2, "into": ["do", "di"]},
        {"m": "split", "stage": "out", "axis": "l", "size": 4},
        {"m": "launch", "persistent": 2}],
        [("B19D5", {"B": 19, "D": 5, "max_len": 7}),
         ("B5all_empty", {"B": 5, "D": 3, "max_len": 6, "lengths": "all_empty"})]),
}


# Several outputs in one kernel: spec files under examples/ whose outputs share their loops
# (an output computed in another stage's program and stored from there), default and
# non-default schedules, at sizes of 1, primes and rows that are not a multiple of the tile.
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
FUSED_ADD_RMSNORM = f"{EXAMPLES / 'norms.py'}:FUSED_ADD_RMSNORM"
LAYERNORM_STATS = f"{EXAMPLES / 'norms.py'}:LAYERNORM_STATS"
ROW_MOMENTS = f"{EXAMPLES / 'reductions.py'}:ROW_MOMENTS"
ROW_SHAPES = [("M1N1", {"M": 1, "N": 1}), ("M7N13", {"M": 7, "N": 13}),
              ("M3N131", {"M": 3, "N": 131})]
LONG_ROWS = [("M1N1", {"M": 1, "N": 1}), ("M5N37", {"M": 5, "N": 37}),
             ("M2N1000", {"M": 2, "N": 1000})]
MULTI_OUTPUT: dict[str, tuple] = {
    "fused_add_rmsnorm_default": (FUSED_ADD_RMSNORM, "single", None, ROW_SHAPES),
    # the row in chunks of 16: h stored per chunk, ms recomputing x + residual per chunk
    "fused_add_rmsnorm_looped": (FUSED_ADD_RMSNORM, "looped", [
        {"m": "bind", "stage": "y", "axis": "i", "to": "grid"},
        {"m": "split", "stage": "y", "axis": "j", "size": 16, "into": ["jo", "ji"]},
        {"m": "compute_at", "stage": "h", "at": ["y", "jo"]},
        {"m": "compute_at", "stage": "ms", "at": ["y", "i"]},
        {"m": "split", "stage": "ms", "axis": "k", "size": 16}], LONG_ROWS),
    # the same with 4-wide vectors along the row (CUDA/HIP: float4 loads of x, residual)
    "fused_add_rmsnorm_vector": (FUSED_ADD_RMSNORM, "looped", [
        {"m": "bind", "stage": "y", "axis": "i", "to": "grid"},
        {"m": "split", "stage": "y", "axis": "j", "size": 16, "into": ["jo", "ji"]},
        {"m": "compute_at", "stage": "h", "at": ["y", "jo"]},
        {"m": "compute_at", "stage": "ms", "at": ["y", "i"]},
        {"m": "split", "stage": "ms", "axis": "k", "size": 16},
        {"m": "vectorize", "stage": "y", "axis": "ji", "width": 4}],
        [("M5N37", {"M": 5, "N": 37}), ("M3N64", {"M": 3, "N": 64})]),
    # two rows per program: the last program's second row is masked off
    "fused_add_rmsnorm_rows": (FUSED_ADD_RMSNORM, "single", [
        {"m": "split", "stage": "y", "axis": "i", "size": 2, "into": ["io", "ii"]},
        {"m": "bind", "stage": "y", "axis": "io", "to": "grid"},
        {"m": "compute_at", "stage": "h", "at": ["y", "io"]},
        {"m": "compute_at", "stage": "ms", "at": ["y", "io"]}], ROW_SHAPES),
    "layernorm_stats_default": (LAYERNORM_STATS, "single", None, ROW_SHAPES),
    "layernorm_stats_looped": (LAYERNORM_STATS, "looped", [
        {"m": "bind", "stage": "y", "axis": "i", "to": "grid"},
        {"m": "split", "stage": "y", "axis": "j", "size": 16, "into": ["jo", "ji"]},
        {"m": "compute_at", "stage": "mean", "at": ["y", "i"]},
        {"m": "compute_at", "stage": "var", "at": ["y", "i"]},
        {"m": "compute_at", "stage": "rstd", "at": ["y", "i"]},
        {"m": "split", "stage": "mean", "axis": "k", "size": 16},
        {"m": "split", "stage": "var", "axis": "k", "size": 16}], LONG_ROWS),
    "row_moments_default": (ROW_MOMENTS, "single", None, ROW_SHAPES),
    # sibling outputs, 4 rows per program, the reductions in chunks of 8
    "row_moments_rows_looped": (ROW_MOMENTS, "looped", [
        {"m": "split", "stage": "q", "axis": "i", "size": 4, "into": ["io", "ii"]},
        {"m": "bind", "stage": "q", "axis": "io", "to": "grid"},
        {"m": "compute_at", "stage": "s", "at": ["q", "io"]},
        {"m": "split", "stage": "s", "axis": "k", "size": 8},
        {"m": "split", "stage": "q", "axis": "k", "size": 8}], LONG_ROWS),
}
VARIANTS.update(MULTI_OUTPUT)

# Reductions split across programs (`reduction` strategy `split`, schedule/rfactor.py):
# partial results per chunk in a stage of their own, combined by the stage; factors that
# do not divide the extent and exceed it (empty chunks), sum and max, a scalar output.
MSE_LOSS = f"{EXAMPLES / 'losses.py'}:MSE_LOSS"
COL_SUM = f"{EXAMPLES / 'reductions.py'}:COL_SUM"
ROW_ABSMAX = f"{EXAMPLES / 'reductions.py'}:ROW_ABSMAX"
SPLIT_SHAPES = [("M1N1", {"M": 1, "N": 1}), ("M37N5", {"M": 37, "N": 5}),
                ("M5N131", {"M": 5, "N": 131})]
SPLIT_REDUCTION: dict[str, tuple] = {
    # a loss to a scalar: 8 chunks of rows, each program over its rows and every column
    "mse_loss_split": (MSE_LOSS, "looped", [
        {"m": "reduction", "stage": "loss", "strategy": "split", "factor": 8},
        {"m": "split", "stage": "loss_rf", "axis": "r", "size": 2}], SPLIT_SHAPES),
    # down the columns: column tiles of 4 on the grid, the rows in 3 chunks of tiles of 4
    "col_sum_split": (COL_SUM, "looped", [
        {"m": "split", "stage": "y", "axis": "j", "size": 4},
        {"m": "bind", "stage": "y", "axis": "jo", "to": "grid"},
        {"m": "split", "stage": "y", "axis": "r", "size": 4},
        {"m": "reduction", "stage": "y", "strategy": "split", "factor": 3}], SPLIT_SHAPES),
    # a max: empty chunks hold the identity, which the combining max ignores
    "row_absmax_split": (ROW_ABSMAX, "looped", [
        {"m": "bind", "stage": "y", "axis": "i", "to": "grid"},
        {"m": "split", "stage": "y", "axis": "k", "size": 8},
        {"m": "reduction", "stage": "y", "strategy": "split", "factor": 4}], SPLIT_SHAPES),
    # a library op: layernorm's mean in partial sums, var and y as before
    "layernorm_mean_split": ("layernorm", "looped", [
        {"m": "bind", "stage": "y", "axis": "i", "to": "grid"},
        {"m": "inline", "stage": "rstd"},
        {"m": "compute_at", "stage": "mean", "at": ["y", "i"]},
        {"m": "compute_at", "stage": "var", "at": ["y", "i"]},
        {"m": "split", "stage": "mean", "axis": "k", "size": 16},
        {"m": "reduction", "stage": "mean", "strategy": "split", "factor": 4}],
        [("M1N1", {"M": 1, "N": 1}), ("M7N13", {"M": 7, "N": 13}),
         ("M3N131", {"M": 3, "N": 131})]),
}
VARIANTS.update(SPLIT_REDUCTION)


def default_cases() -> list[tuple[str, str, dict]]:
    """(id "op/shape label", op, shape) for every library op at small and its edge shapes."""
    return [(f"{n}/{label}", n, s) for n in ops.names() for label, s in shapes(n)]


def variant_cases(labels=None, only_small: bool = False):
    """(id "variant/shape label", op, expected strategy, moves, shape) for the variants."""
    out = []
    for v, (n, expect, moves, *own) in VARIANTS.items():
        if labels is not None and v not in labels:
            continue
        for label, s in own[0] if own else shapes(n)[:1 if only_small else None]:
            out.append((f"{v}/{label}", n, expect, moves, s))
    return out


def strategies(plan) -> set[str]:
    return {st.strategy for k in plan.kernels for st in k.steps}
