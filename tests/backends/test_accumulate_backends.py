"""Accumulating stores on every backend: the catalog's scatter_add, index_add and bincount
(a histogram) and examples/gathers.py's embedding-bag backward (over a jagged axis), built
with their default schedules and with schedules that spread the adds over many programs,
run on fresh random inputs with many repeated indices, empty inputs, size 1 and primes,
against the reference interpreter and torch. Outputs start NaN-poisoned and each kernel is
called twice on the same buffers (its zeroing kernel must run every time). The Triton
interpreter runs in a fresh process (Triton reads TRITON_INTERPRET once); CUDA and HIP run
in their CPU emulation and compile with nvcc / hipcc where those are installed."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from kevolve import api, ops
from kevolve.evaluate import check as ev
from kevolve.ir import interp
from kevolve.schedule import Trace

ROOT = Path(__file__).resolve().parents[2]
BAG_BWD = f"{ROOT / 'examples' / 'gathers.py'}:EMBEDDING_BAG_BACKWARD"

# (op, shape, moves or None for the default schedule)
CASES = [
    ("aten.bincount", {"K": 1, "C": 1}, None),
    ("aten.bincount", {"K": 0, "C": 5}, None),  # empty input: all bins 0
    ("aten.bincount", {"K": 997, "C": 3}, None),  # ~330 adds into each bin
    ("aten.bincount", {"K": 4099, "C": 13},  # 33 programs of 128 adding into 13 bins
     [{"m": "split", "stage": "y", "axis": "k", "size": 128},
      {"m": "bind", "stage": "y", "axis": "ko", "to": "grid"}]),
    ("aten.scatter_add", {"M": 1, "N": 1, "K": 1}, None),
    ("aten.scatter_add", {"M": 5, "N": 3, "K": 0}, None),
    ("aten.scatter_add", {"M": 7, "N": 3, "K": 29}, None),
    ("aten.scatter_add", {"M": 6, "N": 5, "K": 37},  # one program per source element
     [{"m": "bind", "stage": "scattered", "axis": "i", "to": "grid"},
      {"m": "bind", "stage": "scattered", "axis": "r", "to": "grid"}]),
    ("aten.index_add", {"M": 3, "N": 11, "K": 53}, None),
    ("aten.index_add", {"M": 2, "N": 7, "K": 0}, None),
    ("aten.index_add", {"M": 5, "N": 13, "K": 61},  # source rows on the grid, in tiles of 4
     [{"m": "split", "stage": "added", "axis": "r", "size": 4},
      {"m": "bind", "stage": "added", "axis": "ro", "to": "grid"}]),
    (BAG_BWD, {"V": 3, "D": 5, "B": 7, "max_len": 6}, None),
    (BAG_BWD, {"V": 1, "D": 1, "B": 1, "max_len": 1}, None),
]
IDS = [f"{Path(c[0]).stem if '/' in c[0] else c[0]}-{'-'.join(map(str, c[1].values()))}"
       f"{'-moves' if c[2] else ''}" for c in CASES]
SEEDS = (0, 1)


def problems(backend, name: str, shape: dict, moves, lib: str = "numpy",
             device: str = "cpu") -> list[str]:
    d = ops.resolve(name)
    op = d.op_for(shape)
    trace = None if moves is None else Trace.make(op.name, moves)
    kernel = backend.build(api.lower(op, trace, backend, d.dims(shape)))
    out = []
    for seed in SEEDS:
        case = d.case(shape, 7000 + seed)
        dims = interp.bind_dims(op, case.inputs, case.params)
        want = interp.run(op, case.inputs, case.params)
        ins = ev.inputs_for(op, case.inputs, lib, device)
        before = {k: ev.to_host(v).copy() for k, v in ins.items()}
        outs = ev.alloc_outputs(op, dims, lib, device)
        for call in (1, 2):  # the second call adds into what the first one left
            kernel(ins, outs, dict(case.params))
            got = {k: ev.to_host(v) for k, v in outs.items()}
            r = ev.compare(op, got, want)
            if not r.ok:
                out.append(f"seed {seed}, call {call}: {r.message}")
        if (changed := ev.unchanged(before, ins)) is not None:
            out.append(f"seed {seed}: input {changed!r} was modified")
    return out


def test_the_interpreter_agrees_with_torch_on_every_case():
    from kevolve.evaluate.conform import torch_reference

    for name, shape, _ in CASES:
        d = ops.resolve(name)
        op = d.op_for(shape)
        for seed in SEEDS:
            case = d.case(shape, 7000 + seed)
            r = ev.compare(op, torch_reference(d, op, case),
                           interp.run(op, case.inputs, case.params))
            assert r.ok, (name, shape, r.message)


def test_repeated_indices_are_what_is_tested():
    """The cases really hit elements several times (a write-once store would fail)."""
    d = ops.resolve("aten.bincount")
    case = d.case({"K": 997, "C": 3}, 7000)
    assert np.bincount(case.inputs["input"], minlength=3).min() > 100
    d = ops.resolve("aten.index_add")
    case = d.case({"M": 3, "N": 11, "K": 53}, 7000)
    assert np.bincount(case.inputs["index"], minlength=3).max() > 10


@pytest.mark.parametrize("name,shape,moves", CASES, ids=IDS)
@pytest.mark.parametrize("backend", ["cpu", "numba"])
def test_host_backends(backend, name, shape, moves):
    from kevolve.backends.registry import get

    be = get(backend)
    ok, why = be.available()
    if not ok:
        pytest.skip(why)
    assert not problems(be, name, shape, moves)


@pytest.mark.parametrize("backend", ["cpu", "numba", "mtia"])
def test_a_producer_computed_at_an_accumulating_stage(backend):
    """Each source row is scaled by its own sum of squares, computed in the accumulating
    kernel's program (compute_at at its grid axis), then added into the row it names."""
    from kevolve.backends.registry import get
    from kevolve.ir.builder import axes, compute, dims, f32, i64, input, op, reduce_axis, sum_

    be = get(backend)
    ok, why = be.available()
    if not ok:
        pytest.skip(why)
    M, N, K = dims("M N K")
    idx = input("index", (K,), i64)
    src = input("source", (K, N), f32)
    r, j = axes("r j", K, N)
    (r2,) = axes("r", K)
    q = reduce_axis("q", N)
    rs = compute("rs", (r2,), sum_(src[r2, q] * src[r2, q], over=q) + 1.0)
    added = compute("added", (r, j), src[r, j] / rs[r], store=(idx[r], j), shape=(M, N),
                    accumulate="sum")
    o = op("scaled_index_add", inputs=[idx, src], outputs=[added])
    moves = [{"m": "bind", "stage": "added", "axis": "r", "to": "grid"},
             {"m": "compute_at", "stage": "rs", "at": ["added", "r"]}]
    source = api.lower(o, Trace.make(o.name, moves), be, {"M": 5, "N": 7, "K": 41})
    assert [k.name for k in source.meta["plan"].kernels] == ["k_added_zero", "k_added"]
    kernel = be.build(source)
    rng = np.random.default_rng(11)
    ins = {"index": rng.integers(0, 5, 41),
           "source": rng.standard_normal((41, 7)).astype(np.float32)}
    out = {"added": np.full((5, 7), np.nan, np.float32)}
    kernel(ins, out, {"M": 5})
    want = interp.run(o, ins, {"M": 5})["added"]
    np.testing.assert_allclose(out["added"], want, rtol=1e-5, atol=1e-5)


