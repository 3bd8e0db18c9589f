"""Each legality rule fires with its exact code and the index of the move to blame: layer 1
(schema) and layer 2 (semantics) from apply and lower, layer 3 (backend caps) from
check_caps. The cases double as the error table of docs/moves.md."""

from __future__ import annotations

from dataclasses import replace

import pytest
from schedlib import CPU_LIKE, GPU_LIKE, CapsOnly, small

from kevolve.backends.base import Caps, check_caps
from kevolve.plan import lower
from kevolve.schedule import MoveError, Trace, apply_trace, default_trace

B_Y_I = {"m": "bind", "stage": "y", "axis": "i", "to": "grid"}


def fail(name: str, moves: list[dict], dims=None, decisions=None) -> MoveError:
    """Apply and lower `moves` on library op `name`; return the MoveError raised."""
    op, small_dims = small(name)
    with pytest.raises(MoveError) as e:
        lower(apply_trace(op, Trace.make(op.name, moves, decisions)), dims or small_dims)
    return e.value


# (op, moves, index of the move to blame or None for the trace/plan as a whole, code)
CASES = [
    # -- layer 1: schema ------------------------------------------------------------------
    ("softmax", [{"m": "tile", "stage": "y"}], 0, "schema.unknown_move"),
    ("softmax", [{"m": "inline", "stage": "e", "axis": "j"}], 0, "schema.unknown_arg"),
    ("softmax", [B_Y_I, {"m": "split", "stage": "y", "axis": "j"}], 1, "schema.missing_arg"),
    ("softmax", [{"m": "bind", "stage": "y", "axis": "i", "to": "warp"}], 0,
     "schema.bad_value"),
    ("softmax", [{"m": "unroll", "stage": "y", "axis": "j", "factor": 0}], 0,
     "schema.bad_value"),
    ("softmax", [{"m": "fuse", "stage": "y", "axes": ["i"]}], 0, "schema.bad_value"),
    ("softmax", [{"m": "split", "stage": "y", "axis": "j", "size": "16"}], 0,
     "schema.bad_type"),
    ("softmax", [{"m": "split", "stage": "y", "axis": "j", "size": True}], 0,
     "schema.bad_type"),
    ("softmax", [B_Y_I, {"m": "split", "stage": "y", "axis": "j", "size": 48}], 1,
     "schema.not_pow2"),
    ("softmax", [{"m": "split", "stage": "y", "axis": "j", "size": 1 << 17}], 0,
     "schema.bad_value"),
    ("softmax", [{"m": "inline", "stage": "nope"}], 0, "schema.unknown_stage"),
    ("softmax", [{"m": "split", "stage": "y", "axis": "q", "size": 4}], 0,
     "schema.unknown_axis"),
    ("softmax", [{"m": "reorder", "stage": "y", "order": ["i", "i"]}], 0, "schema.duplicate"),
    ("softmax", [B_Y_I, {"m": "split", "stage": "y", "axis": "j", "size": "$BN"}], 1,
     "schema.decision"),
    ("softmax", [{"m": "reduction", "stage": "s", "strategy": "split"}], 0,
     "schema.missing_arg"),
    ("softmax", [{"m": "compute_at", "stage": "mx", "at": ["nope", "i"]}], 0,
     "schema.unknown_stage"),
    ("softmax", [B_Y_I, {"m": "compute_at", "stage": "mx", "at": ["y", "zz"]}], 1,
     "schema.unknown_axis"),
    ("softmax", [{"m": "launch", "constexpr_dims": "N"}], 0, "schema.bad_type"),
    # -- layer 2: semantics of one move (apply) ---------------------------------------------
    ("softmax", [B_Y_I, {"m": "launch", "constexpr_dims": ["N", "K"]}], 1,
     "semantics.unknown_dim"),
    ("softmax", [{"m": "inline", "stage": "e"}, {"m": "split", "stage": "e", "axis": "j",
                                                  "size": 4}], 1, "semantics.inlined"),
    ("softmax", [{"m": "split", "stage": "y", "axis": "j", "size": 16},
                 {"m": "split", "stage": "y", "axis": "ji", "size": 4}], 1,
     "semantics.split_twice"),
    ("softmax", [{"m": "split", "stage": "y", "axis": "j", "size": 16, "into": ["i", "jj"]}],
     0, "semantics.name_taken"),
    ("jagged_sum", [{"m": "split", "stage": "out", "axis": "l", "size": 4, "tail": "guard"}],
     0, "semantics.jagged_guard"),
    ("softmax", [{"m": "split", "stage": "y", "axis": "j", "size": 16},
                 {"m": "reorder", "stage": "y", "order": ["ji", "jo"]}], 1,
     "semantics.tile_order"),
    ("gemm", [{"m": "fuse", "stage": "y", "axes": ["i", "k"]}], 0, "semantics.not_adjacent"),
    ("gemm", [{"m": "fuse", "stage": "y", "axes": ["j", "k"]}], 0, "semantics.fuse"),
    ("jagged_dense_elementwise_add", [{"m": "fuse", "stage": "out", "axes": ["b", "l"]}], 0,
     "semantics.fuse_jagged"),
    ("softmax", [{"m": "bind", "stage": "mx", "axis": "k", "to": "grid"}], 0,
     "semantics.parallel_reduce"),
    ("softmax", [{"m": "split", "stage": "y", "axis": "j", "size": 16},
                 {"m": "bind", "stage": "y", "axis": "ji", "to": "grid"}], 1,
     "semantics.bind_tile"),
    ("softmax", [{"m": "vectorize", "stage": "mx", "axis": "k", "width": 4}], 0,
     "semantics.vector_reduce"),
    ("softmax", [{"m": "split", "stage": "y", "axis": "j", "size": 4},
                 {"m": "vectorize", "stage": "y", "axis": "ji", "width": 8}], 1,
     "semantics.vector_width"),
    ("softmax", [B_Y_I, {"m": "vectorize", "stage": "y", "axis": "i", "width": 4}], 1,
     "semantics.vector_grid"),
    ("softmax", [{"m": "unroll", "stage": "y", "axis": "j", "factor": 128}], 0,
     "semantics.unroll"),
    ("softmax", [{"m": "inline", "stage": "y"}], 0, "semantics.output"),
    ("softmax", [{"m": "inline", "stage": "mx"}], 0, "semantics.inline_reduce"),
    ("tstore", [{"m": "inline", "stage": "a"}], 0, "semantics.inline_store"),
    ("index_add", [{"m": "inline", "stage": "added"}], 0, "semantics.accumulate"),
    ("index_add", [{"m": "bind", "stage": "y", "axis": "v", "to": "grid"},
                   {"m": "compute_at", "stage": "added", "at": ["y", "v"]}], 1,
     "semantics.accumulate"),
    ("index_add", [{"m": "cache", "stage": "added", "buffer": "added", "scope": "shared",
                    "copy": "bulk"}], 0, "semantics.accumulate"),
    ("softmax", [{"m": "compute_at", "stage": "mx", "at": ["mx", "i"]}], 0,
     "semantics.compute_at_self"),
    ("softmax", [{"m": "compute_at", "stage": "s", "at": ["e", "i"]}], 0,
     "semantics.not_consumer"),
    ("softmax", [{"m": "compute_at", "stage": "e", "at": ["s", "i"]}], 0,
     "semantics.compute_at_index"),
    ("softmax", [{"m": "cache", "stage": "y", "buffer": "x", "scope": "shared"}], 0,
     "semantics.cache_unread"),
    ("softmax", [{"m": "reduction", "stage": "y", "strategy": "looped"}], 0,
     "semantics.no_reduction"),
    # -- layer 2: what needs the whole schedule (lower) -------------------------------------
    ("softmax", [B_Y_I, {"m": "reorder", "stage": "y", "order": ["j", "i"]}], None,
     "semantics.grid_order"),
    ("softmax", [{"m": "inline", "stage": "e"},
                 {"m": "compute_at", "stage": "mx", "at": ["e", "i"]}], 1,
     "semantics.nested_compute_at"),
    ("softmax", [B_Y_I, {"m": "compute_at", "stage": "mx", "at": ["y", "j"]}], 1,
     "semantics.compute_at_block"),
    ("gemm_bias_gelu", [B_Y_I, {"m": "split", "stage": "y", "axis": "j", "size": 4},
                        {"m": "compute_at", "stage": "acc", "at": ["y", "i"]}], 2,
     "semantics.compute_at_level"),
    ("softmax", [B_Y_I, {"m": "inline", "stage": "e"},
                 {"m": "compute_at", "stage": "mx", "at": ["y", "i"]}], 2,
     "semantics.compute_at_consumer"),  # s (a kernel of its own) reads mx too
    ("softmax", [B_Y_I, {"m": "compute_at", "stage": "mx", "at": ["y", "i"]}], 1,
     "semantics.compute_at_index"),  # y reads mx only through e, which is not computed here
    ("softmax", [{"m": "split", "stage": "mx", "axis": "k", "size": 16},
                 {"m": "reduction", "stage": "mx", "strategy": "single"}], 1,
     "semantics.single_split"),
    ("softmax", [B_Y_I, {"m": "inline", "stage": "e"},
                 {"m": "compute_at", "stage": "mx", "at": ["y", "i"]},
                 {"m": "compute_at", "stage": "s", "at": ["y", "i"]},
                 {"m": "reduction", "stage": "mx", "strategy": "online"}], 4,
     "semantics.online"),
    ("softmax", [B_Y_I, {"m": "inline", "stage": "e"},
                 {"m": "compute_at", "stage": "s", "at": ["y", "i"]},
                 {"m": "reduction", "stage": "s", "strategy": "online"}], 3,
     "semantics.online"),  # the max is not computed in the same program
    # -- outputs computed in another stage's program (several outputs, one kernel) -------
    ("fused_add_rmsnorm", [{"m": "compute_at", "stage": "h", "at": ["ms", "i"]}], 0,
     "semantics.output_space"),  # ms reads h over its reduce axis k: a reduce mismatch
    ("softmax", [{"m": "compute_at", "stage": "y", "at": ["mx", "i"]}], 0,
     "semantics.output_space"),  # a sibling without y's axis j
    ("part_out", [{"m": "bind", "stage": "y", "axis": "i", "to": "grid"},
                  {"m": "compute_at", "stage": "h", "at": ["y", "i"]}], 1,
     "semantics.output_space"),  # y covers N - 1 of h's N columns
    ("softmax", [{"m": "bind", "stage": "e", "axis": "i", "to": "grid"},
                 {"m": "compute_at", "stage": "y", "at": ["e", "i"]}], 1,
     "semantics.compute_at_order"),  # y reads e, the root computed after it
    ("layernorm_stats", [B_Y_I, {"m": "compute_at", "stage": "mean", "at": ["y", "i"]}], 1,
     "semantics.compute_at_order"),  # var (a kernel before y's) reads mean
    ("softmax", [{"m": "fuse", "stage": "y", "axes": ["i", "j"]}], None, "backend.fused_loop"),
    ("softmax", [{"m": "reduction", "stage": "s", "strategy": "split", "factor": 1}], 0,
     "schema.bad_value"),  # one chunk is no split
    ("softmax", [{"m": "reduction", "stage": "s", "strategy": "split", "factor": 4},
                 {"m": "split", "stage": "s", "axis": "k", "size": 16}], 1,
     "schema.unknown_axis"),  # after the split, s reduces over kp: k is s_rf's
]


