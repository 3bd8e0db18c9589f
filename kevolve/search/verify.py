"""Believing a time: every search candidate is checked at the full benchmark shape in its
own job (a candidate whose job did not check it, and that is about to enter the top of the
population, is checked there before it counts), and one too good to be true is timed again.

Too good to be true: a time below the roofline floor (the bytes the op must move at the
measured copy bandwidth, its FLOPs at the measured matmul rate) is not believed. Such a
candidate is checked at the full benchmark shape and timed again; it counts only if the
new time is no longer below the floor, else it is recorded as `suspicious`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from ..evaluate.job import EvalJob, Result


def floor_ms(result: Result, ceilings: dict) -> float | None:
    """The roofline floor of a result's op at its bench shape, in ms: the larger of its
    floor bytes at the copy ceiling and its floor FLOPs at the matmul ceiling (from the
    result's diagnostics); None when neither is known."""
    d = result.diagnostics or {}
    parts = []
    for need, rate in (("floor_bytes", "copy_bytes_per_s"), ("floor_flops", "matmul_flops")):
        n, r = d.get(need), ceilings.get(rate)
        if isinstance(n, (int, float)) and isinstance(r, (int, float)) and n > 0 and r > 0:
            parts.append(n / r)
    return max(parts) * 1e3 if parts else None


def suspicious(result: Result, ceilings: dict, slack: float = 0.9, min_bytes: int = 0) -> bool:
    """True when an ok result's median time is below `slack` x its roofline floor: faster
    than the hardware can move its bytes or do its FLOPs. Ops that move fewer than
    `min_bytes` (cache-resident on the timing machine) are never suspicious."""
    if not result.ok or result.time_ms is None or slack <= 0:
        return False
    if (result.diagnostics or {}).get("floor_bytes", 0) < min_bytes:
        return False
    fl = floor_ms(result, ceilings)
    return fl is not None and result.time_ms < slack * fl


def reason(res: Result, ceilings: dict, slack: float, min_bytes: int) -> str | None:
    """Why a result is too good to be true (its time against its roofline floor), or None."""
    if not suspicious(res, ceilings, slack, min_bytes):
        return None
    d, fl = res.diagnostics, floor_ms(res, ceilings)
    return (f"{res.time_ms:.4g} ms is below {slack:g} x the roofline floor "
            f"{fl:.4g} ms ({d.get('floor_bytes')} bytes at "
            f"{ceilings.get('copy_bytes_per_s', 0) / 1e9:.4g} GB/s, {d.get('floor_flops')} FLOP "
            f"at {ceilings.get('matmul_flops', 0) / 1e9:.4g} GFLOP/s): faster than the "
            "hardware allows")


def verify(pool, job: EvalJob, res: Result, kth_time: float,
           suspicion: Callable[[Result], str | None], on_event=None) -> Result:
    """A candidate faster than `kth_time` (the population's k-th best) is re-checked at the
    full benchmark shape on `pool` before it counts. One whose time is suspicious is also
    timed again: it counts (with the new time) only if `suspicion` has nothing to say of the
    new time; otherwise it is recorded as `suspicious`."""
    if not res.ok or res.time_ms is None:
        return res
    why = suspicion(res)
    if why is None and (res.time_ms >= kth_time or job.check_bench_shape):
        # (a job that checked the benchmark shape itself needs no second check of it)
        return res
    vjob = replace(job, check_shapes=(), check_bench_shape=True, time=why is not None,
                   baseline=False)
    vres = None
    for _, got in pool.map([vjob]):
        vres = got
    if vres is None:
        return res
    if not vres.ok:
        return replace(vres, message=f"benchmark-shape check: {vres.message}",
                       diagnostics={**res.diagnostics, **vres.diagnostics})
    d = dict(res.diagnostics)
    d["verified_bench_shape"] = True
    d["max_error_bench"] = vres.max_error
    if why is None:
        return replace(res, diagnostics=d)
    d["suspicious"] = {"time_ms": res.time_ms, "times_ms": list(res.times_ms),
                       "reason": why}
    again = suspicion(vres)
    seconds = res.seconds + vres.seconds
    if again is not None:
        if on_event is not None:
            on_event("suspicious", {"candidate": job.candidate_id, "reason": again})
        return Result("suspicious", time_ms=vres.time_ms, times_ms=vres.times_ms,
                      baseline_ms=res.baseline_ms, max_error=res.max_error,
                      message=f"too fast to be true, twice: first {why}; timed again, "
                      f"{again}", diagnostics=d, source_hash=res.source_hash,
                      seconds=seconds)
    d["retimed"] = True
    d["achieved_bytes_per_s"] = vres.diagnostics.get("achieved_bytes_per_s")
    return replace(res, time_ms=vres.time_ms, times_ms=vres.times_ms, diagnostics=d,
                   seconds=seconds)
