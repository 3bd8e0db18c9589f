"""Random move sequences never crash the schedule layer: applying, lowering and the backend
caps check either succeed or raise a well-formed MoveError, never any other exception. When
they succeed, the plan keeps its structural invariants and replays identically."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from movegen import JUNK, aimed_move, junk_move
from schedlib import ALL, CPU_LIKE, GPU_LIKE, check_plan_shape, small

from kevolve.plan import lower
from kevolve.schedule import MoveError, Trace, apply_trace, default_trace

SETTINGS = settings(max_examples=400, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])
PREFIXES = ("schema.", "semantics.", "backend.")


def assert_well_formed(e: MoveError, n_moves: int) -> None:
    assert e.move_index is None or (isinstance(e.move_index, int)
                                    and 0 <= e.move_index < n_moves), e
    assert isinstance(e.code, str) and e.code.startswith(PREFIXES), e.code
    assert isinstance(e.message, str) and e.message.strip(), e
    assert isinstance(e.hint, str)
    assert set(e.to_dict()) == {"move_index", "code", "message", "hint"}
    assert e.code in str(e)


@st.composite
def scenario(draw):
    name = draw(st.sampled_from(ALL))
    op, dims = small(name)
    one = st.one_of(aimed_move(op), junk_move(op)) if draw(st.booleans()) else aimed_move(op)
    moves = draw(st.lists(one, max_size=6))
    if draw(st.booleans()):  # start from a legal schedule, so lowering sees deep cases
        base = default_trace(op, dims).resolved()
        moves = draw(st.permutations(base + moves)) if draw(st.booleans()) else base + moves
    dec = draw(st.dictionaries(st.sampled_from(["$A", "$B", "$BN", "$W"]),
                               st.one_of(st.sampled_from([1, 2, 16, 64, 1024]),
                                         st.integers(-5, 1 << 20)), max_size=4))
    for m in moves:  # define most references (junk_move's "$UNDEFINED" stays undefined)
        for v in (m.values() if isinstance(m, dict) else ()):
            if isinstance(v, str) and v in ("$A", "$B", "$BN", "$W") and v not in dec:
                dec[v] = draw(st.sampled_from([4, 16, 64, 256, 1024]))
    return name, moves, dec


def run(name: str, moves, dec):
    op, dims = small(name)
    t = Trace.make(op.name, moves, dec)
    sched = apply_trace(op, t)
    plan = lower(sched, dims)
    for be in (CPU_LIKE, GPU_LIKE):
        be.check(sched, plan)
    return t, plan


@pytest.mark.slow  # 400 random schedules lowered: `make test` runs it, `make check` not
@SETTINGS
@given(scenario())
def test_random_moves_raise_only_move_errors(sc):
    name, moves, dec = sc
    try:
        t, plan = run(name, moves, dec)
    except MoveError as e:
        assert_well_formed(e, len(moves))
        event(e.code)
        return
    event("lowered")
    check_plan_shape(plan)
    op, dims = small(name)
    assert lower(apply_trace(op, Trace.from_json(t.to_json())), dims) == plan


@SETTINGS
@given(st.text(max_size=80))
def test_random_text_is_rejected_or_parsed(text):
    try:
        t = Trace.from_json(text)
    except MoveError as e:
        assert_well_formed(e, 1 << 30)
        return
    assert Trace.from_json(t.to_json()) == t


json_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-(1 << 70), 1 << 70),
              st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=6)),
    lambda sub: st.one_of(st.lists(sub, max_size=4),
                          st.dictionaries(st.text(max_size=6), sub, max_size=4)),
    max_leaves=12)
trace_like = st.fixed_dictionaries({}, optional={
    "version": st.one_of(st.just(1), json_values), "op": st.one_of(st.sampled_from(ALL),
                                                                   json_values),
    "moves": st.one_of(st.lists(st.one_of(json_values, st.fixed_dictionaries(
        {"m": st.one_of(st.sampled_from(["split", "bind", "inline", "launch"]), JUNK)},
        optional={"stage": json_values, "axis": json_values, "size": json_values})),
        max_size=4), json_values),
    "decisions": st.one_of(st.dictionaries(st.text(max_size=4), json_values, max_size=3),
                           json_values)})


@SETTINGS
@given(st.one_of(json_values, trace_like))
def test_random_json_values_raise_only_move_errors(value):
    text = json.dumps(value)
    for parse in (lambda: Trace.from_dict(value), lambda: Trace.from_json(text)):
        try:
            t = parse()
        except MoveError as e:
            assert_well_formed(e, 1 << 30)
            continue
        assert Trace.from_json(t.to_json()) == t
        if t.op in ALL:  # replaying a parsed trace on its op: still only MoveErrors
            try:
                run(t.op, [m.to_dict() for m in t.moves], dict(t.decisions))
            except MoveError as e:
                assert_well_formed(e, len(t.moves))
