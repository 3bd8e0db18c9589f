"""Construction-time checks. Each failure is a SpecError naming the stage, axis and line."""

from __future__ import annotations

import re

from . import dtypes as dt
from .errors import SpecError
from .nodes import (
    REDUCE,
    REDUCE_OPS,
    AxisRef,
    Binary,
    Compute,
    Const,
    Dim,
    Expr,
    Load,
    Reduce,
    Unary,
    Where,
    children,
    dtype_of,
    walk,
)

NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")


def check_name(kind: str, name, loc: str | None = None, stage: str | None = None) -> None:
    """Names become identifiers (and comments) in every backend's source: an identifier of
    at most 64 characters, or a SpecError at the user's line."""
    if not isinstance(name, str) or not NAME.fullmatch(name):
        raise SpecError(f"{kind} name {str(name)[:80]!r} is not an identifier",
                        "use letters, digits and _ (not starting with a digit), at most 64",
                        stage=stage, loc=loc)


def check_names(op) -> None:
    """Every name of an op (op, inputs, stages, axes, dims and params) is an identifier."""
    check_name("op", op.name, op.loc)
    for b in op.inputs:
        check_name("input", b.name, b.loc)
    for st in op.stages:
        check_name("stage", st.name, st.loc)
        for a in st.axes:
            check_name("axis", a.name, a.loc, st.name)
    for p in op.params:
        check_name("parameter", p.name, op.loc)


def check_stage(s: Compute) -> None:
    """Validate one stage: axes in scope, reductions well-formed, loads well-shaped, types."""
    names = [a.name for a in s.axes]
    dup = {n for n in names if names.count(n) > 1}
    if dup:
        raise SpecError(f"axis name {sorted(dup)[0]!r} is used twice", "give every axis of a "
                        "stage its own name", stage=s.name, loc=s.loc)
    for a in s.axes:
        if a.kind == REDUCE:
            raise SpecError("a reduce axis is listed among the stage's spatial axes",
                            f"iterate {a.name!r} inside sum_/max_/min_(..., over={a.name}) "
                            "instead, or declare it with axes()", stage=s.name, axis=a.name,
                            loc=a.loc or s.loc)
        _check_axis_bounds(s, a, in_scope={x.name for x in s.axes[: s.axes.index(a)]})
    _check_expr(s, s.body, {a.name for a in s.axes})
    for e in s.store_index:
        _check_expr(s, e, {a.name for a in s.axes})
        if not dtype_of(e).is_int:
            raise SpecError("a store index is not an integer", "cast it with cast(..., i64)",
                            stage=s.name, loc=s.loc)
    if len(s.store_index) != s.out.ndim:
        raise SpecError(f"stores {len(s.store_index)} indices into a {s.out.ndim}-d buffer",
                        "make store= match the shape= of the stage", stage=s.name, loc=s.loc)


def _check_axis_bounds(s: Compute, a, in_scope: set[str]) -> None:
    if a.is_jagged and a.max_extent is None:
        raise SpecError("jagged axis has no max_extent", "pass max_extent= (a constant or a "
                        "param(...)) so grids and tiles can be sized", stage=s.name,
                        axis=a.name, loc=a.loc or s.loc)
    for e in (a.start, a.extent):
        for n in walk(e):
            if isinstance(n, AxisRef) and n.axis.name not in in_scope:
                raise SpecError(f"bounds of {a.name!r} use axis {n.axis.name!r}, which is not "
                                "an enclosing axis", f"list {n.axis.name!r} before {a.name!r}"
                                " in the stage's axes", stage=s.name, axis=a.name,
                                loc=a.loc or s.loc)
            if isinstance(n, Load):
                _check_load(s, n)
            if isinstance(n, Reduce):
                raise SpecError("axis bounds may not contain a reduction", "compute the bound "
                                "in a stage of its own", stage=s.name, axis=a.name,
                                loc=a.loc or s.loc)


def _check_load(s: Compute, n: Load, guarded: bool = False) -> None:
    if len(n.index) != n.buffer.ndim:
        raise SpecError(f"{n.buffer.name!r} has {n.buffer.ndim} dims but is indexed with "
                        f"{len(n.index)}", f"index {n.buffer.name} with {n.buffer.ndim} "
                        "expressions", stage=s.name, loc=s.loc)
    for k, ix in enumerate(n.index):
        t = dtype_of(ix)
        if not t.is_int:
            raise SpecError(f"index {k} of {n.buffer.name!r} has type {t}",
                            "indices must be integers: cast(..., i64)", stage=s.name, loc=s.loc)
        if isinstance(ix, AxisRef) and not ix.axis.is_jagged:
            _check_static_bound(s, n, k, ix, low_too=not guarded)
        elif not guarded:  # inside a where() branch the read may be masked: not decidable
            shifted = _axis_plus_const(ix)
            if shifted is not None and not shifted[0].axis.is_jagged:
                _check_static_bound(s, n, k, *shifted)


def _axis_plus_const(ix: Expr) -> tuple[AxisRef, int] | None:
    """(axis, c) when an index is `axis + c`, `c + axis` or `axis - c` with an integer c."""
    if not isinstance(ix, Binary) or ix.op not in ("add", "sub"):
        return None
    a, b = ix.a, ix.b
    if ix.op == "add" and isinstance(a, Const) and isinstance(b, AxisRef):
        a, b = b, a
    if isinstance(a, AxisRef) and isinstance(b, Const) and isinstance(b.value, int) \
            and not isinstance(b.value, bool):
        return a, b.value if ix.op == "add" else -b.value
    return None


