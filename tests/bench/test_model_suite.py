"""`kevolve bench --suite model`: the reference models (benchmarks/models, found by path)
checked against eager, then timed per scenario and mode in interleaved rounds; results.json,
report.md and an HTML page with the end-to-end table; a missing models folder is exit 2
with where it looked; `--report-from` puts a model run beside a per-op run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from kevolve.bench import models as e2e
from kevolve.bench import report
from kevolve.cli import main

EVIL = "<script>alert(1)</script>"
ZOO = Path(__file__).resolve().parents[2] / "benchmarks" / "models"


def test_the_model_suite_checks_times_and_reports(tmp_path):
    pytest.importorskip("torch")
    out = tmp_path / "out"
    r = CliRunner().invoke(main, ["bench", "--suite", "model", "--models", "dlrm",
                                  "--scale", "100000", "--batch", "4,16,8", "--rounds", "1",
                                  "--iters", "1", "--no-compile", "--threads", "1",
                                  "--models-dir", str(ZOO), "--out", str(out), "--json"])
    assert r.exit_code == 0, r.output
    res = json.loads(r.stdout)
    assert res == json.loads((out / "results.json").read_text())
    assert res["suite"] == "model" and res["rounds"] == 1
    m = res["models"]["dlrm"]
    assert m["checks"]["kevolve"]["ok"] and m["checks"]["kevolve"]["grads_checked"] > 10
    assert [s["op"] for s in m["swaps"]].count("embedding_bag") >= 1
    for sc, batch in (("serve", 4), ("large", 16), ("train", 8)):
        sr = m["scenarios"][sc]
        assert sr["batch"] == batch
        assert set(sr["samples_per_s"]) == {"eager", "kevolve"}
        assert all(len(v) == 1 and v[0] > 0 for v in sr["rounds"].values())
        assert "over_compile" not in sr  # no torch.compile in this run
    assert "| train | 8 |" in (out / "report.md").read_text()
    html = (out / "report.html").read_text()
    assert "<h2>End to end: the ranking models</h2>" in html and "<th>kevolve</th>" in html
    assert "<td>train</td><td>8</td>" in html


def test_a_missing_models_folder_says_where_it_looked(tmp_path):
    r = CliRunner().invoke(main, ["bench", "--suite", "model", "--models-dir",
                                  str(tmp_path / "none")])
    assert r.exit_code == 2 and "no reference models at" in r.output
    assert str(tmp_path / "none") in " ".join(r.output.split()) and "Traceback" not in r.output
    r = CliRunner().invoke(main, ["bench", "--suite", "model", "--models-dir", str(ZOO),
                                  "--models", "dlrm,nosuch"])
    assert r.exit_code == 2 and "nosuch" in r.output and "dlrm, seq" in r.output
    r = CliRunner().invoke(main, ["bench", "--suite", "model", "--batch", "4,16"])
    assert r.exit_code == 2 and "SERVE,LARGE,TRAIN" in r.output


def test_the_zoo_is_found_by_path():
    pytest.importorskip("torch")
    zoo = e2e.load_zoo(ZOO)
    assert set(zoo.MODELS) == {"dlrm", "seq"} and zoo.MODULES["JaggedSum"] == "jagged_sum"
    assert e2e.load_zoo(ZOO) is zoo  # imported once


def model_results() -> dict:
    def scen(batch, rates):
        return {"batch": batch, "samples_per_s": rates,
                "rounds": {m: [v] for m, v in rates.items()}}
    return {"suite": "model", "backend": "cpu", "hardware": "cpu", "device_name": "cpu",
            "command": "kevolve bench --suite model", "torch": "2.x", "started": "t",
            "rounds": 1, "iters": 2, "models": {EVIL: {
                "params_m": 13.1, "swaps": [{"path": "embeddings.0", "op": "embedding_bag"}],
                "checks": {"kevolve": {"output_rel_err": 2e-7, "grad_rel_err": 6e-7,
                                       "worst_grad": EVIL, "ok": True}},
                "scenarios": {"serve": scen(64, {"eager": 800.0, "compile": 1000.0,
                                                 "kevolve": 1500.0}),
                              "train": scen(512, {"eager": 90.0, "compile": 100.0,
                                                  EVIL: 120.0})}}}}


def aten_results() -> dict:
    row = {"op": "aten.relu", "family": "unary", "eager_ms": 1.0, "compile_ms": 0.5,
           "kevolve_ms": 1.0, "kevolve_verdict": "ok", "speedup_eager": 1.0,
           "speedup_compile": 0.5, "pct_floor": 40.0, "strategies": ["none"],
           "cause": "pointwise or copy below the copy floor", "floor_ms": 0.4}
    bad = {"op": EVIL, "family": EVIL, "eager_ms": 1.0, "compile_ms": 1.0,
           "kevolve_verdict": "wrong", "kevolve_message": EVIL, "cause": "check failure"}
    from kevolve.bench import catalog
    return {"suite": "aten", "backend": "cpu", "hardware": "cpu", "rounds": 1, "budget": 4,
            "ceilings": {"copy_bytes_per_s": 1e10, "matmul_flops": 1e11},
            "rows": [row, bad], "history": {}, "aten": catalog.summary([row, bad])}


def test_the_page_shows_the_aten_summary_beside_the_models_and_escapes_names(tmp_path):
    res = report.combine([aten_results(), model_results()])
    page = report.render_html(res, with_charts=False)
    assert EVIL not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "<h2>The ATen catalog</h2>" in page and "<h3>check failure (1)</h3>" in page
    assert "fast_1" in page and "<b>0%</b>" in page  # relu lost, the other was wrong
    assert "<h2>End to end: the ranking models</h2>" in page
    # samples/s with the ratio over torch.compile, per scenario and mode
    assert "<td>serve</td><td>64</td><td>800 (0.800x)</td><td>1,000 (1.000x)</td>" \
           "<td>1,500 (1.500x)</td>" in page
    with pytest.raises(ValueError, match="at most one"):
        report.combine([aten_results(), aten_results()])
    a, m = tmp_path / "a.json", tmp_path / "m.json"
    a.write_text(json.dumps(aten_results()))
    m.write_text(json.dumps(model_results()))
    r = CliRunner().invoke(main, ["bench", "--report-from", f"{a},{m}", "--out",
                                  str(tmp_path / "o")])
    assert r.exit_code == 0, r.output
    html = (tmp_path / "o" / "report.html").read_text()
    assert "The ATen catalog" in html and "End to end" in html
    assert "fast_1" in (tmp_path / "o" / "report.md").read_text()  # the aten run's summary
    r = CliRunner().invoke(main, ["bench", "--report-from", f"{m},{m}", "--out",
                                  str(tmp_path / "o")])
    assert r.exit_code == 2 and "at most one" in r.output


def test_the_end_to_end_chart_has_alt_text():
    pytest.importorskip("matplotlib")
    figs = report.charts(model_results())
    (fig,) = figs
    assert fig["title"].startswith("End to end") and "kevolve 1.500x" in fig["alt"]


def test_a_mode_that_cannot_run_is_reported_and_the_others_go_on():
    torch = pytest.importorskip("torch")

    class Batch:
        def __init__(self):
            g = torch.Generator().manual_seed(2)
            self.x = torch.randn(5, 3, generator=g)
            self.labels = torch.rand(5, 1, generator=g)

        def args(self):
            return (self.x,)

    class Broken(torch.nn.Module):
        def forward(self, x):
            raise RuntimeError("graph capture failed\nsecond line")

    eager = torch.nn.Linear(3, 1)
    seen = []
    res = e2e.check({"eager": eager, "compile": eager, "kevolve-reduce-overhead": Broken()},
                    Batch(), 1e-3, seen.append)
    assert res["compile"]["ok"] and res["compile"]["output_rel_err"] == 0.0
    bad = res["kevolve-reduce-overhead"]
    assert not bad["ok"] and bad["error"].startswith("RuntimeError: graph capture failed")
    line = e2e._check_line("kevolve-reduce-overhead", bad)
    assert line == "kevolve-reduce-overhead: FAILED (RuntimeError: graph capture failed)"
    assert len(seen) == 2
