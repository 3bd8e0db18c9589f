"""Schedule mutations the heuristic proposer draws from: each returns a trace that still
applies and lowers, or None where it does not apply."""

from __future__ import annotations

import random
from dataclasses import asdict

from kevolve import ops
from kevolve.backends.registry import get as get_backend
from kevolve.plan import lower
from kevolve.schedule import Trace, apply_trace, default_trace
from kevolve.search.proposers import mutations as mu


def _default(name: str):
    """The op at its gpu preset, those dims and its default trace."""
    d = ops.get(name)
    op, dims = d.op_for("gpu"), d.dims("gpu")
    return op, dims, default_trace(op, dims)


def test_static_dims_are_inner_extents_of_multi_dim_inputs():
    assert mu.static_dims(ops.get("dot_interaction").op) == ["D", "F"]
    assert mu.static_dims(ops.get("gemm_bias_gelu").op) == ["K", "N"]
    # a jagged op's total length and its longest segment change from batch to batch
    assert mu.static_dims(ops.get("jagged_sum").op) == ["D"]


def test_toggle_constexpr_adds_and_removes_a_dim():
    op, dims, t = _default("dot_interaction")
    rng = random.Random(3)
    triton = _caps("triton")
    seen = set()
    cur = t
    for _ in range(12):
        cur = mu.toggle_constexpr(cur, rng, triton, op)
        plan = lower(apply_trace(op, cur), dims)
        cx = plan.kernels[0].constexpr_dims
        assert set(cx) <= {"D", "F"}
        seen.add(cx)
    assert {(), ("D",), ("F",), ("D", "F")} & seen >= {("D",), ("F",)}
    assert Trace.from_json(cur.to_json()) == cur


def _caps(name: str) -> dict:
    """The caps a search hands its proposer (asdict of the backend's Caps)."""
    return asdict(get_backend(name).caps)


def test_launch_mutations_only_where_the_backend_acts_on_the_argument():
    """CUDA/HIP take num_warps as the block size and ignore the other launch arguments: a
    mutation of those would render the same code and spend an evaluation on it."""
    op, dims, t = _default("dot_interaction")  # an f32 contraction with static inner dims
    rng = random.Random(1)
    others = (lambda c: mu.change_stages(t, rng, c), lambda c: mu.toggle_precision(t, rng, c, op),
              lambda c: mu.toggle_constexpr(t, rng, c, op),
              lambda c: mu.toggle_persistent(t, rng, c))
    for name in ("cuda", "hip", "cpu", "mtia"):
        caps = _caps(name)
        assert all(f(caps) is None for f in others), name
    for name in ("cuda", "hip", "triton"):  # doubling or halving: one of 8 draws is legal
        assert any(mu.scale_warps(t, rng, _caps(name)) not in (None, t) for _ in range(8))
    assert mu.scale_warps(t, rng, _caps("cpu")) is None
    triton = _caps("triton")
    for f in others:
        assert any(f(triton) not in (None, t) for _ in range(8))


def test_vectorize_and_cache_only_where_the_backend_renders_them():
    op, dims, t = _default("softmax")
    rng = random.Random(0)
    triton = _caps("triton")
    assert mu.vectorize_inner(t, rng, op, triton) is None
    assert mu.toggle_cache(t, rng, op, triton) is None
    assert mu.toggle_cache(t, rng, op, _caps("cpu")) is None  # the CPU C backend ignores it
    cuda = _caps("cuda")
    v = mu.vectorize_inner(t, rng, op, cuda)
    vec = [m for m in mu.moves_of(v) if m["m"] == "vectorize"]
    assert len(vec) == 1 and vec[0]["width"] in (2, 4, 8), vec
    assert mu.vectorize_inner(v, rng, op, cuda) == t  # toggles back off


