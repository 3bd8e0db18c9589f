"""`kevolve conform`: a rotating share of the ATen catalog built with the default schedule on
cpu and Triton's interpreter, checked against torch and the interpreter (the whole catalog's
spec-vs-torch check is tests/ops/test_aten_catalog.py; `make conform-all` runs every op on
every CPU backend). The share changes every day (KEVOLVE_CONFORM_SHARE=K/N picks one), so
the catalog is covered over N days without any run paying for all of it."""

from __future__ import annotations

import datetime
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from kevolve.cli import main
from kevolve.evaluate.conform import conform_all, share
from kevolve.ops import aten

SPECS = Path(__file__).parent / "specs" / "conform_specs.py"
PARTS = 40  # about 8 ops per run


def todays_share() -> str:
    env = os.environ.get("KEVOLVE_CONFORM_SHARE")
    if env:
        return env
    return f"{datetime.date.today().toordinal() % PARTS}/{PARTS}"


def test_rotating_share_conforms_on_cpu():
    names = share(aten.names(), todays_share())
    assert names
    results = conform_all(names, "cpu")
    bad = [f"{r.op}: {r.verdict} at {r.stage}: {r.reason}" for r in results
           if not r.ok and r.op not in KNOWN.get("cpu", {})]
    assert not bad, "\n".join(bad)


def test_rotating_share_conforms_on_the_triton_interpreter():
    """In a fresh process: Triton reads TRITON_INTERPRET once, when it is first imported,
    and another test of this worker may have imported it with the interpreter off."""
    names = share(aten.names(), todays_share())
    env = dict(os.environ, TRITON_INTERPRET="1")
    out = subprocess.run([sys.executable, "-m", "kevolve", "conform", "--backend", "triton",
                          "--interpret", "--ops", ",".join(names), "--json"],
                         capture_output=True, text=True, env=env, timeout=1800)
    assert out.returncode in (0, 1), out.stderr
    rows = json.loads(out.stdout)["results"]
    assert len(rows) == len(names)
    bad = [f"{r['op']}: {r['verdict']}: {r['reason']}" for r in rows
           if r["verdict"] != "pass" and r["op"] not in KNOWN.get("triton", {})]
    assert not bad, "\n".join(bad)


def run(*args):
    return CliRunner().invoke(main, ["conform", *args])


def test_json_table_and_exit_codes(tmp_path):
    res = run("--ops", "softmax", "--json")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["summary"]["ops"] == len(aten.names("softmax")) == doc["summary"]["passed"]
    row = doc["results"][0]
    assert {"op", "verdict", "max_error", "reason", "family", "shapes"} <= set(row)
    md = tmp_path / "run.md"
    res = run("--ops", f"{SPECS}:RELU,{SPECS}:NOT_RELU", "--json", "-b", "cpu",
              "--markdown", str(md))
    assert res.exit_code == 1
    text = md.read_text()
    assert "**1 of 2 ops pass** on cpu" in text and "| not_relu | spec |" in text
    rows = {r["op"]: r for r in json.loads(res.stdout)["results"]}
    assert rows["my_relu"]["verdict"] == "pass"
    assert rows["not_relu"]["verdict"] == "spec" and rows["not_relu"]["reason"]
    log = tmp_path / "rows.jsonl"
    res = run("--ops", "aten.relu,aten.neg", "-b", "cpu", "--log", str(log))
    assert res.exit_code == 0 and "2/2 passed on cpu" in res.output
    assert [json.loads(x)["op"] for x in log.read_text().splitlines()] == ["aten.relu",
                                                                            "aten.neg"]


@pytest.mark.parametrize("args", [["--ops", "nonsense"], ["--share", "3/2"],
                                  ["-b", "no_such_backend", "--ops", "aten.relu"]])
def test_bad_input_exits_2(args):
    res = run(*args)
    assert res.exit_code == 2, res.output
    assert "Traceback" not in res.output


# Ops known not to conform on a backend, with the cause (kept in step with
# benchmarks/results/2026-12-05-cpu-conform.md); a fixed op simply passes.
KNOWN: dict[str, dict[str, str]] = {"cpu": {}, "triton": {}}


@pytest.mark.parametrize("flag", ["--emulate", "--compile-only"])
def test_cuda_without_a_gpu(flag):
    """The CUDA backend's emulation runs the kernel on the CPU; --compile-only needs only
    nvcc (the machine has no GPU)."""
    from kevolve.backends.registry import get

    be = get("cuda", emulate=True)
    if flag == "--emulate" and not be.available()[0]:
        pytest.skip(be.available()[1])
    import shutil
    if flag == "--compile-only" and shutil.which("nvcc") is None:
        pytest.skip("no nvcc")
    res = run("--ops", "aten.relu", "-b", "cuda", flag, "--no-edges", "--json")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["summary"]["passed"] == 1
