"""Kernels that only look right must fail: each is a deliberately wrong output of the
`faulty` backend (the real CPU kernel, then the fault), judged by the Evaluator the search
uses. Every verdict is "correctness" with a message that names the problem. Where a weaker
check would have passed the kernel, the test shows that too (a control)."""

from __future__ import annotations

import numpy as np
import pytest

from kevolve.backends.registry import get as get_backend
from kevolve.evaluate.check import alloc_outputs, compare, inputs_for
from kevolve.evaluate.evaluator import Evaluator
from kevolve.evaluate.job import EvalJob
from kevolve.ir.interp import run as reference
from kevolve.ops import LIBRARY
from kevolve.plan import lower
from kevolve.schedule import apply_trace, default_trace

SOFTMAX = LIBRARY["softmax"]
SMALL = SOFTMAX.shape("small")  # 6 x 50
EDGES = tuple(SOFTMAX.edge_shapes)  # 1x1, 1x129, 3x1000, 7x64
BENCH = {"M": 64, "N": 256}


def job(fault: str, bench=BENCH, checks=(SMALL, *EDGES), seeds=(0, 1, 2), time=False,
        check_bench=True, **opts) -> EvalJob:
    trace = default_trace(SOFTMAX.op_for(bench), SOFTMAX.dims(bench)).to_json()
    return EvalJob("softmax", "faulty", trace, bench, tuple(checks), tuple(seeds),
                   {"fault": fault, "threads": 1, **opts}, check_bench_shape=check_bench,
                   time=time, repeat=3, threads=1)


@pytest.fixture
def ev(faulty):
    return Evaluator()


def test_the_honest_kernel_passes(ev):
    res = ev.evaluate(job("none", time=True))
    assert res.ok, res.message
    assert res.max_error < 1e-5 and res.time_ms > 0


def test_writes_only_part_of_the_output_is_caught_by_nan_poisoning(ev):
    res = ev.evaluate(job("partial"))
    assert res.verdict == "correctness"
    assert "NaN at flat index" in res.message and "unwritten" in res.message


def test_returns_a_cached_output_is_caught_by_fresh_inputs_per_trial(ev):
    res = ev.evaluate(job("cached"))
    assert res.verdict == "correctness"
    # seed 0 computed it honestly; seed 1's fresh inputs expose the stale output
    assert "seed 1:" in res.message and "elements off" in res.message


def test_modifies_its_inputs(ev):
    res = ev.evaluate(job("modify_inputs"))
    assert res.verdict == "correctness"
    assert "modified input 'x'" in res.message


def test_modifies_its_inputs_only_while_timed_and_leaves_no_trace_for_the_next(ev):
    """Checks call a kernel once per input draw; only timing calls it again on the same
    buffers. A write there is caught after timing, and the inputs it spoiled are not
    handed to the next candidate (which would then fail, or be judged on wrong data)."""
    res = ev.evaluate(job("modify_inputs_when_timed", checks=(), time=True))
    assert res.verdict == "correctness"
    assert "modified input 'x' while it was being timed" in res.message
    honest = ev.evaluate(job("none", checks=(), time=True))
    assert honest.ok, honest.message


def test_right_once_but_accumulating_when_called_again_is_caught_after_timing(ev):
    """Like a kernel that atomically adds into outputs it expects zeroed: the small and edge
    shapes call it once on fresh buffers and pass (the control). At the benchmark shape it
    is called again on the same buffers, by timing or, in the search's top-k check, which
    does not time, once more."""
    control = ev.evaluate(job("accumulate_repeat", check_bench=False))
    assert control.ok, control.message
    timed = ev.evaluate(job("accumulate_repeat", time=True))
    assert timed.verdict == "correctness" and timed.time_ms is None
    assert "right on its first call but not after timing on the same buffers" in timed.message
    # (outputs are poisoned before every timed call: what it adds to is NaN)
    assert "elements off" in timed.message or "NaN" in timed.message
    topk = ev.evaluate(job("accumulate_repeat", checks=(), time=False))
    assert topk.verdict == "correctness"
    assert "but not when called again on the same buffers" in topk.message
    assert ev.evaluate(job("none", checks=(), time=False)).ok


def test_correct_only_at_the_benchmark_shape_is_caught_by_the_extra_shapes(ev):
    good = BENCH["M"] * BENCH["N"]
    control = ev.evaluate(job("bench_only", checks=(), good_numel=good))
    assert control.ok, control.message  # at the bench shape alone it looks right
    res = ev.evaluate(job("bench_only", good_numel=good))
    assert res.verdict == "correctness"
    assert f"shape {SMALL}" in res.message and "elements off" in res.message


def test_right_on_zeros_but_wrong_on_random_data(ev):
    be = get_backend("faulty", fault="zeros", threads=1)
    op, dims = SOFTMAX.op_for(SMALL), SOFTMAX.dims(SMALL)
    kernel = be.build(be.render(lower(apply_trace(op, default_trace(op, dims)), dims)))
    zeros = {"x": np.zeros((SMALL["M"], SMALL["N"]), np.float32)}
    outs = alloc_outputs(op, dims)
    kernel(inputs_for(op, zeros), outs, {})
    assert compare(op, outs, reference(op, zeros)).ok  # a check on zeros would pass it
    res = ev.evaluate(job("zeros"))  # the evaluator never uses zeros: random draws
    assert res.verdict == "correctness"
    assert "elements off" in res.message


def test_produces_nan(ev):
    res = ev.evaluate(job("nan"))
    assert res.verdict == "correctness"
    n = SMALL["M"] * SMALL["N"]
    assert f"NaN at flat index {n // 2}" in res.message


def test_one_element_of_millions_off_by_more_than_the_tolerance(ev):
    cpu = SOFTMAX.shape("cpu")  # 4096 x 4096: 16.7 million outputs
    n = cpu["M"] * cpu["N"]
    assert n > 10_000_000
    within = ev.evaluate(job("one_off", bench=cpu, checks=(), seeds=(0,), delta=1e-6))
    assert within.ok, within.message  # well inside the f32 tolerance: passes
    res = ev.evaluate(job("one_off", bench=cpu, checks=(), seeds=(0,), delta=1e-3))
    assert res.verdict == "correctness"
    k = (n * 7) // 11
    assert f"1 of {n} elements off" in res.message
    assert f"first at ({k // cpu['N']}, {k % cpu['N']})" in res.message
