"""kevolve.torch.accelerate on the reference models (benchmarks/models), CPU backend, tables
scaled down: the swapped model's outputs and every parameter's gradient equal eager's; an
archive without kernels for an op keeps the original module; the benchmark runner checks
before it times and writes its report."""

from __future__ import annotations

import copy
import dataclasses
import json

import pytest

torch = pytest.importorskip("torch")

from benchmarks.models import data, dlrm, run, seq  # noqa: E402
from kevolve.archive import Archive  # noqa: E402
from kevolve.bench import models as e2e  # noqa: E402
from kevolve.torch import KevolveOp, accelerate  # noqa: E402
from kevolve.torch.swap import KevolveEmbeddingBag, KevolveModule  # noqa: E402


def _same_grads(m1, m2, batch):
    g1, g2 = e2e.grads(m1, batch), e2e.grads(m2, batch)
    g2 = {e2e.param_key(n): v for n, v in g2.items()}
    assert set(g1) <= set(g2)
    floor = 1e-5 * max(v.abs().max().item() for v in g1.values())
    for n in g1:
        assert e2e.rel_err(g2[n], g1[n], floor) < 1e-4, n


def test_dlrm_swaps_every_bag_and_the_interaction_and_matches_eager():
    torch.manual_seed(0)
    cfg = dlrm.DLRMConfig().scaled(20000)
    model = dlrm.DLRM(cfg)
    fast = copy.deepcopy(model)
    swaps = accelerate(fast, modules=run.MODULES,
                       bounds={"embeddings.0": {"max_len": cfg.caps[0]}})
    assert [s.op for s in swaps] == ["embedding_bag"] * len(cfg.rows) + ["dot_interaction"]
    assert all(isinstance(e, KevolveEmbeddingBag) for e in fast.embeddings)
    assert fast.embeddings[0].params == {"max_len": cfg.caps[0]}
    assert fast.embeddings[1].params == {}  # derived from the offsets per call
    assert isinstance(fast.interaction, KevolveModule)
    assert fast.embeddings[0].weight is fast.embeddings[0].original.weight
    for seed in (1, 2):
        b = data.dlrm_batch(cfg, 37, seed, "cpu")
        torch.testing.assert_close(fast(*b.args()), model(*b.args()), rtol=1e-5, atol=1e-6)
        _same_grads(model, fast, b)


def test_sequence_model_with_empty_and_long_histories_matches_eager():
    torch.manual_seed(0)
    cfg = dataclasses.replace(seq.SeqConfig().scaled(20000), recent=8)
    model = seq.SeqModel(cfg)
    fast = copy.deepcopy(model)
    swaps = accelerate(fast, modules=run.MODULES)
    assert {s.op for s in swaps} == {"jagged_softmax", "jagged_sum", "jagged_to_padded_dense"}
    assert fast.to_dense.params == {"max_len": cfg.recent}  # the module's own attribute
    b = data.seq_batch(cfg, 41, 3, "cpu")
    lengths = b.offsets[1:] - b.offsets[:-1]
    assert (lengths == 0).any() and (lengths > cfg.recent).any()
    torch.testing.assert_close(fast(*b.args()), model(*b.args()), rtol=1e-5, atol=1e-6)
    _same_grads(model, fast, b)


def test_one_bag_of_size_one_and_fixed_length_bags():
    bag = torch.nn.EmbeddingBag(10, 4, mode="mean")
    fast = torch.nn.Sequential(copy.deepcopy(bag))
    accelerate(fast)
    x = torch.tensor([[3, 1, 1]])
    torch.testing.assert_close(fast[0](x), bag(x))
    idx, off = torch.tensor([7]), torch.tensor([0])  # include_last_offset=False
    torch.testing.assert_close(fast[0](idx, off), bag(idx, off))


def test_an_archive_without_kernels_keeps_the_original_modules(tmp_path):
    db = tmp_path / "empty.db"
    Archive(db).close()
    model = dlrm.DLRM(dlrm.DLRMConfig().scaled(200000))
    assert accelerate(model, archive=db, modules=run.MODULES) == []
    assert all(type(e) is torch.nn.EmbeddingBag for e in model.embeddings)


@pytest.mark.slow
def test_accelerated_models_compile_fullgraph():
    torch.manual_seed(0)
    cfg = seq.SeqConfig().scaled(20000)
    model = seq.SeqModel(cfg)
    fast = copy.deepcopy(model)
    accelerate(fast, modules=run.MODULES)
    b = data.seq_batch(cfg, 16, 4, "cpu")
    f = torch.compile(fast, fullgraph=True)
    torch.testing.assert_close(f(*b.args()), model(*b.args()), rtol=1e-5, atol=1e-6)
    _same_grads(model, f, b)


def test_runner_checks_then_times_and_writes_its_report(tmp_path):
    out = tmp_path / "r"
    assert run.main(["--device", "cpu", "--models", "dlrm", "--scale", "100000",
                     "--serve-batch", "4", "--large-batch", "16", "--train-batch", "8",
                     "--batches", "2", "--rounds", "2", "--iters", "1",
                     "--modes", "eager,kevolve", "--out", str(out)]) == 0
    rep = json.loads(out.with_suffix(".json").read_text())
    r = rep["models"]["dlrm"]
    assert r["checks"]["kevolve"]["ok"] and r["checks"]["kevolve"]["grads_checked"] > 10
    for s in ("serve", "large", "train"):
        sps = r["scenarios"][s]["samples_per_s"]
        assert set(sps) == {"eager", "kevolve"} and all(v > 0 for v in sps.values())
        assert len(r["scenarios"][s]["rounds"]["kevolve"]) == 2
    assert "| train | 8 |" in out.with_suffix(".md").read_text()
    assert isinstance(KevolveOp, type)
