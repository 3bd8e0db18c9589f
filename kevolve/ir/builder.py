"""The spec DSL: write an operator the way you would write the math.

    M, N = dims("M N")
    x = input("x", (M, N), f32)
    i, j = axes("i j", M, N); k = reduce_axis("k", N)
    mx = compute("mx", (i,), max_(x[i, k], over=k))
    ...
    softmax = op("softmax", inputs=[x], outputs=[y])

Every constructor records the caller's file and line, so validation errors point at the spec.
"""

from __future__ import annotations

from . import dtypes as dt
from .errors import SpecError, user_location
from .nodes import (
    ACCUMULATE_DTYPES,
    ACCUMULATE_OPS,
    REDUCE,
    SPATIAL,
    Axis,
    AxisRef,
    Binary,
    Buffer,
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
    _wrap,
    dim_offset,
    dtype_of,
    walk,
    walk_stage,
)
from .validate import check_name, check_names, check_stage

__all__ = [
    "dims", "param", "scalar", "input", "axes", "axis", "reduce_axis", "jagged_axis",
    "compute", "op", "sum_", "max_", "min_", "prod_",
    "exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "erf", "abs_",
    "sin", "cos", "floor", "ceil", "trunc", "round_", "log1p", "expm1",
    "maximum", "minimum", "where", "cast", "const", "eq", "ne",
    "f32", "f16", "bf16", "i32", "i64", "i8", "bool_",
]

f32, f16, bf16, i32, i64, i8, bool_ = dt.f32, dt.f16, dt.bf16, dt.i32, dt.i64, dt.i8, dt.bool_


def _names(spec: str, n: int | None = None) -> list[str]:
    names = spec.replace(",", " ").split()
    if n is not None and len(names) != n:
        raise SpecError(f"{len(names)} names given for {n} items", "give one name per item",
                        loc=user_location())
    return names


def dims(names: str) -> Dim | tuple[Dim, ...]:
    """Symbolic sizes, bound from input shapes at call time: `M, N = dims("M N")`."""
    loc = user_location()
    ds = tuple(Dim(n) for n in _names(names))
    for d in ds:
        check_name("dim", d.name, loc)
    return ds[0] if len(ds) == 1 else ds


def param(name: str) -> Dim:
    """A scalar integer fixed per call that no input shape carries (e.g. a jagged max length)."""
    check_name("parameter", name, user_location())
    return Dim(name)


def scalar(name: str, dtype=dt.f32) -> Load:
    """A scalar fixed per call, of any buffer dtype (a float slope, an epsilon, a scale):
    a 0-d input, used directly in expressions (`x[i] * alpha`) and listed in op(inputs=...)
    like a buffer. A shape dict may give its value (`{"alpha": 0.2}`); else it is drawn
    like any input."""
    return Load(input(name, (), dtype), ())


def _dtype(dtype, stage: str | None = None) -> dt.DType:
    """Parse a dtype name; an unknown one is a SpecError at the user's line."""
    try:
        return dt.parse(dtype)
    except ValueError as e:
        raise SpecError(str(e), "", stage=stage, loc=user_location()) from None


def input(name: str, shape, dtype) -> Buffer:  # noqa: A001 - reads like the math
    t = _dtype(dtype)
    if t.name not in dt.BUFFER_DTYPES:
        raise SpecError(f"buffers cannot hold {t}", f"use one of {dt.BUFFER_DTYPES}",
                        loc=user_location())
    return Buffer(name, tuple(_wrap(s) for s in shape), t, loc=user_location())


def axis(name: str, extent, start=0, *, max_extent=None, reduce: bool = False) -> AxisRef:
    a = Axis(name, _wrap(extent), _wrap(start), REDUCE if reduce else SPATIAL,
             None if max_extent is None else _wrap(max_extent), loc=user_location())
    return AxisRef(a)


def axes(names: str, *extents) -> tuple[AxisRef, ...]:
    """Spatial axes, one per extent: `i, j = axes("i j", M, N)`."""
    loc = user_location()
    return tuple(AxisRef(Axis(n, _wrap(e), Const(0), SPATIAL, None, loc=loc))
                 for n, e in zip(_names(names, len(extents)), extents))


