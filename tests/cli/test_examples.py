"""The operators under examples/ (spec files a user writes, none of them in the library) go
through the command line as a user runs them: every one through `kevolve run FILE:OP
--backend cpu` at its small preset, its torch reference checked against the interpreter on
its edge shapes; a few, rotating by the day (KEVOLVE_EXAMPLES_PICK=N picks another
rotation), through `kevolve evolve --budget 4` and `kevolve export`, the exported module
then called beside the reference, also inside torch.compile."""

from __future__ import annotations

import datetime
import glob
import importlib.util
import json
import os
import sys
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

torch = pytest.importorskip("torch")

from kevolve.cli import main  # noqa: E402
from kevolve.ir.interp import run as interp  # noqa: E402
from kevolve.ir.specfile import spec_names  # noqa: E402
from kevolve.ops import resolve  # noqa: E402
from kevolve.ops.base import torch_inputs  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
FILES = sorted(glob.glob(str(ROOT / "examples" / "*.py")))
REFS = [f"{f}:{n}" for f in FILES for n in spec_names(f)]


def _id(ref: str) -> str:
    path, _, name = ref.rpartition(":")
    return f"{Path(path).stem}:{name}"


def _rotation(k: int = 3) -> list[str]:
    """k examples of different files, a different set each day."""
    day = int(os.environ.get("KEVOLVE_EXAMPLES_PICK", datetime.date.today().toordinal()))
    by_file = [[r for r in REFS if r.startswith(f + ":")] for f in FILES]
    return [by_file[(day + i) % len(by_file)][(day // len(by_file) + i) % len(
        by_file[(day + i) % len(by_file)])] for i in range(k)]


def test_the_examples_are_many_and_not_library_ops():
    from kevolve.ops import LIBRARY

    names = [resolve(r).name for r in REFS]
    assert len(names) >= 30 and len(set(names)) == len(names)
    assert not set(names) & set(LIBRARY)
    for r in REFS:  # each declares a reference and the three presets
        d = resolve(r)
        assert d.has_reference and {"small", "cpu", "gpu"} <= set(d.shapes), r


@pytest.mark.parametrize("ref", REFS, ids=_id)
def test_reference_agrees_with_the_interpreter(ref):
    """The spec and its torch reference say the same thing, at the small preset and on the
    derived edge shapes (size 1, primes, empty and skewed segments)."""
    d = resolve(ref)
    for i, shape in enumerate([d.shape("small"), *d.edge_shapes]):
        sd = {**d.shape("small"), **shape}
        op = d.op_for(sd)
        case = d.case(sd, seed=i)
        want = interp(op, case.inputs, case.params)
        t = torch_inputs(op, case, "cpu", float_dtype=torch.float64)
        with torch.no_grad():
            got = d.torch_eager(t, case.params)
        for name, w in want.items():
            g = got[name].double().numpy()
            assert g.shape == w.shape, (ref, sd, name)
            written = ~np.isnan(w)  # elements no stage writes are don't-care
            np.testing.assert_allclose(g[written], w[written], rtol=1e-6, atol=1e-8,
                                       err_msg=f"{ref} at {sd}")


@pytest.mark.parametrize("ref", REFS, ids=_id)
def test_run_at_the_small_preset(ref):
    r = CliRunner().invoke(main, ["run", ref, "--backend", "cpu", "--shape", "small",
                                  "--threads", "1", "--repeat", "2", "--json"])
    assert r.exit_code == 0, r.output
    res = json.loads(r.stdout)
    assert res["verdict"] == "ok" and res["max_error"] < 1e-2, res
    assert res["baseline"].startswith("torch eager"), res["baseline"]


def _import(path: Path):
    spec = importlib.util.spec_from_file_location(path.stem, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = mod
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.slow
@pytest.mark.parametrize("ref", _rotation(), ids=_id)
def test_evolve_and_export(ref, tmp_path):
    """A short search, then the best kernel exported and called as a PyTorch op at a shape
    it was not tuned for, eagerly and inside torch.compile."""
    d = resolve(ref)
    db = str(tmp_path / "a.db")
    r = CliRunner().invoke(main, ["evolve", ref, "--backend", "cpu", "--budget", "4",
                                  "--shape", "small", "--threads", "1", "--db", db, "--json"])
    assert r.exit_code == 0, r.output
    summ = json.loads(r.stdout)
    assert summ["evaluated"] >= 1 and summ["best_time_ms"] > 0, summ
    out = tmp_path / f"{d.name}_kernel.py"
    r = CliRunner().invoke(main, ["export", ref, "--backend", "cpu", "--db", db, "-o",
                                  str(out), "--name", f"kevolve_examples::{d.name}"])
    assert r.exit_code == 0, r.output
    m = _import(out)
    fn = getattr(m, d.name)
    sd = dict(d.edge_shapes[1])  # distinct primes: another shape class than the tuned one
    op = d.op_for(sd)
    case = d.case({**d.shape("small"), **sd}, seed=7)
    t = torch_inputs(op, case, "cpu")
    args = [t[b.name] for b in op.inputs] + [case.params[p.name] for p in op.params]
    want = d.torch_eager({k: v.double() if v.is_floating_point() else v
                          for k, v in t.items()}, case.params)
    got = fn(*args)
    got = got if isinstance(got, tuple) else (got,)
    compiled = torch.compile(lambda *a: fn(*a), backend="aot_eager")(*args)
    compiled = compiled if isinstance(compiled, tuple) else (compiled,)
    for name, g, c in zip(op.outputs, got, compiled, strict=True):
        w = want[name].double()
        keep = ~torch.isnan(w)
        tol = 2e-2 if g.dtype == torch.bfloat16 else 1e-4
        torch.testing.assert_close(g.double()[keep], w[keep], rtol=tol, atol=tol)
        torch.testing.assert_close(c.double()[keep], w[keep], rtol=tol, atol=tol)
