"""The archive: every op, candidate and result of every search, in one SQLite file.

One file (default `.kevolve/archive.db`) holds ops (IR text and hash), candidates (canonical
trace JSON, its hash, parent, proposer, generation), results (keyed by hardware and backend,
with toolchain versions, verdict, times, diagnostics, shape and seeds), measured hardware
ceilings, LLM token usage and search runs. docs/archive.md describes the schema.

Guarantees:
- The file is recognised before anything is written to it: a file that is not SQLite, is
  corrupt, belongs to another application (`PRAGMA application_id`) or has a schema newer
  than this code (`PRAGMA user_version`) raises ArchiveError naming the file.
- Every write is one `BEGIN IMMEDIATE` transaction (WAL, synchronous=NORMAL, a 30 s busy
  timeout): two processes on one archive both progress, and a process killed with SIGKILL
  loses only the transaction it had not committed.
- A candidate's standing on a (backend, hardware) pair is its latest result there.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import math
import os
import sqlite3
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from .types import Result, Scored

DEFAULT_PATH = Path(".kevolve") / "archive.db"
APPLICATION_ID = int.from_bytes(b"KEVO", "big")  # 0x4B45564F, PRAGMA application_id
BUSY_TIMEOUT_S = 30.0
JSONL_FORMAT = "kevolve-archive"  # the header line of an export
JSONL_VERSION = 1
KINDS = ("ops", "candidates", "results", "ceilings", "usage", "runs")


class ArchiveError(Exception):
    """The archive (or a file to merge or import) is missing, foreign, corrupt, newer than
    this kevolve, locked for too long, or malformed. The message names the file."""


# --- schema --------------------------------------------------------------------------------

_V1 = (
    """CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)""",
    """CREATE TABLE ops (
        id INTEGER PRIMARY KEY, name TEXT NOT NULL, ir_hash TEXT NOT NULL UNIQUE,
        ir_text TEXT NOT NULL, created REAL NOT NULL)""",
    """CREATE INDEX ops_name ON ops(name)""",
    """CREATE TABLE candidates (
        id INTEGER PRIMARY KEY, op_id INTEGER NOT NULL REFERENCES ops(id),
        trace_hash TEXT NOT NULL, trace_json TEXT NOT NULL,
        parent_id INTEGER REFERENCES candidates(id), proposer TEXT NOT NULL DEFAULT '',
        generation INTEGER NOT NULL DEFAULT 0, note TEXT NOT NULL DEFAULT '',
        created REAL NOT NULL, UNIQUE(op_id, trace_hash))""",
    """CREATE TABLE results (
        id INTEGER PRIMARY KEY, candidate_id INTEGER NOT NULL REFERENCES candidates(id),
        hardware TEXT NOT NULL, backend TEXT NOT NULL, toolchain TEXT NOT NULL DEFAULT '{}',
        run_hash TEXT, verdict TEXT NOT NULL, time_ms REAL, times_ms TEXT NOT NULL DEFAULT '[]',
        baseline_ms REAL, max_error REAL, message TEXT NOT NULL DEFAULT '',
        diagnostics TEXT NOT NULL DEFAULT '{}', shape TEXT NOT NULL DEFAULT '{}',
        seeds TEXT NOT NULL DEFAULT '[]', seconds REAL NOT NULL DEFAULT 0,
        created REAL NOT NULL)""",
    """CREATE INDEX results_candidate ON results(candidate_id, backend, hardware)""",
    """CREATE INDEX results_run ON results(run_hash, backend, hardware)""",
    """CREATE TABLE hardware (
        name TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL, measured REAL NOT NULL,
        PRIMARY KEY (name, key))""",
    """CREATE TABLE usage (
        id INTEGER PRIMARY KEY, candidate_id INTEGER REFERENCES candidates(id),
        proposer TEXT NOT NULL, model TEXT NOT NULL, input_tokens INTEGER NOT NULL,
        output_tokens INTEGER NOT NULL, note TEXT NOT NULL DEFAULT '', created REAL NOT NULL)""",
    """CREATE TABLE runs (
        id INTEGER PRIMARY KEY, op_id INTEGER NOT NULL REFERENCES ops(id),
        backend TEXT NOT NULL, hardware TEXT NOT NULL, settings TEXT NOT NULL DEFAULT '{}',
        started REAL NOT NULL, finished REAL, status TEXT NOT NULL DEFAULT 'running')""",
)


def _migrate_0_to_1(conn: sqlite3.Connection) -> None:
    for statement in _V1:
        conn.execute(statement)
    conn.execute("INSERT INTO meta VALUES ('created', ?)", (repr(time.time()),))


# MIGRATIONS[n] takes schema version n to n + 1, inside the opening transaction. Append only;
# never edit a released step. The current version is len(MIGRATIONS).
MIGRATIONS: list[Callable[[sqlite3.Connection], None]] = [_migrate_0_to_1]


def schema_version() -> int:
    return len(MIGRATIONS)


# --- hashes and JSON -----------------------------------------------------------------------

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


def _plain(v):
    """JSON fallback for numpy scalars and arrays, tuples, paths."""
    if hasattr(v, "tolist"):
        return v.tolist()
    if isinstance(v, (set, frozenset)):
        return sorted(v)
    return str(v)


def _dumps(v) -> str:
    return json.dumps(v, sort_keys=True, default=_plain)


def _num(v) -> float | None:
    """A float for a REAL column; NaN and None become NULL."""
    if v is None:
        return None
    v = float(v)
    return None if math.isnan(v) else v


# --- recognising a file without writing to it ----------------------------------------------

_MAGIC = b"SQLite format 3\x00"


def _inspect(path: Path, attempts: int = 3) -> str:
    """'missing', 'blank' (empty: safe to create an archive in) or 'ours', reading only the
    file's header (and, for SQLite files without an application id, its table list through
    an immutable read-only connection: no locks, no -wal/-shm files). Raises ArchiveError."""
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        return "missing"
    except OSError as e:
        raise ArchiveError(f"cannot read archive {path}: {e.strerror or e}") from None
    if not path.is_file():
        raise ArchiveError(f"archive {path} is not a file")
    if size == 0:
        return "blank"
    try:
        with open(path, "rb") as f:
            head = f.read(100)
    except OSError as e:
        raise ArchiveError(f"cannot read archive {path}: {e.strerror or e}") from None
    if len(head) < 100 or not head.startswith(_MAGIC):
        raise ArchiveError(f"{path} is not a kevolve archive: it is not an SQLite database "
                           "(pass --db with the right file; nothing was written to it)")
    page_size = int.from_bytes(head[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    if page_size < 512 or page_size & (page_size - 1):
        raise ArchiveError(f"archive {path} is corrupt: its header is damaged (page size "
                           f"{page_size}); nothing was written to it")
    user_version = int.from_bytes(head[60:64], "big", signed=True)
    app_id = int.from_bytes(head[68:72], "big", signed=True)
    if app_id == APPLICATION_ID:
        _check_version(path, user_version)
        pages = int.from_bytes(head[28:32], "big")
        if pages and head[24:28] == head[92:96] and pages * page_size > size:
            if attempts > 1:  # a checkpoint may be growing the file right now
                time.sleep(0.05)
                return _inspect(path, attempts - 1)
            raise ArchiveError(f"archive {path} is corrupt: it is truncated ({size} bytes, its "
                               f"header says {pages * page_size}); restore it from a copy, or "
                               "pass --db with another file; nothing was written to it")
        return "ours"
    if app_id != 0:
        raise ArchiveError(f"{path} is not a kevolve archive: it is an SQLite database of "
                           f"another application (application_id {app_id:#010x}, kevolve's is "
                           f"{APPLICATION_ID:#010x}); nothing was written to it")
    tables = _tables_readonly(path)
    if tables:
        raise ArchiveError(f"{path} is not a kevolve archive: it is an SQLite database of "
                           f"another application (tables: {', '.join(tables[:6])}); nothing "
                           "was written to it")
    return "blank"


def _tables_readonly(path: Path) -> list[str]:
    uri = path.resolve().as_uri() + "?mode=ro&immutable=1"
    try:
        conn = sqlite3.connect(uri, uri=True)
        try:
            rows = conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' "
                                "ORDER BY name").fetchall()
        finally:
            conn.close()
    except sqlite3.Error as e:
        raise ArchiveError(f"archive {path} is corrupt or not a database ({e}); nothing was "
                           "written to it") from None
    return [r[0] for r in rows]


def _check_version(path: Path, user_version: int) -> None:
    if user_version > schema_version():
        raise ArchiveError(f"archive {path} has schema version {user_version}, newer than this "
                           f"kevolve knows ({schema_version()}): upgrade kevolve to read it; "
                           "nothing was written to it")
    if user_version < 0:
        raise ArchiveError(f"archive {path} is corrupt: schema version {user_version}")


def _describe(e: sqlite3.Error) -> str:
    text = str(e)
    if "locked" in text or "busy" in text:
        return (f"it stayed locked by another process for more than {BUSY_TIMEOUT_S:.0f} s "
                f"({text})")
    if "malformed" in text or "not a database" in text:
        return f"the file is corrupt ({text}); restore it from a copy"
    return text


def _guarded(method):
    """Turn sqlite3 errors into ArchiveError naming the file."""

    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        try:
            return method(self, *args, **kwargs)
        except sqlite3.Error as e:
            raise ArchiveError(f"archive {self.path}: {_describe(e)}") from e

    return wrapper


# --- the archive ---------------------------------------------------------------------------

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


class Archive:
    """An open archive. `Archive(path)` creates the file (and its folder) when missing
    unless create=False; readonly=True never writes (an older schema is migrated in memory).
    Thread-safe: one connection behind a lock."""

    def __init__(self, path: str | os.PathLike = DEFAULT_PATH, *, create: bool = True,
                 readonly: bool = False):
        self.path = Path(path)
        self.readonly = readonly
        self._lock = threading.RLock()
        state = _inspect(self.path)
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
            raise ArchiveError(f"archive {self.path}: {_describe(e)}; nothing was written to "
                               "it") from e

    # opening

    def _open(self) -> sqlite3.Connection:
        conn = sqlite3.connect(str(self.path), timeout=BUSY_TIMEOUT_S, isolation_level=None,
                               check_same_thread=False)
        try:
            conn.row_factory = sqlite3.Row
            conn.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
            conn.execute("PRAGMA foreign_keys = ON")
            self._validate(conn)  # before anything that writes (journal_mode does)
            _wal(conn)
            conn.execute("PRAGMA synchronous = NORMAL")
            if self._needs_migration(conn):
                conn.execute("BEGIN IMMEDIATE")
                try:
                    self._migrate(conn, self._validate(conn))  # again, under the lock
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
            version = self._validate(conn)
            if version == 0:
                raise ArchiveError(f"{self.path} is empty, not a kevolve archive")
            if version < schema_version():  # migrate a copy in memory, never the file
                mem = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
                conn.backup(mem)
                conn.close()
                conn = mem
                conn.row_factory = sqlite3.Row
                conn.execute("BEGIN")
                self._migrate(conn, version)
                conn.execute("COMMIT")
            conn.execute("PRAGMA query_only = ON")
        except BaseException:
            conn.close()
            raise
        return conn

    def _validate(self, conn: sqlite3.Connection) -> int:
        """The schema version of a file that is ours or blank; ArchiveError otherwise. Its
        reads are one snapshot: another process creating the archive at the same moment
        commits its tables and its application id together, and reads in separate
        transactions could see the id from before that commit and the tables from after."""
        own = not conn.in_transaction
        if own:
            conn.execute("BEGIN")
        try:
            app_id = conn.execute("PRAGMA application_id").fetchone()[0]
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE "
                                                 "type = 'table' ORDER BY name")]
        finally:
            if own:
                conn.execute("COMMIT")
        if app_id == APPLICATION_ID:
            _check_version(self.path, version)
            return version
        if app_id != 0 or tables or version != 0:
            raise ArchiveError(f"{self.path} is not a kevolve archive (application_id "
                               f"{app_id:#010x}, tables: {', '.join(tables) or 'none'}); "
                               "nothing was written to it")
        return 0

    def _needs_migration(self, conn: sqlite3.Connection) -> bool:
        return (conn.execute("PRAGMA application_id").fetchone()[0] != APPLICATION_ID
                or conn.execute("PRAGMA user_version").fetchone()[0] < schema_version())

    @staticmethod
    def _migrate(conn: sqlite3.Connection, version: int) -> None:
        for step in MIGRATIONS[version:]:
            step(conn)
        conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
        conn.execute(f"PRAGMA user_version = {schema_version()}")

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def __enter__(self) -> Archive:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Archive({str(self.path)!r})"

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

    @_guarded
    def op_id_for(self, name: str, ir_text: str) -> int:
        h = ir_hash(ir_text)
        rows = self._read("SELECT id FROM ops WHERE ir_hash = ?", (h,))
        if rows:
            return rows[0][0]
        with self._write() as c:
            c.execute("INSERT OR IGNORE INTO ops (name, ir_hash, ir_text, created) "
                      "VALUES (?, ?, ?, ?)", (name, h, ir_text, time.time()))
            return c.execute("SELECT id FROM ops WHERE ir_hash = ?", (h,)).fetchone()[0]

    @_guarded
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

    @_guarded
    def candidate(self, candidate_id: int) -> dict | None:
        """A candidate with its op: id, op_id, op_name, ir_hash, ir_text, trace_json,
        trace_hash, parent_id, proposer, generation, note, created."""
        rows = self._read(
            "SELECT c.*, o.name AS op_name, o.ir_hash, o.ir_text FROM candidates c "
            "JOIN ops o ON o.id = c.op_id WHERE c.id = ?", (candidate_id,))
        return dict(rows[0]) if rows else None

    @_guarded
    def results(self, candidate_id: int) -> list[dict]:
        """Every result of a candidate, oldest first: hardware, backend, toolchain, run_hash,
        shape, seeds, created, and the Result under "result"."""
        rows = self._read("SELECT * FROM results WHERE candidate_id = ? ORDER BY created, id",
                          (candidate_id,))
        return [_result_dict(r) for r in rows]

    # results

    @_guarded
    def add_result(self, candidate_id: int, hardware: str, backend: str, toolchain: dict,
                   result: Result, run_hash: str | None = None, shape: dict | None = None,
                   seeds: Iterable[int] = ()) -> int:
        """Record one evaluation. run_hash defaults to result.source_hash."""
        run_hash = result.source_hash if run_hash is None else run_hash
        with self._write() as c:
            cur = c.execute(
                "INSERT INTO results (candidate_id, hardware, backend, toolchain, run_hash, "
                "verdict, time_ms, times_ms, baseline_ms, max_error, message, diagnostics, "
                "shape, seeds, seconds, created) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (candidate_id, hardware, backend, _dumps(toolchain or {}), run_hash,
                 result.verdict, _num(result.time_ms), _dumps(list(result.times_ms)),
                 _num(result.baseline_ms), _num(result.max_error), result.message or "",
                 _dumps(result.diagnostics or {}), _dumps(shape or {}), _dumps(list(seeds)),
                 float(result.seconds or 0.0), time.time()))
            return cur.lastrowid

    @_guarded
    def find_run(self, op_id: int, backend: str, hardware: str,
                 run_hash: str | None) -> Result | None:
        """The latest result recorded for an identical run (same generated code, backend and
        toolchain) of this op on this hardware, or None."""
        if run_hash is None:
            return None
        rows = self._read(
            "SELECT r.* FROM results r JOIN candidates c ON c.id = r.candidate_id "
            "WHERE r.run_hash = ? AND r.backend = ? AND r.hardware = ? AND c.op_id = ? "
            "ORDER BY r.created DESC, r.id DESC LIMIT 1", (run_hash, backend, hardware, op_id))
        return _result_of(rows[0]) if rows else None

    @_guarded
    def evaluated(self, op_id: int, backend: str, hardware: str) -> set[int]:
        """Ids of this op's candidates with a result on (backend, hardware)."""
        rows = self._read(
            "SELECT DISTINCT r.candidate_id FROM results r JOIN candidates c "
            "ON c.id = r.candidate_id WHERE c.op_id = ? AND r.backend = ? AND r.hardware = ?",
            (op_id, backend, hardware))
        return {r[0] for r in rows}

    def _latest(self, where: str, args: tuple) -> list[sqlite3.Row]:
        """The latest result of each (candidate, backend, hardware) matching `where`, in the
        order candidates were first evaluated there. A passing result without a time (a
        correctness-only check) never hides a timed one: it would erase the candidate's
        time from the population on resume."""
        part = "PARTITION BY r.candidate_id, r.backend, r.hardware"
        untimed = "(r.verdict = 'ok' AND r.time_ms IS NULL)"
        return self._read(
            "WITH latest AS (SELECT r.*, c.op_id, c.trace_json, c.trace_hash, c.parent_id, "
            "c.proposer, c.generation, c.note, o.name AS op_name, o.ir_hash, "
            f"row_number() OVER ({part} ORDER BY {untimed}, r.created DESC, r.id DESC) AS rn, "
            f"min(r.created) OVER ({part}) AS first_created, min(r.id) OVER ({part}) AS first_id "
            "FROM results r JOIN candidates c ON c.id = r.candidate_id "
            f"JOIN ops o ON o.id = c.op_id WHERE {where}) "
            "SELECT * FROM latest WHERE rn = 1 ORDER BY first_created, first_id", args)

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

    @_guarded
    def scored(self, op_id: int, backend: str, hardware: str) -> list[Scored]:
        """Every evaluated candidate of this op on (backend, hardware), oldest first, each
        with its latest result there."""
        rows = self._latest("c.op_id = ? AND r.backend = ? AND r.hardware = ?",
                            (op_id, backend, hardware))
        return [_scored_of(r) for r in rows]

    @_guarded
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
        d = _result_dict(row)
        d.update(candidate_id=row["candidate_id"], op=row["op_name"], ir_hash=row["ir_hash"],
                 trace_json=row["trace_json"], trace_hash=row["trace_hash"],
                 parent_id=row["parent_id"], proposer=row["proposer"],
                 generation=row["generation"], note=row["note"])
        return d

    @_guarded
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
            out.append(_scored_of(r))
            if len(out) == k:
                break
        return out

    def best(self, op_name: str, backend: str | None,
             hardware: str | None = None) -> Scored | None:
        """The fastest ok candidate of the op on the backend (any hardware if None)."""
        d = self.best_record(op_name, backend, hardware)
        if d is None:
            return None
        return Scored(d["trace_json"], d["result"], d["candidate_id"], d["parent_id"],
                      d["proposer"])

    @_guarded
    def history(self, op_name: str, backend: str | None = None,
                hardware: str | None = None) -> list[dict]:
        """One row per evaluated candidate, in evaluation order: index (1-based within its
        backend and hardware), candidate_id, backend, hardware, proposer, generation,
        parent_id, verdict, time_ms, best_ms (best so far on that backend and hardware),
        improved, created."""
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
                        "created": r["created"]})
        return out

    @_guarded
    def op_names(self) -> list[str]:
        return [r[0] for r in self._read("SELECT DISTINCT name FROM ops ORDER BY name")]

    # hardware, usage, runs

    @_guarded
    def hardware_names(self) -> list[str]:
        return [r[0] for r in self._read("SELECT hardware FROM results UNION "
                                         "SELECT name FROM hardware ORDER BY 1")]

    @_guarded
    def set_ceiling(self, hardware: str, key: str, value) -> None:
        """Record a measured ceiling (e.g. copy GB/s, bf16 matmul TFLOP/s); JSON values."""
        with self._write() as c:
            c.execute("INSERT INTO hardware (name, key, value, measured) VALUES (?, ?, ?, ?) "
                      "ON CONFLICT (name, key) DO UPDATE SET value = excluded.value, "
                      "measured = excluded.measured", (hardware, key, _dumps(value), time.time()))

    @_guarded
    def ceilings(self, hardware: str) -> dict:
        rows = self._read("SELECT key, value FROM hardware WHERE name = ? ORDER BY key",
                          (hardware,))
        return {r["key"]: json.loads(r["value"]) for r in rows}

    @_guarded
    def record_usage(self, proposer: str, model: str, input_tokens: int, output_tokens: int,
                     candidate_id: int | None = None, note: str = "") -> int:
        with self._write() as c:
            return c.execute(
                "INSERT INTO usage (candidate_id, proposer, model, input_tokens, output_tokens, "
                "note, created) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (candidate_id, proposer, model, int(input_tokens), int(output_tokens), note,
                 time.time())).lastrowid

    @_guarded
    def usage_totals(self) -> dict:
        """{(proposer, model): {"calls", "input_tokens", "output_tokens"}}."""
        rows = self._read("SELECT proposer, model, count(*), sum(input_tokens), "
                          "sum(output_tokens) FROM usage GROUP BY proposer, model")
        return {(r[0], r[1]): {"calls": r[2], "input_tokens": r[3], "output_tokens": r[4]}
                for r in rows}

    @_guarded
    def start_run(self, op_id: int, backend: str, hardware: str, settings: dict) -> int:
        """Record a search's settings (what --resume continues)."""
        with self._write() as c:
            return c.execute("INSERT INTO runs (op_id, backend, hardware, settings, started) "
                             "VALUES (?, ?, ?, ?, ?)",
                             (op_id, backend, hardware, _dumps(settings), time.time())).lastrowid

    @_guarded
    def finish_run(self, run_id: int, status: str = "done") -> None:
        with self._write() as c:
            c.execute("UPDATE runs SET finished = ?, status = ? WHERE id = ?",
                      (time.time(), status, run_id))

    @_guarded
    def last_run(self, op_id: int, backend: str, hardware: str) -> dict | None:
        rows = self._read("SELECT * FROM runs WHERE op_id = ? AND backend = ? AND hardware = ? "
                          "ORDER BY started DESC, id DESC LIMIT 1", (op_id, backend, hardware))
        if not rows:
            return None
        d = dict(rows[0])
        d["settings"] = json.loads(d["settings"])
        return d

    # inspection

    @_guarded
    def info(self) -> dict:
        """Schema, table counts, and per (op, backend, hardware): candidates evaluated, ok,
        failed, best time."""
        counts = {k: self._read(f"SELECT count(*) FROM {t}")[0][0] for k, t in
                  zip(KINDS, ("ops", "candidates", "results", "hardware", "usage", "runs"))}
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
        unevaluated = self._read("SELECT count(*) FROM candidates c WHERE NOT EXISTS "
                                 "(SELECT 1 FROM results r WHERE r.candidate_id = c.id)")[0][0]
        tokens = self._read("SELECT coalesce(sum(input_tokens), 0), "
                            "coalesce(sum(output_tokens), 0) FROM usage")[0]
        with self._lock:
            version = self._connection().execute("PRAGMA user_version").fetchone()[0]
        return {"path": str(self.path), "schema_version": version,
                "application_id": APPLICATION_ID, "counts": counts,
                "unevaluated": unevaluated,
                "tokens": {"input": tokens[0], "output": tokens[1]},
                "groups": sorted(groups.values(),
                                 key=lambda g: (g["op"], g["backend"], g["hardware"])),
                "hardware": {h: self.ceilings(h) for h in self.hardware_names()}}

    @_guarded
    def check(self) -> list[str]:
        """PRAGMA integrity_check: ["ok"] when the file is sound."""
        return [r[0] for r in self._read("PRAGMA integrity_check")]

    # moving data between archives

    def records(self, op_name: str | None = None) -> Iterator[dict]:
        """The archive as self-describing records (see docs/archive.md), references by
        content hash, never by row id: ops, candidates (parents first), results, ceilings,
        usage, runs. op_name limits it to that op's rows (ceilings are always included)."""
        try:
            yield from self._records(op_name)
        except sqlite3.Error as e:
            raise ArchiveError(f"archive {self.path}: {_describe(e)}") from e

    def _records(self, op_name: str | None) -> Iterator[dict]:
        where, args = ("WHERE o.name = ?", (op_name,)) if op_name is not None else ("", ())
        for r in self._read(f"SELECT o.* FROM ops o {where} ORDER BY o.id", args):
            yield {"kind": "op", "ir_hash": r["ir_hash"], "name": r["name"],
                   "ir_text": r["ir_text"], "created": r["created"]}
        for r in self._read(
                "SELECT c.*, o.ir_hash, po.ir_hash AS parent_op, p.trace_hash AS parent_trace "
                "FROM candidates c JOIN ops o ON o.id = c.op_id "
                "LEFT JOIN candidates p ON p.id = c.parent_id "
                f"LEFT JOIN ops po ON po.id = p.op_id {where} ORDER BY c.id", args):
            parent = [r["parent_op"], r["parent_trace"]] if r["parent_trace"] else None
            yield {"kind": "candidate", "op": r["ir_hash"], "trace_hash": r["trace_hash"],
                   "trace_json": r["trace_json"], "parent": parent, "proposer": r["proposer"],
                   "generation": r["generation"], "note": r["note"], "created": r["created"]}
        for r in self._read(
                "SELECT r.*, c.trace_hash, o.ir_hash FROM results r JOIN candidates c "
                f"ON c.id = r.candidate_id JOIN ops o ON o.id = c.op_id {where} ORDER BY r.id",
                args):
            d = _result_dict(r)
            res = d.pop("result").to_dict()
            res.pop("source_hash")
            yield {"kind": "result", "op": r["ir_hash"], "trace_hash": r["trace_hash"], **d,
                   **res}
        for r in self._read("SELECT * FROM hardware ORDER BY name, key"):
            yield {"kind": "ceiling", "hardware": r["name"], "key": r["key"],
                   "value": json.loads(r["value"]), "measured": r["measured"]}
        usage_where = ("WHERE o.name = ?" if op_name is not None else "")
        for r in self._read(
                "SELECT u.*, c.trace_hash, o.ir_hash FROM usage u LEFT JOIN candidates c "
                f"ON c.id = u.candidate_id LEFT JOIN ops o ON o.id = c.op_id {usage_where} "
                "ORDER BY u.id", args):
            yield {"kind": "usage", "op": r["ir_hash"], "trace_hash": r["trace_hash"],
                   "proposer": r["proposer"], "model": r["model"],
                   "input_tokens": r["input_tokens"], "output_tokens": r["output_tokens"],
                   "note": r["note"], "created": r["created"]}
        for r in self._read("SELECT u.*, o.ir_hash FROM runs u JOIN ops o ON o.id = u.op_id "
                            f"{where} ORDER BY u.id", args):
            yield {"kind": "run", "op": r["ir_hash"], "backend": r["backend"],
                   "hardware": r["hardware"], "settings": json.loads(r["settings"]),
                   "started": r["started"], "finished": r["finished"], "status": r["status"]}

    @_guarded
    def merge(self, other_path: str | os.PathLike) -> dict:
        """Import everything from another archive file (read-only, never written), in one
        transaction: ids are remapped; ops match by IR hash, candidates by (op, trace hash),
        results by (candidate, hardware, backend, run_hash, created), ceilings keep the most
        recently measured value. Returns the counts added per kind and those skipped as
        duplicates: {"ops": n, ..., "skipped": {"ops": n, ...}}. Merging twice adds nothing."""
        other_path = Path(other_path)
        if not other_path.exists():
            raise ArchiveError(f"no archive to merge at {other_path}")
        if other_path.resolve() == self.path.resolve():
            raise ArchiveError(f"cannot merge archive {self.path} into itself")
        with Archive(other_path, readonly=True) as other, self._write() as c:
            return _Importer(c, str(other_path)).run(enumerate(other.records(), 1))

    @_guarded
    def export_jsonl(self, path: str | os.PathLike, op_name: str | None = None) -> dict:
        """Write the archive (or one op's part) as JSON lines: a header, then one record a
        line. Written to a temporary file, then renamed into place. Returns counts per kind."""
        if op_name is not None and op_name not in self.op_names():
            raise ArchiveError(_unknown_op(op_name, self))
        path = Path(path)
        counts = {k: 0 for k in ("op", "candidate", "result", "ceiling", "usage", "run")}
        header = {"kind": "header", "format": JSONL_FORMAT, "version": JSONL_VERSION,
                  "schema": schema_version(), "source": str(self.path), "op": op_name,
                  "exported": time.time()}
        try:
            fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
        except OSError as e:
            raise ArchiveError(f"cannot write {path}: {e.strerror or e}") from None
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(_dumps(header) + "\n")
                for rec in self.records(op_name):
                    counts[rec["kind"]] += 1
                    f.write(_dumps(rec) + "\n")
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        return counts

    @_guarded
    def import_jsonl(self, path: str | os.PathLike) -> dict:
        """Import an export (idempotent: what is already here is skipped), all or nothing.
        Returns counts as merge() does."""
        path = Path(path)
        if not path.is_file():
            raise ArchiveError(f"no file to import at {path}")
        with open(path, encoding="utf-8") as f, self._write() as c:
            return _Importer(c, str(path)).run(_read_jsonl(f, path))


