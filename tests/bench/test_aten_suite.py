"""`kevolve bench --suite aten`: catalog ops selected as `kevolve conform` selects them, each
op's default schedule and searched best beside torch eager and torch.compile; fast_1, the
geomeans and the losses by cause follow from the rows; a wrong kernel is a check failure,
never a win."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from kevolve.bench import catalog, suites
from kevolve.cli import main

pytest.importorskip("torch")


@pytest.fixture(autouse=True)
def small_aten_suite(monkeypatch):
    """The catalog benched at its `small` preset: these tests check the suite's bookkeeping,
    not the kernels' speed."""
    monkeypatch.setitem(suites.PRESET, "aten", "small")


def test_the_selection_is_conforms(monkeypatch):
    from kevolve.commands.bench import _catalog
    from kevolve.evaluate.conform import share
    from kevolve.ops import aten

    got = _catalog("softmax", "aten.relu", "1/3")
    want = share(aten.select("softmax,aten.relu"), "1/3")
    assert got == tuple("aten." + n for n in want) and len(got) >= 2
    assert len(_catalog("", "", None)) == len(aten.names())
    for args, says in ((["--share", "5/2"], "0 <= K < N"),
                       (["--family", "nosuch"], "no ATen catalog op")):
        r = CliRunner().invoke(main, ["bench", "--suite", "aten", "--budget", "0"] + args)
        assert r.exit_code == 2 and says in r.output, r.output


def test_fast_1_and_the_geomeans_follow_from_the_rows(tmp_path):
    out = tmp_path / "out"
    r = CliRunner().invoke(main, ["bench", "--suite", "aten", "--ops", "relu,sum_last",
                                  "--budget", "2", "--rounds", "1", "--threads", "1",
                                  "--db", str(tmp_path / "a.db"), "--out", str(out), "--json"])
    assert r.exit_code == 0, r.output
    res = json.loads(r.stdout)
    assert res == json.loads((out / "results.json").read_text())
    rows, s = res["rows"], res["aten"]
    assert [row["op"] for row in rows] == ["aten.relu", "aten.sum_last"]
    assert res["suite"] == "aten" and res["budget"] == 2 and res["preset"] == "small"
    for row in rows:
        assert row["kevolve_verdict"] == "ok" and row["searched"] >= 1
        assert row["trace_source"] == "archive"  # the search's best, from its archive
        # the default schedule timed beside it, or the pick is the default itself
        assert row.get("default_ms") or row.get("default_is_pick")
        assert row["eager_ms"] > 0 and row["compile_ms"] > 0
        assert row["speedup_compile"] == pytest.approx(row["compile_ms"] / row["kevolve_ms"])
        assert row["family"] in ("unary", "reduction")
        assert row["cause"] == catalog.cause(row)
        assert (row["cause"] is None) == (row["speedup_compile"] >= 1.0)
    assert rows[1]["reduces"] and not rows[0]["reduces"]
    assert s["ops"] == 2 and s["correct"] == 2 and s["timed_vs_compile"] == 2
    assert s["fast_1"] == sum(row["speedup_compile"] >= 1.0 for row in rows) / len(rows)
    assert s["geomean_speedup_compile"] == pytest.approx(
        (rows[0]["speedup_compile"] * rows[1]["speedup_compile"]) ** 0.5)
    assert s["geomean_speedup_eager"] == pytest.approx(res["geomean_speedup_eager"])
    lost = [o["op"] for ops in s["losses"].values() for o in ops]
    assert sorted(lost) == sorted(row["op"] for row in rows if row["cause"])
    md = (out / "report.md").read_text()
    assert "kevolve bench --suite aten" in md and "fast_1" in md and "| aten.relu |" in md
    html = (out / "report.html").read_text()
    assert "<h2>The ATen catalog</h2>" in html and "fast_1" in html
    assert "<th>cause</th>" in html and "<td>aten.sum_last</td>" in html


