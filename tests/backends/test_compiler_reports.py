"""The compilers' per-kernel reports, and their totals in a candidate's diagnostics (the
heuristic proposer shrinks tiles when `compiler.spills` is nonzero)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from kevolve.archive.records import Scored
from kevolve.backends.compiler_reports import parse_amd_remarks, parse_ptxas, totals, triton_jit
from kevolve.evaluate.job import Result
from kevolve.search.proposers.base import ProposalContext
from kevolve.search.proposers.heuristic import HeuristicProposer

PTXAS = """\
ptxas info    : Compiling entry function 'k_a' for 'sm_90'
ptxas info    : Function properties for k_a
    8 bytes stack frame, 4 bytes spill stores, 4 bytes spill loads
ptxas info    : Used 32 registers, used 1 barriers, 1024 bytes smem, 380 bytes cmem[0]
ptxas info    : Compiling entry function 'k_b' for 'sm_90'
ptxas info    : Function properties for k_b
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 64 registers, 380 bytes cmem[0]
"""

AMD = """k.hip:3:1: remark: Function Name: k_a [-Rpass-analysis=kernel-resource-usage]
k.hip:3:1: remark:     VGPRs: 40 [-Rpass-analysis=kernel-resource-usage]
k.hip:3:1: remark:     ScratchSize [bytes/lane]: 16 [-Rpass-analysis=kernel-resource-usage]
k.hip:3:1: remark:     VGPRs Spill: 3 [-Rpass-analysis=kernel-resource-usage]
k.hip:3:1: remark:     LDS Size [bytes/block]: 2048 [-Rpass-analysis=kernel-resource-usage]
"""


def test_ptxas_report_per_kernel_and_totals():
    ks = parse_ptxas(PTXAS)
    assert ks["k_a"] == {"registers": 32, "spill_stores": 4, "spill_loads": 4,
                         "stack_frame": 8, "shared_bytes": 1024, "barriers": 1}
    assert ks["k_b"]["registers"] == 64 and ks["k_b"]["shared_bytes"] == 0
    assert totals({"kernels": ks}) == {"spills": 4, "registers": 64, "stack_frame": 8,
                                       "shared_bytes": 1024}


def test_amd_totals_and_nothing_reported():
    assert totals({"kernels": parse_amd_remarks(AMD)}) == {
        "spills": 3, "registers": 40, "stack_frame": 16, "shared_bytes": 2048}
    assert totals({}) == {} and totals({"kernels": {}}) == {}


def _compiled(regs: int, spill_words: int, shared: int):
    """What Triton's JIT hands back from a launch (its CompiledKernel), reduced to the
    fields the report reads."""
    return SimpleNamespace(n_regs=regs, n_spills=spill_words,
                           metadata=SimpleNamespace(shared=shared))


def test_triton_jit_report_and_totals():
    ks = triton_jit({"k_a": _compiled(255, 38, 98304), "k_b": _compiled(40, 0, 0),
                     "k_c": None})  # k_c: an empty grid launched nothing
    assert ks == {"k_a": {"registers": 255, "local_bytes": 152, "shared_bytes": 98304},
                  "k_b": {"registers": 40, "local_bytes": 0, "shared_bytes": 0}}
    assert totals({"kernels": ks}) == {"spills": 152, "registers": 255, "stack_frame": 152,
                                       "shared_bytes": 98304}


def test_a_triton_kernel_reports_its_launch_at_each_new_shape(monkeypatch):
    """Triton compiles at a launch, per specialization: the kernel's diagnostics are those
    of the latest new shape (the evaluator's last new shape is the bench shape)."""
    import kevolve.backends.triton.backend as tb
    from kevolve import ops
    from kevolve.plan import lower
    from kevolve.schedule import apply_trace, default_trace

    launches = []

    def launch(bufs, dims):
        launches.append(dims["n"])
        return {"k_out": _compiled(32 + dims["n"] // 1024, 0, 0)}
    monkeypatch.setattr(tb, "load_module", lambda source, interpret: SimpleNamespace(
        launch=launch))
    monkeypatch.setattr(tb, "require_triton", lambda interpret=None: None)
    d = ops.get("swish_add")
    op, dims = d.op_for({"n": 1024}), {"n": 1024}
    be = tb.TritonBackend()
    k = be.build(be.render(lower(apply_trace(op, default_trace(op, dims)), dims)))
    assert k.diagnostics == {}  # nothing compiled before the first launch

    def call(n):
        x = np.ones(n, np.float32)
        k({"x": x, "y": x}, {"out": np.empty_like(x)}, {})
    call(1024)
    assert k.diagnostics["kernels"]["k_out"]["registers"] == 33
    call(4096)
    assert k.diagnostics["kernels"]["k_out"]["registers"] == 36
    call(1024)  # a shape seen before: the report stays the latest new shape's
    assert k.diagnostics["kernels"]["k_out"]["registers"] == 36
    assert launches == [1024, 4096, 1024]


def _parent(diag: dict) -> Scored:
    return Scored('{"moves": []}', Result("ok", time_ms=1.0, diagnostics=diag), 1)


def test_spills_in_the_totals_make_the_heuristic_shrink_tiles():
    ctx = ProposalContext("softmax", "", "cuda", {}, "{}", (), None, 0, 0)
    h = HeuristicProposer()
    spilled = {f"compiler.{k}": v for k, v in totals({"kernels": parse_ptxas(PTXAS)}).items()}
    assert h._rules(ctx, _parent(spilled))[0] == "shrink"
    assert "shrink" not in h._rules(ctx, _parent({"compiler.spills": 0}))
