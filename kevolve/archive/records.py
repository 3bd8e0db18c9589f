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

from ..errors import ArchiveError
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


def _where(d: Mapping, table: str = "results") -> str:
    rid = d.get("id")
    return f"{table} row {rid}" if rid is not None else f"a {table} row"


def bad_row(d: Mapping, what: str, table: str = "results") -> ArchiveError:
    """The error for a row that SQLite accepts but kevolve cannot read (hand-edited, or
    written by something else): names the row and the column."""
    return ArchiveError(f"archive: {_where(d, table)}: {what}; the archive holds rows "
                        "kevolve did not write (repair or delete them, or use another --db)")


def loads(text, what: str = "a JSON column"):
    """json.loads for archive text: malformed or absurdly nested JSON is an ArchiveError."""
    from ..schedule.trace import too_deep

    try:
        v = json.loads(text)
    except (ValueError, TypeError, RecursionError) as e:
        raise ArchiveError(f"archive: {what} is not valid JSON ({str(e)[:120]})") from None
    if too_deep(v, 64):
        raise ArchiveError(f"archive: {what} nests JSON more than 64 deep")
    return v


def _json(d: Mapping, key: str, default, kind=None, table: str = "results"):
    v = d.get(key)
    if v is None:
        return default
    if isinstance(v, (str, bytes)):
        v = loads(v, f"{_where(d, table)}, column {key}")
    if kind is not None and not isinstance(v, kind):
        raise bad_row(d, f"column {key} holds {type(v).__name__}, not "
                      f"{getattr(kind, '__name__', 'the expected kind')}", table)
    return v


def _number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def result_of(row: Mapping) -> Result:
    """The Result a results row holds (a sqlite3.Row or a dict of columns); its run_hash is
    the Result's source_hash. Columns this version does not know are dropped; NULL or missing
    ones take the Result's defaults. A value of the wrong kind (text where a time belongs, a
    list where diagnostics belong) is an ArchiveError naming the row."""
    d = dict(row)
    d["times_ms"] = _json(d, "times_ms", [], list)
    d["diagnostics"] = _json(d, "diagnostics", {}, dict)
    d["source_hash"] = d.pop("run_hash", None)
    if not all(_number(t) for t in d["times_ms"]):
        raise bad_row(d, "column times_ms holds something other than numbers")
    if not isinstance(d.get("verdict"), str):
        raise bad_row(d, "column verdict is not text")
    for k in ("time_ms", "baseline_ms", "max_error", "seconds"):
        if d.get(k) is not None and not _number(d[k]):
            raise bad_row(d, f"column {k} holds {type(d[k]).__name__}, not a number")
    for k in ("message", "source_hash"):
        if d.get(k) is not None and not isinstance(d[k], str):
            raise bad_row(d, f"column {k} is not text")
    return Result.from_dict({k: v for k, v in d.items() if v is not None})


def result_dict(row: Mapping) -> dict:
    """A results row as the archive's verbs return it: where and how it ran, and the Result
    under "result"."""
    d = dict(row)
    seeds = _json(d, "seeds", [], list)
    if not all(isinstance(x, int) and not isinstance(x, bool) for x in seeds):
        raise bad_row(d, "column seeds holds something other than integers")
    shape = _json(d, "shape", {}, dict)
    if not all(isinstance(v, (int, float, str)) and not isinstance(v, bool)
               for v in shape.values()):
        raise bad_row(d, "column shape holds something other than sizes, scalars and names")
    for k in ("hardware", "backend"):
        if d.get(k) is not None and not isinstance(d[k], str):
            raise bad_row(d, f"column {k} is not text")
    return {"hardware": d.get("hardware"), "backend": d.get("backend"),
            "toolchain": _json(d, "toolchain", {}, dict), "run_hash": d.get("run_hash"),
            "shape": shape, "seeds": seeds,
            "created": d.get("created"), "origin": d.get("origin") or "",
            "trusted": d.get("trusted", 1), "result": result_of(d)}


def scored_of(row: Mapping) -> Scored:
    """A results row joined with its candidate (trace_json, candidate_id, parent_id,
    proposer) as the population's record."""
    if not isinstance(row["trace_json"], str):
        raise bad_row(dict(row), "its candidate's trace_json is not text")
    return Scored(row["trace_json"], result_of(row), row["candidate_id"], row["parent_id"],
                  row["proposer"])