def _check_static_bound(s: Compute, n: Load, k: int, ix: AxisRef, offset: int = 0,
                        low_too: bool = True) -> None:
    """Decidable out-of-bounds reads: a plain axis (plus a constant) whose range provably
    leaves the dim whenever the axis is not empty."""
    ext, start, dim = ix.axis.extent, ix.axis.start, n.buffer.shape[k]
    if not isinstance(start, Const):
        return
    lo = start.value + offset  # the first index read
    hi = None
    if isinstance(ext, Const) and isinstance(dim, Const):
        hi = ext.value > 0 and lo + ext.value > dim.value
    elif isinstance(ext, Dim) and isinstance(dim, Dim) and lo > 0 and ext == dim:
        hi = True
    low = low_too and lo < 0 and not (isinstance(ext, Const) and ext.value <= 0)
    if not (hi or low):
        return
    hint = f"shrink the axis, or guard the read: where(cond, {n.buffer.name}[...], 0.0)"
    if not offset and not low:  # the axis itself is too long: point at the axis
        raise SpecError(f"axis {ix.axis.name!r} runs past dim {k} of {n.buffer.name!r} "
                        f"(extent {_show(ext)} from {start.value}, dim {_show(dim)})", hint,
                        stage=s.name, axis=ix.axis.name, loc=ix.axis.loc or s.loc)
    what = f"{ix.axis.name} {'+' if offset >= 0 else '-'} {abs(offset)}" if offset \
        else ix.axis.name
    side = "below 0" if low else f"past dim {k}"
    raise SpecError(f"index {what} of {n.buffer.name!r} runs {side} (axis {ix.axis.name!r}: "
                    f"extent {_show(ext)} from {start.value}; dim {k} of {n.buffer.name!r}: "
                    f"{_show(dim)})", hint, stage=s.name, axis=ix.axis.name, loc=s.loc)


def _show(e: Expr) -> str:
    return str(e.value) if isinstance(e, Const) else e.name if isinstance(e, Dim) else "?"


def _check_expr(s: Compute, e: Expr, scope: set[str], guarded: bool = False) -> None:
    if isinstance(e, AxisRef):
        if e.axis.name not in scope:
            if e.axis.kind == REDUCE:
                raise SpecError(f"reduce axis {e.axis.name!r} is used outside a reduction over "
                                "it", f"wrap the expression in sum_/max_/min_(..., "
                                f"over={e.axis.name})", stage=s.name, axis=e.axis.name,
                                loc=s.loc)
            raise SpecError(f"unknown axis {e.axis.name!r}", "add it to the stage's axes or "
                            "use one of " + ", ".join(sorted(scope)), stage=s.name,
                            axis=e.axis.name, loc=s.loc)
        return
    if isinstance(e, Reduce):
        if e.op not in REDUCE_OPS:
            raise SpecError(f"unknown reduction {e.op!r}", "use sum_, max_ or min_",
                            stage=s.name, loc=s.loc)
        inner = set(scope)
        for a in e.axes:
            if a.kind != REDUCE:
                raise SpecError(f"reduction over spatial axis {a.name!r}", "declare it with "
                                "reduce_axis(...) or jagged_axis(..., reduce=True)",
                                stage=s.name, axis=a.name, loc=a.loc or s.loc)
            if a.name in inner:
                raise SpecError(f"axis {a.name!r} is reduced twice", "use a new reduce axis "
                                "for the inner reduction", stage=s.name, axis=a.name,
                                loc=a.loc or s.loc)
            _check_axis_bounds(s, a, in_scope=inner)
            inner.add(a.name)
        _check_expr(s, e.body, inner, guarded)
        return
    if isinstance(e, Load):
        _check_load(s, e, guarded)
    if isinstance(e, Binary):
        ta, tb = dtype_of(e.a), dtype_of(e.b)
        strong = not _weak(e.a) and not _weak(e.b)
        if strong and ta.is_float and tb.is_float and ta != tb:
            raise SpecError(f"dtype mismatch in {e.op}: {ta} and {tb}", "cast one side "
                            f"explicitly, e.g. cast(..., {dt.f32})", stage=s.name, loc=s.loc)
    if isinstance(e, Where) and dtype_of(e.cond) != dt.bool_:
        raise SpecError("where() condition is not boolean", "compare values, e.g. j < n, or "
                        "test an integer or float mask with ne(mask[i], 0)",
                        stage=s.name, loc=s.loc)
    if isinstance(e, Unary) and e.op not in ("neg", "abs", "not") and not dtype_of(e.x).is_float:
        raise SpecError(f"{e.op} of an integer", "cast the argument to a float type",
                        stage=s.name, loc=s.loc)
    if isinstance(e, Where):
        _check_expr(s, e.cond, scope, guarded)
        _check_expr(s, e.a, scope, True)
        _check_expr(s, e.b, scope, True)
        return
    for c in children(e):
        _check_expr(s, c, scope, guarded)


def _weak(e: Expr) -> bool:
    return (isinstance(e, Const) and e.dtype is None) or isinstance(e, (Dim, AxisRef))
