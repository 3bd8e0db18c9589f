"""The archive's file format: its tables, how a schema version becomes the next, and how a
file is recognised as a kevolve archive before anything is written to it.

A kevolve archive is an SQLite file with `PRAGMA application_id` = the bytes `KEVO` and
`PRAGMA user_version` = the number of MIGRATIONS applied. docs/archive.md describes the
tables. Nothing here holds a connection open: store.py owns connections and transactions.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from pathlib import Path

from ..errors import ArchiveError

APPLICATION_ID = int.from_bytes(b"KEVO", "big")  # 0x4B45564F, PRAGMA application_id
# What an archive holds, as counted by info(), merge() and import_jsonl(), and the table of
# each kind.
TABLES = {"ops": "ops", "candidates": "candidates", "results": "results",
          "ceilings": "hardware", "usage": "usage", "runs": "runs", "baselines": "baselines",
          "prompts": "prompts"}
KINDS = tuple(TABLES)


# --- tables and migrations -----------------------------------------------------------------

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


def _migrate_1_to_2(conn: sqlite3.Connection) -> None:
    """Baselines (torch eager, torch.compile) per (op, shape, hardware, toolchain)."""
    conn.execute("""CREATE TABLE baselines (
        op_name TEXT NOT NULL, shape TEXT NOT NULL, hardware TEXT NOT NULL,
        toolchain TEXT NOT NULL, kind TEXT NOT NULL, time_ms REAL, measured REAL NOT NULL,
        PRIMARY KEY (op_name, shape, hardware, toolchain, kind))""")


def _add_result_origin(conn: sqlite3.Connection) -> None:
    """Where a result was measured: `origin` '' for this archive's own searches, else the
    archive or export it was merged from; `trusted` 0 for merged results until `kevolve
    archive verify` measures them again here (or the merge was given --trust)."""
    conn.execute("ALTER TABLE results ADD COLUMN origin TEXT NOT NULL DEFAULT ''")
    conn.execute("ALTER TABLE results ADD COLUMN trusted INTEGER NOT NULL DEFAULT 1")


def _add_prompts(conn: sqlite3.Connection) -> None:
    """Every exchange of an LLM proposer with its model (the conversation sent, the answer,
    transport, model, temperature, seed, tokens, latency) and the candidates it produced."""
    conn.execute("""CREATE TABLE prompts (
        id INTEGER PRIMARY KEY, proposer TEXT NOT NULL, transport TEXT NOT NULL DEFAULT '',
        model TEXT NOT NULL DEFAULT '', temperature REAL, seed INTEGER,
        input_tokens INTEGER NOT NULL DEFAULT 0, output_tokens INTEGER NOT NULL DEFAULT 0,
        latency_s REAL NOT NULL DEFAULT 0, prompt TEXT NOT NULL DEFAULT '[]',
        answer TEXT NOT NULL DEFAULT '', note TEXT NOT NULL DEFAULT '', created REAL NOT NULL)""")
    conn.execute("""CREATE TABLE prompt_candidates (
        prompt_id INTEGER NOT NULL REFERENCES prompts(id),
        candidate_id INTEGER NOT NULL REFERENCES candidates(id),
        PRIMARY KEY (prompt_id, candidate_id))""")
    conn.execute("CREATE INDEX prompt_candidates_candidate ON prompt_candidates(candidate_id)")


# MIGRATIONS[n] takes schema version n to n + 1, inside the opening transaction. Append only;
# never edit a released step. The current version is len(MIGRATIONS).
MIGRATIONS: list[Callable[[sqlite3.Connection], None]] = [_migrate_0_to_1, _migrate_1_to_2,
                                                          _add_result_origin,
                                                          _add_prompts]


def schema_version() -> int:
    return len(MIGRATIONS)


def needs_migration(conn: sqlite3.Connection) -> bool:
    return (conn.execute("PRAGMA application_id").fetchone()[0] != APPLICATION_ID
            or conn.execute("PRAGMA user_version").fetchone()[0] < schema_version())


def migrate(conn: sqlite3.Connection, version: int) -> None:
    """Apply the steps after `version`, then stamp the file as ours, inside the caller's
    transaction (all or nothing)."""
    for step in MIGRATIONS[version:]:
        step(conn)
    conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
    conn.execute(f"PRAGMA user_version = {schema_version()}")


# --- recognising a file --------------------------------------------------------------------

_MAGIC = b"SQLite format 3\x00"


def inspect_file(path: Path, attempts: int = 3) -> str:
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
        check_version(path, user_version)
        pages = int.from_bytes(head[28:32], "big")
        if pages and head[24:28] == head[92:96] and pages * page_size > size:
            if attempts > 1:  # a checkpoint may be growing the file right now
                time.sleep(0.05)
                return inspect_file(path, attempts - 1)
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


def check_version(path: Path, user_version: int) -> None:
    if user_version > schema_version():
        raise ArchiveError(f"archive {path} has schema version {user_version}, newer than this "
                           f"kevolve knows ({schema_version()}): upgrade kevolve to read it; "
                           "nothing was written to it")
    if user_version < 0:
        raise ArchiveError(f"archive {path} is corrupt: schema version {user_version}")


def validate(conn: sqlite3.Connection, path: Path) -> int:
    """The schema version of an open file that is ours or blank; ArchiveError otherwise. Its
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
        check_version(path, version)
        return version
    if app_id != 0 or tables or version != 0:
        raise ArchiveError(f"{path} is not a kevolve archive (application_id "
                           f"{app_id:#010x}, tables: {', '.join(tables) or 'none'}); "
                           "nothing was written to it")
    return 0
