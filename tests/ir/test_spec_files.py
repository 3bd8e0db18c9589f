"""Spec files: every way a spec can be wrong is a SpecError naming the file, the line, and
the stage/axis involved. Each spec below marks its bad line with `# BAD`."""

from __future__ import annotations

import textwrap
from pathlib import Path

import numpy as np
import pytest

from kevolve.ir import Op, SpecError
from kevolve.ir.interp import run
from kevolve.ir.specfile import is_spec_ref, load_op, split_ref
from kevolve.ops import resolve as resolve_op

HEADER = "from kevolve.ir.builder import *\n"


def write(tmp_path: Path, body: str, name: str = "spec.py") -> tuple[Path, int | None]:
    """Write HEADER + body; return the path and the 1-based line marked `# BAD`."""
    text = HEADER + textwrap.dedent(body).lstrip("\n")
    bad = next((k for k, line in enumerate(text.splitlines(), 1) if "# BAD" in line), None)
    path = tmp_path / name
    path.write_text(text)
    return path, bad


def spec_error(tmp_path: Path, body: str, ref_suffix: str = "") -> tuple[SpecError, int, Path]:
    path, bad = write(tmp_path, body)
    with pytest.raises(SpecError) as info:
        load_op(f"{path}{ref_suffix}")
    return info.value, bad, path


SOFTMAX = """
M, N = dims("M N")
x = input("x", (M, N), f32)
i, j = axes("i j", M, N)
k = reduce_axis("k", N)
mx = compute("mx", (i,), max_(x[i, k], over=k))
e = compute("e", (i, j), exp(x[i, j] - mx[i]))
s = compute("s", (i,), sum_(e[i, k], over=k))
y = compute("y", (i, j), e[i, j] / s[i])
softmax = op("softmax", inputs=[x], outputs=[y])
"""


def test_good_spec_loads_and_runs(tmp_path):
    path, _ = write(tmp_path, SOFTMAX)
    for ref in (str(path), f"{path}:softmax"):
        op = load_op(ref)
        assert isinstance(op, Op) and op.name == "softmax"
        assert [s.name for s in op.stages] == ["mx", "e", "s", "y"]
    x = np.random.default_rng(0).standard_normal((3, 5)).astype(np.float32)
    y = run(op, {"x": x})["y"]
    np.testing.assert_allclose(y.sum(axis=1), 1.0, rtol=1e-12)
    assert resolve_op(f"{path}:softmax").op == op


def test_shape_mismatch_names_line_and_stage(tmp_path):
    err, bad, path = spec_error(tmp_path, """
        M, N = dims("M N")
        x = input("x", (M, N), f32)
        i, j = axes("i j", M, N)
        y = compute("y", (i, j), x[i, j, j] * 0.5)  # BAD
        f = op("f", inputs=[x], outputs=[y])
        """)
    assert err.line == bad
    assert err.loc == f"{path}:{bad}"
    assert err.stage == "y"
    assert "2 dims" in err.message and "indexed with 3" in err.message
    assert f"{path}:{bad}" in str(err) and "stage 'y'" in str(err)


def test_dtype_mismatch_needs_explicit_cast(tmp_path):
    err, bad, _ = spec_error(tmp_path, """
        M, N = dims("M N")
        x = input("x", (M, N), f32)
        w = input("w", (M, N), bf16)
        i, j = axes("i j", M, N)
        ok = compute("ok", (i, j), x[i, j] + cast(w[i, j], f32))
        y = compute("y", (i, j), x[i, j] + w[i, j])  # BAD
        """)
    assert err.line == bad
    assert err.stage == "y"
    assert "f32" in err.message and "bf16" in err.message
    assert "cast" in err.hint


def test_unknown_axis(tmp_path):
    err, bad, _ = spec_error(tmp_path, """
        M, N = dims("M N")
        x = input("x", (M, N), f32)
        i, j = axes("i j", M, N)
        (q,) = axes("q", N)
        y = compute("y", (i,), x[i, q])  # BAD
        """)
    assert err.line == bad
    assert (err.stage, err.axis) == ("y", "q")
    assert "unknown axis 'q'" in err.message


def test_reduce_axis_outside_reduction(tmp_path):
    err, bad, _ = spec_error(tmp_path, """
        M, N = dims("M N")
        x = input("x", (M, N), f32)
        (i,) = axes("i", M)
        k = reduce_axis("k", N)
        y = compute("y", (i,), x[i, k] + 0.5)  # BAD
        """)
    assert err.line == bad
    assert (err.stage, err.axis) == ("y", "k")
    assert "outside a reduction" in err.message
    assert "over=k" in err.hint


