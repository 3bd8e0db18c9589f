"""A JIT compiles at a kernel's first launch, so its compile errors (ptxas out of registers,
too much shared memory) surface inside the correctness check, or in timing when the bench
shape is not checked first. Wherever they surface they are compile failures, not wrong
results; other errors in a call keep the stage they happened in."""

from __future__ import annotations

import pytest

from kevolve.evaluate.evaluator import Evaluator, launch_failure
from kevolve.evaluate.job import EvalJob
from kevolve.ops import LIBRARY
from kevolve.schedule import default_trace

SOFTMAX = LIBRARY["softmax"]
BENCH = {"M": 64, "N": 256}


def job(fault: str, checks: tuple, check_bench: bool) -> EvalJob:
    trace = default_trace(SOFTMAX.op_for(BENCH), SOFTMAX.dims(BENCH)).to_json()
    return EvalJob("softmax", "faulty", trace, BENCH, checks, (0,),
                   {"fault": fault, "threads": 1}, check_bench_shape=check_bench,
                   time=True, repeat=3, threads=1)


@pytest.mark.parametrize("checks, check_bench", [((SOFTMAX.shape("small"),), True),
                                                 ((), False)])
def test_a_compile_error_at_the_first_launch_is_a_compile_failure(faulty, checks,
                                                                   check_bench):
    res = Evaluator().evaluate(job("jit_compile_error", checks, check_bench))
    assert res.verdict == "compile", (res.verdict, res.message)
    assert res.message.startswith("PTXASError: ") and "Insufficient registers" in res.message


class OutOfResources(Exception):
    pass


def test_errors_are_classified_by_what_raised_them():
    assert launch_failure(OutOfResources("shared memory"), "timing").stage == "compile"
    assert launch_failure(RuntimeError("illegal address"), "timing").stage == "timing"
    f = launch_failure(ValueError("bad"), "correctness")
    assert (f.stage, f.message) == ("correctness", "ValueError: bad")


def test_the_names_are_tritons():
    """The classification goes by class name (no triton import in the evaluator): these
    are what Triton raises, subclasses included."""
    pytest.importorskip("triton")
    from triton.compiler.errors import CompilationError, CompileTimeAssertionFailure
    from triton.runtime.errors import OutOfResources as TritonOOR
    from triton.runtime.errors import PTXASError

    for e in (CompilationError("src", None, "bad"), CompileTimeAssertionFailure(None, None, "x"),
              TritonOOR(294912, 232448, "shared memory"), PTXASError("ptxas fatal")):
        f = launch_failure(e, "correctness")
        assert f.stage == "compile", e
        assert f.message.startswith(type(e).__name__ + ": ")
