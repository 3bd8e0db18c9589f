"""Checking any Op (not only library ops) on a backend against the reference interpreter.

`inputs_for` derives valid random inputs from the IR alone: floats are normal samples
(positive where a buffer feeds log/sqrt/rsqrt/pow), an index buffer read inside another
load's index gets values in range of the dim it indexes, and an offsets buffer (read in a
jagged axis' bounds) gets sorted offsets with empty segments and one segment at
max_extent. `check` builds the op's kernel once and compares on several seeds, outputs
poisoned with NaN (backend_checks.compare does the comparison)."""

from __future__ import annotations

import numpy as np
from backend_checks import compare, nan_outputs, to_host, to_lib

from kevolve import pipeline
from kevolve.ir.interp import bind_dims
from kevolve.ir.interp import run as reference
from kevolve.ir.nodes import Dim, Load, Op, Unary, walk, walk_stage


def _index_targets(op: Op) -> dict[str, int]:
    """Buffers whose values index another buffer -> which dim (as an index position of the
    indexed buffer) they range over: name -> (indexed buffer, position)."""
    out = {}
    for s in op.stages:
        for n in walk_stage(s):
            if isinstance(n, Load):
                for pos, e in enumerate(n.index):
                    for x in walk(e):
                        if isinstance(x, Load) and x.buffer.name not in out:
                            out[x.buffer.name] = (n.buffer, pos)
    return out


def _offsets(op: Op) -> set[str]:
    names = set()
    for s in op.stages:
        for a in s.axes + s.reduce_axes:
            for e in (a.start, a.extent):
                names |= {n.buffer.name for n in walk(e) if isinstance(n, Load)}
    return names


def _positive(op: Op) -> set[str]:
    names = set()
    for s in op.stages:
        for n in walk_stage(s):
            if isinstance(n, Unary) and n.op in ("log", "sqrt", "rsqrt"):
                names |= {x.buffer.name for x in walk(n) if isinstance(x, Load)}
    return names


def inputs_for(op: Op, dims: dict, params: dict, rng) -> dict[str, np.ndarray]:
    from kevolve.ir.interp import eval_int

    targets, offs, pos = _index_targets(op), _offsets(op), _positive(op)
    out = {}
    for b in op.inputs:
        shape = tuple(eval_int(e, {**dims, **params}) for e in b.shape)
        if b.name in offs:
            nseg = shape[0] - 1
            cap = int(params.get("max_len", 4))
            lens = rng.integers(0, cap + 1, size=nseg)
            if nseg:
                lens[rng.integers(0, nseg)] = 0
                lens[rng.integers(0, nseg)] = cap
            out[b.name] = np.concatenate([[0], np.cumsum(lens)]).astype(b.dtype.np)
        elif b.name in targets:
            buf, p = targets[b.name]
            hi = eval_int(buf.shape[p], {**dims, **params})
            out[b.name] = rng.integers(0, max(hi, 1), size=shape).astype(b.dtype.np)
        elif b.dtype.is_float:
            x = rng.standard_normal(shape)
            out[b.name] = (np.abs(x) + 0.1 if b.name in pos else x).astype(b.dtype.np)
            if b.dtype.name == "bf16":
                from kevolve.ops.base import round_bf16
                out[b.name] = round_bf16(out[b.name])
        else:
            out[b.name] = rng.integers(-3, 4, size=shape).astype(b.dtype.np)
    return out


def check(op: Op, dims: dict, backend, params: dict | None = None, trace=None,
          seeds=(0, 1), call_dims: dict | None = None, make=None) -> list[str]:
    """Problems found running `op` (default schedule for `dims`, or `trace`) on `backend`;
    `make(rng)` gives the inputs (default: `inputs_for` at `call_dims or dims`)."""
    params = dict(params or {})
    comp = pipeline.compile(op, trace, {**dims, **params}, backend)
    kernel = pipeline.build(comp, backend)
    lib = backend.tensor_lib
    problems = []
    for seed in seeds:
        rng = np.random.default_rng(7000 + seed)
        host = make(rng) if make else inputs_for(op, call_dims or dims, params, rng)
        bound = bind_dims(op, host, params)
        ins = to_lib(op, host, lib)
        outs = nan_outputs(op, bound, lib)
        kernel(ins, outs, params)
        ref = reference(op, host, params)
        problems += [f"seed {seed}: {p}" for p in
                     compare(op, {k: to_host(v) for k, v in outs.items()}, ref)]
    return problems


