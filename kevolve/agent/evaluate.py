"""Checking and timing one kernel: the stages a candidate passes through.

Correctness is judged against the float64 reference interpreter with a tolerance by
output dtype; outputs are poisoned with NaN first (NaN never passes) and inputs must come
back unchanged. Timing is a median after warm-up (device events through
`triton.testing.do_bench` on GPUs; `perf_counter` on CPUs)."""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass

import numpy as np

from ..ir.interp import bind_dims, output_shapes
from ..ir.nodes import Op

# |got - ref| <= atol + rtol * |ref|, per output dtype. fp32 kernels must be accurate to
# fp32 (a tf32 or bf16 shortcut fails); bf16/f16 outputs are judged at their precision.
TOLERANCE = {"f32": (2e-4, 2e-5), "bf16": (2e-2, 2e-2), "f16": (4e-3, 4e-3),
             "i32": (0.0, 0.0), "i64": (0.0, 0.0)}


@dataclass(frozen=True)
class CheckResult:
    ok: bool
    max_error: float
    message: str = ""


def compare(op: Op, got: dict[str, np.ndarray], ref: dict[str, np.ndarray]) -> CheckResult:
    worst = 0.0
    for name in op.outputs:
        dtype = op.stage(name).out.dtype.name
        rtol, atol = TOLERANCE[dtype]
        r = np.asarray(ref[name], dtype=np.float64)
        g = np.asarray(got[name], dtype=np.float64)
        if g.shape != r.shape:
            return CheckResult(False, float("inf"), f"{name}: shape {g.shape} != {r.shape}")
        care = ~np.isnan(r)  # elements no stage writes are don't-care
        gc, rc = g[care], r[care]
        if np.isnan(gc).any():
            k = int(np.flatnonzero(np.isnan(g) & care)[0])
            return CheckResult(False, float("inf"), f"{name}: NaN at flat index {k} "
                               f"({int(np.isnan(gc).sum())} NaNs: unwritten or invalid)")
        if gc.size == 0:
            continue
        err = np.abs(gc - rc)
        worst = max(worst, float(err.max()))
        bad = err > atol + rtol * np.abs(rc)
        if bad.any():
            k = int(np.flatnonzero(care)[np.flatnonzero(bad)[0]])
            idx = np.unravel_index(k, g.shape)
            return CheckResult(False, worst, f"{name}: {int(bad.sum())} of {gc.size} elements "
                               f"off; first at {tuple(int(i) for i in idx)}: got "
                               f"{g[idx]:.6g}, want {r[idx]:.6g}")
    return CheckResult(True, worst)


def alloc_outputs(op: Op, dims: dict[str, int], lib: str = "numpy", device: str = "cpu"):
    """NaN-poisoned outputs (ints get a sentinel) in the representation a backend takes."""
    shapes = output_shapes(op, dims)
    out = {}
    for name, shape in shapes.items():
        dt = op.stage(name).out.dtype
        if lib == "numpy":
            a = np.empty(shape, dtype=dt.np)
            a.fill(np.nan if dt.is_float else -7)
        else:
            import torch
            a = torch.full(shape, float("nan") if dt.is_float else -7,
                           dtype=torch_dtype(dt.name), device=device)
        out[name] = a
    return out


def torch_dtype(name: str):
    import torch
    return {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16,
            "i32": torch.int32, "i64": torch.int64}[name]


def inputs_for(op: Op, host: dict[str, np.ndarray], lib: str = "numpy", device: str = "cpu"):
    out = {}
    for b in op.inputs:
        a = np.ascontiguousarray(host[b.name]).astype(b.dtype.np, copy=False)
        if lib == "numpy":
            out[b.name] = a.copy()
        else:
            import torch
            out[b.name] = torch.from_numpy(a.copy()).to(device=device,
                                                        dtype=torch_dtype(b.dtype.name))
    return out


def to_host(x) -> np.ndarray:
    if isinstance(x, np.ndarray):
        return x
    return x.detach().float().cpu().numpy() if x.dtype.is_floating_point else \
        x.detach().cpu().numpy()


def unchanged(before: dict, after: dict) -> str | None:
    """Name of the first input a kernel modified, or None."""
    for k, v in before.items():
        a, b = to_host(v), to_host(after[k])
        if not np.array_equal(a, b, equal_nan=True):
            return k
    return None


def time_cpu(fn, warmup: int = 3, repeat: int = 15) -> list[float]:
    """Milliseconds of each repeat after warm-up."""
    for _ in range(warmup):
        fn()
    out = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t0) * 1e3)
    return out


def time_gpu(fn, warmup_ms: int = 25, rep_ms: int = 100) -> float:
    """Median milliseconds with CUDA events (triton.testing.do_bench flushes L2 between
    runs, so inputs come from DRAM as they would in a model)."""
    from triton.testing import do_bench
    return float(do_bench(fn, warmup=warmup_ms, rep=rep_ms, return_mode="median"))


def median(xs: list[float]) -> float:
    return float(statistics.median(xs))


def dims_of(op: Op, host: dict[str, np.ndarray], params: dict[str, int]) -> dict[str, int]:
    return bind_dims(op, host, params)