@pytest.mark.parametrize("name,moves,index,code", CASES,
                         ids=[f"{c[3]}-{k}" for k, c in enumerate(CASES)])
def test_exact_code_and_index(name, moves, index, code):
    e = fail(name, moves)
    assert (e.move_index, e.code) == (index, code), e
    assert e.message


def test_every_case_is_one_move_away_from_legal():
    """Dropping the blamed move makes the rest legal (so each case tests one rule only)."""
    for name, moves, index, _ in CASES:
        if index is None:
            continue
        op, dims = small(name)
        rest = moves[:index] + moves[index + 1:]
        lower(apply_trace(op, Trace.make(op.name, rest)), dims)


def test_a_trace_for_another_op():
    op, dims = small("softmax")
    trace = default_trace(*small("gemm"))
    with pytest.raises(MoveError) as e:
        apply_trace(op, trace)
    assert (e.value.move_index, e.value.code) == (None, "schema.wrong_op")
    assert "gemm" in e.value.message and "softmax" in e.value.message


def test_a_trace_without_an_op_name_applies_to_any_op():
    op, dims = small("softmax")
    lower(apply_trace(op, Trace.make("", [B_Y_I])), dims)


def test_decision_out_of_range_blames_the_move_that_uses_it():
    e = fail("softmax", [B_Y_I, {"m": "split", "stage": "y", "axis": "j", "size": "$BN"}],
             decisions={"$BN": 48})
    assert (e.move_index, e.code) == (1, "schema.not_pow2")


