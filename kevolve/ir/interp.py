"""The numpy reference interpreter: runs any Op, in float64, vectorized.

Iteration domains are numpy arrays of axis values broadcast over one array dimension per
dense axis. A jagged axis (bounds that vary with an enclosing axis) is flattened into the
dimension of the axis its bounds vary along, FBGEMM style, so `[total, D]` values never get
padded. Reductions over dense axes reduce an array dimension; over jagged ones they
segment-reduce (empty segments give 0, as in FBGEMM and torch). Contractions of two loads
go through einsum, so a GEMM runs as a real matmul.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from . import dtypes as dt
from . import prefix
from .errors import InterpError
from .nodes import (
    Axis,
    AxisRef,
    Binary,
    Cast,
    Compute,
    Const,
    Dim,
    Expr,
    Load,
    Op,
    Reduce,
    Unary,
    Where,
    dim_offset,
    dtype_of,
)


def bind_dims(op: Op, inputs: dict[str, np.ndarray], params: dict[str, int] | None = None
              ) -> dict[str, int]:
    """Solve symbolic dims from input shapes (plus explicit params); check consistency."""
    env: dict[str, int] = {k: int(v) for k, v in (params or {}).items()}
    for b in op.inputs:
        if b.name not in inputs:
            raise InterpError(f"missing input {b.name!r}")
        arr = inputs[b.name]
        if arr.ndim != b.ndim:
            raise InterpError(f"input {b.name!r} should have {b.ndim} dims, got shape "
                              f"{tuple(arr.shape)}")
        for k, d in enumerate(b.shape):
            do = dim_offset(d)
            if do is not None and do[0] not in env:
                env[do[0]] = int(arr.shape[k]) - do[1]
    for b in op.inputs:
        for k, d in enumerate(b.shape):
            want = eval_int(d, env)
            if inputs[b.name].shape[k] != want:
                raise InterpError(f"input {b.name!r} dim {k} is {inputs[b.name].shape[k]}, "
                                  f"expected {want}")
    for p in op.params:
        if p.name not in env:
            raise InterpError(f"parameter {p.name!r} must be given (it is not an input dim)")
    return env


def eval_int(e: Expr, env: dict[str, int]) -> int:
    """Evaluate a shape expression (constants, dims, arithmetic) to an int."""
    if isinstance(e, Const):
        return int(e.value)
    if isinstance(e, Dim):
        try:
            return env[e.name]
        except KeyError:
            raise InterpError(f"dim {e.name!r} is unbound") from None
    if isinstance(e, Binary):
        a, b = eval_int(e.a, env), eval_int(e.b, env)
        return {"add": a + b, "sub": a - b, "mul": a * b, "floordiv": a // b if b else 0,
                "mod": a % b if b else 0, "max": max(a, b), "min": min(a, b),
                "div": a // b if b else 0}[e.op]
    raise InterpError(f"not a shape expression: {e!r}")


@dataclass
class _Domain:
    shape: list[int]
    axes: dict[str, np.ndarray]  # every array has ndim == len(shape)

    def grow(self) -> None:
        self.shape.append(1)
        for k, v in self.axes.items():
            self.axes[k] = v[..., None]


class _Run:
    def __init__(self, op: Op, bufs: dict[str, np.ndarray], dims: dict[str, int], check: bool):
        self.op, self.bufs, self.dims, self.check = op, bufs, dims, check
        self.stage = ""
        # Points of the current domain whose value is used: inside a where() branch, a load
        # may run out of bounds where the branch is not taken (a masked load, as backends do).
        self.guard: np.ndarray | None = None

    # -- domains -------------------------------------------------------------------------
    def add_axis(self, dom: _Domain, a: Axis) -> tuple[str, int, np.ndarray | None]:
        """Extend `dom` by axis `a`. Returns how to fold it back: ("dense", dim, None) or
        ("segment", dim, lengths)."""
        start = self.eval(a.start, dom)
        ext = self.eval(a.extent, dom)
        start = np.asarray(start).astype(np.int64)
        ext = np.asarray(ext).astype(np.int64)
        varying = sorted({k for arr in (start, ext) for k in range(arr.ndim) if arr.shape[k] > 1})
        if not varying:
            n = int(ext.reshape(-1)[0]) if ext.size else 0
            s0 = int(start.reshape(-1)[0]) if start.size else 0
            self._check_len(a, np.array([n]))
            dom.grow()
            dom.shape[-1] = max(n, 0)
            vals = np.arange(s0, s0 + max(n, 0), dtype=np.int64)
            dom.axes[a.name] = vals.reshape([1] * (len(dom.shape) - 1) + [-1])
            return ("dense", len(dom.shape) - 1, None)
        if len(varying) > 1:
            raise InterpError(f"stage {self.stage!r}: bounds of axis {a.name!r} vary along "
                              "more than one enclosing axis. Fix: let the axis run over "
                              "its whole range and mask the window, e.g. "
                              "sum_(where((k >= i) & (k <= j), x[k], 0.0), over=k)")
        p = varying[0]
        n = dom.shape[p]
        lengths = np.broadcast_to(_along(ext, p), (n,)).astype(np.int64)
        starts = np.broadcast_to(_along(start, p), (n,)).astype(np.int64)
        if (lengths < 0).any():
            raise InterpError(f"stage {self.stage!r}: axis {a.name!r} has a negative extent "
                              "(offsets must be non-decreasing)")
        self._check_len(a, lengths)
        total = int(lengths.sum())
        for k, v in dom.axes.items():
            if v.shape[p] > 1:
                dom.axes[k] = np.repeat(v, lengths, axis=p)
        seg_begin = np.cumsum(lengths) - lengths
        local = np.arange(total, dtype=np.int64) - np.repeat(seg_begin, lengths)
        vals = np.repeat(starts, lengths) + local
        shp = [1] * len(dom.shape)
        shp[p] = total
        dom.shape[p] = total
        dom.axes[a.name] = vals.reshape(shp)
        return ("segment", p, lengths)

    def _check_len(self, a: Axis, lengths: np.ndarray) -> None:
        if self.check and a.max_extent is not None and lengths.size:
            cap = eval_int(a.max_extent, self.dims)
            if int(lengths.max()) > cap:
                raise InterpError(f"stage {self.stage!r}: a segment of axis {a.name!r} has "
                                  f"{int(lengths.max())} elements, more than its max_extent "
                                  f"{cap}")

    # -- expressions ---------------------------------------------------------------------
    def eval(self, e: Expr, dom: _Domain):
        if isinstance(e, Const):
            return np.float64(e.value) if dtype_of(e).is_float else np.int64(e.value)
        if isinstance(e, Dim):
            return np.int64(self.dims[e.name])
        if isinstance(e, AxisRef):
            try:
                return dom.axes[e.axis.name]
            except KeyError:
                raise InterpError(f"stage {self.stage!r}: axis {e.axis.name!r} not in "
                                  "scope") from None
        if isinstance(e, Load):
            return self.load(e, dom)
        if isinstance(e, Unary):
            return _UNARY[e.op](self.eval(e.x, dom))
        if isinstance(e, Binary):
            a, b = self.eval(e.a, dom), self.eval(e.b, dom)
            fn = np.floor_divide if e.op == "div" and not dtype_of(e).is_float else \
                _BINARY[e.op]  # integer `/` is `//`, and 0 where the divisor is, as numpy's
            with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
                return fn(a, b)
        if isinstance(e, Where):
            c = self.eval(e.cond, dom)
            return np.where(c, self._branch(e.a, dom, c), self._branch(e.b, dom, np.logical_not(c)))
        if isinstance(e, Cast):
            v = self.eval(e.x, dom)
            if e.dtype.is_int:
                return np.trunc(v).astype(np.int64) if np.asarray(v).dtype.kind == "f" \
                    else np.asarray(v).astype(np.int64)
            return np.asarray(v, dtype=np.float64)
        if isinstance(e, Reduce):
            return self.reduce(e, dom)
        raise InterpError(f"cannot evaluate {type(e).__name__}")

    def _branch(self, e: Expr, dom: _Domain, taken):
        prev = self.guard
        self.guard = taken if prev is None else np.logical_and(prev, taken)
        try:
            return self.eval(e, dom)
        finally:
            self.guard = prev

    def load(self, e: Load, dom: _Domain):
        arr = self.bufs[e.buffer.name]
        idx = [np.asarray(self.eval(i, dom)).astype(np.int64, copy=False) for i in e.index]
        for k, ix in enumerate(idx):
            if ix.size and (ix.min() < 0 or ix.max() >= arr.shape[k]):
                if not self._masked_off((ix < 0) | (ix >= arr.shape[k])):
                    raise InterpError(f"stage {self.stage!r} reads {e.buffer.name!r} out of "
                                      f"bounds in dim {k}: index {int(ix.min())}.."
                                      f"{int(ix.max())}, size {arr.shape[k]}")
                if arr.shape[k] == 0:
                    return np.zeros(np.broadcast_shapes(*(i.shape for i in idx)))
                idx[k] = np.clip(ix, 0, arr.shape[k] - 1)
        return arr[tuple(idx)]

    def _masked_off(self, bad: np.ndarray) -> bool:
        """True when every out-of-bounds point lies where the enclosing where() is not taken."""
        if self.guard is None:
            return False
        try:
            return not np.logical_and(bad, self.guard).any()
        except ValueError:  # shapes do not broadcast: cannot prove the read is masked
            return False

    def reduce(self, e: Reduce, dom: _Domain):
        fast = self._contraction(e, dom)
        if fast is None:
            fast = self._prefix(e, dom)
        if fast is not None:
            return fast
        inner = _Domain(list(dom.shape), dict(dom.axes))
        folds = [self.add_axis(inner, a) for a in e.axes]
        prev, self.guard = self.guard, None  # the guard lives on the outer domain
        try:
            val = np.broadcast_to(self.eval(e.body, inner), inner.shape)
        finally:
            self.guard = prev
        val = val.astype(np.float64) if val.dtype.kind == "f" else val
        for kind, p, lengths in reversed(folds):
            if kind == "dense":
                val = _dense_reduce(e.op, val, p)
            else:
                val = _segment_reduce(e.op, val, p, lengths)
        return val

    def _prefix(self, e: Reduce, dom: _Domain):
        """A prefix reduction (cumsum) as a running accumulation along its stage axis:
        O(N) memory and time where the window's triangle would take O(N^2)."""
        stage = next((s for s in self.op.stages if s.name == self.stage), None)
        pre = prefix.of_reduce(e, stage)[0] if stage is not None else None
        if pre is None or len(dom.shape) != len(stage.axes):
            return None
        p = [a.name for a in stage.axes].index(pre.axis)
        k = e.axes[0].name
        inner = _Domain(list(dom.shape), {**dom.axes, k: dom.axes[pre.axis] + pre.shift})
        nonempty = np.broadcast_to(self.eval(pre.nonempty, dom), dom.shape)
        prev = self.guard  # an empty window's element is never read
        self.guard = nonempty if prev is None else np.logical_and(prev, nonempty)
        try:
            val = np.broadcast_to(self.eval(e.body, inner), dom.shape)
        finally:
            self.guard = prev
        if val.dtype.kind == "f":
            val = val.astype(np.float64)
            ident = {"sum": 0.0, "prod": 1.0, "max": -np.inf, "min": np.inf}[e.op]
        else:
            big = np.iinfo(val.dtype)
            ident = {"sum": 0, "prod": 1, "max": big.min, "min": big.max}[e.op]
        val = np.where(nonempty, val, ident)
        uf = {"sum": np.add, "max": np.maximum, "min": np.minimum, "prod": np.multiply}[e.op]
        if pre.reverse:
            val = np.flip(uf.accumulate(np.flip(val, p), axis=p), p)
        else:
            val = uf.accumulate(val, axis=p) if val.shape[p] else val
        return np.where(nonempty, val, 0) if e.op in ("max", "min") else val

    def _contraction(self, e: Reduce, dom: _Domain):
        """sum over dense axes of load*load with plain axis indices -> einsum (a real GEMM)."""
        if e.op != "sum" or not isinstance(e.body, Binary) or e.body.op != "mul":
            return None
        loads = (e.body.a, e.body.b)
        if not all(isinstance(x, Load) and all(isinstance(i, AxisRef) for i in x.index)
                   for x in loads):
            return None
        if any(a.is_jagged or a.start != Const(0) for a in e.axes):
            return None
        red = {a.name for a in e.axes}
        outer = [n for n in dom.axes if n not in red]
        letters = {}
        for n in outer + [a.name for a in e.axes]:
            letters.setdefault(n, chr(ord("a") + len(letters)))
        if len(letters) > 26:
            return None
        # Each outer axis must be a plain arange along its own domain dim for this to be exact.
        dim_of = {}
        for n in outer:
            v = dom.axes[n]
            nz = [k for k in range(v.ndim) if v.shape[k] > 1]
            if len(nz) > 1 or (nz and (nz[0] in dim_of.values() or not _is_arange(v))):
                return None
            dim_of[n] = nz[0] if nz else None
        ops, specs = [], []
        for x in loads:
            arr = self.bufs[x.buffer.name]
            names = [i.axis.name for i in x.index]
            if len(set(names)) != len(names) or any(n not in letters for n in names):
                return None
            for k, n in enumerate(names):
                ext = dom.shape[dim_of[n]] if dim_of.get(n) is not None else (
                    eval_int(_axis(e, n).extent, self.dims) if n in red else 1)
                if ext > arr.shape[k]:
                    return None
                if n not in red and dim_of.get(n) is None:
                    return None
            sl = tuple(slice(0, dom.shape[dim_of[n]]) if n not in red else
                       slice(0, eval_int(_axis(e, n).extent, self.dims)) for n in names)
            ops.append(np.asarray(arr[sl], dtype=np.float64))
            specs.append("".join(letters[n] for n in names))
        used = set("".join(specs))
        out_names = [n for n in outer if letters[n] in used]
        res = np.einsum(f"{specs[0]},{specs[1]}->{''.join(letters[n] for n in out_names)}",
                        *ops, optimize=True)
        # Place result dims on the domain dims of their axes.
        order = sorted(range(len(out_names)), key=lambda k: dim_of[out_names[k]])
        res = np.transpose(res, order)
        shp = [1] * len(dom.shape)
        for k in order:
            shp[dim_of[out_names[k]]] = res.shape[order.index(k)]
        return res.reshape(shp)

    # -- stages --------------------------------------------------------------------------
    def run_stage(self, s: Compute) -> None:
        try:
            self._run_stage(s)
        except InterpError as e:  # name the line of the spec that made the stage
            if s.loc and not str(e).startswith(s.loc):
                raise InterpError(f"{s.loc}: {e}") from None
            raise

    def _run_stage(self, s: Compute) -> None:
        self.stage = s.name
        dom = _Domain([], {})
        for a in s.axes:
            self.add_axis(dom, a)
        val = np.broadcast_to(self.eval(s.body, dom), dom.shape)
        out = self.bufs[s.name]
        if s.accumulate is not None:
            out[...] = 0
        if s.store is None and all(not a.is_jagged and a.start == Const(0) for a in s.axes):
            out[...] = val
            return
        idx = [np.broadcast_to(self.eval(i, dom), dom.shape) for i in s.store_index]
        for k, ix in enumerate(idx):
            if ix.size and (ix.min() < 0 or ix.max() >= out.shape[k]):
                raise InterpError(f"stage {s.name!r} stores out of bounds in dim {k}")
        if s.accumulate == "sum":
            np.add.at(out, tuple(idx), val)  # repeated indices add up
            return
        out[tuple(idx)] = val


