"""The Trace JSON round trip is a law: exact, canonical and hash-stable, for any trace the
move grammar allows (including `$NAME` decision references)."""

from __future__ import annotations

import json
import random

import jsonschema
from hypothesis import given, settings
from hypothesis import strategies as st
from movegen import spec_move, spec_trace

from kevolve.schedule import MoveError, Trace
from kevolve.schedule.apply import check_schema
from kevolve.schedule.moves import json_schema, trace_schema

FAST = settings(max_examples=200, deadline=None)
MOVE_SCHEMA = jsonschema.Draft202012Validator(json_schema())
TRACE_SCHEMA = jsonschema.Draft202012Validator(trace_schema())


@FAST
@given(spec_trace())
def test_json_round_trip_is_exact(t3):
    op, moves, dec = t3
    t = Trace.make(op, moves, dec)
    assert Trace.from_json(t.to_json()) == t
    assert Trace.from_dict(t.to_dict()) == t
    assert Trace.from_json(t.to_json(indent=2)) == t
    assert Trace.from_dict(json.loads(t.to_json())) == t
    # what goes out is what came in
    assert t.to_dict() == {"version": 1, "op": op, "moves": moves, "decisions": dec}
    assert hash(Trace.from_json(t.to_json())) == hash(t)


@FAST
@given(spec_trace(), st.integers(0, 2**32))
def test_to_json_is_canonical(t3, seed):
    """Key order of moves and decisions does not matter: equal traces, one string, one hash."""
    op, moves, dec = t3
    rnd = random.Random(seed)

    def shuffled(d: dict) -> dict:
        items = list(d.items())
        rnd.shuffle(items)
        return dict(items)

    a = Trace.make(op, moves, dec)
    b = Trace.make(op, [shuffled(m) for m in moves], shuffled(dec))
    assert a == b
    assert a.to_json() == b.to_json()
    assert a.hash == b.hash == Trace.from_json(a.to_json()).hash
    assert len(a.hash) == 16 and int(a.hash, 16) >= 0
    assert a.to_json() == json.dumps(json.loads(a.to_json()), sort_keys=True)


@FAST
@given(spec_trace())
def test_traces_from_the_grammar_validate_against_the_published_schema(t3):
    op, moves, dec = t3
    t = Trace.make(op, moves, dec)
    TRACE_SCHEMA.validate(json.loads(t.to_json()))
    for m in t.resolved():
        assert not any(isinstance(v, str) and v.startswith("$") for v in m.values())


@FAST
@given(spec_move(refs=False))
def test_layer_one_accepts_what_the_grammar_allows(move):
    check_schema(move, 0)  # raises MoveError if the grammar and layer 1 disagree
    MOVE_SCHEMA.validate(move)


@FAST
@given(spec_trace())
def test_resolved_replaces_every_reference(t3):
    op, moves, dec = t3
    t = Trace.make(op, moves, dec)
    for m, r in zip(moves, t.resolved()):
        assert r == {k: dec[v] if isinstance(v, str) and v.startswith("$") and k != "m" else v
                     for k, v in m.items()}
    changed = t.with_decisions(**{k: 7 for k in dec})
    assert changed.moves == t.moves and dict(changed.decisions) == {k: 7 for k in dec}


def test_undefined_reference_names_its_move():
    t = Trace.make("softmax", [{"m": "inline", "stage": "e"},
                               {"m": "split", "stage": "y", "axis": "j", "size": "$BN"}])
    try:
        t.resolved()
    except MoveError as e:
        assert (e.move_index, e.code) == (1, "schema.decision") and "$BN" in e.hint
    else:
        raise AssertionError("an undefined $BN resolved")