def test_toggle_cache_names_a_stage_that_reads_the_buffer_and_lowers():
    op, dims, t = _default("softmax")
    pairs = mu.cache_candidates(op)
    assert ("mx", "x") in pairs and all(b == "x" for _, b in pairs)
    cuda = _caps("cuda")
    rng = random.Random(1)
    seen = set()
    for _ in range(20):
        c = mu.toggle_cache(t, rng, op, cuda)
        if c is None:
            continue
        (mv,) = [m for m in mu.moves_of(c) if m["m"] == "cache"]
        assert (mv["stage"], mv["buffer"]) in pairs and mv["scope"] == "shared"
        seen.add(mv["stage"])
        lower(apply_trace(op, c), dims)
    assert seen, "no cache move proposed"


def test_toggle_persistent_adds_a_program_count_and_takes_it_away():
    op, dims, t = _default("gemm_bias_gelu")
    rng = random.Random(5)
    triton = _caps("triton")
    counts = set()
    for _ in range(16):
        on = mu.toggle_persistent(t, rng, triton)
        k = lower(apply_trace(op, on), dims).kernels[0]
        assert k.persistent in (1, 2, 4, 8) and k.grid
        counts.add(k.persistent)
        off = mu.toggle_persistent(on, rng, triton)
        assert lower(apply_trace(op, off), dims).kernels[0].persistent is None
    assert len(counts) > 1


def test_toggle_pipeline_needs_persistent_programs_and_goes_with_them():
    op, dims, t = _default("gemm_bias_gelu")
    rng = random.Random(3)
    triton = _caps("triton")
    assert mu.toggle_pipeline(t, rng, triton) is None  # one program per tile
    assert mu.toggle_pipeline(t, rng, _caps("cuda")) is None
    persistent = mu.toggle_persistent(t, rng, triton)
    on = mu.toggle_pipeline(persistent, rng, triton)
    assert lower(apply_trace(op, on), dims).kernels[0].pipeline == "across_tiles"
    assert "flatten=True" in _triton_source(op, dims, on)
    assert mu.toggle_pipeline(on, rng, triton).moves == persistent.moves
    off = mu.toggle_persistent(on, rng, triton)  # drops the pipeline with the programs
    k = lower(apply_trace(op, off), dims).kernels[0]
    assert k.persistent is None and k.pipeline is None


def test_cap_persistent_keeps_the_largest_count_that_fits():
    op, dims, t = _default("gemm_bias_gelu")
    rng = random.Random(5)
    triton = _caps("triton")
    eight = next(x for x in (mu.toggle_persistent(t, rng, triton) for _ in range(64))
                 if lower(apply_trace(op, x), dims).kernels[0].persistent == 8)
    for fit, want in ((1, 1), (2, 2), (3, 2), (5, 4), (8, 8), (20, 8), (0, 1)):
        got = mu.cap_persistent(eight, fit)
        assert lower(apply_trace(op, got), dims).kernels[0].persistent == want
    assert mu.cap_persistent(t, 1) == t  # one program per tile stays so


def _triton_source(op, dims, t) -> str:
    from kevolve.backends.triton import TritonBackend
    return TritonBackend().render(lower(apply_trace(op, t), dims)).text


def test_unroll_and_precision_only_where_they_change_the_code():
    """On the H200, all 23 unroll and all 10 precision mutations of a gemm_bias_gelu search
    rendered their parents' code (reused, yet counted against the budget): Triton leaves
    unrolling to its compiler, and dot_precision applies to f32 operands only."""
    op, dims, t = _default("gemm_bias_gelu")
    rng = random.Random(0)
    triton = _caps("triton")
    assert all(mu.unroll_loop(t, rng, op, triton) is None for _ in range(8))
    assert all(mu.toggle_precision(t, rng, triton, op) is None for _ in range(8))
    # the rule's reason: such moves leave Triton's source as it was
    moves = mu.moves_of(t)
    same = mu.rebuild(t, moves + [{"m": "unroll", "stage": "y", "axis": "ii", "factor": 8},
                                  {"m": "launch", "dot_precision": "tf32x3"}])
    assert _triton_source(op, dims, same) == _triton_source(op, dims, t)
    for name in ("cpu", "cuda", "hip", "mtia"):  # the C backends write the pragma
        u = mu.unroll_loop(t, rng, op, _caps(name))
        assert u is not None and any(m["m"] == "unroll" for m in mu.moves_of(u)), name
        lower(apply_trace(op, u), dims)
    f32op, f32dims, g = _default("gemm")  # f32 operands: the precision is a real choice
    p = mu.toggle_precision(g, rng, triton, f32op)
    assert p is not None
    assert _triton_source(f32op, f32dims, p) != _triton_source(f32op, f32dims, g)


