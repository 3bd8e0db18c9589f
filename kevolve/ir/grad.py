"""Reverse-mode differentiation of the IR: the backward of an Op as another Op.

The backward is written in "read-and-sum" form where the index map can be inverted: every
gradient element is computed by one program that reads the upstream gradient at all the
points that touched it and sums them. For each load of an input `X[I(p)]` in a stage over
points `p`:

- an index that is a plain axis of the stage (`X[i, k]`) becomes the gradient's own axis;
  axes the index does not mention become a reduction (`dA[i, k] = sum_j dY[i, j] B[k, j]`);
- a jagged axis (the absolute row of a segment) is inverted with the segment id of each
  row (`seg__<offsets>`), and `offsets[b] + j` likewise;
- a gather (`table[indices[l], d]`) is not inverted: its gradient is an accumulating stage
  (`accumulate="sum"`) over the forward's own points, reduce axes included, each adding
  `dY * coefficient` into the row it read (`d_table[indices[l], d] += d_out[b, d]`): one
  atomic add per point, no auxiliary input and no bound on the busiest row. With
  `derive(op, gathers="inverse")` it is inverted instead, with the inverse index: for each
  table row, the positions `l` that read it, as a CSR (`perm__<indices>` sorted positions
  and `invoff__<indices>` offsets per row, plus `max_count__<indices>`, the most positions
  any row has); embedding_bag's weight gradient is then a jagged reduction over that CSR.

These auxiliary inputs are cheap functions of the forward's integer inputs that the caller
computes (`aux_arrays` on the host, kevolve.torch on the device). A stage whose body is not
linear in its reduction (softmax's max, a norm's variance) or whose indices cannot be
inverted is not differentiated: `NotDifferentiable` says which, and the op must carry a
hand-written backward (OpDef.backward) instead.

The backward Op's inputs: the forward inputs it reads, `d_<output>` for the output's
gradient, and the auxiliary inputs above; its outputs `d_<input>` for every float input.
A hand-written backward follows the same names (and may also read forward outputs).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import dtypes as dt
from .errors import SpecError
from .nodes import (
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
    dtype_of,
    rebuild,
    substitute_axes,
    walk,
)

SEG, PERM, INVOFF, MAXCOUNT = "seg__", "perm__", "invoff__", "max_count__"


class NotDifferentiable(SpecError):
    """The IR of an op cannot be differentiated automatically (give OpDef.backward)."""


@dataclass(frozen=True)
class Backward:
    """A backward Op and how to call it: `wrt[k]` is the forward input whose gradient is
    the output `d_<wrt[k]>`; `aux` names the auxiliary inputs (see the module docstring)."""

    op: Op
    wrt: tuple[str, ...]
    aux: tuple[str, ...]


# -- symbolic derivative -------------------------------------------------------------------

def _c(v: float) -> Const:
    return Const(float(v))


def _mul(a: Expr | None, b: Expr | None) -> Expr | None:
    if a is None or b is None:
        return None
    if a == _c(1):
        return b
    if b == _c(1):
        return a
    return Binary("mul", a, b)


def _add(a: Expr | None, b: Expr | None) -> Expr | None:
    if a is None:
        return b
    if b is None:
        return a
    return Binary("add", a, b)


def _f32(e: Expr) -> Expr:
    return Cast(e, dt.f32) if dtype_of(e) != dt.f32 else e


def diff(e: Expr, target: Expr) -> Expr | None:
    """d e / d target (target: a Load or a Reduce, compared structurally); None is zero."""
    if e == target:
        return _c(1)
    if isinstance(e, (Const, Dim, AxisRef, Load)):
        return None
    if isinstance(e, Cast):
        return diff(e.x, target) if e.dtype.is_float else None
    if isinstance(e, Where):
        da, db = diff(e.a, target), diff(e.b, target)
        if da is None and db is None:
            return None
        return Where(e.cond, da if da is not None else _c(0), db if db is not None else _c(0))
    if isinstance(e, Unary):
        dx = diff(e.x, target)
        if dx is None or e.op == "not":
            return None
        x = _f32(e.x)
        local = {
            "neg": lambda: _c(-1),
            "exp": lambda: Unary("exp", x),
            "log": lambda: Binary("div", _c(1), x),
            "sqrt": lambda: Binary("div", _c(0.5), Unary("sqrt", x)),
            "rsqrt": lambda: Binary("mul", _c(-0.5), Binary("div", Unary("rsqrt", x), x)),
            "tanh": lambda: Binary("sub", _c(1), Binary("mul", Unary("tanh", x),
                                                        Unary("tanh", x))),
            "sigmoid": lambda: Binary("mul", Unary("sigmoid", x),
                                      Binary("sub", _c(1), Unary("sigmoid", x))),
            "erf": lambda: Binary("mul", _c(2 / np.sqrt(np.pi)),
                                  Unary("exp", Unary("neg", Binary("mul", x, x)))),
            "abs": lambda: Where(Binary("ge", x, _c(0)), _c(1), _c(-1)),
        }[e.op]()
        return _mul(dx, local)
    if isinstance(e, Binary):
        if e.op not in ("add", "sub", "mul", "div", "max", "min", "pow"):
            return None
        da, db = diff(e.a, target), diff(e.b, target)
        if da is None and db is None:
            return None
        a, b = _f32(e.a), _f32(e.b)
        if e.op == "add":
            return _add(da, db)
        if e.op == "sub":
            return _add(da, _mul(db, _c(-1)))
        if e.op == "mul":
            return _add(_mul(da, b), _mul(db, a))
        if e.op == "div":
            return _add(_mul(da, Binary("div", _c(1), b)),
                        _mul(db, Binary("div", Unary("neg", a), Binary("mul", b, b))))
        if e.op in ("max", "min"):
            pick = Binary("ge" if e.op == "max" else "le", a, b)
            return _add(_mul(da, Where(pick, _c(1), _c(0))),
                        _mul(db, Where(pick, _c(0), _c(1))))
        if db is not None:
            raise NotDifferentiable("pow with a non-constant exponent",
                                    "write exp(b * log(a)) or give OpDef.backward")
        return _mul(da, Binary("mul", b, Binary("pow", a, Binary("sub", b, _c(1)))))
    if isinstance(e, Reduce):
        if any(target == n for n in walk(e.body)) or diff(e.body, target) is not None:
            raise NotDifferentiable(f"a {e.op} reduction nested inside an expression",
                                    "give OpDef.backward")
        return None
    raise NotDifferentiable(f"cannot differentiate {type(e).__name__}", "")


# -- index inversion -----------------------------------------------------------------------

@dataclass
class _Inverse:
    """How the points of the forward stage are expressed on the gradient's axes."""

    mapping: dict[str, Expr]       # forward axis name -> expression over the new axes
    gathers: list[Axis]            # new reduce axes (inverse-index walks)
    aux: dict[str, Buffer]         # auxiliary inputs by name
    params: set[str]
    guards: list[Expr] = None      # conditions a point must meet to exist in the forward

    def __post_init__(self):
        self.guards = [] if self.guards is None else self.guards


