"""`kevolve export`: the best archived kernel as a standalone module registering a PyTorch
custom op with autograd. The test archives one evaluated softmax/cpu candidate, exports
it, imports the module from its file, and calls the op at the tuned shape, at other shapes
(including one whose generated code differs), through torch.ops and inside torch.compile,
and differentiates through it."""

from __future__ import annotations

import importlib.util
import json
import sys

import pytest
from click.testing import CliRunner

torch = pytest.importorskip("torch")

from kevolve.archive import Archive  # noqa: E402
from kevolve.cli import main  # noqa: E402
from kevolve.evaluate.evaluator import evaluate  # noqa: E402
from kevolve.evaluate.job import EvalJob  # noqa: E402
from kevolve.ops import LIBRARY  # noqa: E402
from kevolve.schedule import default_trace  # noqa: E402

SOFTMAX = LIBRARY["softmax"]
TUNED = {"M": 8, "N": 64}


def tiled_trace() -> str:
    t = json.loads(default_trace(SOFTMAX.op, TUNED).to_json())
    t["moves"] += [{"m": "split", "stage": "y", "axis": "j", "size": "$BN",
                    "into": ["jo", "ji"]},
                   {"m": "vectorize", "stage": "y", "axis": "ji", "width": 8}]
    t["decisions"] = {"$BN": 16}
    return json.dumps(t)


@pytest.fixture(scope="module")
def archive(tmp_path_factory):
    """One softmax candidate, evaluated for real at the tuned shape."""
    db = tmp_path_factory.mktemp("export") / "a.db"
    tj = tiled_trace()
    res = evaluate(EvalJob("softmax", "cpu", tj, TUNED, check_shapes=(SOFTMAX.shape("small"),),
                           backend_options={"threads": 1}, repeat=3, threads=1,
                           baseline=True))
    assert res.ok, res.message
    with Archive(db) as a:
        cid, _ = a.add_candidate(a.op_id(SOFTMAX.op), tj, proposer="heuristic")
        a.add_result(cid, "cpu:test:1t", "cpu", {}, res, None, TUNED, [0, 1, 2])
    return db


def _import(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def test_export_writes_a_custom_op_module(archive, tmp_path):
    out = tmp_path / "softmax_kernel.py"
    r = CliRunner().invoke(main, ["export", "softmax", "-b", "cpu", "-o", str(out), "--db",
                                  str(archive), "--name", "kevolve_test::softmax"])
    assert r.exit_code == 0, r.output
    assert "tuned for" in r.output
    text = out.read_text()
    assert "Autograd" in text and "needs kevolve installed" in text
    m = _import(out, "softmax_kernel")
    assert m.TUNED_FOR == TUNED and m.BACKEND == "cpu" and m.OP_NAME == "kevolve_test::softmax"
    assert "kv_launch" in m.SOURCE and m.TRACE["decisions"] == {"$BN": 16}

    x = torch.randn(8, 64)
    torch.testing.assert_close(m.softmax(x), torch.softmax(x, -1), atol=1e-6, rtol=1e-5)
    # Other shapes: one with the same generated code (rows are a runtime dim) shares the
    # build; one whose tile no longer divides the row gets its own lowering.
    for shape in [(3, 64), (5, 50), (1, 1)]:
        x = torch.randn(*shape)
        torch.testing.assert_close(torch.ops.kevolve_test.softmax(x), torch.softmax(x, -1),
                                   atol=1e-6, rtol=1e-5)
    assert len(m._by_dims) == 4 and len(m._by_code) == 3
    # Inputs of another dtype or layout are converted, not misread.
    x = torch.randn(64, 8, dtype=torch.float64).t()
    torch.testing.assert_close(m.softmax(x), torch.softmax(x.float(), -1), atol=1e-6,
                               rtol=1e-5)

    # Inside torch.compile (the fake implementation gives the output's shape; aot_eager
    # keeps the test fast, inductor works the same way).
    f = torch.compile(lambda a: m.softmax(a) * 2.0, fullgraph=True, backend="aot_eager")
    x = torch.randn(8, 64)
    torch.testing.assert_close(f(x), 2.0 * torch.softmax(x, -1), atol=1e-6, rtol=1e-5)

    # Autograd: softmax has no derivable backward (four stages) and no hand-written one,
    # so its reference is differentiated; the gradient is torch's.
    x = torch.randn(8, 64, requires_grad=True)
    g = torch.randn(8, 64)
    m.softmax(x).backward(g)
    x2 = x.detach().clone().requires_grad_(True)
    torch.softmax(x2, -1).backward(g)
    torch.testing.assert_close(x.grad, x2.grad, atol=1e-6, rtol=1e-5)


def test_export_errors_are_one_paragraph(archive, tmp_path):
    r = CliRunner().invoke(main, ["export", "softmax", "-b", "triton", "-o",
                                  str(tmp_path / "x.py"), "--db", str(archive)])
    assert r.exit_code == 2 and "no successful result" in r.output
    assert not (tmp_path / "x.py").exists()
    r = CliRunner().invoke(main, ["export", "softmax", "-b", "cpu", "-o",
                                  str(tmp_path / "x.py"), "--db", str(tmp_path / "none.db")])
    assert r.exit_code == 2 and "no archive" in r.output
