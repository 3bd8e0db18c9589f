"""Moving results between archives: merging another archive file into this one, and
exporting and importing JSON lines. Both paths feed the same importer, so they follow the
same rules: records refer to each other by content hash (an op's IR hash, a candidate's
trace hash), never by row id; what is already here is skipped; all or nothing.

This is the archive's union of two stores (TVM meta_schedule's "union" database): the
other archive is only read, and an older schema is migrated in memory, never on disk."""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import tempfile
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

from . import schema
from .records import canonical_trace, dumps, ir_hash, loads, real, result_dict
from .schema import KINDS, ArchiveError
from .store import Store, describe, guarded

JSONL_FORMAT = "kevolve-archive"  # the header line of an export
JSONL_VERSION = 1


def records(store: Store, op_name: str | None = None) -> Iterator[dict]:
    """The archive as self-describing records (see docs/archive.md), references by
    content hash, never by row id: ops, candidates (parents first), results, ceilings,
    usage, runs, baselines. op_name limits it to that op's rows (ceilings are always
    included)."""
    try:
        yield from _records(store, op_name)
    except sqlite3.Error as e:
        raise ArchiveError(f"archive {store.path}: {describe(e)}") from e


def _records(store: Store, op_name: str | None) -> Iterator[dict]:
    where, args = ("WHERE o.name = ?", (op_name,)) if op_name is not None else ("", ())
    for r in store._read(f"SELECT o.* FROM ops o {where} ORDER BY o.id", args):
        yield {"kind": "op", "ir_hash": r["ir_hash"], "name": r["name"],
               "ir_text": r["ir_text"], "created": r["created"]}
    for r in store._read(
            "SELECT c.*, o.ir_hash, po.ir_hash AS parent_op, p.trace_hash AS parent_trace "
            "FROM candidates c JOIN ops o ON o.id = c.op_id "
            "LEFT JOIN candidates p ON p.id = c.parent_id "
            f"LEFT JOIN ops po ON po.id = p.op_id {where} ORDER BY c.id", args):
        parent = [r["parent_op"], r["parent_trace"]] if r["parent_trace"] else None
        yield {"kind": "candidate", "op": r["ir_hash"], "trace_hash": r["trace_hash"],
               "trace_json": r["trace_json"], "parent": parent, "proposer": r["proposer"],
               "generation": r["generation"], "note": r["note"], "created": r["created"]}
    for r in store._read(
            "SELECT r.*, c.trace_hash, o.ir_hash FROM results r JOIN candidates c "
            f"ON c.id = r.candidate_id JOIN ops o ON o.id = c.op_id {where} ORDER BY r.id",
            args):
        d = result_dict(r)
        res = d.pop("result").to_dict()
        res.pop("source_hash")
        yield {"kind": "result", "op": r["ir_hash"], "trace_hash": r["trace_hash"], **d,
               **res}
    for r in store._read("SELECT * FROM hardware ORDER BY name, key"):
        yield {"kind": "ceiling", "hardware": r["name"], "key": r["key"],
               "value": loads(r["value"], f"ceiling {r['key']!r}"), "measured": r["measured"]}
    usage_where = ("WHERE o.name = ?" if op_name is not None else "")
    for r in store._read(
            "SELECT u.*, c.trace_hash, o.ir_hash FROM usage u LEFT JOIN candidates c "
            f"ON c.id = u.candidate_id LEFT JOIN ops o ON o.id = c.op_id {usage_where} "
            "ORDER BY u.id", args):
        yield {"kind": "usage", "op": r["ir_hash"], "trace_hash": r["trace_hash"],
               "proposer": r["proposer"], "model": r["model"],
               "input_tokens": r["input_tokens"], "output_tokens": r["output_tokens"],
               "note": r["note"], "created": r["created"]}
    yield from _prompt_records(store, op_name)
    for r in store._read("SELECT u.*, o.ir_hash FROM runs u JOIN ops o ON o.id = u.op_id "
                         f"{where} ORDER BY u.id", args):
        yield {"kind": "run", "op": r["ir_hash"], "backend": r["backend"],
               "hardware": r["hardware"],
               "settings": loads(r["settings"], f"runs row {r['id']}, settings"),
               "started": r["started"], "finished": r["finished"], "status": r["status"]}
    bwhere = "WHERE op_name = ?" if op_name is not None else ""
    for r in store._read(f"SELECT * FROM baselines {bwhere} ORDER BY op_name, hardware, "
                         "toolchain, shape, kind", args):
        yield {"kind": "baseline", "op_name": r["op_name"],
               "shape": loads(r["shape"], f"baselines row of {r['op_name']}, shape"),
               "hardware": r["hardware"], "toolchain": r["toolchain"], "baseline": r["kind"],
               "time_ms": r["time_ms"], "measured": r["measured"]}