def _seg_of(a: Axis) -> tuple[Buffer, Axis] | None:
    """(offsets buffer, enclosing axis) of a jagged axis made by jagged_axis()."""
    s = a.start
    if isinstance(s, Load) and len(s.index) == 1 and isinstance(s.index[0], AxisRef):
        return s.buffer, s.index[0].axis
    return None


def _invert(stage: Compute, x: Buffer, index: tuple[Expr, ...], new: list[Axis],
            inv: _Inverse) -> None:
    def seg_buf(off: Buffer, rows) -> Buffer:
        name = SEG + off.name
        return inv.aux.setdefault(name, Buffer(name, (rows,), dt.i64))

    def bind(a: Axis, e: Expr) -> None:
        if a.name in inv.mapping:
            raise NotDifferentiable(f"input {x.name!r} is read twice along one axis",
                                    "give OpDef.backward", stage=stage.name, axis=a.name)
        inv.mapping[a.name] = e

    for k, comp in enumerate(index):
        xk = AxisRef(new[k])
        if isinstance(comp, AxisRef):
            a = comp.axis
            seg = _seg_of(a) if a.is_jagged else None
            if seg is not None:
                off, b = seg
                bind(a, xk)
                bind(b, Load(seg_buf(off, x.shape[k]), (xk,)))
                continue
            if a.is_jagged or a.start != Const(0) or a.extent != x.shape[k]:
                raise NotDifferentiable(
                    f"load {x.name}[...] covers only part of dim {k} through axis "
                    f"{a.name!r}", "give OpDef.backward", stage=stage.name, axis=a.name)
            bind(a, xk)
        elif isinstance(comp, Load) and len(comp.index) == 1 and \
                isinstance(comp.index[0], AxisRef) and comp.buffer.dtype.is_int:
            idx, a = comp.buffer, comp.index[0].axis
            perm = inv.aux.setdefault(PERM + idx.name, Buffer(PERM + idx.name, idx.shape,
                                                              dt.i64))
            invoff = inv.aux.setdefault(INVOFF + idx.name,
                                        Buffer(INVOFF + idx.name, (x.shape[k] + 1,), dt.i64))
            start = Load(invoff, (xk,))
            g = Axis(f"g_{idx.name}", Load(invoff, (xk + 1,)) - start, start, REDUCE,
                     Dim(MAXCOUNT + idx.name))
            inv.params.add(MAXCOUNT + idx.name)
            inv.gathers.append(g)
            pos = Load(perm, (AxisRef(g),))
            bind(a, pos)
            seg = _seg_of(a) if a.is_jagged else None
            if seg is not None:
                off, b = seg
                bind(b, Load(seg_buf(off, idx.shape[0]), (pos,)))
        elif isinstance(comp, Binary) and comp.op == "add" and isinstance(comp.b, AxisRef) \
                and isinstance(comp.a, Load) and len(comp.a.index) == 1 and \
                isinstance(comp.a.index[0], AxisRef) and comp.a.buffer.dtype.is_int:
            off, b, j = comp.a.buffer, comp.a.index[0].axis, comp.b.axis  # offsets[b] + j
            sb = Load(seg_buf(off, x.shape[k]), (xk,))
            bind(b, sb)
            bind(j, xk - Load(off, (sb,)))
            inv.guards.append(Binary("lt", xk - Load(off, (sb,)), j.extent))  # j < its bound
        else:
            raise NotDifferentiable(f"cannot invert the index of {x.name}[...] along dim {k}",
                                    "give OpDef.backward", stage=stage.name)


