"""IR nodes: frozen, hashable dataclasses describing *what* an operator computes.

An `Op` is a DAG of `Compute` stages over `Buffer`s. Each stage iterates its spatial `Axis`es
and evaluates an `Expr` (which may contain `Reduce`s over reduce axes). A jagged axis has a
`start`/`extent` that load from an offsets buffer and a `max_extent` for sizing grids.
Source locations (`loc`) are kept for error messages but never take part in equality.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import lru_cache

from . import dtypes as dt
from .dtypes import DType

UNARY_OPS = ("neg", "exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "erf", "abs", "not",
             "sin", "cos", "floor", "ceil", "trunc", "round", "log1p", "expm1")
ARITH_OPS = ("add", "sub", "mul", "div", "floordiv", "mod", "max", "min", "pow")
CMP_OPS = ("lt", "le", "gt", "ge", "eq", "ne")
LOGIC_OPS = ("and", "or")
BINARY_OPS = ARITH_OPS + CMP_OPS + LOGIC_OPS
REDUCE_OPS = ("sum", "max", "min", "prod")
ACCUMULATE_OPS = ("sum",)  # accumulating stores: out[store] += body (see Compute.accumulate)
ACCUMULATE_DTYPES = ("f32", "i32", "i64")  # what every backend has an atomic add for
SPATIAL, REDUCE = "spatial", "reduce"


def _wrap(v: object) -> Expr:
    if isinstance(v, Expr):
        return v
    if isinstance(v, bool):
        return Const(int(v), dt.bool_)
    if isinstance(v, (int, float)):
        return Const(v)
    if isinstance(v, Axis):
        return AxisRef(v)
    raise TypeError(f"cannot use {type(v).__name__} {v!r} in a kevolve expression")


class Expr:
    """Base of all expressions; arithmetic operators build new nodes (`==` stays structural)."""

    __slots__ = ()

    def __add__(self, o): return Binary("add", self, _wrap(o))
    def __radd__(self, o): return Binary("add", _wrap(o), self)
    def __sub__(self, o): return Binary("sub", self, _wrap(o))
    def __rsub__(self, o): return Binary("sub", _wrap(o), self)
    def __mul__(self, o): return Binary("mul", self, _wrap(o))
    def __rmul__(self, o): return Binary("mul", _wrap(o), self)
    def __truediv__(self, o): return Binary("div", self, _wrap(o))
    def __rtruediv__(self, o): return Binary("div", _wrap(o), self)
    def __floordiv__(self, o): return Binary("floordiv", self, _wrap(o))
    def __mod__(self, o): return Binary("mod", self, _wrap(o))
    def __pow__(self, o): return Binary("pow", self, _wrap(o))
    def __neg__(self): return Unary("neg", self)
    def __lt__(self, o): return Binary("lt", self, _wrap(o))
    def __le__(self, o): return Binary("le", self, _wrap(o))
    def __gt__(self, o): return Binary("gt", self, _wrap(o))
    def __ge__(self, o): return Binary("ge", self, _wrap(o))
    def __and__(self, o): return Binary("and", self, _wrap(o))
    def __or__(self, o): return Binary("or", self, _wrap(o))


@dataclass(frozen=True, eq=False)
class Const(Expr):
    value: float | int
    dtype: DType | None = None  # None: weakly typed, adopts its partner's type

    # 1 and 1.0 are different constants (an index vs a float): compare the Python type too.
    def _key(self):
        return (type(self.value).__name__, self.value, self.dtype)

    def __eq__(self, other) -> bool:
        return isinstance(other, Const) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(("Const",) + self._key())


@dataclass(frozen=True)
class Dim(Expr):
    """A symbolic integer: bound from input shapes, or passed per call as a parameter."""

    name: str


@dataclass(frozen=True)
class Axis:
    name: str
    extent: Expr
    start: Expr = Const(0)
    kind: str = SPATIAL
    max_extent: Expr | None = None
    loc: str | None = field(default=None, compare=False, hash=False, repr=False)

    @property
    def is_jagged(self) -> bool:
        """Bounds depend on other axes or on loaded data (FBGEMM-style offsets)."""
        return any(isinstance(n, (AxisRef, Load))
                   for e in (self.start, self.extent) for n in walk(e))

    @property
    def bound(self) -> Expr:
        """A static upper bound on the extent (for grids and tile sizes)."""
        return self.max_extent if self.max_extent is not None else self.extent


@dataclass(frozen=True)
class AxisRef(Expr):
    axis: Axis


@dataclass(frozen=True)
class Buffer:
    name: str
    shape: tuple[Expr, ...]
    dtype: DType
    loc: str | None = field(default=None, compare=False, hash=False, repr=False)

    def __getitem__(self, index) -> Load:
        idx = index if isinstance(index, tuple) else (index,)
        return Load(self, tuple(_wrap(i) for i in idx))

    @property
    def ndim(self) -> int:
        return len(self.shape)


@dataclass(frozen=True)
class Load(Expr):
    buffer: Buffer
    index: tuple[Expr, ...]
    # The stage that produces `buffer` (None for inputs); lets op() find the DAG from outputs.
    source: Compute | None = field(default=None, compare=False, hash=False, repr=False)


@dataclass(frozen=True)
class Unary(Expr):
    op: str
    x: Expr


@dataclass(frozen=True)
class Binary(Expr):
    op: str
    a: Expr
    b: Expr


@dataclass(frozen=True)
class Where(Expr):
    cond: Expr
    a: Expr
    b: Expr


@dataclass(frozen=True)
class Cast(Expr):
    x: Expr
    dtype: DType


@dataclass(frozen=True)
class Reduce(Expr):
    op: str
    body: Expr
    axes: tuple[Axis, ...]


@dataclass(frozen=True)
class Compute:
    """One stage: `out[store] = body` for every point of `axes` (store defaults to the axes).

    With `accumulate="sum"` the buffer starts at 0 and every point adds its body into
    `out[store]` (np.add.at): several points may hit the same element (a scatter-add, a
    histogram), so the stage is its own kernel, zeroed before it runs, its adds atomic."""

    name: str
    axes: tuple[Axis, ...]
    body: Expr
    out: Buffer
    store: tuple[Expr, ...] | None = None
    accumulate: str | None = None
    loc: str | None = field(default=None, compare=False, hash=False, repr=False)

    def __getitem__(self, index) -> Load:
        ld = self.out[index]
        return Load(ld.buffer, ld.index, source=self)

    @property
    def store_index(self) -> tuple[Expr, ...]:
        return self.store if self.store is not None else tuple(AxisRef(a) for a in self.axes)

    @property
    def reduce_axes(self) -> tuple[Axis, ...]:
        seen: dict[str, Axis] = {}
        for n in walk(self.body):
            if isinstance(n, Reduce):
                for a in n.axes:
                    seen.setdefault(a.name, a)
        return tuple(seen.values())

    def axis(self, name: str) -> Axis:
        for a in self.axes + self.reduce_axes:
            if a.name == name:
                return a
        raise KeyError(name)


@dataclass(frozen=True)
class Op:
    name: str
    inputs: tuple[Buffer, ...]
    outputs: tuple[str, ...]  # names of stages whose buffers are outputs
    stages: tuple[Compute, ...]  # topological order
    params: tuple[Dim, ...] = ()  # dims not derivable from input shapes
    loc: str | None = field(default=None, compare=False, hash=False, repr=False)

    def stage(self, name: str) -> Compute:
        for s in self.stages:
            if s.name == name:
                return s
        raise KeyError(name)

    def buffer(self, name: str) -> Buffer:
        """An input, or the buffer a stage writes, by name."""
        for b in self.inputs:
            if b.name == name:
                return b
        return self.stage(name).out

    @property
    def output_buffers(self) -> tuple[Buffer, ...]:
        return tuple(self.stage(n).out for n in self.outputs)

    def consumers(self, name: str) -> tuple[Compute, ...]:
        buf = self.stage(name).out
        return tuple(s for s in self.stages if any(
            isinstance(n, Load) and n.buffer == buf for n in walk_stage(s)))

    def producers(self, stage: Compute) -> tuple[Compute, ...]:
        bufs = {n.buffer.name for n in walk_stage(stage) if isinstance(n, Load)}
        return tuple(s for s in self.stages if s.name in bufs and s.name != stage.name)


def children(e: Expr) -> tuple[Expr, ...]:
    if isinstance(e, Load):
        return e.index
    if isinstance(e, Unary):
        return (e.x,)
    if isinstance(e, Binary):
        return (e.a, e.b)
    if isinstance(e, Where):
        return (e.cond, e.a, e.b)
    if isinstance(e, Cast):
        return (e.x,)
    if isinstance(e, Reduce):
        return (e.body,)
    return ()


def walk(e: Expr) -> Iterator[Expr]:
    """Pre-order traversal (does not descend into axis bounds)."""
    stack = [e]
    while stack:
        n = stack.pop()
        yield n
        stack.extend(reversed(children(n)))


def axis_exprs(a: Axis) -> tuple[Expr, ...]:
    return (a.start, a.extent) + ((a.max_extent,) if a.max_extent is not None else ())


def walk_stage(s: Compute) -> Iterator[Expr]:
    """Every expression of a stage: body, store index and the bounds of all its axes."""
    roots = [s.body, *s.store_index]
    for a in s.axes + s.reduce_axes:
        roots.extend(axis_exprs(a))
    for r in roots:
        yield from walk(r)


def rebuild(e: Expr, fn: Callable[[Expr], Expr | None]) -> Expr:
    """Bottom-up rewrite: `fn` returns a replacement or None to keep the (rebuilt) node."""
    if isinstance(e, Load):
        new = Load(e.buffer, tuple(rebuild(i, fn) for i in e.index), e.source)
    elif isinstance(e, Unary):
        new = Unary(e.op, rebuild(e.x, fn))
    elif isinstance(e, Binary):
        new = Binary(e.op, rebuild(e.a, fn), rebuild(e.b, fn))
    elif isinstance(e, Where):
        new = Where(rebuild(e.cond, fn), rebuild(e.a, fn), rebuild(e.b, fn))
    elif isinstance(e, Cast):
        new = Cast(rebuild(e.x, fn), e.dtype)
    elif isinstance(e, Reduce):
        new = Reduce(e.op, rebuild(e.body, fn), e.axes)
    else:
        new = e
    r = fn(new)
    return new if r is None else r


def substitute_axes(e: Expr, mapping: dict[str, Expr]) -> Expr:
    return rebuild(e, lambda n: mapping.get(n.axis.name) if isinstance(n, AxisRef) else None)


def product_factors(e: Expr) -> tuple[Expr, Expr] | None:
    """(A, B) of sum(A * B), each with a cast taken off (bf16 inputs cast to f32 are still
    those inputs): a contraction's operands as matrix-unit lowering, estimates and
    baselines see them. None for any other expression."""
    if isinstance(e, Reduce) and e.op == "sum" and isinstance(e.body, Binary) \
            and e.body.op == "mul":
        a, b = (x.x if isinstance(x, Cast) else x for x in (e.body.a, e.body.b))
        return a, b
    return None


@lru_cache(maxsize=65536)
def dtype_of(e: Expr) -> DType:
    """Static type; weak constants report f32 (float) or i64 (int)."""
    if isinstance(e, Const):
        if e.dtype is not None:
            return e.dtype
        return dt.i64 if isinstance(e.value, int) else dt.f32
    if isinstance(e, (Dim, AxisRef)):
        return dt.i64
    if isinstance(e, Load):
        return e.buffer.dtype
    if isinstance(e, Cast):
        return e.dtype
    if isinstance(e, Unary):
        if e.op == "not":
            return dt.bool_
        t = dtype_of(e.x)
        return t if e.op in ("neg", "abs") or t.is_float else dt.f32
    if isinstance(e, Binary):
        if e.op in CMP_OPS or e.op in LOGIC_OPS:
            return dt.bool_
        return dt.promote(_strong(e.a), _strong(e.b)) if not _weak(e.a) and not _weak(e.b) \
            else (dtype_of(e.b) if _weak(e.a) and not _weak(e.b) else
                  dtype_of(e.a) if _weak(e.b) and not _weak(e.a) else
                  dt.promote(dtype_of(e.a), dtype_of(e.b)))
    if isinstance(e, Where):
        return dtype_of(e.b) if _weak(e.a) else dtype_of(e.a)
    if isinstance(e, Reduce):
        return dtype_of(e.body)
    raise TypeError(f"not an expression: {e!r}")


def dim_offset(e: Expr) -> tuple[str, int] | None:
    """`D`, `D + c` or `D - c` as (D, c): shape entries a dim can be solved from."""
    if isinstance(e, Dim):
        return e.name, 0
    if isinstance(e, Binary) and e.op in ("add", "sub") and isinstance(e.a, Dim) \
            and isinstance(e.b, Const) and isinstance(e.b.value, int):
        return e.a.name, e.b.value if e.op == "add" else -e.b.value
    return None


def _weak(e: Expr) -> bool:
    """Index-like integers and untyped constants adapt to the other operand's type."""
    return (isinstance(e, Const) and e.dtype is None) or isinstance(e, (Dim, AxisRef))


