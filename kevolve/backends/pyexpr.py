"""Printing IR expressions over named values, for every backend language.

A language supplies only data: operator spellings, how to call math functions, load,
select and cast. Triton, numba and the C family share this one printer."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from ..ir.nodes import (
    AxisRef,
    Binary,
    Cast,
    Const,
    Dim,
    Expr,
    Load,
    Reduce,
    Unary,
    Where,
    dtype_of,
)

PY_BINOP = {"add": "+", "sub": "-", "mul": "*", "mod": "%", "floordiv": "//", "lt": "<",
            "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!=", "and": "&", "or": "|",
            "pow": "**"}


@dataclass
class Ctx:
    """Names in scope while printing one step: axis values, computed-at stage values,
    accumulators of reductions already emitted, and loads whose values are already in
    registers (the lanes of a vector load)."""

    axes: dict[str, str] = field(default_factory=dict)
    masks: dict[str, str | None] = field(default_factory=dict)
    locals: dict[str, str] = field(default_factory=dict)
    reduces: dict[Reduce, str] = field(default_factory=dict)
    guards: list[str] = field(default_factory=list)  # where() conditions around a load
    loads: dict[Load, str] = field(default_factory=dict)  # loads already in registers

    def child(self) -> Ctx:
        return Ctx(dict(self.axes), dict(self.masks), dict(self.locals), dict(self.reduces),
                   list(self.guards), dict(self.loads))


@dataclass(frozen=True)
class PyLang:
    unary: dict[str, Callable[[str], str]]
    maximum: str  # function names; C picks float or int versions by type below
    minimum: str
    where: Callable[[str, str, str], str]
    load: Callable[[str, str, str | None, Expr], str]  # (ptr, offset, mask, load) -> code
    cast: Callable[[str, object], str]
    dim: Callable[[str], str] = staticmethod(lambda n: f"d_{n}")
    float_const: Callable[[float], str] = staticmethod(repr)
    binops: dict[str, str] = field(default_factory=lambda: dict(PY_BINOP))
    intdiv: str = "//"
    int_maximum: str | None = None
    int_minimum: str | None = None
    # `1 + erf(y)` (a Gaussian CDF, e.g. the erf GELU) spelled as erfc(-y) where a language
    # has a cheaper or more accurate way: no cancellation in the lower tail.
    one_plus_erf: Callable[[str], str] | None = None
    # `k * x * (1 + erf(c * x))` with constants k, c > 0 (the erf GELU: k = 1/2, c = 1/sqrt 2)
    # as one call (code of x, k, c): x is evaluated once, and a language can fold the
    # constants into one formula instead of a select and two products.
    gauss_gate: Callable[[str, float, float], str] | None = None
    # a ** b for a non-constant or non-integer exponent: (a, b, floating) -> code; None
    # prints the `pow` binop (Python's `**`, which C-like languages do not have)
    power: Callable[[str, str, bool], str] | None = None
    # (offset, mask) -> an offset of the mask's shape, for a load guarded only by a where()
    # branch (no masked axis of its own): Triton refuses a block mask on a scalar pointer
    spread: Callable[[str, str], str] | None = None
    # integer `//` and `%` already round toward -inf (Python); C and Triton truncate
    floor_native: bool = False


MAX_EXPANDED_POWER = 8  # x ** n with a constant integer |n| up to this is multiplied out


def _power(x: Binary, go, lang: PyLang) -> str:
    """x.a ** x.b. A constant integer exponent multiplies out (exact for any sign of the
    base, as a GPU or C library pow is not always), 1/2 and -1/2 are square roots; the
    rest is the language's power function."""
    b = x.b
    fl = dtype_of(x).is_float
    if isinstance(b, Const) and float(b.value) == int(b.value) \
            and abs(int(b.value)) <= MAX_EXPANDED_POWER:
        n = int(b.value)
        a = go(x.a)
        one = lang.float_const(1.0) if fl else "1"
        prod = " * ".join([a] * abs(n)) if n else one
        if n < 0:
            return f"({one} / ({prod}))"
        return f"({prod})"
    if isinstance(b, Const) and fl and float(b.value) in (0.5, -0.5):
        return lang.unary["sqrt" if float(b.value) > 0 else "rsqrt"](go(x.a))
    if lang.power is not None:
        return lang.power(go(x.a), go(b), fl)
    return f"({go(x.a)} {lang.binops['pow']} {go(b)})"