# -- the backward op -----------------------------------------------------------------------

def _rebound(a: Axis, mapping: dict[str, Expr]) -> Axis:
    sub = lambda e: substitute_axes(e, mapping) if e is not None else None  # noqa: E731
    return Axis(a.name, sub(a.extent), sub(a.start), REDUCE, sub(a.max_extent), loc=a.loc)


def _terms(stage: Compute) -> list[tuple[Load, Expr, tuple[Axis, ...]]]:
    """(load of a float input, d body / d load, reduce axes at the load)."""
    body = stage.body
    reds = [n for n in walk(body) if isinstance(n, Reduce)]
    if len(reds) > 1 or (reds and reds[0].op != "sum"):
        raise NotDifferentiable(
            f"stage body has {'a ' + reds[0].op if reds and len(reds) == 1 else 'several'} "
            "reduction(s); only one sum is differentiated", "give OpDef.backward",
            stage=stage.name)
    out = []
    if reds:
        r = reds[0]
        outer = diff(body, r)
        if outer is not None and any(isinstance(n, Reduce) for n in walk(outer)):
            raise NotDifferentiable("the body is not linear in its sum", "give OpDef.backward",
                                    stage=stage.name)
        loads = {n for n in walk(r.body) if isinstance(n, Load) and n.buffer.dtype.is_float}
        for ld in sorted(loads, key=repr):
            d = _mul(outer, diff(r.body, ld))
            if d is not None:
                out.append((ld, d, r.axes))
    outside = rebuild(body, lambda n: Const(0.0) if isinstance(n, Reduce) else None)
    loads = {n for n in walk(outside) if isinstance(n, Load) and n.buffer.dtype.is_float}
    for ld in sorted(loads, key=repr):
        d = diff(body, ld)
        if d is not None:
            out.append((ld, d, ()))
    return out


