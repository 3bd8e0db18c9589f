"""What the archive stores, as values: the identities it keys rows by (an op's IR hash, a
trace's canonical hash, a run's RunKey), and the conversion between result rows and
`Result`s. Pure functions on plain data; no connection is opened here.

Rows are read tolerantly, as OpenEvolve reads its program records: a column a newer schema
added is ignored, one an older schema lacked takes the Result's default."""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, replace

from ..evaluate.job import Result

__all__ = ["REUSED", "Result", "RunKey", "Scored", "canonical_trace", "dumps", "ir_hash",
           "name_of", "real", "result_columns", "result_dict", "result_of", "reused",
           "scored_of"]


# --- identities ----------------------------------------------------------------------------

def ir_hash(ir_text: str) -> str:
    """The identity of an op: sha256 of its printed IR (kevolve.ir.printer.op_text)."""
    return hashlib.sha256(ir_text.encode()).hexdigest()


def name_of(ref: str) -> str:
    """The archived name of an op reference: a library name as is, or the `name` part of a
    spec reference `path/spec.py:name` (ops are archived under Op.name)."""
    path, sep, name = ref.rpartition(":")
    return name if sep and path.endswith(".py") else ref


def canonical_trace(trace_json) -> tuple[str, str]:
    """(canonical JSON, hash) of a trace, so formatting and key order do not matter: the
    Trace's own canonical form and `Trace.hash`. Text that is not a valid Trace (a proposer's
    junk, recorded with its legality failure) is canonicalised as plain JSON, or kept as is."""
    from ..schedule.errors import MoveError
    from ..schedule.trace import Trace

    if isinstance(trace_json, Trace):
        return trace_json.to_json(), trace_json.hash
    if isinstance(trace_json, dict):
        trace_json = json.dumps(trace_json)
    try:
        t = Trace.from_json(trace_json)
    except MoveError:
        try:
            text = json.dumps(json.loads(trace_json), sort_keys=True)
        except (ValueError, TypeError, RecursionError):
            text = str(trace_json)
        return text, hashlib.sha256(text.encode()).hexdigest()[:16]
    return t.to_json(), t.hash


@dataclass(frozen=True)
class Scored:
    """A trace with its evaluation, as the archive returns it and the search's population
    and proposers see it."""

    trace_json: str
    result: Result
    candidate_id: int | None = None
    parent_id: int | None = None
    proposer: str = ""


@dataclass(frozen=True)
class RunKey:
    """What ran: the generated source (KernelSource.hash), the backend, the toolchain's
    versions and the hardware. Two candidates with one key ran identical code, so one's
    result stands for the other's; a result whose key differs from the one its trace gets
    now is stale. `stable_hash()` is stored as `results.run_hash` (and `Result.source_hash`):
    its formula is frozen, since changing it would make every archived result stale.

    `toolchain` may be given as a dict; it is kept as sorted (name, version) pairs so that
    the key is hashable."""

    source_hash: str
    backend: str
    toolchain: tuple[tuple[str, object], ...]
    hardware: str

    def __post_init__(self):
        pairs = self.toolchain.items() if isinstance(self.toolchain, Mapping) else self.toolchain
        object.__setattr__(self, "toolchain", tuple(sorted(pairs)))

    def stable_hash(self) -> str:
        key = json.dumps([self.source_hash, self.backend, dict(self.toolchain), self.hardware],
                         sort_keys=True)
        return hashlib.sha256(key.encode()).hexdigest()[:24]


# --- the "reused" marker -------------------------------------------------------------------

REUSED = "[reused: identical generated code]"


def reused(prev: Result) -> Result:
    """Another candidate's result, for a candidate whose generated code is identical, marked
    as reused once (the result it copies may be a copy already)."""
    if REUSED in prev.message:
        return prev
    return replace(prev, message=f"{prev.message} {REUSED}".strip())


# --- JSON columns --------------------------------------------------------------------------

def _plain(v):
    """JSON fallback for numpy scalars and arrays, tuples, paths."""
    if hasattr(v, "tolist"):
        return v.tolist()
    if isinstance(v, (set, frozenset)):
        return sorted(v)
    return str(v)


def dumps(v) -> str:
    """A JSON column's text: sorted keys, numpy values as plain ones."""
    return json.dumps(v, sort_keys=True, default=_plain)


def real(v) -> float | None:
    """A float for a REAL column; NaN and None become NULL."""
    if v is None:
        return None
    v = float(v)
    return None if math.isnan(v) else v


# --- rows <-> Result -----------------------------------------------------------------------

def result_columns(result: Result) -> dict:
    """The `results` columns that hold a Result (the caller adds candidate, hardware,
    backend, toolchain, run_hash, shape, seeds and created)."""
    return {"verdict": result.verdict, "time_ms": real(result.time_ms),
            "times_ms": dumps(list(result.times_ms)), "baseline_ms": real(result.baseline_ms),
            "max_error": real(result.max_error), "message": result.message or "",
            "diagnostics": dumps(result.diagnostics or {}),
            "seconds": float(result.seconds or 0.0)}


def _json(d: dict, key: str, default):
    v = d.get(key)
    if v is None:
        return default
    return json.loads(v) if isinstance(v, (str, bytes)) else v


def result_of(row: Mapping) -> Result:
    """The Result a results row holds (a sqlite3.Row or a dict of columns); its run_hash is
    the Result's source_hash. Columns this version does not know are dropped; NULL or missing
    ones take the Result's defaults."""
    d = dict(row)
    d["times_ms"] = _json(d, "times_ms", [])
    d["diagnostics"] = _json(d, "diagnostics", {})
    d["source_hash"] = d.pop("run_hash", None)
    return Result.from_dict({k: v for k, v in d.items() if v is not None})


def result_dict(row: Mapping) -> dict:
    """A results row as the archive's verbs return it: where and how it ran, and the Result
    under "result"."""
    d = dict(row)
    return {"hardware": d.get("hardware"), "backend": d.get("backend"),
            "toolchain": _json(d, "toolchain", {}), "run_hash": d.get("run_hash"),
            "shape": _json(d, "shape", {}), "seeds": _json(d, "seeds", []),
            "created": d.get("created"), "origin": d.get("origin") or "",
            "trusted": d.get("trusted", 1), "result": result_of(d)}


def scored_of(row: Mapping) -> Scored:
    """A results row joined with its candidate (trace_json, candidate_id, parent_id,
    proposer) as the population's record."""
    return Scored(row["trace_json"], result_of(row), row["candidate_id"], row["parent_id"],
                  row["proposer"])
