"""Bad input from people, through the command line: spec files that are wrong in each way a
person gets them wrong, and schedule files of junk. Each is exit code 2 with one paragraph
that names the line (specs) or carries the structured move error (traces), never a
traceback. The API-level checks live in tests/ir/test_spec_files.py and
tests/schedule/test_random_moves.py; the strategies for junk moves are reused from
tests/schedule/movegen.py."""

from __future__ import annotations

import json
import re
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kevolve.cli import main
from kevolve.ir import SpecError
from kevolve.ir.errors import InterpError
from kevolve.ir.interp import run as reference
from kevolve.ir.specfile import load_op
from kevolve.ops import LIBRARY
from kevolve.schedule import default_trace

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "schedule"))
from movegen import aimed_move, junk_move  # noqa: E402

HEADER = "from kevolve.ir.builder import *\n"
SPECS = {
    "syntax-error": ("""
        M, N = dims("M N")
        x = input("x", (M, N), f32)
        i, j = axes("i j", M N)  # BAD
        """, "syntax error"),
    "wrong-shapes": ("""
        M, N = dims("M N")
        x = input("x", (M, N), f32)
        i, j = axes("i j", M, N)
        y = compute("y", (i, j), x[i])  # BAD
        f = op("f", inputs=[x], outputs=[y])
        """, "indexed with 1"),
    "unknown-dtype": ("""
        M = dims("M")
        x = input("x", (M,), "f33")  # BAD
        """, "f33"),
    "reads-past-the-end": ("""
        M = dims("M")
        x = input("x", (M,), f32)
        (i,) = axes("i", M)
        y = compute("y", (i,), x[i] - x[i + 1])  # BAD
        f = op("f", inputs=[x], outputs=[y])
        """, "index i + 1 of 'x' runs past dim 0"),
    "reads-before-the-start": ("""
        M, N = dims("M N")
        x = input("x", (M, N), f32)
        i, j = axes("i j", M, N)
        k = reduce_axis("k", N)
        y = compute("y", (i, j), sum_(x[i, k - 1], over=k))  # BAD
        f = op("f", inputs=[x], outputs=[y])
        """, "index k - 1 of 'x' runs below 0"),
    "fixed-axis-past-a-fixed-dim": ("""
        x = input("x", (8,), f32)
        (i,) = axes("i", 9)  # BAD
        y = compute("y", (i,), x[i])
        f = op("f", inputs=[x], outputs=[y])
        """, "axis 'i' runs past dim 0 of 'x'"),
}


def write_spec(tmp_path: Path, body: str) -> tuple[Path, int]:
    text = HEADER + textwrap.dedent(body).lstrip("\n")
    bad = next(k for k, line in enumerate(text.splitlines(), 1) if "# BAD" in line)
    path = tmp_path / "spec.py"
    path.write_text(text)
    return path, bad


def one_paragraph_error(result) -> str:
    assert result.exit_code == 2, result.output
    assert isinstance(result.exception, SystemExit), result.exception
    err = result.stderr.strip()
    assert err.startswith("kevolve: error:") and "\n" not in err, err
    assert "Traceback" not in result.output
    return err


@pytest.mark.parametrize("command", ["show", "lower"])
@pytest.mark.parametrize("case", sorted(SPECS))
def test_a_bad_spec_file_is_one_paragraph_naming_the_line(tmp_path, case, command):
    body, says = SPECS[case]
    path, bad = write_spec(tmp_path, body)
    ref = f"{path}:f"
    args = ["show", ref] if command == "show" else \
        ["lower", ref, "--backend", "cpu", "--shape", "M=8", "--shape", "N=8"]
    err = one_paragraph_error(CliRunner().invoke(main, args))
    assert f"{path}:{bad}" in err and says in err, err


def test_a_read_out_of_bounds_the_static_check_cannot_decide_is_caught_by_the_interpreter(
        tmp_path):
    """`x[i * 2]` reads past the end for every M > 1, but only a symbolic check of products
    would know; the spec loads (and lowers), and the reference interpreter refuses to run it,
    naming the line and the stage."""
    path, bad = write_spec(tmp_path, """
        M = dims("M")
        x = input("x", (M,), f32)
        (i,) = axes("i", M)
        y = compute("y", (i,), x[i * 2])  # BAD
        f = op("f", inputs=[x], outputs=[y])
        """)
    op = load_op(f"{path}:f")
    with pytest.raises(InterpError) as e:
        reference(op, {"x": np.ones(5, np.float32)})
    assert str(e.value).startswith(f"{path}:{bad}: stage 'y' reads 'x' out of bounds")
    # a guarded read is legal, statically and when run
    path, _ = write_spec(tmp_path, """
        M = dims("M")
        x = input("x", (M,), f32)
        (i,) = axes("i", M)
        y = compute("y", (i,), where(i + 1 < M, x[i + 1], 0.0) - x[i])  # BAD (not bad)
        f = op("f", inputs=[x], outputs=[y])
        """)
    got = reference(load_op(f"{path}:f"), {"x": np.arange(4, dtype=np.float32)})["y"]
    np.testing.assert_array_equal(got, [1, 1, 1, -3])


def test_spec_errors_keep_their_stage_and_line_as_data(tmp_path):
    path, bad = write_spec(tmp_path, SPECS["reads-past-the-end"][0])
    with pytest.raises(SpecError) as e:
        load_op(f"{path}:f")
    assert (e.value.line, e.value.stage, e.value.axis) == (bad, "y", "i")


# -- traces: hypothesis junk through `kevolve lower --schedule` ------------------------------

SOFTMAX = LIBRARY["softmax"]
OP = SOFTMAX.op_for(SOFTMAX.shape("small"))
BASE = json.loads(default_trace(OP, SOFTMAX.dims("small")).to_json())["moves"]
json_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-(1 << 70), 1 << 70),
              st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=6)),
    lambda sub: st.one_of(st.lists(sub, max_size=4),
                          st.dictionaries(st.text(max_size=6), sub, max_size=4)),
    max_leaves=10)


@st.composite
def schedule_file(draw) -> str:
    kind = draw(st.sampled_from(["text", "json", "moves", "moves_on_default"]))
    if kind == "text":
        return draw(st.text(max_size=60))
    if kind == "json":
        return json.dumps(draw(json_values))
    moves = draw(st.lists(st.one_of(aimed_move(OP), junk_move(OP)), max_size=5))
    if kind == "moves_on_default":
        moves = BASE + moves
    trace = {"version": 1, "op": draw(st.sampled_from(["softmax", "softmax", "gemm", ""])),
             "moves": moves}
    if draw(st.booleans()):
        trace["decisions"] = draw(st.dictionaries(st.sampled_from(["$A", "$B", "$BN", "$W"]),
                                                  st.integers(-4, 1 << 20), max_size=3))
    return json.dumps(trace)


@settings(max_examples=150, deadline=None, suppress_health_check=[
    HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(text=schedule_file())
def test_junk_schedules_never_crash_lower(tmp_path, text):
    path = tmp_path / "trace.json"
    path.write_text(text)
    r = CliRunner().invoke(main, ["lower", "softmax", "--backend", "cpu", "--shape", "small",
                                  "--schedule", str(path)])
    if r.exit_code == 0:
        assert "kv_launch" in r.stdout  # a legal schedule: the generated source
        return
    err = one_paragraph_error(r)
    # the structured move error: "move N: [layer.code] message. Hint: ..." (not-JSON text
    # included: schema.json)
    assert re.search(r"\[(schema|semantics|backend)\.[a-z_0-9]+\] ", err), err