# --- helpers -------------------------------------------------------------------------------

def _unknown_op(op_name: str, archive: Archive) -> str:
    names = archive.op_names()
    if not names:
        return f"archive {archive.path} is empty: it holds no ops yet (run kevolve evolve)"
    return (f"no op named {op_name!r} in archive {archive.path}; it holds: "
            f"{', '.join(names)}")


def _result_of(r: sqlite3.Row) -> Result:
    return Result(verdict=r["verdict"], time_ms=r["time_ms"],
                  times_ms=tuple(json.loads(r["times_ms"])), baseline_ms=r["baseline_ms"],
                  max_error=r["max_error"], message=r["message"],
                  diagnostics=json.loads(r["diagnostics"]), source_hash=r["run_hash"],
                  seconds=r["seconds"])


def _result_dict(r: sqlite3.Row) -> dict:
    return {"hardware": r["hardware"], "backend": r["backend"],
            "toolchain": json.loads(r["toolchain"]), "run_hash": r["run_hash"],
            "shape": json.loads(r["shape"]), "seeds": json.loads(r["seeds"]),
            "created": r["created"], "result": _result_of(r)}


def _scored_of(r: sqlite3.Row) -> Scored:
    return Scored(r["trace_json"], _result_of(r), r["candidate_id"], r["parent_id"],
                  r["proposer"])