@pytest.mark.parametrize("text,code", [
    ("{", "schema.json"), ("[]", "schema.not_object"),
    ('{"version": 2, "moves": []}', "schema.version"),
    ('{"moves": {}}', "schema.moves"), ('{"moves": [], "decisions": {"$A": "x"}}',
                                        "schema.decisions"),
    ('{"moves": [], "decisions": {"$A": true}}', "schema.decisions"),
    ('{"op": 3, "moves": []}', "schema.op"), ('{"moves": [7]}', "schema.not_object"),
])
def test_trace_level_schema_errors(text, code):
    with pytest.raises(MoveError) as e:
        Trace.from_json(text)
    assert e.value.code == code
    assert e.value.move_index == (0 if text == '{"moves": [7]}' else None)


# -- layer 3: backend capabilities --------------------------------------------------------

def _checked(backend, name, moves, dims=None):
    op, small_dims = small(name)
    dims = dims or small_dims
    sched = apply_trace(op, Trace.make(op.name, moves))
    plan = lower(sched, dims)
    with pytest.raises(MoveError) as e:
        check_caps(backend, sched, plan)
    return e.value


SOFTMAX_ROW = [B_Y_I, {"m": "inline", "stage": "e"},
               {"m": "compute_at", "stage": "mx", "at": ["y", "i"]},
               {"m": "compute_at", "stage": "s", "at": ["y", "i"]}]