def reduce_axis(name: str, extent, start=0, *, max_extent=None) -> AxisRef:
    """An axis to reduce over; an extent that varies (`j + 1`, a segment's length) needs
    `max_extent`, its largest value, to size tiles and grids."""
    loc = user_location()
    return AxisRef(Axis(name, _wrap(extent), _wrap(start), REDUCE,
                        None if max_extent is None else _wrap(max_extent), loc=loc))


def jagged_axis(name: str, *, start, end, max_extent, reduce: bool = False) -> AxisRef:
    """An axis over `[start, end)` where the bounds load from offsets (FBGEMM format).
    The axis value is the absolute row, so `values[l, d]` indexes directly."""
    s, e = _wrap(start), _wrap(end)
    return AxisRef(Axis(name, e - s, s, REDUCE if reduce else SPATIAL,
                        None if max_extent is None else _wrap(max_extent), loc=user_location()))


def _reduce(op: str, body, over) -> Reduce:
    over = over if isinstance(over, (tuple, list)) else (over,)
    return Reduce(op, _wrap(body), tuple(_axis_of(a) for a in over))


def _axis_of(a) -> Axis:
    if isinstance(a, AxisRef):
        return a.axis
    if isinstance(a, Axis):
        return a
    raise SpecError(f"{a!r} is not an axis", "pass axes made by axes()/reduce_axis()",
                    loc=user_location())


def sum_(body, over) -> Reduce:
    return _reduce("sum", body, over)


def max_(body, over) -> Reduce:
    return _reduce("max", body, over)


def min_(body, over) -> Reduce:
    return _reduce("min", body, over)


def prod_(body, over) -> Reduce:
    """The product over the axes (of nothing: 1, as torch.prod)."""
    return _reduce("prod", body, over)


def _u(op):
    def f(x) -> Unary:
        return Unary(op, _wrap(x))
    f.__name__ = op
    return f


