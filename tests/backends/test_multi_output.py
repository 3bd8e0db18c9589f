"""Several outputs in one kernel (an output computed in another stage's program and stored
from there): the fused plans have fewer kernels than outputs, and every backend's kernel
matches the reference interpreter on fresh random inputs at sizes of 1, primes and rows
that are not a multiple of the tile (backend_checks.MULTI_OUTPUT: a fused residual add +
RMSNorm returning h and y, a layernorm returning mean, rstd and y, and two sibling row
reductions). The CPU backend's and the Triton interpreter's variant tests run the same
cases (they are in backend_checks.VARIANTS); here: numba, the emulated CUDA and HIP
sources, MTIA, nvcc and hipcc compiles, and refusals at the command line."""

from __future__ import annotations

import json
import shutil

import backend_checks as bc
import pytest
from click.testing import CliRunner
from gpu_support import check_emulated, need

from kevolve import ops
from kevolve.backends.numba import NumbaBackend
from kevolve.cli import main
from kevolve.ir.interp import run as interp

CASES = bc.variant_cases(bc.MULTI_OUTPUT)
NUMBA = NumbaBackend()


def _fused(ref: str):
    d = ops.resolve(ref)
    sd = d.shape("small")
    return d, bc.plan_for(d.op_for(sd), d.dims(sd))


@pytest.mark.parametrize("ref,outputs", [(bc.FUSED_ADD_RMSNORM, ("h", "y")),
                                         (bc.LAYERNORM_STATS, ("mean", "rstd", "y")),
                                         (bc.ROW_MOMENTS, ("s", "q"))])
def test_default_plan_computes_all_outputs_in_one_kernel(ref, outputs):
    d, plan = _fused(ref)
    assert d.op.outputs == outputs
    assert len(plan.kernels) == 1 < len(outputs)
    assert sorted(plan.kernels[0].writes) == sorted(outputs)
    assert plan.scratch == ()  # nothing goes through memory between kernels


def test_default_residual_norm_reads_its_inputs_in_one_program():
    """h is stored from y's program and y reads it from registers (no load of h)."""
    from kevolve.backends.cpu import CpuBackend

    _, plan = _fused(bc.FUSED_ADD_RMSNORM)
    src = CpuBackend().render(plan).text
    assert src.count("static void k_") == 1
    assert "p_h[" in src and "= val_h[" in src
    assert "* p_h[" not in src and "(p_h[" not in src


@pytest.mark.parametrize("case", CASES, ids=lambda c: c[0])
def test_numba(case):
    ok, why = NUMBA.available()
    if not ok:
        pytest.skip(why)
    _, ref, expect, moves, shape = case
    d = ops.resolve(ref)
    assert expect in bc.strategies(bc.plan_for(d.op_for(shape), d.dims(shape), moves, NUMBA))
    problems = bc.check(NUMBA, ref, shape, moves, seeds=(0, 1))
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


@pytest.mark.parametrize("ref", [bc.FUSED_ADD_RMSNORM, bc.LAYERNORM_STATS, bc.ROW_MOMENTS])
def test_nvcc_compiles_the_fused_kernels(ref):
    from gpu_support import lower

    from kevolve.backends.cuda import CudaBackend

    need("nvcc", "the cuda backend compiles with the CUDA toolkit's nvcc")
    be = CudaBackend()
    for moves in [None] + [c[3] for c in CASES if c[1] == ref and c[3]]:
        src = lower(be, ref, "small", moves)
        assert src.text.count("__global__") == 1
        be.build(src)  # nvcc -arch=sm_90 + ptxas; raises CompileError on failure


@pytest.mark.skipif(shutil.which("hipcc") is None, reason="hipcc is not installed")
def test_hipcc_compiles_the_fused_kernels():
    from gpu_support import lower

    from kevolve.backends.hip import HipBackend

    be = HipBackend()
    for ref in (bc.FUSED_ADD_RMSNORM, bc.LAYERNORM_STATS, bc.ROW_MOMENTS):
        be.build(lower(be, ref, "small"))


def test_examples_references_agree_with_the_interpreter():
    """The torch references of the multi-output examples, output by output."""
    torch = pytest.importorskip("torch")
    from kevolve.ops.base import torch_inputs

    for ref in (bc.FUSED_ADD_RMSNORM, bc.LAYERNORM_STATS, bc.ROW_MOMENTS):
        d = ops.resolve(ref)
        for sd in (d.shape("small"), {"M": 1, "N": 1}, {"M": 3, "N": 131}):
            case = d.case(sd, 7)
            want = interp(d.op, case.inputs, case.params)
            got = d.torch_eager(torch_inputs(d.op, case, float_dtype=torch.float64),
                                case.params)
            for name in d.op.outputs:
                torch.testing.assert_close(got[name].double(), torch.tensor(want[name]),
                                           rtol=1e-9, atol=1e-9)


# -- refusals -------------------------------------------------------------------------------

REFUSED = [
    # ms reads h over its reduce axis k: its programs do not iterate over h's points
    (bc.FUSED_ADD_RMSNORM, [{"m": "compute_at", "stage": "h", "at": ["ms", "i"]}],
     "semantics.output_space", "move 0", "'h'"),
    # a sibling without the output's axis j
    (bc.FUSED_ADD_RMSNORM, [{"m": "bind", "stage": "y", "axis": "i", "to": "grid"},
                            {"m": "compute_at", "stage": "h", "at": ["ms", "i"]}],
     "semantics.output_space", "move 1", "'h'"),
    # var (a kernel of its own, launched first) reads mean, now computed in y's kernel
    (bc.LAYERNORM_STATS, [{"m": "bind", "stage": "y", "axis": "i", "to": "grid"},
                          {"m": "compute_at", "stage": "mean", "at": ["y", "i"]}],
     "semantics.compute_at_order", "move 1", "'mean'"),
]


@pytest.mark.parametrize("ref,moves,code,where,stage", REFUSED)
def test_illegal_fusion_is_refused_at_the_cli(tmp_path, ref, moves, code, where, stage):
    d = ops.resolve(ref)
    trace = tmp_path / "t.json"
    trace.write_text(json.dumps({"version": 1, "op": d.name, "moves": moves}))
    r = CliRunner().invoke(main, ["lower", ref, "--backend", "cpu", "--schedule", str(trace),
                                  "--shape", "M=4", "--shape", "N=8"])
    assert r.exit_code == 2, r.output
    assert "Traceback" not in r.output
    assert code in r.output and where in r.output and stage in r.output, r.output