def test_tile_too_large_for_the_cpu():
    e = _checked(CPU_LIKE, "softmax", SOFTMAX_ROW, {"M": 4, "N": 1 << 20})
    assert (e.move_index, e.code) == (None, "backend.tile_too_large")
    assert str(1 << 20) in e.message and str(1 << 16) in e.message
    # a split row fits
    op = small("softmax")[0]
    t = Trace.make("softmax", SOFTMAX_ROW + [
        {"m": "split", "stage": s, "axis": a, "size": 4096}
        for s, a in (("y", "j"), ("mx", "k"), ("s", "k"))])
    sched = apply_trace(op, t)
    check_caps(CPU_LIKE, sched, lower(sched, {"M": 4, "N": 1 << 20}))


def test_num_warps_over_the_cap():
    e = _checked(GPU_LIKE, "softmax", SOFTMAX_ROW + [{"m": "launch", "num_warps": 64}])
    assert (e.move_index, e.code) == (None, "backend.num_warps")
    op, dims = small("softmax")
    sched = apply_trace(op, Trace.make("softmax", SOFTMAX_ROW + [{"m": "launch",
                                                                  "num_warps": 32}]))
    check_caps(GPU_LIKE, sched, lower(sched, dims))


def test_other_caps():
    no_online = CapsOnly("t", replace(GPU_LIKE.caps, strategies=frozenset({"auto", "single"})))
    e = _checked(no_online, "softmax", SOFTMAX_ROW + [
        {"m": "reduction", "stage": "s", "strategy": "online"}])
    assert (e.move_index, e.code) == (4, "backend.strategy")
    e = _checked(CPU_LIKE, "softmax", SOFTMAX_ROW + [
        {"m": "bind", "stage": "y", "axis": "j", "to": "threads"}])
    assert e.code == "backend.bind"
    e = _checked(CPU_LIKE, "softmax", SOFTMAX_ROW + [
        {"m": "vectorize", "stage": "y", "axis": "j", "width": 32}])
    assert e.code == "backend.vector_width"
    no_cache = CapsOnly("t", Caps("cpu", moves=frozenset({"split", "bind"})))
    e = _checked(no_cache, "softmax", SOFTMAX_ROW + [
        {"m": "cache", "stage": "mx", "buffer": "x", "scope": "local"}])
    assert e.code == "backend.cache"


@pytest.mark.parametrize("backend", ["cpu", "triton", "numba"])
def test_real_backends_enforce_the_same_limits(backend):
    """The same layer-3 failures with the registered backends' own caps (skipped where a
    backend does not import on this machine)."""
    from kevolve.backends import registry

    try:
        be = registry.get(backend)
    except Exception as e:  # noqa: BLE001 - optional toolchains
        pytest.skip(f"{backend}: {e}")
    e = _checked(be, "softmax", SOFTMAX_ROW, {"M": 4, "N": 1 << 20})
    assert e.code == "backend.tile_too_large"
    e = _checked(be, "softmax", SOFTMAX_ROW + [{"m": "launch", "num_warps": 64}])
    assert e.code == "backend.num_warps"
    op, dims = small("softmax")
    sched = apply_trace(op, default_trace(op, dims))
    be.check(sched, lower(sched, dims))  # the default schedule passes every backend
