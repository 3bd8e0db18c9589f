"""The one timer: medians after warm-up, device events on a GPU and `perf_counter` on a CPU,
and interleaved rounds for timing several contenders side by side (the bench and the
`run` command time kernels beside torch eager through these)."""

from __future__ import annotations

import statistics
import time

from .timing_lock import NodeTimingLock

MIN_TIMED_MS = 25.0  # a CPU timing's calls add up to at least this (MAX_CALLS permitting)
MAX_CALLS = 2000


def time_cpu(fn, warmup: int = 3, repeat: int = 15, prepare=None,
             min_ms: float = 0.0) -> list[float]:
    """Milliseconds of each repeat after warm-up: `repeat` calls, and more until the timed
    calls add up to `min_ms` (at most MAX_CALLS). A 0.1 ms kernel's 15 calls span 1.5 ms,
    where one interrupt on a shared core moves the median; its medians of 15 moved by a
    fifth from one timing to the next on a 2-core machine. `prepare()`, when given, runs
    untimed before every call (the evaluator poisons the outputs there, so no call can skip
    its work and leave the previous call's result standing)."""
    for _ in range(warmup):
        if prepare is not None:
            prepare()
        fn()
    out: list[float] = []
    total = 0.0
    while len(out) < repeat or (total < min_ms and len(out) < MAX_CALLS):
        if prepare is not None:
            prepare()
        t0 = time.perf_counter()
        fn()
        ms = (time.perf_counter() - t0) * 1e3
        out.append(ms)
        total += ms
    return out


def time_gpu(fn, warmup_ms: int = 25, rep_ms: int = 100) -> float:
    """Median milliseconds with CUDA events (triton.testing.do_bench flushes L2 between
    runs, so inputs come from DRAM as they would in a model)."""
    from triton.testing import do_bench
    return float(do_bench(fn, warmup=warmup_ms, rep=rep_ms, return_mode="median"))


def median(xs: list[float]) -> float:
    return float(statistics.median(xs))


def chunk_medians(xs: list[float], n: int) -> list[float]:
    """The medians of `n` consecutive, near-equal groups of `xs`, in order (what a result
    keeps of a timing's many calls: the drift over the timing, not every call)."""
    n = max(1, min(n, len(xs)))
    bounds = [round(i * len(xs) / n) for i in range(n + 1)]
    return [median(xs[a:b]) for a, b in zip(bounds, bounds[1:], strict=False)]


def timer(gpu: bool, repeat: int = 15):
    """fn -> median milliseconds: `time_gpu` on a device, else the median of `time_cpu`."""
    if gpu:
        return lambda fn: time_gpu(fn)
    return lambda fn: median(time_cpu(fn, repeat=repeat, min_ms=MIN_TIMED_MS))


def orders(n: int, rounds: int) -> list[list[int]]:
    """The order of the n contestants in each of `rounds` rounds: the rows of a Williams
    design, in which every contestant runs right after every other equally often (once in
    n rows for even n, twice in 2n rows for odd n). At a GPU's power limit what ran just
    before sets the clock a kernel starts at (a GEMM's single timings on the H200 differed
    by up to ~15% with what preceded them), so a fixed order would favour whoever always
    follows a light kernel."""
    if n == 0:
        return [[] for _ in range(rounds)]
    first, lo, hi = [0], 1, n - 1
    while len(first) < n:
        first.append(lo)
        lo += 1
        if len(first) < n:
            first.append(hi)
            hi -= 1
    rows = [[(x + r) % n for x in first] for r in range(n)]
    if n % 2:
        rows += [row[::-1] for row in rows]
    return [rows[r % len(rows)] for r in range(rounds)]


def interleaved(calls: dict, rounds: int, timer, on_error=None) -> dict[str, list[float]]:
    """Each call timed once per round, the rounds in `orders`; a call whose timing raises
    is handed to `on_error(key, exc)` and timed no more (without `on_error` it raises).
    The first call is timed once more before the rounds and that time dropped, so that the
    first kept timing follows a timing like every other, not the idle GPU a build left (on
    the H200 a GEMM timed right after its build ran up to 11% faster than in the rounds).
    The rounds hold the machine's timing lock: no other kevolve process times meanwhile."""
    lock = NodeTimingLock()
    lock.acquire()
    try:
        return _interleaved(calls, rounds, timer, on_error)
    finally:
        lock.release()


def _interleaved(calls: dict, rounds: int, timer, on_error) -> dict[str, list[float]]:
    keys = list(calls)
    times: dict = {key: [] for key in keys}
    failed: set = set()
    plan = orders(len(keys), rounds)
    if plan and plan[0]:
        try:
            timer(calls[keys[plan[0][0]]])
        except Exception:
            pass  # it fails again in its round, where on_error hears of it
    for order in plan:
        for key in (keys[i] for i in order):
            if key in failed:
                continue
            try:
                times[key].append(timer(calls[key]))
            except Exception as e:
                if on_error is None:
                    raise
                failed.add(key)
                on_error(key, e)
    return times
