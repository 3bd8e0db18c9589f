"""The published JSON Schema (what the LLM proposer's tool definition uses) is valid JSON
Schema, accepts every move of every default trace, and rejects what layer 1 rejects for
shape reasons (unknown keys, missing arguments, wrong types, bad enums)."""

from __future__ import annotations

import json

import jsonschema
import pytest
from schedlib import ALL, small

from kevolve.schedule import MOVES, MoveError, apply, default_trace, initial
from kevolve.schedule.moves import json_schema, trace_schema

MOVE = jsonschema.Draft202012Validator(json_schema())
TRACE = jsonschema.Draft202012Validator(trace_schema())


def test_schemas_are_valid_json_schema():
    jsonschema.Draft202012Validator.check_schema(json_schema())
    jsonschema.Draft202012Validator.check_schema(trace_schema())
    assert json.loads(json.dumps(json_schema())) == json_schema()  # plain JSON data
    assert len(json_schema()["oneOf"]) == len(MOVES)


@pytest.mark.parametrize("name", ALL)
def test_default_traces_validate(name):
    op, dims = small(name)
    for t in (default_trace(op, dims), default_trace(op)):
        d = json.loads(t.to_json())
        TRACE.validate(d)
        for m in d["moves"]:
            MOVE.validate(m)  # `$NAME` references included
        for m in t.resolved():
            MOVE.validate(m)


def test_each_move_documents_itself():
    for spec in MOVES.values():
        assert spec.doc and set(spec.required) <= set(spec.args)


BAD = [
    ({"m": "inline", "stage": "e", "extra": 1}, "schema.unknown_arg"),
    ({"m": "split", "stage": "y", "axis": "j", "size": 16, "into": ["a", "b"], "x": 0},
     "schema.unknown_arg"),
    ({"m": "split", "stage": "y", "axis": "j"}, "schema.missing_arg"),
    ({"m": "bind", "stage": "y", "axis": "i", "to": "lanes"}, "schema.bad_value"),
    ({"m": "split", "stage": "y", "axis": "j", "size": "sixteen"}, "schema.bad_type"),
    ({"m": "split", "stage": "y", "axis": "j", "size": 0}, "schema.bad_value"),
    ({"m": "compute_at", "stage": "mx", "at": ["y"]}, "schema.bad_value"),
    ({"m": "inline", "stage": ""}, "schema.bad_type"),
    ({"m": "launch", "num_warps": True}, "schema.bad_type"),
    ({"m": "nope"}, "schema.unknown_move"),
]


@pytest.mark.parametrize("move,code", BAD, ids=[c for _, c in BAD])
def test_schema_and_layer_one_reject_the_same_shapes(move, code):
    assert not MOVE.is_valid(move)
    with pytest.raises(MoveError) as e:
        apply(initial(small("softmax")[0]), move, 0)
    assert e.value.code == code


def test_what_only_layer_one_checks():
    """JSON Schema cannot say "power of two" (and counts 16.0 as an integer): layer 1 does."""
    op = small("softmax")[0]
    for move, code in [({"m": "split", "stage": "y", "axis": "j", "size": 48},
                        "schema.not_pow2"),
                       ({"m": "split", "stage": "y", "axis": "j", "size": 16.0},
                        "schema.bad_type")]:
        assert MOVE.is_valid(move)
        with pytest.raises(MoveError) as e:
            apply(initial(op), move, 0)
        assert e.value.code == code