def py_float(v: float, inf: str, nan: str) -> str:
    """A float constant in Python syntax whose non-finite values name a module's constants
    (`repr` gives bare `inf`/`nan`, which are not names in generated code)."""
    if v != v:
        return nan
    if v in (float("inf"), float("-inf")):
        return inf if v > 0 else f"(-{inf})"
    return repr(float(v))


def strides(shape: tuple[Expr, ...]) -> list[Expr]:
    """Row-major strides of a buffer shape, as expressions over dims."""
    out: list[Expr] = []
    acc: Expr = Const(1)
    for s in reversed(shape):
        out.append(acc)
        acc = s if acc == Const(1) else Binary("mul", s, acc)
    return list(reversed(out))


def linear_offset(index: tuple[Expr, ...], shape: tuple[Expr, ...], go) -> str:
    """Row-major element offset of `index` into a buffer of `shape`, printed with `go`."""
    terms = []
    for i, s in zip(index, strides(shape)):
        t = go(i)
        terms.append(t if s == Const(1) else f"{t} * {go(s)}")
    return " + ".join(f"({t})" for t in terms) if terms else "0"


def axes_in(e: Expr) -> list[str]:
    from ..ir.nodes import walk
    seen: list[str] = []
    for n in walk(e):
        if isinstance(n, AxisRef) and n.axis.name not in seen:
            seen.append(n.axis.name)
    return seen


def mask_of(ctx: Ctx, names) -> str | None:
    ms = [ctx.masks[n] for n in names if ctx.masks.get(n)] + list(ctx.guards)
    if not ms:
        return None
    return ms[0] if len(ms) == 1 else "(" + " & ".join(ms) + ")"


def _erf_of_one_plus(x: Binary) -> Expr | None:
    """y when x is `1 + erf(y)` or `erf(y) + 1` in floating point, else None."""
    if x.op != "add" or not dtype_of(x).is_float:
        return None
    for one, other in ((x.a, x.b), (x.b, x.a)):
        if isinstance(one, Const) and float(one.value) == 1.0 and isinstance(other, Unary) \
                and other.op == "erf":
            return other.x
    return None


def _const_factor(e: Expr) -> tuple[float, Expr] | None:
    """(k, x) when e is k * x, x * k or x / (1/k) with a float constant k; (1, e) else."""
    if isinstance(e, Binary) and e.op == "mul":
        for k, x in ((e.a, e.b), (e.b, e.a)):
            if isinstance(k, Const) and dtype_of(k).is_float:
                return float(k.value), x
    if isinstance(e, Binary) and e.op == "div" and isinstance(e.b, Const) \
            and dtype_of(e.b).is_float and float(e.b.value) != 0.0:
        return 1.0 / float(e.b.value), e.a
    return 1.0, e


def _gauss_gated(x: Binary) -> tuple[Expr, float, float] | None:
    """(v, k, c) when x is `k * v * (1 + erf(c * v))` (either factor order, k and c
    written as products or quotients by constants) with k, c > 0; else None."""
    if x.op != "mul" or not dtype_of(x).is_float:
        return None
    for gate, other in ((x.a, x.b), (x.b, x.a)):
        y = _erf_of_one_plus(gate) if isinstance(gate, Binary) else None
        if y is None:
            continue
        k, v = _const_factor(other)
        c, u = _const_factor(y)
        if u == v and k > 0 and c > 0 and not isinstance(v, Const):
            return v, k, c
    return None