exp, log, sqrt, rsqrt, tanh, sigmoid, erf, abs_ = (
    _u(o) for o in ("exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "erf", "abs"))
# round_ rounds half to even (torch.round, C rintf); trunc rounds toward zero.
sin, cos, floor, ceil, trunc, round_, log1p, expm1 = (
    _u(o) for o in ("sin", "cos", "floor", "ceil", "trunc", "round", "log1p", "expm1"))


def maximum(a, b) -> Binary:
    return Binary("max", _wrap(a), _wrap(b))


def minimum(a, b) -> Binary:
    return Binary("min", _wrap(a), _wrap(b))


def eq(a, b) -> Binary:
    return Binary("eq", _wrap(a), _wrap(b))


def ne(a, b) -> Binary:
    return Binary("ne", _wrap(a), _wrap(b))


def where(cond, a, b) -> Where:
    if isinstance(cond, bool):  # `x == y` on expressions is Python's structural equality
        raise SpecError(f"where() got the Python bool {cond} as its condition",
                        "compare values with eq(a, b) / ne(a, b), not == / !=",
                        loc=user_location())
    return Where(_wrap(cond), _wrap(a), _wrap(b))


def cast(x, dtype) -> Cast:
    return Cast(_wrap(x), _dtype(dtype))


def const(value, dtype) -> Const:
    return Const(value, _dtype(dtype))


def compute(name: str, axes, body, *, dtype=None, store=None, shape=None,
            accumulate=None) -> Compute:
    """A stage. `store`/`shape` place results elsewhere than `out[axes]` (jagged outputs).
    `accumulate="sum"` adds every point's body into `out[store]` instead of writing it
    (the buffer starts at 0; indices may repeat): a scatter-add in O(points)."""
    loc = user_location()
    if accumulate is not None:
        _check_accumulate(name, accumulate, store, shape, loc)
    ax = tuple(_axis_of(a) for a in axes)
    b = _wrap(body)
    if dtype is not None:
        t = _dtype(dtype, stage=name)
        if dtype_of(b) != t:
            b = Cast(b, t)
    t = dtype_of(b)
    if shape is None:
        if store is not None:
            raise SpecError("store= needs shape=", "give the output buffer's shape",
                            stage=name, loc=loc)
        for a in ax:
            if a.is_jagged or a.start != Const(0):
                raise SpecError("cannot size the output from a jagged or offset axis",
                                "pass shape= and store= (e.g. store=(l, d))", stage=name,
                                axis=a.name, loc=loc)
        shape = tuple(a.extent for a in ax)
    st = None if store is None else tuple(_wrap(e) for e in store)
    if accumulate is not None and t.name not in ACCUMULATE_DTYPES:
        raise SpecError(f"an accumulating stage cannot store {t}: atomic adds exist for "
                        f"{', '.join(ACCUMULATE_DTYPES)} on every backend",
                        "accumulate in f32 (dtype=f32) and cast in a stage that reads it",
                        stage=name, loc=loc)
    out = Buffer(name, tuple(_wrap(s) for s in shape), t, loc=loc)
    stage = Compute(name, ax, b, out, st, accumulate, loc=loc)
    check_stage(stage)
    return stage


def _check_accumulate(name: str, mode, store, shape, loc) -> None:
    if mode not in ACCUMULATE_OPS:
        raise SpecError(f"unknown accumulate mode {mode!r}",
                        f"use accumulate={ACCUMULATE_OPS[0]!r} (or leave it out to write "
                        "each point once)", stage=name, loc=loc)
    if store is None or shape is None:
        raise SpecError("an accumulating stage needs store= and shape=", "say where each "
                        "point adds into (store=, e.g. (index[k], d)) and the output's "
                        "shape (shape=)", stage=name, loc=loc)


def op(name: str, inputs, outputs) -> Op:
    """Collect the stages reachable from `outputs`, in dependency order, and check them."""
    loc = user_location()
    outs = tuple(outputs)
    # a scalar() is a 0-d input read with no index: its buffer is the input
    inputs = [b.buffer if isinstance(b, Load) and not b.index and b.source is None else b
              for b in inputs]
    stages: dict[str, Compute] = {}
    visiting: set[str] = set()

    def collect(s: Compute) -> None:
        if s.name in stages:
            if stages[s.name] != s:
                raise SpecError(f"two different stages are named {s.name!r}", "rename one",
                                stage=s.name, loc=s.loc)
            return
        if s.name in visiting:
            raise SpecError("stages form a cycle", "a stage cannot read its own output",
                            stage=s.name, loc=s.loc)
        visiting.add(s.name)
        for n in walk_stage(s):
            if isinstance(n, Load) and n.source is not None:
                collect(n.source)
        stages[s.name] = s
        visiting.discard(s.name)

    for s in outs:
        if not isinstance(s, Compute):
            raise SpecError(f"output {s!r} is not a stage", "pass stages made by compute()",
                            loc=loc)
        collect(s)
    input_names = {b.name for b in inputs}
    for s in stages.values():
        if s.name in input_names:
            raise SpecError(f"stage {s.name!r} has the name of an input", "rename it",
                            stage=s.name, loc=s.loc)
        for n in walk_stage(s):
            if isinstance(n, Load) and n.buffer.name not in stages and \
                    n.buffer.name not in input_names:
                raise SpecError(f"reads {n.buffer.name!r}, which is neither an input nor a "
                                "stage", f"add {n.buffer.name} to op(..., inputs=[...])",
                                stage=s.name, loc=s.loc)
    bare = {do[0] for b in inputs for d in b.shape if (do := dim_offset(d)) is not None}
    used: dict[str, Dim] = {}
    for b in tuple(inputs) + tuple(s.out for s in stages.values()):
        for e in b.shape:
            _dims_in(e, used)
    for s in stages.values():
        for n in walk_stage(s):
            _dims_in(n, used)
    params = tuple(d for n, d in sorted(used.items()) if n not in bare)
    made = Op(name, tuple(inputs), tuple(s.name for s in outs), tuple(stages.values()),
              params, loc=loc)
    check_names(made)
    for d in used.values():
        check_name("dim", d.name, loc)
    return made


def _dims_in(e: Expr, acc: dict[str, Dim]) -> None:
    for n in walk(e):
        if isinstance(n, Dim):
            acc[n.name] = n
