"""Compatibility re-export: lowering lives in kevolve.plan.lower."""

from ..plan.lower import effective_bodies, lower
from .defaults import p2

__all__ = ["effective_bodies", "lower", "p2"]