EMULATED = [c for c in CASES if c[2] is not None or c[1].get("K") == 0]


@pytest.mark.parametrize("name,shape,moves", EMULATED,
                         ids=[IDS[CASES.index(c)] for c in EMULATED])
@pytest.mark.parametrize("backend", ["mtia", "cuda"])
def test_emulated_backends(backend, name, shape, moves):
    """MTIA (PEs on host threads, kv_atomic_add) and CUDA's CPU emulation (atomicAdd on
    the emulator's threads)."""
    from kevolve.backends.registry import get

    be = get(backend, emulate=True) if backend == "cuda" else get(backend)
    ok, why = be.available()
    if not ok:
        pytest.skip(why)
    assert not problems(be, name, shape, moves)


@pytest.mark.skipif(importlib.util.find_spec("triton") is None
                    or importlib.util.find_spec("torch") is None,
                    reason="needs triton and torch")
def test_triton_interpreter():
    env = dict(os.environ, TRITON_INTERPRET="1",
               PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    out = subprocess.run([sys.executable, __file__], capture_output=True, text=True, env=env,
                         cwd=ROOT, timeout=1800)
    assert out.returncode == 0, out.stderr[-3000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert len(got) == len(CASES)
    bad = {k: v for k, v in got.items() if v}
    assert not bad, bad


@pytest.mark.parametrize("backend,tool", [("cuda", "nvcc"), ("hip", "hipcc")])
def test_gpu_sources_compile(backend, tool):
    """nvcc (sm_90) and hipcc compile the atomicAdd kernels (f32 and the i64 histogram)."""
    from gpu_support import need

    from kevolve.backends.registry import get

    need(tool, f"the {backend} backend compiles with {tool}")
    be = get(backend)
    for name, shape, moves in CASES[3], CASES[7], CASES[-2]:
        d = ops.resolve(name)
        op = d.op_for(shape)
        src = api.lower(op, None if moves is None else Trace.make(op.name, moves), be,
                        d.dims(shape))
        assert "atomicAdd(" in src.text
        kern = be.build(src)
        assert set(kern.diagnostics["kernels"]) == {k.name for k in src.meta["plan"].kernels}


@pytest.mark.cuda
@pytest.mark.parametrize("backend", ["triton", "cuda"])
def test_on_a_cuda_device(backend):
    """Real atomics: tl.atomic_add and atomicAdd on the GPU (run with `-m cuda` there)."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")
    from kevolve.backends.registry import get

    be = get(backend)
    ok, why = be.available()
    if not ok:
        pytest.skip(why)
    bad = {cid: p for cid, (name, shape, moves) in zip(IDS, CASES)
           if (p := problems(be, name, shape, moves, "torch", "cuda"))}
    assert not bad, bad


def _main() -> None:
    """The Triton cases, in a process started with TRITON_INTERPRET=1: one JSON object
    {case id: [problems]} on the last line of stdout."""
    from kevolve.backends.triton import TritonBackend

    be = TritonBackend(interpret=True)
    res = {}
    for cid, (name, shape, moves) in zip(IDS, CASES):
        res[cid] = problems(be, name, shape, moves, lib="torch")
    print(json.dumps(res))


if __name__ == "__main__":
    _main()
