"""The open archive: one SQLite connection, its transactions, and the verbs that read and
write ops, candidates, results, ceilings, token usage and runs. Only this package issues
SQL; the search and the commands call these verbs.

Guarantees:
- The file is recognised before anything is written to it (schema.inspect_file and
  schema.validate): a file that is not SQLite, is corrupt, belongs to another application
  or has a schema newer than this code raises ArchiveError naming the file.
- Every write is one `BEGIN IMMEDIATE` transaction (WAL, synchronous=NORMAL, a 30 s busy
  timeout): two processes on one archive both progress, and a process killed with SIGKILL
  loses only the transaction it had not committed.
- A candidate's standing on a (backend, hardware) pair is its latest result there.
"""

from __future__ import annotations

import contextlib
import functools
import os
import sqlite3
import threading
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

from . import schema
from .records import (
    REUSED,
    Result,
    Scored,
    bad_row,
    canonical_trace,
    dumps,
    ir_hash,
    loads,
    name_of,
    result_columns,
    result_dict,
    result_of,
    scored_of,
)
from .schema import APPLICATION_ID, TABLES, ArchiveError

BUSY_TIMEOUT_S = 30.0


def describe(e: sqlite3.Error) -> str:
    """An SQLite error in words a user can act on (locked too long, corrupt, or as is)."""
    text = str(e)
    if "locked" in text or "busy" in text:
        return (f"it stayed locked by another process for more than {BUSY_TIMEOUT_S:.0f} s "
                f"({text})")
    if "malformed" in text or "not a database" in text:
        return f"the file is corrupt ({text}); restore it from a copy"
    return text


def guarded(method):
    """Turn sqlite3 errors into ArchiveError naming the file."""

    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        try:
            return method(self, *args, **kwargs)
        except sqlite3.Error as e:
            raise ArchiveError(f"archive {self.path}: {describe(e)}") from e

    return wrapper


# --- the store -----------------------------------------------------------------------------

def _wal(conn: sqlite3.Connection, timeout_s: float = BUSY_TIMEOUT_S) -> None:
    """Put the file in WAL mode, waiting up to `timeout_s` for other processes. SQLite
    answers a switch that meets another connection's switch or commit with "database is
    locked" at once, without its busy handler (the two would deadlock), so two processes
    creating one archive at the same moment need this loop: when the other has switched,
    the mode is already WAL."""
    deadline, pause = time.monotonic() + timeout_s, 0.001
    while True:
        try:
            if conn.execute("PRAGMA journal_mode").fetchone()[0].lower() != "wal":
                conn.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as e:
            if "locked" not in str(e) or time.monotonic() >= deadline:
                raise
        time.sleep(pause)
        pause = min(2 * pause, 0.05)


