"""Compatibility: the archive moved to the package `kevolve.archive`. This module re-exports
its public names for one release; import from `kevolve.archive` instead."""

from ..archive import (
    APPLICATION_ID,
    BUSY_TIMEOUT_S,
    DEFAULT_PATH,
    KINDS,
    MIGRATIONS,
    Archive,
    ArchiveError,
    canonical_trace,
    ir_hash,
    name_of,
    schema_version,
)
from ..archive.merge import JSONL_FORMAT, JSONL_VERSION

__all__ = ["APPLICATION_ID", "BUSY_TIMEOUT_S", "DEFAULT_PATH", "JSONL_FORMAT", "JSONL_VERSION",
           "KINDS", "MIGRATIONS", "Archive", "ArchiveError", "canonical_trace", "ir_hash",
           "name_of", "schema_version"]
