"""benchmarks/examples_table.py runs spec files' operators through the command line (run,
evolve, export) and writes the table as JSON and markdown: here two tiny operators."""

from __future__ import annotations

import importlib.util
import json
import math
from pathlib import Path

import pytest

pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parents[2]

SPEC = '''
from kevolve.ir.builder import axes, axis, compute, dims, f32, input, op, reduce_axis, sum_
from kevolve.ops import define

M, N = dims("M N")
x = input("x", (M, N), f32)
i, j = axes("i j", M, N)
TWICE = define(op("twice_plus_one", inputs=[x], outputs=[compute("y", (i, j),
               2.0 * x[i, j] + 1.0)]), presets={"small": {"M": 3, "N": 5}},
               reference=lambda t, p: 2.0 * t["x"] + 1.0)

M, N = dims("M N")
x = input("x", (M, N), f32)
r, k = axis("r", M), reduce_axis("k", N)
ROWSUM = define(op("row_sum", inputs=[x], outputs=[compute("s", (r,),
                sum_(x[r, k], over=k))]), presets={"small": {"M": 4, "N": 6}},
                reference="torch.sum(dim=-1)")
'''


def _tool():
    spec = importlib.util.spec_from_file_location("examples_table",
                                                  ROOT / "benchmarks" / "examples_table.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.slow
def test_the_table_of_two_tiny_examples(tmp_path, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    (tmp_path / "tiny.py").write_text(SPEC)
    out = tmp_path / "res" / "table"
    tool = _tool()
    assert tool.spec_refs([str(tmp_path / "tiny.py")]) == [
        f"{tmp_path / 'tiny.py'}:TWICE", f"{tmp_path / 'tiny.py'}:ROWSUM"]
    # --stop-after: ops not started by then are left for --resume
    rc = tool.main([str(tmp_path / "tiny.py"), "--backend", "cpu", "--budget", "2",
                    "--shape", "small", "--db", str(tmp_path / "a.db"), "--out", str(out),
                    "--stop-after", "0"])
    assert rc == 1 and json.loads(out.with_suffix(".json").read_text())["ops"] == []
    rc = tool.main([str(tmp_path / "tiny.py"), "--backend", "cpu", "--budget", "2",
                    "--shape", "small", "--threads", "1", "--db", str(tmp_path / "a.db"),
                    "--out", str(out), "--jobs", "2"])
    assert rc == 0
    doc = json.loads(out.with_suffix(".json").read_text())
    assert doc["backend"] == "cpu" and doc["budget"] == 2 and "--budget 2" in doc["command"]
    assert [r["op"] for r in doc["ops"]] == ["twice_plus_one", "row_sum"]
    for r in doc["ops"]:
        assert r["run_verdict"] == "ok" and r["evolve_verdict"] == "ok", r
        assert r["export"] == "ok" and 1 <= r["evaluated"] <= 2
        assert r["kevolve_ms"] > 0 and r["eager_ms"] > 0
        assert math.isclose(r["speedup_eager"], r["eager_ms"] / r["kevolve_ms"], rel_tol=1e-6)
    assert (tmp_path / "exported" / "row_sum_cpu.py").is_file()
    md = out.with_suffix(".md").read_text()
    assert md.count("\n| twice_plus_one |") == 1 and md.count("\n| row_sum |") == 1
    assert "2 ops; evolve passed for 2, export for 2" in md
    # --resume keeps what is there and runs nothing again
    rc = tool.main([str(tmp_path / "tiny.py"), "--backend", "cpu", "--budget", "2",
                    "--shape", "small", "--db", str(tmp_path / "a.db"), "--out", str(out),
                    "--resume", "--timeout", "0.001"])
    again = json.loads(out.with_suffix(".json").read_text())
    assert rc == 0 and again["ops"] == doc["ops"] and len(again["resumed"]) == 1
    # --combine: one table from tables written by separate commands
    first = dict(doc, ops=doc["ops"][:1])
    (tmp_path / "one.json").write_text(json.dumps(first))
    (tmp_path / "two.json").write_text(json.dumps(dict(doc, ops=doc["ops"][1:])))
    assert tool.main([str(tmp_path / "one.json"), str(tmp_path / "two.json"), "--combine",
                      "--out", str(tmp_path / "all")]) == 0
    both = json.loads((tmp_path / "all.json").read_text())
    assert both["ops"] == doc["ops"] and "row_sum" in (tmp_path / "all.md").read_text()


def test_a_table_from_several_machines_names_each_rows_hardware():
    tool = _tool()
    row = {"ref": "x.py:A", "op": "a", "run_verdict": "not run", "evolve_verdict": "ok",
           "export": "ok", "kevolve_ms": 1.0, "compile_ms": 1.0, "speedup_compile": 1.0}
    doc = {"backend": "triton", "budget": 8, "command": "c", "date": "d", "torch": "t",
           "python": "p", "hardware": "gpu:A", "ops": [dict(row, hardware="gpu:A")]}
    one = tool.markdown(doc)
    assert "hardware gpu:A;" in one and "| hardware |" not in one
    doc["ops"].append(dict(row, op="b", hardware="gpu:B"))
    two = tool.markdown(doc)
    assert "hardware per row" in two and "| hardware |" in two
    assert "| ok | gpu:A |" in two and "| ok | gpu:B |" in two
