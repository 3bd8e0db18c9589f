"""Sizes that dims constrain (a valid convolution's output L - K + 1): the presets and edge
shapes derived for a spec keep every such size at least 1 (one size per dim once gave
K=9 > L=4 and a traceback from allocating a negative dim), and a shape given on the command
line that makes one negative is exit 2 naming the stage, the size and the values. Channels
split into groups (C // G, G a param): the derived shapes keep C // G at least 1 and C a
multiple of G (primes gave C=3, G=17: a C kernel divided by C // G = 0, SIGFPE), and a
search checks and times them."""

from __future__ import annotations

import textwrap

from click.testing import CliRunner

from kevolve.backends.registry import get
from kevolve.cli import main
from kevolve.evaluate.conform import conform
from kevolve.ir.interp import eval_int
from kevolve.ops import resolve

SPEC = textwrap.dedent("""
    from kevolve.ir.builder import axes, compute, dims, f32, input, op, reduce_axis, sum_
    B, Ci, Co, L, K = dims("B Ci Co L K")
    x = input("x", (B, Ci, L), f32)
    w = input("weight", (Co, Ci, K), f32)
    b, co, o = axes("b co o", B, Co, L - K + 1)
    ci, t = reduce_axis("ci", Ci), reduce_axis("t", K)
    y = compute("y", (b, co, o), sum_(x[b, ci, o + t] * w[co, ci, t], over=(ci, t)))
    conv1d = op("conv1d", inputs=[x, w], outputs=[y])
""")


GROUPS = textwrap.dedent("""
    from kevolve.ir.builder import axes, compute, dims, f32, input, op, param, reduce_axis
    from kevolve.ir.builder import cast, sum_
    B, C, H = dims("B C H")
    G = param("G")
    x = input("x", (B, C, H), f32)
    b, g = axes("b g", B, G)
    rc, rh = reduce_axis("rc", C // G), reduce_axis("rh", H)
    mean = compute("mean", (b, g), sum_(x[b, g * (C // G) + rc, rh], over=(rc, rh))
                   / cast((C // G) * H, f32))
    b2, c, h = axes("b2 c h", B, C, H)
    y = compute("y", (b2, c, h), x[b2, c, h] - mean[b2, c // (C // G)])
    centered = op("group_centered", inputs=[x], outputs=[y])
""")


def test_derived_shapes_split_channels_into_whole_groups(tmp_path):
    path = tmp_path / "groups.py"
    path.write_text(GROUPS)
    d = resolve(str(path))
    for sd in [d.shape(p) for p in d.shapes] + list(d.edge_shapes):
        assert sd["C"] // sd["G"] >= 1 and sd["C"] % sd["G"] == 0, sd
    assert conform(d, get("cpu"), seeds=(0,), backend_name="cpu").ok
    r = CliRunner().invoke(main, ["evolve", str(path), "--backend", "cpu", "--budget", "1",
                                  "--db", str(tmp_path / "a.db")])
    assert r.exit_code == 0, r.output


def test_derived_shapes_keep_constrained_sizes_positive(tmp_path):
    path = tmp_path / "conv.py"
    path.write_text(SPEC)
    d = resolve(str(path))
    out = d.op.stage("y").out
    for sd in [d.shape(p) for p in d.shapes] + list(d.edge_shapes):
        assert eval_int(out.shape[2], sd) >= 1, sd
    assert conform(d, get("cpu"), seeds=(0,), backend_name="cpu").ok


def test_a_negative_size_on_the_command_line_is_exit_2(tmp_path):
    path = tmp_path / "conv.py"
    path.write_text(SPEC)
    r = CliRunner().invoke(main, ["run", str(path), "--backend", "cpu", "--shape", "small",
                                  "--shape", "L=4", "--shape", "K=9"])
    assert r.exit_code == 2, r.output
    assert "stage 'y'" in r.output and "L - K + 1 = -4" in r.output, r.output
    assert "Traceback" not in r.output