def _gathered(ld: Load) -> bool:
    """The load picks rows through an index load (`table[indices[l], d]`)."""
    return any(isinstance(c, Load) and c.buffer.dtype.is_int for c in ld.index)


def _scatter(stage: Compute, ld: Load, coef: Expr, raxes, g_at: Load, name: str) -> Compute:
    """`name[I(p)] += dY[store(p)] * coef(p)` over every point p of the forward stage, its
    reduce axes iterated as spatial ones: a gather's gradient as an accumulating stage."""
    from .builder import compute

    ren: dict[str, Expr] = {}
    axes = []
    for a in stage.axes + tuple(raxes):
        sub = lambda e: substitute_axes(e, ren) if e is not None else None  # noqa: E731
        na = Axis(a.name, sub(a.extent), sub(a.start), SPATIAL, sub(a.max_extent), loc=a.loc)
        ren[a.name] = AxisRef(na)
        axes.append(na)
    body = substitute_axes(_mul(_f32(g_at), _f32(coef)), ren)
    store = tuple(substitute_axes(i, ren) for i in ld.index)
    return compute(name, tuple(axes), body, store=store, shape=ld.buffer.shape,
                   accumulate="sum")


def derive(op: Op, gathers: str = "scatter") -> Backward:
    """The backward of a one-stage op (see the module docstring); NotDifferentiable when
    the stage cannot be inverted. `gathers` says how a gathered input's gradient is formed:
    `scatter`, an accumulating stage over the forward's points (one atomic add per point,
    no auxiliary input); `inverse`, the read-and-sum form over the inverse index (CSR)."""
    from .builder import compute, input
    from .builder import op as make_op

    if gathers not in ("scatter", "inverse"):
        raise ValueError(f"gathers must be 'scatter' or 'inverse', not {gathers!r}")

    if len(op.stages) != 1 or len(op.outputs) != 1:
        raise NotDifferentiable(f"{op.name} has {len(op.stages)} stages; only one-stage ops "
                                "are differentiated automatically", "give OpDef.backward")
    stage = op.stage(op.outputs[0])
    grad = input("d_" + stage.name, stage.out.shape, dt.f32)
    g_at = Load(grad, stage.store_index)
    by_input: dict[str, list[tuple[list[Axis], Expr]]] = {}
    aux: dict[str, Buffer] = {}
    params: set[str] = set()
    for ld, coef, raxes in _terms(stage):
        x = ld.buffer
        if gathers == "scatter" and _gathered(ld):
            by_input.setdefault(x.name, []).append((ld, coef, raxes))
            continue
        new = [Axis(f"x{k}", s) for k, s in enumerate(x.shape)]
        inv = _Inverse({}, [], aux, params)
        _invert(stage, x, ld.index, new, inv)
        free = [a for a in stage.axes + tuple(raxes) if a.name not in inv.mapping]
        for a in free:  # left free: summed over, their bounds on the resolved points
            inv.mapping[a.name] = AxisRef(_rebound(a, inv.mapping))
        mapping = inv.mapping
        for _ in range(3):  # mapped expressions may mention other mapped axes (bounds)
            mapping = {k: substitute_axes(v, mapping) for k, v in mapping.items()}
        body = _mul(_f32(substitute_axes(g_at, mapping)), _f32(substitute_axes(coef, mapping)))
        over = tuple(inv.gathers) + tuple(mapping[a.name].axis for a in free)
        for cond in inv.guards:
            body = Where(substitute_axes(cond, mapping), body, _c(0))
        if over:
            body = Reduce("sum", body, over)
        by_input.setdefault(x.name, []).append((new, body))
    if not by_input:
        raise NotDifferentiable(f"{op.name} has no float input to differentiate", "")
    outs = []
    for name, parts in by_input.items():
        x = op.buffer(name)
        if len(parts) == 1 and len(parts[0]) == 3 and x.dtype == dt.f32:
            outs.append(_scatter(stage, *parts[0], g_at, "d_" + name))
            continue
        if len(parts) == 1 and len(parts[0]) == 2:
            new, body = parts[0]
            outs.append(compute("d_" + name, tuple(AxisRef(a) for a in new), body,
                                dtype=x.dtype.name))
            continue
        new = [Axis(f"x{k}", s) for k, s in enumerate(x.shape)]
        idx = tuple(AxisRef(a) for a in new)
        total = None
        for t, part in enumerate(parts):
            if len(part) == 3:  # accumulated in f32, read back (and cast) below
                st = _scatter(stage, *part, g_at, f"d_{name}_{t}")
            else:
                axs, body = part
                st = compute(f"d_{name}_{t}", tuple(AxisRef(a) for a in axs), body)
            total = _add(total, st[idx])
        outs.append(compute("d_" + name, idx, total, dtype=x.dtype.name))
    ins = [b for b in op.inputs] + [grad] + [aux[k] for k in sorted(aux)]
    bwd = make_op(op.name + "_backward", inputs=ins, outputs=outs)
    bwd = _prune_inputs(bwd)
    return Backward(bwd, tuple(by_input), tuple(sorted(aux)))