def _prompt_records(store: Store, op_name: str | None) -> Iterator[dict]:
    """The LLM exchanges, each with the candidates it produced by (ir_hash, trace_hash);
    with op_name, those that produced a candidate of that op."""
    if not store._read("SELECT 1 FROM sqlite_master WHERE name = 'prompts'"):
        return
    links: dict[int, list] = {}
    for r in store._read("SELECT pc.prompt_id, o.ir_hash, c.trace_hash, o.name FROM "
                         "prompt_candidates pc JOIN candidates c ON c.id = pc.candidate_id "
                         "JOIN ops o ON o.id = c.op_id ORDER BY pc.prompt_id, c.id"):
        if op_name is None or r["name"] == op_name:
            links.setdefault(r["prompt_id"], []).append([r["ir_hash"], r["trace_hash"]])
    for r in store._read("SELECT * FROM prompts ORDER BY id"):
        if op_name is not None and r["id"] not in links:
            continue
        yield {"kind": "prompt", "proposer": r["proposer"], "transport": r["transport"],
               "model": r["model"], "temperature": r["temperature"], "seed": r["seed"],
               "input_tokens": r["input_tokens"], "output_tokens": r["output_tokens"],
               "latency_s": r["latency_s"],
               "prompt": loads(r["prompt"] or "[]", f"prompts row {r['id']}, prompt"),
               "answer": r["answer"], "note": r["note"], "created": r["created"],
               "candidates": links.get(r["id"], [])}


@guarded
def merge(store: Store, other_path: str | os.PathLike, trust: bool = False) -> dict:
    """Import everything from another archive file (read-only, never written), in one
    transaction: ids are remapped; ops match by IR hash, candidates by (op, trace hash),
    results by (candidate, hardware, backend, run_hash, created), ceilings and baselines
    keep the most recently measured value. Returns the counts added per kind and those skipped as
    duplicates: {"ops": n, ..., "skipped": {"ops": n, ...}}. Merging twice adds nothing.
    Merged results are marked with their origin and untrusted (never a best, never
    reused, never exported) until `kevolve archive verify` measures them here, unless
    `trust`."""
    other_path = Path(other_path)
    if not other_path.exists():
        raise ArchiveError(f"no archive to merge at {other_path}")
    if other_path.resolve() == store.path.resolve():
        raise ArchiveError(f"cannot merge archive {store.path} into itself")
    with Store(other_path, readonly=True) as other, store._write() as c:
        return _Importer(c, str(other_path), trust).run(enumerate(records(other), 1))


@guarded
def export_jsonl(store: Store, path: str | os.PathLike, op_name: str | None = None) -> dict:
    """Write the archive (or one op's part) as JSON lines: a header, then one record a
    line. Written to a temporary file, then renamed into place. Returns counts per kind."""
    if op_name is not None and op_name not in store.op_names():
        raise ArchiveError(_unknown_op(op_name, store))
    path = Path(path)
    counts = {k: 0 for k in ("op", "candidate", "result", "ceiling", "usage", "prompt", "run",
                             "baseline")}
    header = {"kind": "header", "format": JSONL_FORMAT, "version": JSONL_VERSION,
              "schema": schema.schema_version(), "source": str(store.path), "op": op_name,
              "exported": time.time()}
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    except OSError as e:
        raise ArchiveError(f"cannot write {path}: {e.strerror or e}") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(dumps(header) + "\n")
            for rec in records(store, op_name):
                counts[rec["kind"]] += 1
                f.write(dumps(rec) + "\n")
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return counts


@guarded
def import_jsonl(store: Store, path: str | os.PathLike, trust: bool = False) -> dict:
    """Import an export (idempotent: what is already here is skipped), all or nothing.
    Returns counts as merge() does; results are untrusted unless `trust`, as merge's."""
    path = Path(path)
    if not path.is_file():
        raise ArchiveError(f"no file to import at {path}")
    with open(path, encoding="utf-8") as f, store._write() as c:
        return _Importer(c, str(path), trust).run(_read_jsonl(f, path))


# --- helpers -------------------------------------------------------------------------------