def test_change_group_halves_or_doubles_the_grouped_rows_of_a_2d_grid():
    op, dims, t = _default("gemm_bias_gelu")  # group_m 8 by default
    rng = random.Random(2)
    triton = _caps("triton")
    assert mu.change_group(t, rng, _caps("cpu")) is None
    seen = set()
    for _ in range(12):
        g = mu.change_group(t, rng, triton)
        seen.add(lower(apply_trace(op, g), dims).kernels[0].group_m)
    assert seen == {4, 16}
    cur, walk = t, 0
    while lower(apply_trace(op, cur), dims).kernels[0].group_m and walk < 60:
        cur, walk = mu.change_group(cur, rng, triton) or cur, walk + 1  # down to 1: none
    assert lower(apply_trace(op, cur), dims).kernels[0].group_m is None
    assert all("group_m" not in m for m in mu.moves_of(cur))
    for name in ("cuda", "hip"):  # their blocks are ordered the same way
        g = mu.change_group(t, rng, _caps(name))
        assert lower(apply_trace(op, g), dims).kernels[0].group_m in (4, 16)
    sop, _, st = _default("softmax")  # one grid axis: nothing to group
    assert mu.change_group(st, rng, triton) is None


def test_the_leader_gets_every_kind_of_mutation_before_any_twice():
    """Improvements come in chains of single moves: the best parent tries each kind once
    before the proposer repeats one on it (a random pick repeats within a few draws)."""
    from kevolve.archive.records import Scored
    from kevolve.evaluate.job import Result
    from kevolve.ir.printer import op_text
    from kevolve.search.proposers.base import Proposal, ProposalContext
    from kevolve.search.proposers.heuristic import HeuristicProposer

    op, dims, t = _default("gemm_bias_gelu")
    leader = Scored(t.to_json(), Result("ok", time_ms=0.5), 1)
    ctx = ProposalContext("gemm_bias_gelu", op_text(op), "triton", _caps("triton"),
                          t.to_json(), (leader,), leader, 1, 3, dims, True)
    h = HeuristicProposer(seed=4)
    kinds = list(dict.fromkeys(["scale", "warps", "stages", "group", "bulk", "persistent"]))
    draws = [h._kind(kinds, leader, True) for _ in range(len(kinds))]
    assert sorted(draws) == sorted(kinds)  # each once
    other = Scored(t.to_json(), Result("ok", time_ms=0.6), 2)
    assert h._kind(kinds, other, True) in kinds  # a new leader starts afresh
    assert len(h.tried[2]) == 1

    got: list[Proposal] = HeuristicProposer(seed=4).propose(ctx, 30)
    notes = [p.note for p in got]
    first_repeat = next(i for i, n in enumerate(notes) if n in notes[:i])
    assert first_repeat >= 8, notes
    assert {"group", "bulk", "persistent", "bulk_write"} <= set(notes[:first_repeat])


def test_the_proposer_goes_a_step_further_when_the_neighbourhood_is_used_up():
    """One parent has a few dozen single-move neighbours: once all are seen, a mutation
    that lands on a seen trace is followed by another, so the search does not stall
    (the H200's gemm search from scratch stopped at 162 of its 300 for lack of this)."""
    from kevolve.archive.records import Scored
    from kevolve.evaluate.job import Result
    from kevolve.ir.printer import op_text
    from kevolve.search.proposers.base import ProposalContext
    from kevolve.search.proposers.heuristic import HeuristicProposer

    op, dims, t = _default("gemm_bias_gelu")
    leader = Scored(t.to_json(), Result("ok", time_ms=0.5), 1)
    ctx = ProposalContext("gemm_bias_gelu", op_text(op), "triton", _caps("triton"),
                          t.to_json(), (leader,), leader, 1, 3, dims, True)
    h = HeuristicProposer(seed=7)
    rounds = [h.propose(ctx, 8) for _ in range(12)]
    assert all(len(r) == 8 for r in rounds), [len(r) for r in rounds]
    keys = [p.trace_json for r in rounds for p in r]
    assert len(set(keys)) == len(keys) and t.to_json() not in keys
    late = [p.note for p in rounds[-1]]
    assert all("+" in n for n in late), late  # by now every single move was seen
    for p in rounds[-1]:  # and the longer steps are schedules that still lower
        lower(apply_trace(op, Trace.from_json(p.trace_json)), dims)