def _strong(e: Expr) -> DType:
    return dtype_of(e)



def tiling_dims(op: Op) -> list[str]:
    """Dims a schedule is lowered for: those in some axis' bounds (tile sizes, trip counts,
    masks depend on them). The rest (a jagged values buffer's total length) only size
    buffers, so a kernel takes them at call time and a lowering need not know them."""
    names: set[str] = set()
    for s in op.stages:
        if s.accumulate is not None:  # its zeroing kernel runs over the whole buffer
            for e in s.out.shape:
                names |= {n.name for n in walk(e) if isinstance(n, Dim)}
        for a in s.axes + s.reduce_axes:
            for e in (a.start, a.extent) + ((a.max_extent,) if a.max_extent is not None
                                           else ()):
                names |= {n.name for n in walk(e) if isinstance(n, Dim)}
    return sorted(names)


def op_dims(op: Op) -> list[str]:
    """Names of every symbolic dim an op mentions (shapes, bounds, bodies), sorted: the
    scalar arguments every kernel of the op receives."""
    names: set[str] = set()
    for b in op.inputs + tuple(s.out for s in op.stages):
        for e in b.shape:
            names |= {n.name for n in walk(e) if isinstance(n, Dim)}
    for s in op.stages:
        names |= {n.name for n in walk_stage(s) if isinstance(n, Dim)}
    return sorted(names)
