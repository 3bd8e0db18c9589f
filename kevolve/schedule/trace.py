"""A Trace is a schedule as data: `{"version", "op", "moves": [...], "decisions": {...}}`.

Moves hold structure; numbers may be `"$NAME"` references into `decisions`, so a search can
mutate numbers without touching structure. JSON round trip is exact and canonical."""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field

from .errors import MoveError
from .moves import DECISION_PATTERN, MOVES

VERSION = 1


def _freeze(v):
    if isinstance(v, list):
        return tuple(_freeze(x) for x in v)
    return v


def _thaw(v):
    if isinstance(v, tuple):
        return [_thaw(x) for x in v]
    return v


MAX_DEPTH = 16  # a trace is {moves: [{m, args: [names]}]}: 4 deep; anything far deeper is junk


def too_deep(value, limit: int) -> bool:
    """True when lists and dicts nest more than `limit` deep (walked without recursion, so
    a hostile document cannot exhaust the stack)."""
    stack = [(value, 1)]
    while stack:
        v, depth = stack.pop()
        if isinstance(v, (list, tuple, dict)):
            if depth > limit:
                return True
            stack.extend((c, depth + 1) for c in (v.values() if isinstance(v, dict) else v))
    return False


@dataclass(frozen=True)
class Move:
    m: str
    args: tuple[tuple[str, object], ...]  # sorted (key, value); lists become tuples

    @staticmethod
    def of(d: dict, index: int | None = None) -> Move:
        if not isinstance(d, dict):
            raise MoveError(index, "schema.not_object", f"a move must be a JSON object, got "
                            f"{type(d).__name__}", 'write {"m": "split", ...}')
        name = d.get("m")
        if not isinstance(name, str) or name not in MOVES:
            raise MoveError(index, "schema.unknown_move", f"unknown move {name!r}",
                            f"use one of: {', '.join(MOVES)}")
        for k, v in d.items():  # keep Move hashable and its args sortable
            if not isinstance(k, str) or isinstance(v, dict) or (
                    isinstance(v, list) and any(isinstance(x, (dict, list)) for x in v)):
                raise MoveError(index, "schema.bad_type", f"{name}.{k} must be a name, a "
                                f"number or a list of names, got {v!r}", "")
        return Move(name, tuple(sorted((k, _freeze(v)) for k, v in d.items() if k != "m")))

    def get(self, key: str, default=None):
        for k, v in self.args:
            if k == key:
                return v
        return default

    def to_dict(self) -> dict:
        return {"m": self.m, **{k: _thaw(v) for k, v in self.args}}


@dataclass(frozen=True)
class Trace:
    op: str
    moves: tuple[Move, ...] = ()
    decisions: tuple[tuple[str, int], ...] = field(default=())
    version: int = VERSION

    @staticmethod
    def make(op: str, moves: list[dict], decisions: dict | None = None) -> Trace:
        return Trace(op, tuple(Move.of(m, i) for i, m in enumerate(moves)),
                     tuple(sorted((decisions or {}).items())))

    def to_dict(self) -> dict:
        return {"version": self.version, "op": self.op,
                "moves": [m.to_dict() for m in self.moves],
                "decisions": dict(self.decisions)}

    def to_json(self, indent: int | None = None) -> str:
        return json.dumps(self.to_dict(), indent=indent, sort_keys=indent is None)

    @staticmethod
    def from_dict(d) -> Trace:
        if not isinstance(d, dict):
            raise MoveError(None, "schema.not_object", "a trace must be a JSON object",
                            '{"version": 1, "op": ..., "moves": [...], "decisions": {}}')
        if too_deep(d, MAX_DEPTH):
            raise MoveError(None, "schema.too_deep", f"the trace nests lists or objects more "
                            f"than {MAX_DEPTH} deep", "a move's arguments are names, numbers "
                            "and short lists")
        if d.get("version", VERSION) != VERSION:
            raise MoveError(None, "schema.version", f"trace version {d.get('version')!r} is "
                            f"not supported", f"use version {VERSION}")
        moves = d.get("moves", [])
        if not isinstance(moves, list):
            raise MoveError(None, "schema.moves", "moves must be a list", "")
        dec = d.get("decisions", {}) or {}
        if not isinstance(dec, dict) or not all(
                isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool)
                for k, v in dec.items()):
            raise MoveError(None, "schema.decisions", "decisions must map names to integers",
                            '{"$BN": 1024}')
        bad = next((k for k in dec if not re.fullmatch(DECISION_PATTERN, k)), None)
        if bad is not None:
            raise MoveError(None, "schema.decisions", f"decision name {bad[:80]!r} is not $ and "
                            "word characters (at most 64)", '{"$BN": 1024}')
        op = d.get("op", "")
        if not isinstance(op, str):
            raise MoveError(None, "schema.op", "op must be a string", "")
        return Trace(op, tuple(Move.of(m, i) for i, m in enumerate(moves)),
                     tuple(sorted(dec.items())))

    @staticmethod
    def from_json(text: str) -> Trace:
        if not isinstance(text, (str, bytes, bytearray)):
            raise MoveError(None, "schema.json", f"a trace is JSON text, not "
                            f"{type(text).__name__}", "")
        try:
            d = json.loads(text)
        except (ValueError, TypeError, RecursionError) as e:  # ValueError: JSONDecodeError
            raise MoveError(None, "schema.json", f"not valid JSON: {e}", "") from None
        return Trace.from_dict(d)

    def resolved(self) -> list[dict]:
        """Moves with `$NAME` references replaced by their decision values."""
        dec = dict(self.decisions)
        out = []
        for i, m in enumerate(self.moves):
            d = m.to_dict()
            for k, v in list(d.items()):
                if isinstance(v, str) and v.startswith("$") and k != "m":
                    if v not in dec:
                        raise MoveError(i, "schema.decision", f"{k} refers to undefined "
                                        f"decision {v}", f'add "{v}" to decisions')
                    d[k] = dec[v]
            out.append(d)
        return out

    def with_decisions(self, **changes: int) -> Trace:
        dec = dict(self.decisions)
        dec.update(changes)
        return Trace(self.op, self.moves, tuple(sorted(dec.items())), self.version)

    def with_moves(self, moves) -> Trace:
        return Trace(self.op, tuple(moves), self.decisions, self.version)

    @property
    def hash(self) -> str:
        return hashlib.sha256(self.to_json().encode()).hexdigest()[:16]

    def pretty(self) -> str:
        lines = [f"trace for {self.op} (v{self.version})"]
        for i, m in enumerate(self.moves):
            args = ", ".join(f"{k}={json.dumps(_thaw(v))}" for k, v in m.args)
            lines.append(f"  {i:2d}. {m.m}({args})")
        if self.decisions:
            lines.append("  decisions: " + ", ".join(f"{k}={v}" for k, v in self.decisions))
        return "\n".join(lines)
