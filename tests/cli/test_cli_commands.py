"""The `kevolve` command line: ops, show, error reporting, and light imports."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from kevolve.cli import main

HEAVY = ("torch", "triton", "numba", "ray", "anthropic")
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


def assert_one_paragraph_error(result) -> str:
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    err = result.stderr.strip()
    assert err.startswith("kevolve: error:")
    assert "\n" not in err, err
    return err


def test_ops_lists_the_library(runner):
    result = runner.invoke(main, ["ops"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "softmax" in result.output
    assert "x: f32[M, N]" in result.output  # inputs with dtypes


def test_show_prints_stages(runner):
    result = runner.invoke(main, ["show", "softmax"])
    assert result.exit_code == 0, result.output
    out = result.output
    assert out.startswith("op softmax")
    for stage in ("mx", "e", "s", "y"):
        assert f"\n  {stage}[" in out


def test_show_a_spec_file(runner, tmp_path):
    spec = tmp_path / "mine.py"
    spec.write_text(
        "from kevolve.ir.builder import *\n"
        'N = dims("N")\n'
        'x = input("x", (N,), f32)\n'
        '(i,) = axes("i", N)\n'
        'twice = op("twice", inputs=[x], outputs=[compute("y", (i,), x[i] * 0.5)])\n')
    result = runner.invoke(main, ["show", f"{spec}:twice"])
    assert result.exit_code == 0, result.output
    assert result.output.startswith("op twice")


def test_show_unknown_op_is_one_paragraph(runner):
    result = runner.invoke(main, ["show", "missing_op"])
    err = assert_one_paragraph_error(result)
    assert "missing_op" in err and "softmax" in err


def test_show_spec_with_syntax_error_names_the_line(runner, tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("from kevolve.ir.builder import *\nM = dims('M')\nx = input('x', (M,) f32)\n")
    result = runner.invoke(main, ["show", f"{bad}:x"])
    err = assert_one_paragraph_error(result)
    assert f"{bad}:3" in err
    assert "syntax" in err


def test_show_spec_with_invalid_stage_names_line_and_stage(runner, tmp_path):
    bad = tmp_path / "shape.py"
    bad.write_text("from kevolve.ir.builder import *\n"
                   "M, N = dims('M N')\n"
                   "x = input('x', (M, N), f32)\n"
                   "i, j = axes('i j', M, N)\n"
                   "y = compute('y', (i, j), x[i])\n")
    result = runner.invoke(main, ["show", str(bad)])
    err = assert_one_paragraph_error(result)
    assert f"{bad}:5" in err and "stage 'y'" in err


def test_debug_shows_the_traceback(runner, tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("x = (\n")
    result = runner.invoke(main, ["--debug", "show", f"{bad}:x"])
    assert result.exit_code == 2
    assert "Traceback" in result.stderr
    assert f"{bad}:1" in result.stderr


def test_usage_errors_exit_2(runner, tmp_path):
    assert runner.invoke(main, ["no-such-command"]).exit_code == 2
    assert runner.invoke(main, ["show"]).exit_code == 2
    missing = tmp_path / "missing.json"
    assert runner.invoke(main, ["show", "softmax", "--schedule", str(missing)]).exit_code == 2


def test_show_with_a_schedule_file(runner, tmp_path):
    from kevolve.ops import resolve as resolve_op
    from kevolve.schedule import Trace, default_trace

    trace = default_trace(resolve_op("softmax").op)
    path = tmp_path / "trace.json"
    path.write_text(trace.to_json())
    result = runner.invoke(main, ["show", "softmax", "--schedule", str(path)])
    assert result.exit_code == 0, result.output
    assert Trace.from_json(path.read_text()).pretty() in result.output


def test_help_lists_commands(runner):
    result = runner.invoke(main, ["--help"])
    assert result.exit_code == 0
    for name in ("ops", "show", "demo"):
        assert name in result.output


def _heavy_modules_after(code: str) -> list[str]:
    probe = (f"import sys\n{code}\n"
             f"print('HEAVY=' + ','.join(m for m in {HEAVY!r} if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True,
                         text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    line = [x for x in out.stdout.splitlines() if x.startswith("HEAVY=")][-1]
    return [m for m in line[len("HEAVY="):].split(",") if m]


def test_import_kevolve_is_light():
    assert _heavy_modules_after("import kevolve, kevolve.cli, kevolve.ir") == []


def test_help_is_light():
    code = ("from kevolve.cli import main\n"
            "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
            "try:\n    main(['show', '--help'])\nexcept SystemExit:\n    pass")
    assert _heavy_modules_after(code) == []


def test_demo_on_a_small_preset(runner):
    result = runner.invoke(main, ["demo", "--preset", "small", "--repeat", "1"],
                           env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    out = result.output
    assert out.startswith("op softmax")
    assert "torch eager" in out and "reference interpreter" in out
    assert "nominal 20 GB/s" in out
    err = float(out.split("max |torch - reference|")[1].split()[1])
    assert err < 1e-5


def test_demo_unknown_preset_is_a_user_error(runner):
    err = assert_one_paragraph_error(runner.invoke(main, ["demo", "--preset", "huge"]))
    assert "huge" in err
