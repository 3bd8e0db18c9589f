"""Random arithmetic over two inputs, built with the DSL and run by the interpreter, gives
the values numpy computes for the same arithmetic directly."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from kevolve.ir import builder as k
from kevolve.ir.interp import run
from kevolve.ir.nodes import Const

# Non-integral constants only: an integral float (2.0) would compare equal to an int
# constant (see test_int_and_float_constants_are_distinct in test_spec_files.py).
CONSTS = st.sampled_from([-2.5, -0.75, 0.5, 1.5, 3.25])
UNARY = {
    "neg": (lambda a: -a, lambda a: -a),
    "abs": (k.abs_, np.abs),
    "tanh": (k.tanh, np.tanh),
    "sigmoid": (k.sigmoid, lambda a: 1.0 / (1.0 + np.exp(-a))),
}
BINARY = {
    "add": (lambda a, b: a + b, np.add),
    "sub": (lambda a, b: a - b, np.subtract),
    "mul": (lambda a, b: a * b, np.multiply),
    "div": (lambda a, b: a / b, np.divide),
    "max": (k.maximum, np.maximum),
    "min": (k.minimum, np.minimum),
}

leaves = st.one_of(st.sampled_from(["a", "b"]), CONSTS)
trees = st.recursive(
    leaves,
    lambda sub: st.one_of(
        st.tuples(st.sampled_from(sorted(UNARY)), sub),
        st.tuples(st.sampled_from(sorted(BINARY)), sub, sub),
    ),
    max_leaves=12,
)


def evaluate(tree, a, b, dsl: bool):
    """Build the expression with the DSL (dsl=True) or compute it with numpy."""
    if isinstance(tree, str):
        return a if tree == "a" else b
    if isinstance(tree, float):
        return tree if dsl else np.float64(tree)
    fns = UNARY[tree[0]] if len(tree) == 2 else BINARY[tree[0]]
    fn = fns[0] if dsl else fns[1]
    args = [evaluate(t, a, b, dsl) for t in tree[1:]]
    if dsl:
        if all(isinstance(x, float) for x in args):  # keep Python from folding (or 1/0)
            args[0] = Const(args[0])
        return fn(*args)
    with np.errstate(all="ignore"):
        return fn(*args)


def arrays(n: int):
    return st.lists(st.floats(-4, 4, allow_nan=False, width=32), min_size=n, max_size=n).map(
        lambda v: np.asarray(v, dtype=np.float32))


@settings(max_examples=150, deadline=None)
@given(tree=trees, data=st.data(), n=st.integers(1, 6))
def test_dsl_arithmetic_matches_numpy(tree, data, n):
    xa = data.draw(arrays(n), label="a")
    xb = data.draw(arrays(n), label="b")
    N = k.dims("N")
    a_buf = k.input("a", (N,), k.f32)
    b_buf = k.input("b", (N,), k.f32)
    (i,) = k.axes("i", N)
    body = evaluate(tree, a_buf[i], b_buf[i], dsl=True)
    y = k.compute("y", (i,), body, dtype=k.f32)
    op = k.op("arith", inputs=[a_buf, b_buf], outputs=[y])
    got = run(op, {"a": xa, "b": xb})["y"]
    want = np.broadcast_to(evaluate(tree, xa.astype(np.float64), xb.astype(np.float64),
                                    dsl=False), (n,))
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12, equal_nan=True)