def test_jagged_axis_without_max_extent_points_at_the_axis(tmp_path):
    err, bad, _ = spec_error(tmp_path, """
        B, D, T = dims("B D T")
        values = input("values", (T, D), f32)
        offsets = input("offsets", (B + 1,), i64)
        b, d = axes("b d", B, D)
        l = jagged_axis("l", start=offsets[b], end=offsets[b + 1], max_extent=None,  # BAD
                        reduce=True)
        out = compute("out", (b, d), sum_(values[l, d], over=l))
        """)
    assert err.line == bad
    assert (err.stage, err.axis) == ("out", "l")
    assert "max_extent" in err.message


def test_syntax_error(tmp_path):
    err, bad, path = spec_error(tmp_path, """
        M, N = dims("M N")
        x = input("x", (M, N), f32)
        i, j = axes("i j", M N)  # BAD
        """)
    assert err.line == bad
    assert err.loc == f"{path}:{bad}"
    assert "syntax" in err.message


def test_unknown_dtype(tmp_path):
    err, bad, _ = spec_error(tmp_path, """
        (M,) = (dims("M"),)
        x = input("x", (M,), "f33")  # BAD
        """)
    assert err.line == bad
    assert "f33" in err.message


@pytest.mark.parametrize("bad_call", ['cast(x[i], "f33")', 'x[i] * const(2, "f33")'])
def test_unknown_dtype_in_cast_and_const(tmp_path, bad_call):
    err, bad, _ = spec_error(tmp_path, f"""
        M = dims("M")
        x = input("x", (M,), f32)
        (i,) = axes("i", M)
        y = compute("y", (i,), {bad_call})  # BAD
        """)
    assert err.line == bad
    assert "f33" in err.message


def test_unknown_dtype_of_a_stage(tmp_path):
    err, bad, _ = spec_error(tmp_path, """
        M = dims("M")
        x = input("x", (M,), f32)
        (i,) = axes("i", M)
        y = compute("y", (i,), x[i], dtype="f33")  # BAD
        """)
    assert err.line == bad
    assert err.stage == "y"


def test_reading_a_buffer_that_is_not_an_input(tmp_path):
    err, bad, _ = spec_error(tmp_path, """
        M = dims("M")
        x = input("x", (M,), f32)
        w = input("w", (M,), f32)
        (i,) = axes("i", M)
        y = compute("y", (i,), x[i] * w[i])  # BAD
        f = op("f", inputs=[x], outputs=[y])
        """)
    assert err.line == bad
    assert err.stage == "y"
    assert "'w'" in err.message and "neither an input" in err.message


def test_exception_while_executing_names_innermost_line(tmp_path):
    err, bad, path = spec_error(tmp_path, """
        def helper(n):
            return {"a": 1}[n]  # BAD

        M = dims("M")
        helper("b")
        """)
    assert err.line == bad
    assert "KeyError" in err.message
    assert isinstance(err.__cause__, KeyError)


def test_error_inside_a_helper_function_keeps_the_builder_line(tmp_path):
    err, bad, _ = spec_error(tmp_path, """
        def stage(x, i):
            return compute("y", (i,), x[i, i])  # BAD

        M = dims("M")
        x = input("x", (M,), f32)
        (i,) = axes("i", M)
        y = stage(x, i)
        """)
    assert err.line == bad
    assert err.stage == "y"


def test_no_op_with_that_name_lists_the_ops(tmp_path):
    err, _, path = spec_error(tmp_path, SOFTMAX, ":softmx")
    assert "'softmx'" in err.message
    assert "softmax" in err.message
    assert err.loc == str(path)


def test_name_that_is_not_an_op(tmp_path):
    err, _, _ = spec_error(tmp_path, SOFTMAX, ":x")
    assert "not an Op" in err.message and "softmax" in err.message


def test_several_ops_need_a_name(tmp_path):
    body = SOFTMAX + 'again = op("again", inputs=[x], outputs=[mx])\n'
    err, _, _ = spec_error(tmp_path, body)
    assert "again" in err.message and "softmax" in err.message
    path = tmp_path / "spec.py"
    assert load_op(f"{path}:again").outputs == ("mx",)


