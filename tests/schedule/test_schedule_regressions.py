"""Bugs found while writing the schedule tests, each pinned by the smallest case that showed
it (the fixes are in kevolve/schedule; see the commit messages)."""

from __future__ import annotations

import jsonschema
import pytest
from schedlib import check_plan_shape, small

from kevolve.plan import lower
from kevolve.schedule import MoveError, Trace, apply, apply_trace, initial
from kevolve.schedule.moves import json_schema


def _lower(name: str, moves: list[dict]):
    op, dims = small(name)
    return lower(apply_trace(op, Trace.make(op.name, moves)), dims)


def test_compute_at_maps_a_stored_producer_through_its_store_index():
    # `a` iterates (i, j) and stores at (j, i); `y` reads a[j, i]. The load indexes a's
    # buffer, so a.i follows y.i, not the first load index (once zipped with a's axes,
    # which computed the transpose of what y reads).
    plan = _lower("tstore", [{"m": "bind", "stage": "y", "axis": "j", "to": "grid"},
                             {"m": "compute_at", "stage": "a", "at": ["y", "j"]}])
    (k,) = plan.kernels
    step_a = next(s for s in k.steps if s.stage.name == "a")
    assert {m.axis.name: m.loops for m in step_a.spatial} == {"i": ("i",), "j": ("j",)}
    check_plan_shape(plan)


def test_two_online_folds_in_one_kernel_keep_the_root():
    moves = [{"m": "bind", "stage": "y", "axis": "i", "to": "grid"}]
    moves += [{"m": "compute_at", "stage": s, "at": ["y", "i"]} for s in ("m1", "s1", "m2",
                                                                        "s2")]
    moves += [{"m": "reduction", "stage": s, "strategy": "online"} for s in ("s1", "s2")]
    (k,) = _lower("two_softmax", moves).kernels
    assert [(s.stage.name, s.strategy, s.online_max) for s in k.steps] == [
        ("s1", "online", "m1"), ("s2", "online", "m2"), ("y", "none", None)]


def test_online_needs_a_sum():
    from kevolve.ir.builder import axes, compute, dims, exp, f32, input, max_, op, reduce_axis

    M, N = dims("M N")
    x = input("x", (M, N), f32)
    i, j = axes("i j", M, N)
    k = reduce_axis("k", N)
    mx = compute("mx", (i,), max_(x[i, k], over=k))
    s = compute("s", (i,), max_(exp(x[i, k] - mx[i]), over=k))  # a max, not a sum
    y = compute("y", (i, j), exp(x[i, j] - mx[i]) / s[i])
    o = op("maxexp", inputs=[x], outputs=[y])
    t = Trace.make("maxexp", [{"m": "bind", "stage": "y", "axis": "i", "to": "grid"},
                              {"m": "compute_at", "stage": "mx", "at": ["y", "i"]},
                              {"m": "compute_at", "stage": "s", "at": ["y", "i"]},
                              {"m": "reduction", "stage": "s", "strategy": "online"}])
    with pytest.raises(MoveError) as e:
        lower(apply_trace(o, t), {"M": 2, "N": 8})
    assert (e.value.move_index, e.value.code) == (3, "semantics.online")


@pytest.mark.parametrize("move", [{"m": ["split"]}, {"m": {"a": 1}}, {"m": None}])
def test_unhashable_or_missing_move_name(move):
    with pytest.raises(MoveError) as e:
        Trace.from_dict({"op": "softmax", "moves": [move]})
    assert (e.value.move_index, e.value.code) == (0, "schema.unknown_move")
    with pytest.raises(MoveError) as e:
        apply(initial(small("softmax")[0]), move, 5)
    assert (e.value.move_index, e.value.code) == (5, "schema.unknown_move")


@pytest.mark.parametrize("move", [{"m": "inline", "stage": {"a": 1}},
                                  {"m": "reorder", "stage": "y", "order": [["i"], "j"]},
                                  {"m": "inline", "stage": "e", 3: 4}])