def test_mutations_of_a_0d_output_return_none_or_a_trace():
    """A full reduction to a scalar (mean squared error) has a root without axes: the
    mutations that work on the root's innermost axis do not apply (they raised
    IndexError, which ended `kevolve evolve` on such an op)."""
    from kevolve.ir.builder import cast, compute, dims, f32, input, op, reduce_axis, sum_

    M, N = dims("M N")
    a, b = input("a", (M, N), f32), input("b", (M, N), f32)
    r, c = reduce_axis("r", M), reduce_axis("c", N)
    d = a[r, c] - b[r, c]
    mse = op("mse", inputs=[a, b],
             outputs=[compute("loss", (), sum_(d * d, over=(r, c)) / cast(M * N, f32))])
    dims_ = {"M": 37, "N": 300}
    t = default_trace(mse, dims_)
    rng = random.Random(0)
    for backend in ("cpu", "cuda", "triton"):
        caps = _caps(backend)
        for got in (mu.split_tile(t, rng, mse), mu.vectorize_inner(t, rng, mse, caps),
                    mu.rows_per_program(t, rng, mse), mu.unroll_loop(t, rng, mse, caps),
                    mu.toggle_reduce_split(t, rng, mse), mu.toggle_online(t, rng, mse)):
            if got is not None:
                lower(apply_trace(mse, got), dims_)


def test_compute_at_mutation_splits_and_fuses_an_output_with_the_root():
    """Several outputs in one kernel: the compute_at mutation takes an output out of the
    root's program (a kernel of its own) and puts it back; both are legal, and the root the
    other mutations tune is the output that stores the others."""
    from pathlib import Path

    ref = str(Path(__file__).resolve().parents[2] / "examples" / "norms.py")
    d = ops.resolve(f"{ref}:FUSED_ADD_RMSNORM")
    op, dims = d.op_for("small"), d.dims("small")
    fused = default_trace(op, dims)
    assert len(lower(apply_trace(op, fused), dims).kernels) == 1
    assert mu.main_root(op, mu.moves_of(fused)) == "y"
    apart = next(t for seed in range(32)
                 if (t := mu.toggle_compute_at(fused, random.Random(seed), op)) is not None
                 and not any(m["m"] == "compute_at" and m["stage"] == "h"
                             for m in mu.moves_of(t)))
    assert {"m": "bind", "stage": "h", "axis": "i", "to": "grid"} in mu.moves_of(apart)
    assert len(lower(apply_trace(op, apart), dims).kernels) == 2
    back = next(t for seed in range(32)
                if (t := mu.toggle_compute_at(apart, random.Random(seed), op)) is not None
                and {"m": "compute_at", "stage": "h", "at": ["y", "i"]} in mu.moves_of(t))
    assert not any(m.get("stage") == "h" and m["m"] == "bind" for m in mu.moves_of(back))
    assert len(lower(apply_trace(op, back), dims).kernels) == 1
    # the row-tiling mutations act on y, never on h, whichever order the outputs are in
    tiled = mu.split_tile(fused, random.Random(0), op)
    assert tiled is None or all(m.get("stage") != "h" for m in mu.moves_of(tiled)
                                if m["m"] == "split")


def _with_split(t: Trace, stage: str, axis: str, key: str, size: int) -> Trace:
    return mu.rebuild(t, mu.moves_of(t) + [{"m": "split", "stage": stage, "axis": axis,
                                            "size": key}], {**dict(t.decisions), key: size})