class Store:
    """An open archive file. `Store(path)` creates the file (and its folder) when missing
    unless create=False; readonly=True never writes (an older schema is migrated in memory).
    Thread-safe: one connection behind a lock. `_read` and `_write` are the package's only
    doors to SQL (merge.py uses them too); kevolve.archive.Archive adds merge, export and
    import to these verbs."""

    def __init__(self, path: str | os.PathLike, *, create: bool = True,
                 readonly: bool = False):
        self.path = Path(path)
        self.readonly = readonly
        self._lock = threading.RLock()
        state = schema.inspect_file(self.path)
        if state == "missing":
            if readonly or not create:
                raise ArchiveError(f"no archive at {self.path} (kevolve evolve creates one; "
                                   "pass --db PATH to use another)")
            self.path.parent.mkdir(parents=True, exist_ok=True)
        # "blank" may still be an archive whose first transactions are only in its WAL: the
        # connection below reads through the WAL and decides.
        try:
            self._conn = self._open_readonly() if readonly else self._open()
        except sqlite3.Error as e:
            raise ArchiveError(f"archive {self.path}: {describe(e)}; nothing was written to "
                               "it") from e

    # opening

    def _open(self) -> sqlite3.Connection:
        conn = sqlite3.connect(str(self.path), timeout=BUSY_TIMEOUT_S, isolation_level=None,
                               check_same_thread=False)
        try:
            conn.row_factory = sqlite3.Row
            conn.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
            conn.execute("PRAGMA foreign_keys = ON")
            schema.validate(conn, self.path)  # before anything that writes (journal_mode does)
            _wal(conn)
            conn.execute("PRAGMA synchronous = NORMAL")
            if schema.needs_migration(conn):
                conn.execute("BEGIN IMMEDIATE")
                try:
                    schema.migrate(conn, schema.validate(conn, self.path))  # again, under the lock
                    conn.execute("COMMIT")
                except BaseException:
                    if conn.in_transaction:
                        conn.execute("ROLLBACK")
                    raise
        except BaseException:
            conn.close()
            raise
        return conn

    def _open_readonly(self) -> sqlite3.Connection:
        # With no -wal file every committed page is in the main file: read it immutably (no
        # locks, no side files). Otherwise read through the WAL (SQLite may add a -shm file).
        wal = Path(f"{self.path}-wal").exists()
        uri = self.path.resolve().as_uri() + ("?mode=ro" if wal else "?mode=ro&immutable=1")
        conn = sqlite3.connect(uri, uri=True, timeout=BUSY_TIMEOUT_S, isolation_level=None,
                               check_same_thread=False)
        try:
            conn.row_factory = sqlite3.Row
            version = schema.validate(conn, self.path)
            if version == 0:
                raise ArchiveError(f"{self.path} is empty, not a kevolve archive")
            if version < schema.schema_version():  # migrate a copy in memory, never the file
                mem = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
                conn.backup(mem)
                conn.close()
                conn = mem
                conn.row_factory = sqlite3.Row
                conn.execute("BEGIN")
                schema.migrate(conn, version)
                conn.execute("COMMIT")
            conn.execute("PRAGMA query_only = ON")
        except BaseException:
            conn.close()
            raise
        return conn

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str(self.path)!r})"

    @contextlib.contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """One transaction that holds the write lock from its start (BEGIN IMMEDIATE), so a
        read followed by a write never meets a concurrent writer's snapshot."""
        if self.readonly:
            raise ArchiveError(f"archive {self.path} was opened read-only")
        with self._lock:
            conn = self._connection()
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            raise ArchiveError(f"archive {self.path} is closed")
        return self._conn

    def _read(self, sql: str, args=()) -> list[sqlite3.Row]:
        with self._lock:
            return self._connection().execute(sql, args).fetchall()

    # ops and candidates

    def op_id(self, op) -> int:
        """The id of an Op (inserted on first sight), keyed by the sha256 of op_text(op)."""
        from ..ir.printer import op_text

        return self.op_id_for(op.name, op_text(op))

    @guarded
    def op_id_for(self, name: str, ir_text: str) -> int:
        h = ir_hash(ir_text)
        rows = self._read("SELECT id FROM ops WHERE ir_hash = ?", (h,))
        if rows:
            return rows[0][0]
        with self._write() as c:
            c.execute("INSERT OR IGNORE INTO ops (name, ir_hash, ir_text, created) "
                      "VALUES (?, ?, ?, ?)", (name, h, ir_text, time.time()))
            return c.execute("SELECT id FROM ops WHERE ir_hash = ?", (h,)).fetchone()[0]

    @guarded
    def add_candidate(self, op_id: int, trace_json, parent_id: int | None = None,
                      proposer: str = "", generation: int = 0,
                      note: str = "") -> tuple[int, bool]:
        """(id, is_new). A trace already archived for this op (same canonical hash) returns
        its existing id. After a kill, a candidate may exist without a result: check
        `evaluated()`, not is_new, to decide whether to evaluate it."""
        text, th = canonical_trace(trace_json)
        with self._write() as c:
            cur = c.execute(
                "INSERT OR IGNORE INTO candidates (op_id, trace_hash, trace_json, parent_id, "
                "proposer, generation, note, created) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (op_id, th, text, parent_id, proposer, int(generation), note, time.time()))
            if cur.rowcount == 1:
                return cur.lastrowid, True
            row = c.execute("SELECT id FROM candidates WHERE op_id = ? AND trace_hash = ?",
                            (op_id, th)).fetchone()
            return row[0], False

    @guarded
    def candidate(self, candidate_id: int) -> dict | None:
        """A candidate with its op: id, op_id, op_name, ir_hash, ir_text, trace_json,
        trace_hash, parent_id, proposer, generation, note, created."""
        rows = self._read(
            "SELECT c.*, o.name AS op_name, o.ir_hash, o.ir_text FROM candidates c "
            "JOIN ops o ON o.id = c.op_id WHERE c.id = ?", (candidate_id,))
        return dict(rows[0]) if rows else None

    @guarded
    def results(self, candidate_id: int) -> list[dict]:
        """Every result of a candidate, oldest first: hardware, backend, toolchain, run_hash,
        shape, seeds, created, and the Result under "result"."""
        rows = self._read("SELECT * FROM results WHERE candidate_id = ? ORDER BY created, id",
                          (candidate_id,))
        return [result_dict(r) for r in rows]

    # results

    @guarded
    def add_result(self, candidate_id: int, hardware: str, backend: str, toolchain: dict,
                   result: Result, run_hash: str | None = None, shape: dict | None = None,
                   seeds: Iterable[int] = ()) -> int:
        """Record one evaluation. run_hash defaults to result.source_hash."""
        run_hash = result.source_hash if run_hash is None else run_hash
        cols = result_columns(result)
        with self._write() as c:
            cur = c.execute(
                "INSERT INTO results (candidate_id, hardware, backend, toolchain, run_hash, "
                "verdict, time_ms, times_ms, baseline_ms, max_error, message, diagnostics, "
                "shape, seeds, seconds, created) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (candidate_id, hardware, backend, dumps(toolchain or {}), run_hash,
                 cols["verdict"], cols["time_ms"], cols["times_ms"], cols["baseline_ms"],
                 cols["max_error"], cols["message"], cols["diagnostics"], dumps(shape or {}),
                 dumps(list(seeds)), cols["seconds"], time.time()))
            return cur.lastrowid

    @guarded
    def find_run(self, op_id: int, backend: str, hardware: str,
                 run_hash: str | None) -> Result | None:
        """The latest result recorded for an identical run (same generated code, backend and
        toolchain) of this op on this hardware, or None."""
        if run_hash is None:
            return None
        rows = self._read(
            "SELECT r.* FROM results r JOIN candidates c ON c.id = r.candidate_id "
            "WHERE r.run_hash = ? AND r.backend = ? AND r.hardware = ? AND c.op_id = ? "
            "AND r.trusted = 1 ORDER BY r.created DESC, r.id DESC LIMIT 1",
            (run_hash, backend, hardware, op_id))
        return result_of(rows[0]) if rows else None

    @guarded
    def evaluated(self, op_id: int, backend: str, hardware: str) -> set[int]:
        """Ids of this op's candidates with a result on (backend, hardware)."""
        rows = self._read(
            "SELECT DISTINCT r.candidate_id FROM results r JOIN candidates c "
            "ON c.id = r.candidate_id WHERE c.op_id = ? AND r.backend = ? AND r.hardware = ? "
            "AND r.trusted = 1", (op_id, backend, hardware))
        return {r[0] for r in rows}

    @guarded
    def in_flight(self, op_id: int) -> list[tuple[str, str, int | None]]:
        """(trace_json, note, parent_id) of this op's candidates with no result anywhere,
        oldest first: those a killed search was evaluating (or that another search on this
        archive is evaluating right now)."""
        rows = self._read("SELECT trace_json, note, parent_id FROM candidates c WHERE op_id = ? "
                          "AND NOT EXISTS (SELECT 1 FROM results r WHERE r.candidate_id = c.id) "
                          "ORDER BY id", (op_id,))
        return [(r[0], r[1], r[2]) for r in rows]

    def _latest(self, where: str, args: tuple) -> list[sqlite3.Row]:
        """The latest result of each (candidate, backend, hardware) matching `where`, in the
        order candidates were first evaluated there. A passing result without a time (a
        correctness-only check) never hides a timed one: it would erase the candidate's
        time from the population on resume. Results merged from elsewhere and not verified
        here (`trusted` != 1) are never among them: they are claims, not measurements."""
        part = "PARTITION BY r.candidate_id, r.backend, r.hardware"
        untimed = "(r.verdict = 'ok' AND r.time_ms IS NULL)"
        rows = self._read(
            "WITH latest AS (SELECT r.*, c.op_id, c.trace_json, c.trace_hash, c.parent_id, "
            "c.proposer, c.generation, c.note, o.name AS op_name, o.ir_hash, "
            f"row_number() OVER ({part} ORDER BY {untimed}, r.created DESC, r.id DESC) AS rn, "
            f"min(r.created) OVER ({part}) AS first_created, min(r.id) OVER ({part}) AS first_id "
            "FROM results r JOIN candidates c ON c.id = r.candidate_id "
            f"JOIN ops o ON o.id = c.op_id WHERE ({where}) AND r.trusted = 1) "
            "SELECT * FROM latest WHERE rn = 1 ORDER BY first_created, first_id", args)
        for r in rows:  # a row kevolve cannot read is an ArchiveError naming it, here
            result_dict(r)
            scored_of(r)
            if not isinstance(r["op_name"], str) or not isinstance(r["created"], (int, float)):
                raise bad_row(dict(r), "its op name or creation time is of the wrong kind")
        return rows

    @staticmethod
    def _where(op_name: str, backend: str | None, hardware: str | None) -> tuple[str, tuple]:
        clauses, args = ["o.name = ?"], [name_of(op_name)]
        if backend is not None:
            clauses.append("r.backend = ?")
            args.append(backend)
        if hardware is not None:
            clauses.append("r.hardware = ?")
            args.append(hardware)
        return " AND ".join(clauses), tuple(args)

    @guarded
    def scored(self, op_id: int, backend: str, hardware: str) -> list[Scored]:
        """Every evaluated candidate of this op on (backend, hardware), oldest first, each
        with its latest result there."""
        rows = self._latest("c.op_id = ? AND r.backend = ? AND r.hardware = ?",
                            (op_id, backend, hardware))
        return [scored_of(r) for r in rows]

    @guarded
    def best_record(self, op_name: str, backend: str | None,
                    hardware: str | None = None) -> dict | None:
        """The fastest ok candidate (lowest median time_ms of its latest result) of every op
        with this name (or spec reference `path/spec.py:name`), with everything known about
        it; None if there is none."""
        rows = [r for r in self._latest(*self._where(op_name, backend, hardware))
                if r["verdict"] == "ok" and r["time_ms"] is not None]
        if not rows:
            return None
        row = min(rows, key=lambda r: r["time_ms"])  # stable: the earliest of equals
        d = result_dict(row)
        d.update(candidate_id=row["candidate_id"], op=row["op_name"], ir_hash=row["ir_hash"],
                 trace_json=row["trace_json"], trace_hash=row["trace_hash"],
                 parent_id=row["parent_id"], proposer=row["proposer"],
                 generation=row["generation"], note=row["note"])
        return d

    @guarded
    def best_by_shape(self, op_name: str, backend: str | None,
                      hardware: str | None = None) -> list[dict]:
        """best_record per distinct shape the op was searched at (shape buckets: the best
        kernel for a training batch is not the best for a serving request), in the order
        the shapes were first evaluated."""
        best: dict[str, sqlite3.Row] = {}
        for r in self._latest(*self._where(op_name, backend, hardware)):
            if r["verdict"] != "ok" or r["time_ms"] is None:
                continue
            key = r["shape"] or "{}"
            if key not in best or r["time_ms"] < best[key]["time_ms"]:
                best[key] = r
        out = []
        for row in best.values():
            d = result_dict(row)
            d.update(candidate_id=row["candidate_id"], op=row["op_name"],
                     trace_json=row["trace_json"])
            out.append(d)
        return out

    @guarded
    def fastest(self, op_name: str, backend: str | None, hardware: str | None = None,
                k: int = 1) -> list[Scored]:
        """The k fastest ok candidates, fastest first, one per distinct generated code."""
        rows = sorted((r for r in self._latest(*self._where(op_name, backend, hardware))
                       if r["verdict"] == "ok" and r["time_ms"] is not None),
                      key=lambda r: r["time_ms"])
        out, seen = [], set()
        for r in rows:
            if r["run_hash"] is not None and r["run_hash"] in seen:
                continue
            seen.add(r["run_hash"])
            out.append(scored_of(r))
            if len(out) == k:
                break
        return out

    @guarded
    def scored_by_name(self, op_name: str, backend: str | None,
                       hardware: str | None = None) -> list[Scored]:
        """Every evaluated candidate of the op (by name) with its latest result, oldest
        first."""
        return [scored_of(r) for r in self._latest(*self._where(op_name, backend, hardware))]

    def best(self, op_name: str, backend: str | None,
             hardware: str | None = None) -> Scored | None:
        """The fastest ok candidate of the op on the backend (any hardware if None)."""
        d = self.best_record(op_name, backend, hardware)
        if d is None:
            return None
        return Scored(d["trace_json"], d["result"], d["candidate_id"], d["parent_id"],
                      d["proposer"])

    @guarded
    def history(self, op_name: str, backend: str | None = None,
                hardware: str | None = None) -> list[dict]:
        """One row per evaluated candidate, in evaluation order: index (1-based within its
        backend and hardware), candidate_id, backend, hardware, proposer, generation,
        parent_id, verdict, time_ms, best_ms (best so far on that backend and hardware),
        improved, reused (another candidate's result for identical code), created."""
        out, best, count = [], {}, {}
        for r in self._latest(*self._where(op_name, backend, hardware)):
            key = (r["backend"], r["hardware"])
            count[key] = count.get(key, 0) + 1
            t = r["time_ms"] if r["verdict"] == "ok" else None
            improved = t is not None and (key not in best or t < best[key])
            if improved:
                best[key] = t
            out.append({"index": count[key], "candidate_id": r["candidate_id"],
                        "backend": r["backend"], "hardware": r["hardware"],
                        "proposer": r["proposer"], "generation": r["generation"],
                        "parent_id": r["parent_id"], "verdict": r["verdict"], "time_ms": t,
                        "best_ms": best.get(key), "improved": improved,
                        "reused": REUSED in (r["message"] or ""),
                        "created": r["created"]})
        return out

    @guarded
    def op_names(self) -> list[str]:
        return [r[0] for r in self._read("SELECT DISTINCT name FROM ops ORDER BY name")]

    # hardware, usage, runs

    @guarded
    def hardware_names(self) -> list[str]:
        return [r[0] for r in self._read("SELECT hardware FROM results UNION "
                                         "SELECT name FROM hardware ORDER BY 1")]

    @guarded
    def set_ceiling(self, hardware: str, key: str, value) -> None:
        """Record a measured ceiling (e.g. copy GB/s, bf16 matmul TFLOP/s); JSON values."""
        with self._write() as c:
            c.execute("INSERT INTO hardware (name, key, value, measured) VALUES (?, ?, ?, ?) "
                      "ON CONFLICT (name, key) DO UPDATE SET value = excluded.value, "
                      "measured = excluded.measured", (hardware, key, dumps(value), time.time()))

    @guarded
    def set_baselines(self, op_name: str, shape: dict, hardware: str, toolchain: str,
                      times: dict) -> None:
        """Record baseline times (kind -> ms: torch eager, torch.compile) measured now for
        an op at a shape on a hardware with a toolchain (e.g. "torch 2.13"); the latest
        measurement of each kind stands. None times are skipped."""
        with self._write() as c:
            for kind, t in times.items():
                if t is None:
                    continue
                c.execute("INSERT INTO baselines (op_name, shape, hardware, toolchain, kind, "
                          "time_ms, measured) VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT "
                          "(op_name, shape, hardware, toolchain, kind) DO UPDATE SET "
                          "time_ms = excluded.time_ms, measured = excluded.measured",
                          (op_name, dumps(shape), hardware, toolchain, kind, float(t),
                           time.time()))

    @guarded
    def baselines(self, op_name: str) -> list[dict]:
        """The op's recorded baselines: one dict per (shape, hardware, toolchain, kind)."""
        rows = self._read("SELECT * FROM baselines WHERE op_name = ? ORDER BY hardware, "
                          "toolchain, shape, kind", (op_name,))
        return [{"op": r["op_name"], "shape": loads(r["shape"], "a baselines shape"),
                 "hardware": r["hardware"], "toolchain": r["toolchain"], "kind": r["kind"],
                 "time_ms": r["time_ms"], "measured": r["measured"]} for r in rows]

    @guarded
    def ceilings(self, hardware: str) -> dict:
        rows = self._read("SELECT key, value FROM hardware WHERE name = ? ORDER BY key",
                          (hardware,))
        return {r["key"]: loads(r["value"], f"ceiling {r['key']!r} of {hardware!r}")
                for r in rows}

    @guarded
    def record_usage(self, proposer: str, model: str, input_tokens: int, output_tokens: int,
                     candidate_id: int | None = None, note: str = "") -> int:
        with self._write() as c:
            return c.execute(
                "INSERT INTO usage (candidate_id, proposer, model, input_tokens, output_tokens, "
                "note, created) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (candidate_id, proposer, model, int(input_tokens), int(output_tokens), note,
                 time.time())).lastrowid

    @guarded
    def untrusted(self) -> list[dict]:
        """Results merged from another archive and not yet verified here, oldest first:
        result_id, candidate_id, op (name), trace_json, and the result_dict fields."""
        rows = self._read("SELECT r.*, c.trace_json, o.name AS op_name FROM results r "
                          "JOIN candidates c ON c.id = r.candidate_id JOIN ops o "
                          "ON o.id = c.op_id WHERE r.trusted = 0 ORDER BY r.id")
        return [{**result_dict(r), "result_id": r["id"], "candidate_id": r["candidate_id"],
                 "op": r["op_name"], "trace_json": r["trace_json"]} for r in rows]

    @guarded
    def mark_verified(self, result_id: int) -> None:
        """A merged result whose candidate was measured again here: `trusted` = -1 (checked;
        the new measurement counts, this one never does)."""
        with self._write() as c:
            c.execute("UPDATE results SET trusted = -1 WHERE id = ? AND trusted = 0",
                      (result_id,))

    @guarded
    def usage_totals(self) -> dict:
        """{(proposer, model): {"calls", "input_tokens", "output_tokens"}}."""
        rows = self._read("SELECT proposer, model, count(*), sum(input_tokens), "
                          "sum(output_tokens) FROM usage GROUP BY proposer, model")
        return {(r[0], r[1]): {"calls": r[2], "input_tokens": r[3], "output_tokens": r[4]}
                for r in rows}

    @guarded
    def record_prompt(self, proposer: str, transport: str, model: str,
                      temperature: float | None, seed: int | None, input_tokens: int,
                      output_tokens: int, latency_s: float, prompt: str, answer: str,
                      note: str = "") -> int:
        """Archive one exchange of an LLM proposer (`prompt`: the conversation sent, as a
        JSON list of {role, content}); its id, for link_prompt."""
        with self._write() as c:
            return c.execute(
                "INSERT INTO prompts (proposer, transport, model, temperature, seed, "
                "input_tokens, output_tokens, latency_s, prompt, answer, note, created) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (proposer, transport, model, temperature, seed, int(input_tokens),
                 int(output_tokens), float(latency_s), prompt, answer, note,
                 time.time())).lastrowid

    @guarded
    def link_prompt(self, prompt_id: int, candidate_id: int) -> None:
        """Record that an exchange produced a candidate."""
        with self._write() as c:
            c.execute("INSERT OR IGNORE INTO prompt_candidates (prompt_id, candidate_id) "
                      "VALUES (?, ?)", (prompt_id, candidate_id))

    @guarded
    def prompts_of(self, candidate_id: int) -> list[dict]:
        """The exchanges that produced a candidate, oldest first: each prompt row (prompt
        parsed back to its messages) with `candidates`, the ids it produced; none in an
        archive from before prompts were kept, opened read-only."""
        if not self._read("SELECT 1 FROM sqlite_master WHERE name = 'prompts'"):
            return []
        rows = self._read("SELECT p.* FROM prompts p JOIN prompt_candidates pc ON "
                          "pc.prompt_id = p.id WHERE pc.candidate_id = ? ORDER BY p.id",
                          (candidate_id,))
        out = []
        for r in rows:
            d = dict(r)
            d["prompt"] = loads(d["prompt"] or "[]", f"prompts row {d['id']}, prompt")
            d["candidates"] = [x[0] for x in self._read(
                "SELECT candidate_id FROM prompt_candidates WHERE prompt_id = ? ORDER BY 1",
                (d["id"],))]
            out.append(d)
        return out

    @guarded
    def start_run(self, op_id: int, backend: str, hardware: str, settings: dict) -> int:
        """Record a search's settings (what --resume continues)."""
        with self._write() as c:
            return c.execute("INSERT INTO runs (op_id, backend, hardware, settings, started) "
                             "VALUES (?, ?, ?, ?, ?)",
                             (op_id, backend, hardware, dumps(settings), time.time())).lastrowid

    @guarded
    def finish_run(self, run_id: int, status: str = "done") -> None:
        with self._write() as c:
            c.execute("UPDATE runs SET finished = ?, status = ? WHERE id = ?",
                      (time.time(), status, run_id))

    @guarded
    def last_run(self, op_id: int, backend: str, hardware: str) -> dict | None:
        rows = self._read("SELECT * FROM runs WHERE op_id = ? AND backend = ? AND hardware = ? "
                          "ORDER BY started DESC, id DESC LIMIT 1", (op_id, backend, hardware))
        if not rows:
            return None
        d = dict(rows[0])
        d["settings"] = loads(d["settings"], f"runs row {d.get('id')}, column settings")
        return d

    # inspection

    @guarded
    def info(self) -> dict:
        """Schema, table counts, and per (op, backend, hardware): candidates evaluated, ok,
        failed, best time."""
        have = {r[0] for r in self._read("SELECT name FROM sqlite_master WHERE type = 'table'")}
        counts = {k: self._read(f"SELECT count(*) FROM {t}")[0][0] if t in have else 0
                  for k, t in TABLES.items()}  # an older archive opened read-only lacks some
        groups: dict[tuple, dict] = {}
        for r in self._latest("1", ()):
            key = (r["op_name"], r["backend"], r["hardware"])
            g = groups.setdefault(key, {"op": key[0], "backend": key[1], "hardware": key[2],
                                        "candidates": 0, "ok": 0, "failed": 0,
                                        "best_ms": None, "last": None})
            g["candidates"] += 1
            if r["verdict"] == "ok":
                g["ok"] += 1
                if r["time_ms"] is not None and (g["best_ms"] is None
                                                 or r["time_ms"] < g["best_ms"]):
                    g["best_ms"] = r["time_ms"]
            else:
                g["failed"] += 1
            g["last"] = max(g["last"] or 0.0, r["created"])
        untrusted = self._read("SELECT count(*) FROM results WHERE trusted = 0")[0][0]
        unevaluated = self._read("SELECT count(*) FROM candidates c WHERE NOT EXISTS "
                                 "(SELECT 1 FROM results r WHERE r.candidate_id = c.id)")[0][0]
        tokens = self._read("SELECT coalesce(sum(input_tokens), 0), "
                            "coalesce(sum(output_tokens), 0) FROM usage")[0]
        with self._lock:
            version = self._connection().execute("PRAGMA user_version").fetchone()[0]
        return {"path": str(self.path), "schema_version": version,
                "application_id": APPLICATION_ID, "counts": counts,
                "unevaluated": unevaluated, "untrusted": untrusted,
                "tokens": {"input": tokens[0], "output": tokens[1]},
                "groups": sorted(groups.values(),
                                 key=lambda g: (g["op"], g["backend"], g["hardware"])),
                "hardware": {h: self.ceilings(h) for h in self.hardware_names()}}

    @guarded
    def check(self) -> list[str]:
        """PRAGMA integrity_check: ["ok"] when the file is sound."""
        return [r[0] for r in self._read("PRAGMA integrity_check")]

    def quick_check(self) -> None:
        """Raise ArchiveError (naming the file) unless SQLite's quick_check passes: damage
        inside the file's pages is otherwise found only by the query that reads them, which
        may come after a search has written to the file."""
        try:
            rows = [r[0] for r in self._read("PRAGMA quick_check")]
        except sqlite3.Error as e:
            raise ArchiveError(f"archive {self.path} is corrupt ({e}); restore it from a copy, "
                               "or pass --db with another file; nothing was written to it") from e
        if rows != ["ok"]:
            raise ArchiveError(f"archive {self.path} is corrupt ({'; '.join(rows[:3])}); "
                               "restore it from a copy, or pass --db with another file; nothing "
                               "was written to it")