def test_moves_stay_hashable(move):
    with pytest.raises(MoveError) as e:
        Trace.from_dict({"op": "softmax", "moves": [{"m": "launch"}, move]})
    assert (e.value.move_index, e.value.code) == (1, "schema.bad_type")


@pytest.mark.parametrize("text", ["[" * 100_000, "1" * 5000, '{"moves": [' + "9" * 5000 + "]}"])
def test_hostile_json_is_a_schema_error(text):
    with pytest.raises(MoveError) as e:
        Trace.from_json(text)
    assert e.value.code == "schema.json"


def test_layer_one_checks_names_inside_lists_as_the_json_schema_does():
    long = "x" * 65
    move = {"m": "split", "stage": "y", "axis": "j", "size": 4, "into": [long, "ji"]}
    assert not jsonschema.Draft202012Validator(json_schema()).is_valid(move)
    with pytest.raises(MoveError) as e:
        apply(initial(small("softmax")[0]), move, 0)
    assert e.value.code == "schema.bad_type"


def test_move_error_survives_the_exception_machinery():
    """A frozen-dataclass exception broke when Python set __traceback__ (contextlib) or
    __notes__ (add_note, which pytest and hypothesis use)."""
    import contextlib
    import pickle

    @contextlib.contextmanager
    def nothing():
        yield

    with pytest.raises(MoveError) as e:
        with nothing():
            raise MoveError(2, "semantics.x", "message", "hint")
    assert e.value.to_dict() == {"move_index": 2, "code": "semantics.x", "message": "message",
                                 "hint": "hint"}
    err = MoveError(move_index=1, code="schema.y", message="m")
    err.add_note("a note")
    back = pickle.loads(pickle.dumps(err))
    assert back.to_dict() == err.to_dict() and isinstance(back, MoveError)


@pytest.mark.parametrize("name,moves,index", [
    ("softmax", [{"m": "split", "stage": "y", "axis": "j", "size": 16},
                 {"m": "reorder", "stage": "y", "order": ["jo", "i"]},
                 {"m": "reorder", "stage": "y", "order": ["ji", "jo"]}], 2),
    ("gemm_bias_gelu", [{"m": "bind", "stage": "y", "axis": "i", "to": "grid"},
                        {"m": "compute_at", "stage": "acc", "at": ["y", "i"]},
                        {"m": "split", "stage": "acc", "axis": "k", "size": 32},
                        {"m": "reorder", "stage": "acc", "order": ["ki", "i"]}], 3),
])
def test_a_tile_cannot_move_outside_its_outer_loop_even_when_not_adjacent(name, moves, index):
    # Only adjacent pairs were checked: (ji, i, jo) passed and lowering then divided by a
    # missing tile size (TypeError), or built k = ki + ko with the wrong strides.
    op, dims = small(name)
    with pytest.raises(MoveError) as e:
        lower(apply_trace(op, Trace.make(op.name, moves)), dims)
    assert (e.value.move_index, e.value.code) == (index, "semantics.tile_order")


def test_steps_carry_their_cache_moves_and_an_online_sum_its_max_stages():
    """A step lists its stage's cache moves; an online sum, which computes its max stage
    too, lists the max stage's as well."""
    op, dims = small("softmax")
    moves = [{"m": "bind", "stage": "y", "axis": "i", "to": "grid"},
             {"m": "inline", "stage": "e"},
             {"m": "compute_at", "stage": "mx", "at": ["y", "i"]},
             {"m": "compute_at", "stage": "s", "at": ["y", "i"]},
             {"m": "cache", "stage": "mx", "buffer": "x", "scope": "shared"}]
    plan = lower(apply_trace(op, Trace.make("softmax", moves)), dims)
    caches = {st.stage.name: st.caches for st in plan.kernels[0].steps}
    assert caches == {"mx": (("x", "shared", "threads"),), "s": (), "y": ()}
    online = moves + [{"m": "reduction", "stage": "s", "strategy": "online"}]
    plan = lower(apply_trace(op, Trace.make("softmax", online)), dims)
    (s, y) = plan.kernels[0].steps
    assert s.online_max == "mx" and s.caches == (("x", "shared", "threads"),) and y.caches == ()