def test_a_wrong_kernel_is_a_check_failure_not_a_win(tmp_path, monkeypatch):
    """Every kernel the bench builds here adds 1 to its outputs: each op is reported wrong,
    untimed, with cause `check failure`, and counts against fast_1."""
    import kevolve
    from kevolve.bench.runner import run_suite

    real = kevolve.build

    def wrong(lowered, be):
        k = real(lowered, be)

        def call(ins, outs, params):
            k(ins, outs, params)
            for v in outs.values():
                v[...] += 1.0
        return call
    monkeypatch.setattr(kevolve, "build", wrong)
    res = run_suite("aten", "cpu", db=str(tmp_path / "a.db"), budget=0, from_archive=False,
                    workers=1, threads=1, compile_=False, ops=("aten.relu", "aten.sum_last"),
                    rounds=1)
    for row in res["rows"]:
        assert row["kevolve_verdict"] == "wrong" and row["kevolve_max_error"] >= 1.0
        assert "kevolve_ms" not in row and "speedup_compile" not in row
        assert row["cause"] == catalog.CHECK
        assert row["eager_ms"] > 0  # torch was still timed
    assert res["aten"]["fast_1"] == 0.0 and res["aten"]["correct"] == 0
    assert [o["op"] for o in res["aten"]["losses"][catalog.CHECK]] == \
        ["aten.relu", "aten.sum_last"]


@pytest.mark.parametrize("row,cause", [
    ({"kevolve_verdict": "wrong"}, catalog.CHECK),
    ({"kevolve_verdict": "error", "kevolve_stage": "compile"}, catalog.COMPILE),
    ({"kevolve_verdict": "error", "kevolve_stage": "legality"}, catalog.LEGALITY),
    ({"kevolve_verdict": "error", "kevolve_stage": None}, catalog.RUN),
    ({"kevolve_verdict": "error", "kevolve_stage": "bench"}, catalog.BENCH_ERROR),
    ({"kevolve_verdict": "ok", "speedup_eager": 2.0}, catalog.NO_BASELINE),
    ({"kevolve_verdict": "ok", "compile_ms": 1, "speedup_compile": 1.0}, None),
    ({"kevolve_verdict": "ok", "compile_ms": 1, "speedup_compile": 0.9, "pct_floor": 85},
     catalog.NEAR_FLOOR),
    ({"kevolve_verdict": "ok", "compile_ms": 1, "speedup_compile": 0.5, "contracts": True,
      "on_device": True, "strategies": ["looped"]}, catalog.NO_TENSOR_CORES),
    ({"kevolve_verdict": "ok", "compile_ms": 1, "speedup_compile": 0.5, "contracts": True,
      "on_device": True, "strategies": ["dot"]}, catalog.CONTRACTION),
    ({"kevolve_verdict": "ok", "compile_ms": 1, "speedup_compile": 0.5, "contracts": True,
      "on_device": False, "strategies": ["looped"]}, catalog.CONTRACTION),
    ({"kevolve_verdict": "ok", "compile_ms": 1, "speedup_compile": 0.5, "reduces": True},
     catalog.REDUCTION),
    ({"kevolve_verdict": "ok", "compile_ms": 1, "speedup_compile": 0.5}, catalog.POINTWISE),
])
def test_each_cause_from_what_was_measured(row, cause):
    assert catalog.cause(row) == cause


def test_the_kind_of_an_op_from_its_ir():
    from kevolve.ops import aten

    assert catalog.op_kind(aten.get("mm").op) == (True, False)
    assert catalog.op_kind(aten.get("sum_last").op) == (False, True)
    assert catalog.op_kind(aten.get("relu").op) == (False, False)


def test_the_summary_counts_every_op_in_fast_1s_denominator():
    rows = [{"op": "a", "kevolve_verdict": "ok", "compile_ms": 1, "speedup_compile": 1.2,
             "family": "unary"},
            {"op": "b", "kevolve_verdict": "wrong", "compile_ms": 1, "family": "unary"},
            {"op": "c", "kevolve_verdict": "ok", "speedup_eager": 3.0, "family": "loss"}]
    s = catalog.summary(rows)
    assert s["fast_1"] == pytest.approx(1 / 3)
    assert s["families"]["unary"]["fast_1"] == 0.5 and s["families"]["loss"]["fast_1"] == 0
    assert list(s["losses"]) == [catalog.CHECK, catalog.NO_BASELINE]
    assert s["geomean_speedup_compile"] == pytest.approx(1.2)
