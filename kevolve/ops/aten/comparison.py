"""Comparisons, logical operators and `where` over x, y[M, N]: a stage stores no booleans,
so each result is 1.0 / 0.0 in f32 (torch's bool compared as a number). Inputs are drawn
from a few integers so that ties (where == and != differ from < and >) occur."""

from __future__ import annotations

from ...ir.builder import abs_, axes, compute, dims, eq, f32, input, ne, op, where
from ..spec import domain
from ._entry import at_least, entry

_INTS = domain(-2.0, 2.0, integer=True)


def _b(c):
    return where(c, 1.0, 0.0)


# name -> (formula of (x, y) giving a value, torch reference)
TABLE: dict[str, tuple] = {
    "eq": (lambda x, y: _b(eq(x, y)), "torch.eq"),
    "ne": (lambda x, y: _b(ne(x, y)), "torch.ne"),
    "lt": (lambda x, y: _b(x < y), "torch.lt"),
    "le": (lambda x, y: _b(x <= y), "torch.le"),
    "gt": (lambda x, y: _b(x > y), "torch.gt"),
    "ge": (lambda x, y: _b(x >= y), "torch.ge"),
    "logical_and": (lambda x, y: _b(ne(x, 0.0) & ne(y, 0.0)), "torch.logical_and"),
    "logical_or": (lambda x, y: _b(ne(x, 0.0) | ne(y, 0.0)), "torch.logical_or"),
    "logical_xor": (lambda x, y: _b(ne(_b(ne(x, 0.0)), _b(ne(y, 0.0)))), "torch.logical_xor"),
    "where_positive": (lambda x, y: where(x > 0.0, x, y),
                       lambda t, p: __import__("torch").where(t["x"] > 0, t["x"], t["y"])),
    "isclose": (lambda x, y: _b(abs_(x - y) <= 1e-8 + 1e-5 * abs_(y)), "torch.isclose"),
    "eq_scalar": (lambda x, y: _b(eq(x, 1.0)) + y * 0.0,
                  lambda t, p: (t["x"] == 1).double() + t["y"] * 0.0),
}


def compare_op(name: str, fn):
    M, N = dims("M N")
    x = input("x", (M, N), f32)
    y = input("y", (M, N), f32)
    i, j = axes("i j", M, N)
    return op(name, inputs=[x, y], outputs=[compute("out", (i, j), fn(x[i, j], y[i, j]))])


def _make(name, fn, ref):
    o = compare_op(name, fn)
    return entry(o, ref, inputs={"x": _INTS, "y": _INTS}, edges=at_least(o, {}))


OPS = {n: _make(n, *row) for n, row in TABLE.items()}