def _unknown_op(op_name: str, archive: Store) -> str:
    names = archive.op_names()
    if not names:
        return f"archive {archive.path} is empty: it holds no ops yet (run kevolve evolve)"
    return (f"no op named {op_name!r} in archive {archive.path}; it holds: "
            f"{', '.join(names)}")



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

    def __init__(self, conn: sqlite3.Connection, source: str, trust: bool = False):
        self.c = conn
        self.source = source
        self.trust = trust
        self.added = dict.fromkeys(KINDS, 0)
        self.skipped = dict.fromkeys(KINDS, 0)
        self.ops: dict[str, int] = {}  # ir_hash -> our op id
        self.cands: dict[tuple[str, str], int] = {}  # (ir_hash, their trace hash) -> our id
        self.where = source

    def run(self, records: Iterable[tuple[int, dict]]) -> dict:
        handlers = {"op": self.op, "candidate": self.candidate, "result": self.result,
                    "ceiling": self.ceiling, "usage": self.usage, "run": self.run_record,
                    "baseline": self.baseline, "prompt": self.prompt}
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
        num = lambda k: real(self.get(rec, k, float, None))  # noqa: E731
        self.c.execute(
            "INSERT INTO results (candidate_id, hardware, backend, toolchain, run_hash, "
            "verdict, time_ms, times_ms, baseline_ms, max_error, message, diagnostics, shape, "
            "seeds, seconds, created, origin, trusted) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (cid, hw, be, dumps(self.get(rec, "toolchain", dict, {})), run_hash,
             self.get(rec, "verdict", str), num("time_ms"),
             dumps(self.get(rec, "times_ms", list, [])), num("baseline_ms"), num("max_error"),
             self.get(rec, "message", str, ""), dumps(self.get(rec, "diagnostics", dict, {})),
             dumps(self.get(rec, "shape", dict, {})), dumps(self.get(rec, "seeds", list, [])),
             self.get(rec, "seconds", float, 0.0), created,
             self.get(rec, "origin", str, "") or self.source,
             1 if self.trust and rec.get("trusted", 1) == 1 else 0))
        self.count("results", True)

    def ceiling(self, rec: dict) -> None:
        cur = self.c.execute(
            "INSERT INTO hardware (name, key, value, measured) VALUES (?, ?, ?, ?) "
            "ON CONFLICT (name, key) DO UPDATE SET value = excluded.value, "
            "measured = excluded.measured WHERE excluded.measured > hardware.measured",
            (self.get(rec, "hardware", str), self.get(rec, "key", str),
             dumps(rec.get("value")), self.get(rec, "measured", float)))
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

    def prompt(self, rec: dict) -> None:
        """An LLM exchange; the same one (proposer, transport, model, time, answer) is
        skipped. Its candidates must be in the file or here already."""
        temp, seed = rec.get("temperature"), rec.get("seed")
        if temp is not None:
            temp = self.get(rec, "temperature", float)
        if seed is not None:
            seed = self.get(rec, "seed", int)
        key = (self.get(rec, "proposer", str), self.get(rec, "transport", str, ""),
               self.get(rec, "model", str, ""), self.get(rec, "created", float),
               self.get(rec, "answer", str, ""))
        cands = []
        for ref in self.get(rec, "candidates", list, []):
            if not (isinstance(ref, list) and len(ref) == 2
                    and all(isinstance(x, str) for x in ref)):
                self.fail("a prompt's candidate is not [ir_hash, trace_hash]")
            cid = self.cand_ref(*ref)
            if cid is None:
                self.fail(f"a prompt refers to candidate {ref[1][:12]}, which is neither in "
                          "the file nor here")
            cands.append(cid)
        row = self.c.execute("SELECT id FROM prompts WHERE proposer = ? AND transport = ? AND "
                             "model = ? AND created = ? AND answer = ?", key).fetchone()
        if row is None:
            pid = self.c.execute(
                "INSERT INTO prompts (proposer, transport, model, temperature, seed, "
                "input_tokens, output_tokens, latency_s, prompt, answer, note, created) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (*key[:3], temp, seed, self.get(rec, "input_tokens", int, 0),
                 self.get(rec, "output_tokens", int, 0),
                 self.get(rec, "latency_s", float, 0.0),
                 dumps(self.get(rec, "prompt", list, [])), key[4],
                 self.get(rec, "note", str, ""), key[3])).lastrowid
        else:
            pid = row[0]
        for cid in cands:
            self.c.execute("INSERT OR IGNORE INTO prompt_candidates (prompt_id, candidate_id) "
                           "VALUES (?, ?)", (pid, cid))
        self.count("prompts", row is None)

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
                       (*key, dumps(self.get(rec, "settings", dict, {})),
                        self.get(rec, "finished", float, None),
                        self.get(rec, "status", str, "done")))
        self.count("runs", True)

    def baseline(self, rec: dict) -> None:
        """A torch baseline per (op, shape, hardware, toolchain, kind): the latest stands."""
        cur = self.c.execute(
            "INSERT INTO baselines (op_name, shape, hardware, toolchain, kind, time_ms, "
            "measured) VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (op_name, shape, hardware, "
            "toolchain, kind) DO UPDATE SET time_ms = excluded.time_ms, "
            "measured = excluded.measured WHERE excluded.measured > baselines.measured",
            (self.get(rec, "op_name", str), dumps(self.get(rec, "shape", dict)),
             self.get(rec, "hardware", str), self.get(rec, "toolchain", str),
             self.get(rec, "baseline", str), real(self.get(rec, "time_ms", float, None)),
             self.get(rec, "measured", float)))
        self.count("baselines", cur.rowcount == 1)
