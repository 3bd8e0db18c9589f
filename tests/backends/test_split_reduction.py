"""Reductions split across programs (`reduction` strategy `split`): the schedule rewrites
the stage into partial results per chunk (a stage of its own, `NAME_rf`) and their
combination, and every backend runs the pair with what it has. Cases are in
backend_checks.SPLIT_REDUCTION (the CPU backend's and the Triton interpreter's variant
tests run them too); here: the rewrite itself, numba, the emulated CUDA and HIP sources,
MTIA, nvcc, and the refusals."""

from __future__ import annotations

import json

import backend_checks as bc
import pytest
from click.testing import CliRunner
from gpu_support import check_emulated, need

from kevolve import ops
from kevolve.backends.numba import NumbaBackend
from kevolve.cli import main
from kevolve.schedule import Trace, apply_trace

CASES = bc.variant_cases(bc.SPLIT_REDUCTION)


def _sched(ref: str, moves, shape=None):
    d = ops.resolve(ref)
    return d, apply_trace(d.op_for(shape or d.shape("small")),
                          Trace.from_json(json.dumps({"version": 1, "moves": moves})))


@pytest.mark.parametrize("label", list(bc.SPLIT_REDUCTION))
def test_the_split_stage_gets_a_partial_stage_and_its_own_kernel(label):
    ref, _, moves, _ = bc.SPLIT_REDUCTION[label]
    stage = next(m["stage"] for m in moves if m.get("strategy") == "split")
    factor = next(m["factor"] for m in moves if m.get("strategy") == "split")
    d, s = _sched(ref, moves)
    names = [x.name for x in s.op.stages]
    assert names.index(stage + "_rf") == names.index(stage) - 1
    part = s.op.stage(stage + "_rf")
    assert part.axes[-1].extent.value == factor and part.out.shape[-1].value == factor
    assert s.op.outputs == d.op.outputs and s.op.inputs == d.op.inputs
    sch = s.stage(stage + "_rf")
    assert any(lp.bind == "grid" and lp.name == part.axes[-1].name for lp in sch.loops)
    sd = d.shape("small")
    plan = bc.plan_for(d.op_for(sd), d.dims(sd), moves)
    assert any(stage + "_rf" in k.writes for k in plan.kernels)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c[0])
def test_numba(case):
    be = NumbaBackend()
    ok, why = be.available()
    if not ok:
        pytest.skip(why)
    _, ref, _, moves, shape = case
    problems = bc.check(be, ref, shape, moves, seeds=(0, 1))
    assert not problems, "\n".join(problems)


@pytest.fixture(scope="module")
def gxx() -> str:
    return need("g++", "the CPU emulation of CUDA, HIP and MTIA compiles with g++")


@pytest.mark.parametrize("case", CASES, ids=lambda c: c[0])
def test_emulated_cuda_and_hip(gxx, case):
    from kevolve.backends.cuda import CudaBackend
    from kevolve.backends.hip import HipBackend

    _, ref, _, moves, shape = case
    for be in (CudaBackend(emulate=True), HipBackend(emulate=True)):
        problems = check_emulated(be, ref, shape, moves, seeds=(0,))
        assert not problems, (be.name, problems)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c[0])
def test_mtia(gxx, case):
    from kevolve.backends.mtia import MtiaBackend

    _, ref, _, moves, shape = case
    problems = bc.check(MtiaBackend(threads=2), ref, shape, moves, seeds=(0,))
    assert not problems, "\n".join(problems)


def test_nvcc_compiles_the_split_kernels():
    from gpu_support import lower

    from kevolve.backends.cuda import CudaBackend

    need("nvcc", "the cuda backend compiles with the CUDA toolkit's nvcc")
    be = CudaBackend()
    for ref, _, moves, _ in bc.SPLIT_REDUCTION.values():
        be.build(lower(be, ref, "small", moves))


TWO_REDUCTIONS = """
from kevolve.ir.builder import axis, compute, dims, f32, input, max_, op, reduce_axis, sum_
from kevolve.ops import define

M, N = dims("M N")
x = input("x", (M, N), f32)
i, k = axis("i", M), reduce_axis("k", N)
SPREAD = define(op("spread", inputs=[x], outputs=[compute("y", (i,), max_(x[i, k], over=k)
                   - sum_(x[i, k], over=k) / N)]), presets={"small": {"M": 3, "N": 5}})
"""

