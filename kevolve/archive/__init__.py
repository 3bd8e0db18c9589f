"""The archive: every op, candidate and result of every search, in one SQLite file.

One file (default `.kevolve/archive.db`) holds ops (IR text and hash), candidates (canonical
trace JSON, its hash, parent, proposer, generation), results (keyed by hardware and backend,
with toolchain versions, verdict, times, diagnostics, shape and seeds), measured hardware
ceilings, LLM token usage and search runs. docs/archive.md describes the schema and the
guarantees.

The package, one concept a module:
- schema.py   tables, MIGRATIONS, application_id/user_version, recognising a file
- records.py  identities (ir_hash, canonical_trace, RunKey) and rows <-> Result
- store.py    the connection, its transactions, and the query and write verbs
- merge.py    merging another archive, JSONL export and import

`Archive` is the one object callers use: the store's verbs plus merge, export and import.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

from . import merge as _merge
from .records import (
    REUSED,
    RunKey,
    Scored,
    canonical_trace,
    ir_hash,
    name_of,
    result_of,
    reused,
)
from .schema import APPLICATION_ID, KINDS, MIGRATIONS, ArchiveError, schema_version
from .store import BUSY_TIMEOUT_S, Store

# The one default archive, relative to the working directory (a str: search configs that
# hold it stay plain JSON).
DEFAULT_PATH = os.path.join(".kevolve", "archive.db")

__all__ = ["APPLICATION_ID", "BUSY_TIMEOUT_S", "DEFAULT_PATH", "KINDS", "MIGRATIONS", "REUSED",
           "Archive", "ArchiveError", "RunKey", "Scored", "canonical_trace", "ir_hash",
           "name_of", "open_archive", "result_of", "reused", "schema_version"]


class Archive(Store):
    """An open archive: the store's verbs (store.py) plus moving data between archives
    (merge.py). `Archive(path)` creates the file (and its folder) when missing unless
    create=False; readonly=True never writes (an older schema is migrated in memory)."""

    def __init__(self, path: str | os.PathLike = DEFAULT_PATH, *, create: bool = True,
                 readonly: bool = False):
        super().__init__(path, create=create, readonly=readonly)

    def records(self, op_name: str | None = None) -> Iterator[dict]:
        """The archive as self-describing records (see docs/archive.md): ops, candidates
        (parents first), results, ceilings, usage, runs; op_name limits it to one op."""
        return _merge.records(self, op_name)

    def merge(self, other_path: str | os.PathLike, trust: bool = False) -> dict:
        """Import everything from another archive file (only read), in one transaction;
        returns counts added per kind and {"skipped": ...}. Merging twice adds nothing.
        Its results are untrusted until verified here, unless `trust`."""
        return _merge.merge(self, other_path, trust)

    def export_jsonl(self, path: str | os.PathLike, op_name: str | None = None) -> dict:
        """Write the archive (or one op's part) as JSON lines; returns counts per kind."""
        return _merge.export_jsonl(self, path, op_name)

    def import_jsonl(self, path: str | os.PathLike, trust: bool = False) -> dict:
        """Import an export, all or nothing; returns counts as merge() does."""
        return _merge.import_jsonl(self, path, trust)


def open_archive(path: str | os.PathLike = DEFAULT_PATH, *, create: bool = False,
                 readonly: bool = False) -> Archive:
    """An existing archive (ArchiveError naming the file when it is missing, foreign or
    damaged), or a new one with create=True: how commands open the file `--db` names."""
    return Archive(path, create=create, readonly=readonly)
