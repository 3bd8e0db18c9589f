"""Is a kernel's output right? Outputs are compared with the reference (kevolve.evaluate.
oracle) with a tolerance by output dtype; they start poisoned with NaN (NaN never passes),
and inputs must come back unchanged. Arrays are numpy on the host or torch tensors on a
device, as the backend's Target says (`tensor_lib`, `tensor_device`)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..ir.dtypes import torch_dtype
from ..ir.interp import output_shapes
from ..ir.nodes import Op

# |got - ref| <= atol + rtol * |ref|, per output dtype. fp32 kernels must be accurate to
# fp32 (a tf32 or bf16 shortcut fails); bf16/f16 outputs are judged at their precision.
TOLERANCE = {"f32": (2e-4, 2e-5), "bf16": (2e-2, 2e-2), "f16": (4e-3, 4e-3),
             "i32": (0.0, 0.0), "i64": (0.0, 0.0),
             "i8": (0.0, 0.0), "bool": (0.0, 0.0)}


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
        # The absolute part scales with the output's magnitude: a sum of many terms that
        # nearly cancel carries the rounding of its terms, not of its (small) result.
        scale = max(1.0, float(np.sqrt(np.mean(rc * rc))))
        bad = err > atol * scale + rtol * np.abs(rc)
        if bad.any():
            k = int(np.flatnonzero(care)[np.flatnonzero(bad)[0]])
            idx = np.unravel_index(k, g.shape)
            got, want = _shown(g[idx], r[idx], dtype)
            return CheckResult(False, worst, f"{name}: {int(bad.sum())} of {gc.size} elements "
                               f"off; first at {tuple(int(i) for i in idx)}: got {got}, "
                               f"want {want}")
    return CheckResult(True, worst)


def _shown(got: float, want: float, dtype: str) -> tuple[str, str]:
    """Two values as text that tells them apart: integers in full, floats with as many
    significant digits as it takes (up to 17)."""
    if dtype not in ("f32", "f16", "bf16", "f64"):
        return f"{int(got)}", f"{int(want)}"
    for digits in (6, 9, 17):
        a, b = f"{got:.{digits}g}", f"{want:.{digits}g}"
        if a != b:
            break
    return a, b


def alloc_outputs(op: Op, dims: dict[str, int], lib: str = "numpy", device: str = "cpu"):
    """NaN-poisoned outputs (ints get a sentinel) in the representation a backend takes."""
    shapes = output_shapes(op, dims)
    out = {}
    for name, shape in shapes.items():
        dt = op.stage(name).out.dtype
        if lib == "numpy":
            a = np.empty(shape, dtype=dt.np)
        else:
            import torch
            a = torch.empty(shape, dtype=torch_dtype(dt), device=device)
        out[name] = a
    poison(out)
    return out


def poison(outputs: dict) -> None:
    """Fill outputs in place with NaN (ints with a sentinel): what a kernel does not write
    is seen. Timing poisons before every timed call, so a call that skips its work fails."""
    for a in outputs.values():
        floating = a.dtype.kind == "f" if isinstance(a, np.ndarray) else \
            a.dtype.is_floating_point
        if isinstance(a, np.ndarray):
            a.fill(np.nan if floating else -7)
        else:
            a.fill_(float("nan") if floating else -7)


def copy_into(dst: dict, src: dict) -> None:
    """Overwrite each array of `dst` in place with `src`'s values (same shapes)."""
    for n, v in dst.items():
        if isinstance(v, np.ndarray):
            np.copyto(v, src[n])
        else:
            v.copy_(src[n])


def inputs_for(op: Op, host: dict[str, np.ndarray], lib: str = "numpy", device: str = "cpu"):
    """Fresh copies of a case's host inputs, in the buffers' dtypes and the representation a
    backend takes (a kernel may not share, or modify, the case's own arrays)."""
    out = {}
    for b in op.inputs:
        h = np.asarray(host[b.name])  # reshaped: a 0-d scalar input stays 0-d
        a = np.ascontiguousarray(h).reshape(h.shape).astype(b.dtype.np, copy=False)
        if lib == "numpy":
            out[b.name] = a.copy()
        else:
            import torch
            out[b.name] = torch.from_numpy(a.copy()).to(device=device,
                                                        dtype=torch_dtype(b.dtype))
    return out


def to_host(x) -> np.ndarray:
    """A numpy view of an output or input (a device tensor is copied to the host)."""
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


def copy_arrays(arrays: dict, lib: str) -> dict:
    """A copy of each array (numpy or torch), to compare inputs with after a kernel ran."""
    return {n: (v.clone() if lib == "torch" else v.copy()) for n, v in arrays.items()}