REFUSED = [
    # two reductions in one stage: which would the chunks split?
    ("spec", [{"m": "reduction", "stage": "y", "strategy": "split", "factor": 4}],
     "semantics.split_reduction", "move 0"),
    # a stage that stores through an index
    (f"{bc.EXAMPLES / 'gathers.py'}:EMBEDDING_BAG_BACKWARD",
     [{"m": "reduction", "stage": "grad_table", "strategy": "split", "factor": 4}],
     "semantics.", "move 0"),
    (bc.ROW_ABSMAX, [{"m": "reduction", "stage": "y", "strategy": "split"}],
     "schema.missing_arg", "move 0"),
    (bc.ROW_ABSMAX, [{"m": "reduction", "stage": "y", "strategy": "split", "factor": 1}],
     "schema.bad_value", "move 0"),
]


@pytest.mark.parametrize("ref,moves,code,where", REFUSED)
def test_a_split_that_cannot_apply_is_refused_with_the_move(tmp_path, ref, moves, code,
                                                            where):
    if ref == "spec":
        (tmp_path / "spread.py").write_text(TWO_REDUCTIONS)
        ref = f"{tmp_path / 'spread.py'}:SPREAD"
    d = ops.resolve(ref)
    trace = tmp_path / "t.json"
    trace.write_text(json.dumps({"version": 1, "op": d.name, "moves": moves}))
    r = CliRunner().invoke(main, ["lower", ref, "--backend", "cpu", "--schedule", str(trace),
                                  "--shape", "small"])
    assert r.exit_code == 2, r.output
    assert "Traceback" not in r.output and where in r.output, r.output
    assert code in r.output, r.output


def _default_moves(ref: str, preset: str) -> list[dict]:
    from kevolve.schedule import default_trace

    d = ops.resolve(ref)
    sd = d.shape(preset)
    return default_trace(d.op_for(sd), d.dims(sd)).resolved()


def test_the_default_splits_a_long_reduction_that_few_programs_would_run():
    from kevolve.backends.cpu import CpuBackend

    moves = _default_moves(bc.MSE_LOSS, "cpu")  # a 0-d output over 4096 x 512
    assert any(m.get("strategy") == "split" for m in moves), moves
    d = ops.resolve(bc.MSE_LOSS)
    problems = bc.check(CpuBackend(threads=2), bc.MSE_LOSS, d.shape("cpu"), None, seeds=(0,))
    assert not problems, "\n".join(problems)
    # one program per row, 4096 of them: enough programs, no split
    assert not any(m.get("strategy") == "split" for m in _default_moves(bc.ROW_ABSMAX, "cpu"))
    # a short reduction to a scalar stays one program
    assert not any(m.get("strategy") == "split" for m in _default_moves(bc.MSE_LOSS, "small"))


@pytest.mark.parametrize("preset", ["small", "cpu", "gpu"])
def test_a_sum_down_columns_tiles_neighbouring_columns(preset):
    """A reduction over the leading dim (x[r, j] summed over r) once ran one column per
    program, each reading with a stride of a row (9 ms against torch's 0.2 on a CPU): the
    default tiles neighbouring columns, so each chunk of rows is read in contiguous
    pieces; where that leaves few programs over a long reduction, the rows are split
    across programs as well. The kernel matches the interpreter at every preset's shape
    that runs quickly here."""
    from kevolve.backends.cpu import CpuBackend

    moves = _default_moves(bc.COL_SUM, preset)
    split_j = [m for m in moves if m["m"] == "split" and m["stage"] == "y" and m["axis"] == "j"]
    assert split_j and split_j[0]["size"] > 1, moves
    assert not any(m["m"] == "bind" and m.get("axis") == "j" for m in moves), moves
    d = ops.resolve(bc.COL_SUM)
    if preset != "gpu":
        problems = bc.check(CpuBackend(threads=2), bc.COL_SUM, d.shape(preset), None,
                            seeds=(0,))
        assert not problems, "\n".join(problems)
