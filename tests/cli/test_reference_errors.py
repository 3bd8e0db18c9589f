"""A spec whose torch reference raises is the spec's mistake: `kevolve run` exits 2 with one
paragraph naming the reference's file and line and how a reference is called (it was a
traceback from the timing, after the kernel had passed). A prefix's reduce axis takes its
`max_extent` from reduce_axis(), which the error for a missing one asks for."""

from __future__ import annotations

import textwrap

from click.testing import CliRunner

from kevolve.cli import main

SPEC = textwrap.dedent("""
    from kevolve.ir.builder import axes, compute, dims, f32, input, op, reduce_axis, sum_
    from kevolve.ops import define

    M, N = dims("M N")
    x = input("x", (M, N), f32)
    i, j = axes("i j", M, N)
    k = reduce_axis("k", j + 1, max_extent=N)
    y = compute("y", (i, j), sum_(x[i, k], over=k))
    SIZES = {"small": {"M": 3, "N": 7}, "cpu": {"M": 3, "N": 7}}
    GOOD = define(op("cumsum_good", inputs=[x], outputs=[y]), presets=SIZES,
                  reference=lambda t, p: t["x"].cumsum(1))
    BAD = define(op("cumsum_bad", inputs=[x], outputs=[y]), presets=SIZES,
                 reference=lambda x: x.cumsum(1))
""")


def test_a_reference_that_raises_is_exit_2_naming_its_line(tmp_path):
    path = tmp_path / "scans.py"
    path.write_text(SPEC)
    r = CliRunner().invoke(main, ["run", f"{path}:cumsum_bad", "--backend", "cpu", "--shape",
                                  "small"])
    assert r.exit_code == 2, r.output
    line = next(n for n, t in enumerate(SPEC.splitlines(), 1) if "BAD = define" in t)
    assert f"scans.py:{line}" in r.output and "TypeError" in r.output
    assert "reference(tensors, params)" in r.output and "Traceback" not in r.output


def test_a_good_reference_and_a_prefix_reduce_axis_run(tmp_path):
    path = tmp_path / "scans.py"
    path.write_text(SPEC)
    r = CliRunner().invoke(main, ["run", f"{path}:cumsum_good", "--backend", "cpu", "--shape",
                                  "small", "--json"])
    assert r.exit_code == 0, r.output
    assert '"verdict": "ok"' in r.output
