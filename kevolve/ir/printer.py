"""A compact, stable text form of an Op: what goes into LLM prompts and `kevolve show`."""

from __future__ import annotations

from .nodes import (
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
)

_SYM = {"add": "+", "sub": "-", "mul": "*", "div": "/", "floordiv": "//", "mod": "%",
        "lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!=", "and": "&",
        "or": "|", "pow": "**"}
# Python's binding order (comparisons loosest, then | and &), so that the text reads the
# same as Python: `(a >= 0) & (b < L)`, never `a >= 0 & b < L`.
_PREC = {"lt": 1, "le": 1, "gt": 1, "ge": 1, "eq": 1, "ne": 1, "or": 2, "and": 3,
         "add": 4, "sub": 4, "mul": 5, "div": 5, "floordiv": 5, "mod": 5, "pow": 6}
_CMP = ("lt", "le", "gt", "ge", "eq", "ne")


def expr(e: Expr, prec: int = 0) -> str:
    if isinstance(e, Const):
        v = repr(e.value) if isinstance(e.value, float) else str(e.value)
        return v if e.dtype is None else f"{v}:{e.dtype}"
    if isinstance(e, Dim):
        return e.name
    if isinstance(e, AxisRef):
        return e.axis.name
    if isinstance(e, Load):
        if not e.index:  # a scalar() input
            return e.buffer.name
        return f"{e.buffer.name}[{', '.join(expr(i) for i in e.index)}]"
    if isinstance(e, Unary):
        return f"-{expr(e.x, 7)}" if e.op == "neg" else f"{e.op}({expr(e.x)})"
    if isinstance(e, Binary):
        if e.op in ("max", "min"):
            return f"{e.op}({expr(e.a)}, {expr(e.b)})"
        p = _PREC[e.op]
        s = f"{expr(e.a, p + (e.op in _CMP))} {_SYM[e.op]} {expr(e.b, p + 1)}"
        return f"({s})" if p < prec else s
    if isinstance(e, Where):
        return f"where({expr(e.cond)}, {expr(e.a)}, {expr(e.b)})"
    if isinstance(e, Cast):
        return f"{e.dtype}({expr(e.x)})"
    if isinstance(e, Reduce):
        return f"{e.op}_{{{', '.join(a.name for a in e.axes)}}}({expr(e.body)})"
    return repr(e)


def axis(a: Axis) -> str:
    if a.start == Const(0) and not a.is_jagged:
        rng = expr(a.extent)
    elif isinstance(a.extent, Binary) and a.extent.op == "sub" and a.extent.b == a.start:
        rng = f"{expr(a.start)} .. {expr(a.extent.a)}"
    elif a.start == Const(0):
        rng = f"0 .. {expr(a.extent)}"
    else:
        rng = f"{expr(a.start)} .. {expr(a.start)} + {expr(a.extent, 5)}"
    cap = f" (max {expr(a.max_extent)})" if a.max_extent is not None else ""
    return f"{a.name} in {rng}{cap}"


def buffer(b: Buffer) -> str:
    return f"{b.name}: {b.dtype}[{', '.join(expr(s) for s in b.shape)}]"


def stage(s: Compute) -> str:
    eq = "+=" if s.accumulate == "sum" else "="
    lines = [f"  {s.name}[{', '.join(expr(i) for i in s.store_index)}] {eq} {expr(s.body)}"]
    bounds = [axis(a) for a in s.axes + s.reduce_axes]
    lines.append(f"      for {'; '.join(bounds)}")
    lines.append(f"      -> {buffer(s.out)}")
    return "\n".join(lines)


def op_text(op: Op) -> str:
    head = [f"op {op.name}"]
    head += [f"  in  {buffer(b)}" for b in op.inputs]
    if op.params:
        head.append(f"  params {', '.join(p.name for p in op.params)}")
    head.append(f"  out {', '.join(op.outputs)}")
    return "\n".join(head + [stage(s) for s in op.stages])