def emit(e: Expr, ctx: Ctx, lang: PyLang, ptr: Callable[[str], str]) -> str:
    def go(x: Expr) -> str:
        if isinstance(x, Const):
            if dtype_of(x).is_float:
                v = float(x.value)
                return lang.float_const(v)
            return str(int(x.value))
        if isinstance(x, Dim):
            return lang.dim(x.name)
        if isinstance(x, AxisRef):
            return ctx.axes[x.axis.name]
        if isinstance(x, Reduce):
            return ctx.reduces[x]
        if isinstance(x, Load):
            if ctx.loads and x in ctx.loads:  # e.g. a lane of a vector load (CUDA/HIP)
                return ctx.loads[x]
            if x.buffer.name in ctx.locals:
                return ctx.locals[x.buffer.name]
            guards, ctx.guards = ctx.guards, []  # index loads (offsets) are not guarded
            off = linear_offset(x.index, x.buffer.shape, go)
            ctx.guards = guards
            # a 0-d input (a scalar) is never out of bounds: no mask, whatever the branch
            mask = mask_of(ctx, axes_in(x)) if x.index else None
            if mask and lang.spread and ctx.guards and \
                    not any(ctx.masks.get(n) for n in axes_in(x)):
                off = lang.spread(off, mask)
            return lang.load(ptr(x.buffer.name), off, mask, x)
        if isinstance(x, Unary):
            if x.op == "neg":
                return f"(-{go(x.x)})"
            if x.op == "abs" and not dtype_of(x.x).is_float:  # an index: no float abs
                a = go(x.x)
                return f"{lang.int_maximum or lang.maximum}({a}, -({a}))"
            return lang.unary[x.op](go(x.x))
        if isinstance(x, Binary):
            g = _gauss_gated(x) if lang.gauss_gate else None
            if g is not None:
                return lang.gauss_gate(go(g[0]), g[1], g[2])
            y = _erf_of_one_plus(x) if lang.one_plus_erf else None
            if y is not None:
                return lang.one_plus_erf(go(y))
            if x.op == "pow":
                return _power(x, go, lang)
            a, b = go(x.a), go(x.b)
            fl = dtype_of(x).is_float
            if x.op == "max":
                return f"{lang.maximum if fl else lang.int_maximum or lang.maximum}({a}, {b})"
            if x.op == "min":
                return f"{lang.minimum if fl else lang.int_minimum or lang.minimum}({a}, {b})"
            if x.op in ("floordiv", "mod") or (x.op == "div" and not fl):
                return _floored(x, a, b, fl, lang)  # integer `/` is `//` in the IR
            if x.op == "div":
                return f"({a} / {b})"
            return f"({a} {lang.binops[x.op]} {b})"
        if isinstance(x, Where):
            # Tile languages evaluate both branches: a load in a branch is masked by the
            # branch's condition, so it never reads where the other branch is taken.
            c = go(x.cond)
            ctx.guards.append(c)
            a = go(x.a)
            ctx.guards[-1] = lang.unary["not"](c)
            b = go(x.b)
            ctx.guards.pop()
            return lang.where(c, a, b)
        if isinstance(x, Cast):
            return lang.cast(go(x.x), x.dtype)
        raise TypeError(f"cannot print {type(x).__name__}")
    return go(e)


def _floored(x: Binary, a: str, b: str, fl: bool, lang: PyLang) -> str:
    """`a // b` and `a % b` as the IR (and Python, numpy, torch) define them: the quotient
    rounded toward -inf, the remainder with the divisor's sign. C and Triton truncate
    toward zero, which agrees only where neither side is negative."""
    if fl:
        q = lang.unary["floor"](f"({a} / {b})")
        return q if x.op == "floordiv" else f"({a} - {q} * {b})"
    op = lang.binops["mod"] if x.op == "mod" else lang.intdiv
    if lang.floor_native or (_nonneg(x.a) and _nonneg(x.b)):
        return f"({a} {op} {b})"
    bo = lang.binops
    r = f"({a} {bo['mod']} {b})"
    off = (f"(({r} {bo['ne']} 0) {bo['and']} (({r} {bo['lt']} 0) {bo['ne']} "
           f"({b} {bo['lt']} 0)))")  # a remainder whose sign differs from the divisor's
    if x.op != "mod":
        q = f"({a} {lang.intdiv} {b})"
        return lang.where(off, f"({q} - 1)", q)
    return lang.where(off, f"({r} + {b})", r)


def _nonneg(e: Expr) -> bool:
    """Whether integer expression `e` is never negative by its form: axis positions, sizes
    and non-negative constants under +, *, //, %, max and min (index arithmetic)."""
    if isinstance(e, Const):
        return e.value >= 0
    if isinstance(e, (AxisRef, Dim)):
        return True
    if isinstance(e, Binary) and e.op in ("add", "mul", "floordiv", "mod", "max", "min"):
        if e.op == "mul" and any(_nonneg(x) and y == Binary("sub", x, Const(1))
                                 for x, y in ((e.a, e.b), (e.b, e.a))):
            return True  # x * (x - 1) of an integer x >= 0 (a triangle's index)
        return _nonneg(e.a) and _nonneg(e.b)
    return False

