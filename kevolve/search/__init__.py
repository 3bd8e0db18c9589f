"""Searching schedules: `evolve(cfg)` runs one search (loop.py) of one op on one backend,
with a MAP-Elites population (population.py), proposers (proposers/), the checks that
decide whether a time is believed (verify.py), and results recorded through measure
callbacks (callbacks.py)."""

from .config import STALL_ROUNDS, SearchConfig, Summary
from .loop import Search, evolve

__all__ = ["STALL_ROUNDS", "Search", "SearchConfig", "Summary", "evolve"]