def _splits(t: Trace) -> dict:
    dec = dict(t.decisions)
    return {(m["stage"], m["axis"]): dec.get(m["size"], m["size"])
            for m in mu.moves_of(t) if m["m"] == "split" and "into" not in m}


def test_echo_copies_a_reduction_split_to_the_sibling_reduction_and_the_output_row():
    op, dims, t = _default("layernorm")
    assert mu.echo_splits(t, op) == []  # nothing split yet: nothing to echo
    one = _with_split(t, "mean", "k", "$R_mean_k", 64)
    echoed = mu.echo_splits(one, op)
    got = [set(_splits(e).items()) - set(_splits(one).items()) for e in echoed]
    # the same size on var's reduction and on y's row, each a trace of its own
    assert sorted(map(sorted, got)) == [[(("var", "k"), 64)], [(("y", "j"), 64)]]
    for e in echoed:
        lower(apply_trace(op, e), dims)
    both = _with_split(_with_split(one, "var", "k", "$R_var_k", 64), "y", "j", "$T_j", 64)
    assert mu.echo_splits(both, op) == []  # every sibling split: nothing more


def test_echo_needs_an_axis_of_the_same_extent():
    # gemm's output row (N) and its contraction (K) differ: a split of one is not echoed
    op, dims, t = _default("gemm_bias_gelu")
    red = [s for s in op.stages if s.reduce_axes]
    s = red[0]
    a = s.reduce_axes[0]
    split = _with_split(t, s.name, a.name, f"$R_{s.name}_{a.name}", 32)
    for e in mu.echo_splits(split, op):
        new = set(_splits(e)) - set(_splits(split))
        for st, ax in new:
            b = next(x for x in (*op.stage(st).axes, *op.stage(st).reduce_axes)
                     if x.name == ax)
            assert (b.extent, b.start) == (a.extent, a.start)


def test_the_heuristic_tries_the_echo_first_on_a_parent_that_has_one(monkeypatch):
    from kevolve.search.proposers.heuristic import HeuristicProposer

    op, dims, t = _default("rmsnorm")
    stage = next(s for s in op.stages if s.reduce_axes)
    parent = _with_split(t, stage.name, stage.reduce_axes[0].name,
                         f"$R_{stage.name}_{stage.reduce_axes[0].name}", 128)

    class P:  # the fields _rules reads
        trace_json = parent.to_json()

        class result:
            diagnostics: dict = {}
            verdict = "ok"

    class Ctx:
        op_name, ceilings, default_trace_json = "rmsnorm", {}, t.to_json()
    h = HeuristicProposer(seed=0)
    assert h._rules(Ctx, P)[0] == "echo"
    for e in mu.echo_splits(parent, op):
        h.seen.add(e.to_json())
    assert "echo" not in h._rules(Ctx, P)  # its echoes all seen: no longer first


def test_a_split_reduction_is_repaired_into_a_legal_two_pass_schedule():
    from pathlib import Path

    from kevolve.backends.cpu import CpuBackend
    from kevolve.pipeline import lower as lower_for

    ref = f"{Path(__file__).resolve().parents[2] / 'examples' / 'losses.py'}:MSE_LOSS"
    d = ops.resolve(ref)
    sd = d.shape("gpu")
    op, dims = d.op_for(sd), d.dims(sd)
    t = Trace.make(op.name, [{"m": "launch", "num_warps": 8},
                             {"m": "reduction", "stage": "loss", "strategy": "split"}])
    fixes = dict(mu.repairs(t, op))
    fixed = fixes["split:loss"]
    moves = mu.moves_of(fixed)
    assert {"m": "split", "stage": "loss_rf", "axis": "r", "size": "$R_loss_rf_r"} in moves
    assert dict(fixed.decisions)["$RF_loss"] == 64
    plan = lower(apply_trace(op, fixed), dims)
    assert len(plan.kernels) == 2
    lower_for(op, fixed, dims, CpuBackend())  # the backend's limits hold too