def _axis(e: Reduce, name: str) -> Axis:
    return next(a for a in e.axes if a.name == name)


def _is_arange(v: np.ndarray) -> bool:
    flat = v.reshape(-1)
    return bool(np.array_equal(flat, np.arange(flat.size)))


def _along(arr: np.ndarray, p: int) -> np.ndarray:
    """The 1-d profile of `arr` along dim p (it is constant along every other dim)."""
    idx = tuple(slice(None) if k == p else 0 for k in range(arr.ndim))
    return arr[idx]


def _dense_reduce(op: str, val: np.ndarray, p: int) -> np.ndarray:
    if val.shape[p] == 0:
        return np.full(val.shape[:p] + val.shape[p + 1:], 1.0 if op == "prod" else 0.0)
    f = {"sum": np.sum, "max": np.max, "min": np.min, "prod": np.prod}[op]
    return f(val, axis=p)


def _segment_reduce(op: str, val: np.ndarray, p: int, lengths: np.ndarray) -> np.ndarray:
    shp = list(val.shape)
    shp[p] = lengths.size
    res = np.zeros(shp, dtype=val.dtype if val.dtype.kind != "b" else np.int64)
    if op == "prod":
        res[...] = 1
    nz = lengths > 0
    if nz.any():
        starts = (np.cumsum(lengths) - lengths)[nz]
        uf = {"sum": np.add, "max": np.maximum, "min": np.minimum, "prod": np.multiply}[op]
        part = uf.reduceat(val, starts, axis=p)
        sel = [slice(None)] * len(shp)
        sel[p] = np.nonzero(nz)[0]
        res[tuple(sel)] = part
    return res