def _read_jsonl(f, path: Path) -> Iterator[tuple[int, dict]]:
    """(line number, record) of an export, after checking its header line."""
    for lineno, line in enumerate(f, 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except ValueError as e:
            raise ArchiveError(f"{path}:{lineno}: not JSON ({e}); nothing was imported") from None
        if not isinstance(rec, dict):
            raise ArchiveError(f"{path}:{lineno}: expected a JSON object; nothing was imported")
        if lineno == 1:
            if rec.get("kind") != "header" or rec.get("format") != JSONL_FORMAT:
                raise ArchiveError(f"{path} is not a kevolve archive export (its first line "
                                   "is not a kevolve-archive header)")
            if not isinstance(rec.get("version"), int) or rec["version"] > JSONL_VERSION:
                raise ArchiveError(f"{path} is an export of format version "
                                   f"{rec.get('version')!r}, newer than this kevolve knows "
                                   f"({JSONL_VERSION}): upgrade kevolve to import it")
            continue
        yield lineno, rec


_MISSING = object()


class _Importer:
    """Adds records (from an export or another archive) inside the caller's transaction."""

    def __init__(self, conn: sqlite3.Connection, source: str):
        self.c = conn
        self.source = source
        self.added = dict.fromkeys(KINDS, 0)
        self.skipped = dict.fromkeys(KINDS, 0)
        self.ops: dict[str, int] = {}  # ir_hash -> our op id
        self.cands: dict[tuple[str, str], int] = {}  # (ir_hash, their trace hash) -> our id
        self.where = source

    def run(self, records: Iterable[tuple[int, dict]]) -> dict:
        handlers = {"op": self.op, "candidate": self.candidate, "result": self.result,
                    "ceiling": self.ceiling, "usage": self.usage, "run": self.run_record}
        for n, rec in records:
            self.where = f"{self.source} (record {n})"
            handler = handlers.get(rec.get("kind"))
            if handler is None:
                self.fail(f"unknown record kind {rec.get('kind')!r}")
            handler(rec)
        return {**self.added, "skipped": self.skipped}

    def fail(self, what: str):
        raise ArchiveError(f"{self.where}: {what}; nothing was imported")

    def get(self, rec: dict, key: str, kind, default=_MISSING):
        v = rec.get(key, default)
        if v is _MISSING:
            self.fail(f"missing field {key!r}")
        if v is None and default is None:
            return None
        if kind is float and isinstance(v, int) and not isinstance(v, bool):
            return float(v)
        if not isinstance(v, kind) or isinstance(v, bool) and kind is not bool:
            self.fail(f"field {key!r} has the wrong type ({type(v).__name__})")
        return v

    def op_ref(self, h) -> int:
        if h not in self.ops:
            row = self.c.execute("SELECT id FROM ops WHERE ir_hash = ?", (h,)).fetchone()
            if row is None:
                self.fail(f"refers to op {str(h)[:12]}, which is neither in the file nor here")
            self.ops[h] = row[0]
        return self.ops[h]

    def cand_ref(self, op_hash, trace_hash) -> int | None:
        key = (op_hash, trace_hash)
        if key not in self.cands:
            if op_hash is None or trace_hash is None:
                return None
            row = self.c.execute("SELECT id FROM candidates WHERE op_id = ? AND trace_hash = ?",
                                 (self.op_ref(op_hash), trace_hash)).fetchone()
            if row is None:
                return None
            self.cands[key] = row[0]
        return self.cands[key]

    def count(self, kind: str, added: bool) -> None:
        (self.added if added else self.skipped)[kind] += 1

    def op(self, rec: dict) -> None:
        text = self.get(rec, "ir_text", str)
        h = self.get(rec, "ir_hash", str)
        if ir_hash(text) != h:
            self.fail(f"op {h[:12]}: its ir_hash does not match its ir_text")
        cur = self.c.execute("INSERT OR IGNORE INTO ops (name, ir_hash, ir_text, created) "
                             "VALUES (?, ?, ?, ?)",
                             (self.get(rec, "name", str), h, text,
                              self.get(rec, "created", float)))
        self.count("ops", cur.rowcount == 1)
        self.ops[h] = self.c.execute("SELECT id FROM ops WHERE ir_hash = ?", (h,)).fetchone()[0]

    def candidate(self, rec: dict) -> None:
        op_hash = self.get(rec, "op", str)
        op_id = self.op_ref(op_hash)
        text, th = canonical_trace(self.get(rec, "trace_json", str))
        parent = self.get(rec, "parent", list, None)
        parent_id = self.cand_ref(*parent) if parent and len(parent) == 2 else None
        cur = self.c.execute(
            "INSERT OR IGNORE INTO candidates (op_id, trace_hash, trace_json, parent_id, "
            "proposer, generation, note, created) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (op_id, th, text, parent_id, self.get(rec, "proposer", str, ""),
             self.get(rec, "generation", int, 0), self.get(rec, "note", str, ""),
             self.get(rec, "created", float)))
        self.count("candidates", cur.rowcount == 1)
        row = self.c.execute("SELECT id FROM candidates WHERE op_id = ? AND trace_hash = ?",
                             (op_id, th)).fetchone()
        self.cands[(op_hash, self.get(rec, "trace_hash", str, th))] = row[0]
        self.cands[(op_hash, th)] = row[0]

    def result(self, rec: dict) -> None:
        cid = self.cand_ref(self.get(rec, "op", str), self.get(rec, "trace_hash", str))
        if cid is None:
            self.fail("a result of a candidate that is neither in the file nor here")
        hw, be = self.get(rec, "hardware", str), self.get(rec, "backend", str)
        run_hash = self.get(rec, "run_hash", str, None)
        created = self.get(rec, "created", float)
        if self.c.execute("SELECT 1 FROM results WHERE candidate_id = ? AND hardware = ? AND "
                          "backend = ? AND run_hash IS ? AND created = ?",
                          (cid, hw, be, run_hash, created)).fetchone():
            self.count("results", False)
            return
        num = lambda k: _num(self.get(rec, k, float, None))  # noqa: E731
        self.c.execute(
            "INSERT INTO results (candidate_id, hardware, backend, toolchain, run_hash, "
            "verdict, time_ms, times_ms, baseline_ms, max_error, message, diagnostics, shape, "
            "seeds, seconds, created) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (cid, hw, be, _dumps(self.get(rec, "toolchain", dict, {})), run_hash,
             self.get(rec, "verdict", str), num("time_ms"),
             _dumps(self.get(rec, "times_ms", list, [])), num("baseline_ms"), num("max_error"),
             self.get(rec, "message", str, ""), _dumps(self.get(rec, "diagnostics", dict, {})),
             _dumps(self.get(rec, "shape", dict, {})), _dumps(self.get(rec, "seeds", list, [])),
             self.get(rec, "seconds", float, 0.0), created))
        self.count("results", True)

    def ceiling(self, rec: dict) -> None:
        cur = self.c.execute(
            "INSERT INTO hardware (name, key, value, measured) VALUES (?, ?, ?, ?) "
            "ON CONFLICT (name, key) DO UPDATE SET value = excluded.value, "
            "measured = excluded.measured WHERE excluded.measured > hardware.measured",
            (self.get(rec, "hardware", str), self.get(rec, "key", str),
             _dumps(rec.get("value")), self.get(rec, "measured", float)))
        self.count("ceilings", cur.rowcount == 1)

    def usage(self, rec: dict) -> None:
        cid = self.cand_ref(self.get(rec, "op", str, None), self.get(rec, "trace_hash", str, None))
        row = (cid, self.get(rec, "proposer", str), self.get(rec, "model", str),
               self.get(rec, "input_tokens", int), self.get(rec, "output_tokens", int),
               self.get(rec, "note", str, ""), self.get(rec, "created", float))
        if self.c.execute("SELECT 1 FROM usage WHERE candidate_id IS ? AND proposer = ? AND "
                          "model = ? AND input_tokens = ? AND output_tokens = ? AND note = ? "
                          "AND created = ?", row).fetchone():
            self.count("usage", False)
            return
        self.c.execute("INSERT INTO usage (candidate_id, proposer, model, input_tokens, "
                       "output_tokens, note, created) VALUES (?, ?, ?, ?, ?, ?, ?)", row)
        self.count("usage", True)

    def run_record(self, rec: dict) -> None:
        op_id = self.op_ref(self.get(rec, "op", str))
        key = (op_id, self.get(rec, "backend", str), self.get(rec, "hardware", str),
               self.get(rec, "started", float))
        if self.c.execute("SELECT 1 FROM runs WHERE op_id = ? AND backend = ? AND hardware = ? "
                          "AND started = ?", key).fetchone():
            self.count("runs", False)
            return
        self.c.execute("INSERT INTO runs (op_id, backend, hardware, started, settings, "
                       "finished, status) VALUES (?, ?, ?, ?, ?, ?, ?)",
                       (*key, _dumps(self.get(rec, "settings", dict, {})),
                        self.get(rec, "finished", float, None),
                        self.get(rec, "status", str, "done")))
        self.count("runs", True)
