"""Backends by capability: the `Target` each built-in declares, the entry-point table the
registry reads (installed or from pyproject.toml), and the two bugs that deciding "GPU" by a
backend's name caused (an MTIA search on a CPU-only machine, an emulated CUDA evaluation)."""

from __future__ import annotations

import shutil

import pytest
from click.testing import CliRunner

from kevolve.backends import registry
from kevolve.backends.target import BuildReport, Target

needs_gxx = pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++")


@pytest.mark.parametrize("name,options,on_device,lib,measured,threads", [
    ("cpu", {}, False, "numpy", True, True),
    ("numba", {}, False, "numpy", True, False),
    ("mtia", {}, False, "numpy", False, False),
    ("cuda", {}, True, "torch", True, False),
    ("cuda", {"emulate": True}, False, "numpy", True, False),
    ("hip", {"emulate": True}, False, "numpy", True, False),
    ("triton", {}, True, "torch", True, False),
    ("triton", {"interpret": True}, False, "torch", True, False),
])
def test_each_backend_declares_its_target(name, options, on_device, lib, measured, threads):
    be = registry.get(name, **options, threads=2)  # every backend takes threads=
    t = be.target
    assert isinstance(t, Target)
    assert (t.on_device, t.tensor_lib, t.measured, t.host_threads) == \
        (on_device, lib, measured, threads)
    assert t.device == be.caps.device


def test_only_the_interpreter_asks_workers_for_an_environment():
    assert registry.get("triton", interpret=True).worker_env() == {"TRITON_INTERPRET": "1"}
    assert registry.get("triton").worker_env() == {}
    assert registry.get("cpu").worker_env() == {}


def test_backends_bring_their_notes():
    assert "#" in registry.get("triton").notes() or registry.get("triton").notes()
    assert registry.get("cpu").notes() != registry.get("cuda").notes()


def test_the_builtins_come_from_the_entry_point_table():
    table = registry.pyproject_table()
    assert set(table) == {"cpu", "numba", "cuda", "hip", "mtia", "triton"}
    assert {n: t for n, t in registry.names().items() if n in table} == table


def test_a_checkout_without_metadata_reads_pyproject(monkeypatch):
    """As on the GPU machine (PYTHONPATH=., nothing installed): no kevolve entry points."""
    monkeypatch.setattr(registry, "entry_points", lambda group: [])
    assert registry.names() == registry.pyproject_table()
    assert registry.get("cpu").name == "cpu"


def test_build_report_reads_a_kernels_diagnostics():
    r = BuildReport.of({"kernels": {"k0": {"registers": 40}}, "estimate_ms": 1.5})
    assert r.kernels == {"k0": {"registers": 40}} and r.estimate_ms == 1.5
    assert BuildReport.of({}).estimate_ms is None


@needs_gxx
def test_an_emulated_cuda_candidate_evaluates():
    """The CUDA backend's CPU emulator runs on the host: its EvalJob must not reach for a
    GPU (torch.cuda) because the backend is called cuda."""
    from kevolve.evaluate.evaluator import Evaluator
    from kevolve.evaluate.job import EvalJob
    from kevolve.ops import LIBRARY
    from kevolve.schedule import default_trace

    d = LIBRARY["softmax"]
    shape = d.shape("small")
    trace = default_trace(d.op_for(shape), d.dims(shape)).to_json()
    job = EvalJob("softmax", "cuda", trace, shape, seeds=(0,),
                  backend_options={"emulate": True}, repeat=2)
    res = Evaluator().evaluate(job)
    assert res.verdict == "ok", res.message
    assert res.time_ms is not None and res.max_error is not None


@needs_gxx
def test_evolve_on_mtia_runs_on_a_cpu_only_machine(tmp_path, monkeypatch):
    """`kevolve evolve softmax --backend mtia --budget 2`: the MTIA backend runs emulated on
    the host; the search must not name the hardware through torch.cuda."""
    from kevolve.cli import main

    monkeypatch.chdir(tmp_path)
    r = CliRunner().invoke(main, ["evolve", "softmax", "--backend", "mtia", "--budget", "2",
                                  "--shape", "small", "--db", str(tmp_path / "a.db")])
    assert r.exit_code == 0, r.output + repr(r.exception)
    from kevolve.archive import Archive

    best = Archive(str(tmp_path / "a.db")).best("softmax", "mtia")
    assert best is not None and best.result.ok  # a candidate passed the emulated checks
    # ranked by the backend's estimate for the target, not by the emulator's wall time
    diag = best.result.diagnostics
    assert diag["timing"] == "estimate" and diag["wall_ms"] > 0
    assert best.result.time_ms == diag["estimate_ms"]
