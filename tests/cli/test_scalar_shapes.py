"""A float scalar (scalar("slope")) through the CLI and the archive: `--shape slope=0.25`
sets it (it was kept as the string "0.25" and the run drew a random slope instead), a value
that is not a number is exit 2 naming it, a preset holding a float survives the archive
(`best` refused the rows `evolve` wrote), and the edge shapes keep the small preset's value
(drawn at random, an epsilon went negative and the reference's NaN hid every error)."""

from __future__ import annotations

import json
import textwrap

import pytest
from click.testing import CliRunner

from kevolve.cli import main
from kevolve.ops import resolve

SPEC = textwrap.dedent("""
    from kevolve.ir.builder import axes, compute, dims, f32, input, op, rsqrt, scalar, sum_
    from kevolve.ir.builder import reduce_axis, cast
    from kevolve.ops import define, domain

    M, N = dims("M N")
    x = input("x", (M, N), f32)
    slope, eps = scalar("slope"), scalar("eps")
    i, j = axes("i j", M, N)
    k = reduce_axis("k", N)
    ms = compute("ms", (i,), sum_(x[i, k] * x[i, k], over=k) / cast(N, f32))
    y = compute("y", (i, j), x[i, j] * slope * rsqrt(ms[i] + eps))
    SCALED = define(op("scaled_norm", inputs=[x, slope, eps], outputs=[y]),
                    presets={"small": {"M": 5, "N": 7, "slope": 0.5, "eps": 1e-6},
                             "cpu": {"M": 64, "N": 96, "slope": 0.5, "eps": 1e-6}},
                    reference=lambda t, p: t["x"] * t["slope"] * (
                        (t["x"] * t["x"]).mean(-1, keepdim=True) + t["eps"]).rsqrt(),
                    inputs={"slope": domain(0.1, 1.0)})
""")


@pytest.fixture()
def spec(tmp_path):
    path = tmp_path / "scaled.py"
    path.write_text(SPEC)
    return f"{path}:SCALED"


def test_a_float_scalar_is_set_on_the_command_line(spec):
    r = CliRunner().invoke(main, ["run", spec, "--backend", "cpu", "--shape", "small",
                                  "--shape", "slope=0.25", "--json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.output[r.output.index("{"):])
    assert out["shape"]["slope"] == 0.25 and out["verdict"] == "ok", out


@pytest.mark.parametrize("arg", ["slope=abc", "nope=1.5"])
def test_a_bad_scalar_is_exit_2_naming_it(spec, arg):
    r = CliRunner().invoke(main, ["run", spec, "--backend", "cpu", "--shape", "small",
                                  "--shape", arg])
    assert r.exit_code == 2, r.output
    assert arg.split("=")[0] in r.output and "Traceback" not in r.output


def test_edge_shapes_keep_the_small_presets_scalars(spec):
    d = resolve(spec)
    assert d.edge_shapes and all(e["eps"] == 1e-6 and e["slope"] == 0.5
                                 for e in d.edge_shapes), d.edge_shapes


def test_an_archive_with_float_scalars_is_read_back(spec, tmp_path):
    db = str(tmp_path / "a.db")
    r = CliRunner().invoke(main, ["evolve", spec, "--backend", "cpu", "--budget", "2",
                                  "--shape", "small", "--db", db])
    assert r.exit_code == 0, r.output
    for verb in (["best", spec], ["history", spec]):
        r = CliRunner().invoke(main, [*verb, "--backend", "cpu", "--db", db])
        assert r.exit_code == 0, r.output
        assert "holds something other" not in r.output