def test_no_op_at_all(tmp_path):
    err, _, _ = spec_error(tmp_path, 'M = dims("M")\n')
    assert "defines no Op" in err.message


def test_missing_file(tmp_path):
    with pytest.raises(SpecError) as info:
        load_op(str(tmp_path / "nope.py:softmax"))
    assert "does not exist" in info.value.message


def test_refs():
    assert split_ref("a/b.py:softmax") == ("a/b.py", "softmax")
    assert split_ref("a/b.py") == ("a/b.py", None)
    assert is_spec_ref("spec.py:x") and is_spec_ref("dir/spec.py")
    assert not is_spec_ref("softmax")


def test_resolve_library_and_unknown_names():
    assert resolve_op("softmax").name == "softmax"
    with pytest.raises(KeyError) as info:
        resolve_op("missing_op")
    assert "missing_op" in info.value.args[0] and "softmax" in info.value.args[0]


def test_int_and_float_constants_are_distinct():
    from kevolve.ir.nodes import Const, dtype_of

    assert dtype_of(Const(1.0)).name == "f32"
    assert dtype_of(Const(1)).name == "i64"
    assert Const(1) != Const(1.0) and len({Const(1), Const(1.0)}) == 2


def test_where_with_a_python_bool_names_the_line(tmp_path):
    """`x == 0.0` on expressions is structural equality (a Python bool): where() would
    silently take one branch everywhere, so it refuses it."""
    err, bad, path = spec_error(tmp_path, """
        M = dims("M")
        x = input("x", (M,), f32)
        (i,) = axes("i", M)
        y = compute("y", (i,), where(x[i] == 0.0, 1.0, x[i]))  # BAD
        f = op("f", inputs=[x], outputs=[y])
        """)
    assert err.line == bad and err.loc == f"{path}:{bad}"
    assert "eq(a, b)" in err.hint


def test_an_op_is_found_by_its_own_name(tmp_path):
    """`file.py:softmax` finds an Op bound to another name (SOFT = op("softmax", ...)), and
    the OpDef that wraps it where the file defines one; a name neither bound nor an Op's own
    stays an error."""
    path, _ = write(tmp_path, SOFTMAX.replace("softmax = op(", "SOFT = op("))
    assert load_op(f"{path}:softmax").name == "softmax"
    assert resolve_op(f"{path}:softmax").op.name == "softmax"
    wrapped, _ = write(tmp_path, "from kevolve.ops import define\n" +
                       SOFTMAX.replace("softmax = op(", "_o = op(") +
                       'SOFT = define(_o, presets={"small": {"M": 2, "N": 3}})\n', "w.py")
    d = resolve_op(f"{wrapped}:softmax")
    assert d.op.name == "softmax" and d.shape("small") == {"M": 2, "N": 3}
    with pytest.raises(SpecError, match="no Op named 'nope'"):
        load_op(f"{path}:nope")


def test_a_spec_imports_the_helper_module_beside_it(tmp_path):
    """Its folder is on sys.path while it runs, as for a script; not after."""
    import sys

    (tmp_path / "rowhelpers.py").write_text(HEADER + textwrap.dedent("""
        def scaled(name, k):
            N = dims("N")
            x = input("x", (N,), f32)
            (i,) = axes("i", N)
            return x, compute(name, (i,), x[i] * k)
    """))
    path, _ = write(tmp_path, """
        from rowhelpers import scaled
        x, y = scaled("y", 3.0)
        triple = op("triple", inputs=[x], outputs=[y])
    """)
    op = load_op(str(path))
    assert op.name == "triple"
    assert run(op, {"x": np.arange(4.0)})["y"].tolist() == [0.0, 3.0, 6.0, 9.0]
    assert str(tmp_path) not in sys.path


def test_printed_conditions_read_as_python():
    """`show` and prompts print `(i >= 1) & (i < N - 1)`: in Python `&` binds tighter than
    a comparison, so `i >= 1 & i < N - 1` means something else."""
    from kevolve.ir.builder import axes, dims
    from kevolve.ir.printer import expr

    N = dims("N")
    (i,) = axes("i", N)
    text = expr((i >= 1) & (i < N - 1) | (i * 2 + 1 < N))
    assert text == "(i >= 1) & (i < N - 1) | (i * 2 + 1 < N)"
    assert eval(text, {"i": 0, "N": 5}) == (((0 >= 1) & (0 < 4)) | (1 < 5))
