"""Former home of the per-backend notes, kept for one release: the notes now sit with the
backends (kevolve/backends/notes/) and the LLM proposer asks `Backend.notes()`."""

from ...backends.notes import available, notes

__all__ = ["available", "notes"]
