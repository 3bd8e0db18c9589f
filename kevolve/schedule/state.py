"""Schedule state: what the moves so far have decided, per stage. Frozen; moves rebuild it."""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..ir.nodes import Op


@dataclass(frozen=True)
class LoopAxis:
    """One loop of a stage's nest. `origin` names the IR axis (two for a fused loop)."""

    name: str
    origin: tuple[str, ...]
    kind: str  # spatial | reduce
    part: str = "whole"  # whole | outer | inner | fused
    size: int | None = None  # tile size of an inner axis
    tail: str = "mask"
    bind: str | None = None  # grid | threads
    vector: int | None = None
    unroll: int | None = None


@dataclass(frozen=True)
class StageSched:
    name: str
    loops: tuple[LoopAxis, ...]
    placement: str = "root"  # root | inline | at
    at: tuple[str, str] | None = None
    placed_by: int | None = None  # index of the move that set the placement
    reduction: str = "auto"  # auto | single | looped | online | split
    reduction_by: int | None = None
    split_factor: int | None = None
    caches: tuple[tuple[str, str, str], ...] = ()  # (buffer, scope, copy) from cache moves
    cache_by: tuple[tuple[str, int], ...] = ()  # (buffer, index of its cache move)
    store_parts: int = 1  # pieces of a bulk write of the stage's own output (cache parts)
    prefetch: tuple[tuple[str, int], ...] = ()  # (buffer, distance) for gathered loads

    def loop(self, name: str) -> LoopAxis | None:
        for lp in self.loops:
            if lp.name == name:
                return lp
        return None

    def loops_of(self, origin: str) -> tuple[LoopAxis, ...]:
        return tuple(lp for lp in self.loops if origin in lp.origin)


@dataclass(frozen=True)
class Schedule:
    op: Op
    stages: tuple[StageSched, ...]
    num_warps: int | None = None
    num_stages: int | None = None
    group_m: int | None = None
    dot_precision: str | None = None
    constexpr_dims: tuple[str, ...] = ()
    persistent: int | None = None
    pipeline: str | None = None  # tile | across_tiles (persistent programs)

    def stage(self, name: str) -> StageSched:
        for s in self.stages:
            if s.name == name:
                return s
        raise KeyError(name)

    def with_stage(self, new: StageSched) -> Schedule:
        return replace(self, stages=tuple(new if s.name == new.name else s
                                          for s in self.stages))


def initial(op: Op) -> Schedule:
    """Every stage materialized at root, its axes as whole loops (spatial, then reduce)."""
    stages = []
    for s in op.stages:
        loops = tuple(LoopAxis(a.name, (a.name,), "spatial") for a in s.axes)
        loops += tuple(LoopAxis(a.name, (a.name,), "reduce") for a in s.reduce_axes)
        stages.append(StageSched(s.name, loops))
    return Schedule(op, tuple(stages))