def _prune_inputs(op: Op) -> Op:
    """Drop inputs the backward never reads, unless they carry a dim nothing else does."""
    used = set()
    for s in op.stages:
        from .nodes import walk_stage
        used |= {n.buffer.name for n in walk_stage(s) if isinstance(n, Load)}
    keep = [b for b in op.inputs if b.name in used]
    dims_kept = {n.name for b in keep for e in b.shape for n in walk(e) if isinstance(n, Dim)}
    for b in op.inputs:
        if b.name not in used and any(isinstance(n, Dim) and n.name not in dims_kept
                                      for e in b.shape for n in walk(e)):
            keep.append(b)
            dims_kept |= {n.name for e in b.shape for n in walk(e) if isinstance(n, Dim)}
    order = {b.name: i for i, b in enumerate(op.inputs)}
    keep.sort(key=lambda b: order[b.name])
    from dataclasses import replace
    return replace(op, inputs=tuple(keep))


def for_op(op: Op, backward=None) -> Backward:
    """A hand-written backward (an Op, or anything with `.op`) if given, else derived."""
    if backward is None:
        return derive(op)
    bop = backward if isinstance(backward, Op) else backward.op
    wrt = tuple(s[2:] for s in bop.outputs if s.startswith("d_"))
    aux = tuple(b.name for b in bop.inputs if b.name.startswith((SEG, PERM, INVOFF)))
    return Backward(bop, wrt, aux)


# -- auxiliary inputs on the host (the oracle's side; kevolve.torch has the device side) --

def aux_arrays(bwd: Backward, inputs: dict[str, np.ndarray], dims: dict[str, int]
               ) -> tuple[dict, dict]:
    """(arrays, params) of the auxiliary inputs `bwd` needs, from the forward inputs and
    the forward's dims (kevolve.ir.interp.bind_dims)."""
    from .interp import eval_int

    arrays, params = {}, {}
    for name in bwd.aux:
        b = bwd.op.buffer(name)
        if name.startswith(SEG):
            off = np.asarray(inputs[name[len(SEG):]])
            rows = np.arange(eval_int(b.shape[0], dims))
            arrays[name] = np.searchsorted(off, rows, side="right").astype(np.int64) - 1
        elif name.startswith(PERM):
            idx = np.asarray(inputs[name[len(PERM):]])
            arrays[name] = np.argsort(idx, kind="stable").astype(np.int64)
        elif name.startswith(INVOFF):
            src = name[len(INVOFF):]
            idx = np.asarray(inputs[src])
            n = eval_int(b.shape[0], dims) - 1
            counts = np.bincount(idx, minlength=n)[:n]
            arrays[name] = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
            params[MAXCOUNT + src] = int(counts.max()) if counts.size else 0
    return arrays, params
