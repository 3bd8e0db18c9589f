"""Compatibility re-export (the Triton emitter imports these names from here): the shared
plan walk lives in kevolve.plan.walk."""

from ..plan.walk import grid_count, levels, reads_contiguous, reduces_in

__all__ = ["grid_count", "levels", "reads_contiguous", "reduces_in"]