def dims_of(op: Op) -> list[str]:
    seen = []
    for b in op.inputs:
        for e in b.shape:
            for n in walk(e):
                if isinstance(n, Dim) and n.name not in seen:
                    seen.append(n.name)
    return seen


_INTERPRET_SCRIPT = """
import pickle, sys
sys.path[:0] = sys.argv[2:]
import numpy as np
import opcheck
from kevolve.backends.registry import get
op, dims, params, hosts = pickle.load(open(sys.argv[1], "rb"))
it = iter(hosts)
problems = opcheck.check(op, dims, get("triton", interpret=True), params=params,
                         seeds=tuple(range(len(hosts))), make=lambda rng: next(it))
print("PROBLEMS", repr(problems))
"""


def check_interpreted(op: Op, dims: dict, params: dict | None = None, seeds=(0, 1),
                      make=None, tmp_dir=None) -> list[str]:
    """`check` on Triton's interpreter in a fresh process: the interpreter is a mode Triton
    fixes when it is first imported, and a test process may have imported it without."""
    import os
    import pickle
    import subprocess
    import sys
    import tempfile
    from pathlib import Path

    params = dict(params or {})
    hosts = []
    for seed in seeds:
        rng = np.random.default_rng(7000 + seed)
        hosts.append(make(rng) if make else inputs_for(op, dims, params, rng))
    here = Path(__file__).resolve().parent
    with tempfile.TemporaryDirectory(dir=tmp_dir) as d:
        path = Path(d) / "case.pkl"
        path.write_bytes(pickle.dumps((op, dims, params, hosts)))
        env = {**os.environ, "TRITON_INTERPRET": "1"}
        p = subprocess.run([sys.executable, "-c", _INTERPRET_SCRIPT, str(path), str(here),
                            str(here.parent / "backends"), str(here.parents[1])],
                           capture_output=True, text=True, env=env, timeout=600)
    line = next((x for x in p.stdout.splitlines() if x.startswith("PROBLEMS ")), None)
    if line is None:
        return [f"the interpreter's process exited {p.returncode}: {p.stderr[-2000:]}"]
    import ast
    return ast.literal_eval(line[len("PROBLEMS "):])


BACKENDS = ("cpu", "numba", "mtia", "triton", "cuda", "hip")  # every backend, by name


def check_on(name: str, op: Op, dims: dict, params: dict | None = None, make=None) -> list[str]:
    """`check` on backend `name`: Triton in its interpreter's own process, CUDA and HIP in
    their CPU emulation; a backend that cannot run here skips the test."""
    import pytest

    from kevolve.backends.registry import get

    if name == "triton":
        return check_interpreted(op, dims, params, make=make)
    be = get(name, emulate=True) if name in ("cuda", "hip") else get(name)
    ok, why = be.available()
    if not ok:
        pytest.skip(why)
    return check(op, dims, be, params=params, make=make)


def gpu_compile(name: str, op: Op, dims: dict) -> None:
    """Build the default schedule's real device source with nvcc (cuda, sm_90) or hipcc
    (hip), not only its emulation; skips where the compiler is not installed."""
    import shutil

    import pytest

    from kevolve import api
    from kevolve.backends.registry import get

    tool = {"cuda": "nvcc", "hip": "hipcc"}[name]
    if shutil.which(tool) is None:
        pytest.skip(f"{tool} is not installed")
    be = get(name)
    be.build(api.lower(op, None, be, dims))