def _erf(x):
    try:
        from scipy.special import erf
        return erf(x)
    except ImportError:
        return np.vectorize(math.erf, otypes=[np.float64])(x)


_UNARY = {
    "neg": np.negative, "exp": np.exp, "log": np.log, "sqrt": np.sqrt,
    "rsqrt": lambda x: 1.0 / np.sqrt(x), "tanh": np.tanh,
    "sigmoid": lambda x: 0.5 * (1.0 + np.tanh(0.5 * np.asarray(x, dtype=np.float64))),
    "erf": _erf, "abs": np.abs, "not": np.logical_not, "sin": np.sin, "cos": np.cos,
    "floor": np.floor, "ceil": np.ceil, "trunc": np.trunc, "round": np.rint,
    "log1p": np.log1p, "expm1": np.expm1,
}
_BINARY = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.true_divide,
    "floordiv": np.floor_divide, "mod": np.mod, "max": np.maximum, "min": np.minimum,
    "pow": np.power, "lt": np.less, "le": np.less_equal, "gt": np.greater,
    "ge": np.greater_equal, "eq": np.equal, "ne": np.not_equal, "and": np.logical_and,
    "or": np.logical_or,
}


def run(op: Op, inputs: dict[str, np.ndarray], params: dict[str, int] | None = None, *,
        check: bool = True) -> dict[str, np.ndarray]:
    """Evaluate `op` on host arrays. Returns every output as float64 (int64 for int outputs,
    bool for bool ones). Output elements no stage writes stay NaN (the evaluator treats
    them as don't-care)."""
    dims = bind_dims(op, inputs, params)
    bufs: dict[str, np.ndarray] = {}
    for b in op.inputs:
        a = np.asarray(inputs[b.name])
        bufs[b.name] = a.astype(np.int64) if b.dtype.is_int else a.astype(bool) \
            if b.dtype == dt.bool_ else a.astype(np.float64)
    r = _Run(op, bufs, dims, check)
    for s in op.stages:
        shape = tuple(eval_int(d, dims) for d in s.out.shape)
        bufs[s.name] = np.full(shape, np.nan) if s.out.dtype.is_float else \
            np.zeros(shape, dtype=bool if s.out.dtype == dt.bool_ else np.int64)
        r.run_stage(s)
    return {n: bufs[n] for n in op.outputs}


def output_shapes(op: Op, dims: dict[str, int]) -> dict[str, tuple[int, ...]]:
    return {n: tuple(eval_int(d, dims) for d in op.stage(n).out.shape) for n in op.outputs}
