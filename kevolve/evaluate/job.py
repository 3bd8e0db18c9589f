"""What is evaluated and what comes back: plain frozen data, JSON-able, so jobs cross
process (and Ray) boundaries and results go into the archive unchanged. The stages a
candidate passes through, cheapest first, are declared here once."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields

# Verdicts: "ok", or the stage that failed, cheapest first; then what the worker pool
# records when a worker dies, hangs or grows too large; and "suspicious": a time below the
# roofline floor that did not go away when timed again (kevolve.search.verify).
STAGES = ("legality", "render", "compile", "correctness", "timing")
FAILURES = STAGES + ("crash", "timeout", "oom", "suspicious")


@dataclass(frozen=True)
class EvalJob:
    """Everything a worker needs to evaluate one candidate, by value."""

    op: str  # library name or `path/to/spec.py:name`
    backend: str
    trace_json: str
    bench_shape: dict  # the shape dict timing runs at (a preset's dict, overrides applied)
    check_shapes: tuple[dict, ...] = ()  # small and edge shapes checked before timing
    seeds: tuple[int, ...] = (0, 1, 2)  # one fresh input draw per trial
    backend_options: dict = field(default_factory=dict)
    check_bench_shape: bool = True  # full correctness at the bench shape too
    time: bool = True
    repeat: int = 15  # CPU timed repeats
    threads: int | None = None  # CPU threads (kernel and torch baseline alike)
    baseline: bool = False  # also time torch eager in the same process
    candidate_id: int | None = None

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class Result:
    verdict: str  # "ok" or a member of FAILURES
    time_ms: float | None = None  # median
    times_ms: tuple[float, ...] = ()  # per call; medians of `repeat` groups when more ran
    baseline_ms: float | None = None  # torch eager, same process
    max_error: float | None = None
    message: str = ""  # the failure, trimmed (compiler error, mismatch location, ...)
    diagnostics: dict = field(default_factory=dict)  # regs, spills, bytes/s, % roofline...
    source_hash: str | None = None  # what ran: rendered source + backend + toolchain
    seconds: float = 0.0  # wall time of the evaluation

    @property
    def ok(self) -> bool:
        return self.verdict == "ok"

    def to_dict(self) -> dict:
        d = asdict(self)
        d["times_ms"] = list(self.times_ms)
        return d

    @staticmethod
    def from_dict(d: dict) -> Result:
        """The Result a dict holds, written by this kevolve or another version: keys this
        version does not know are dropped, missing ones take their defaults."""
        d = {k: v for k, v in d.items() if k in _RESULT_FIELDS}
        d["times_ms"] = tuple(d.get("times_ms") or ())
        return Result(**d)


_RESULT_FIELDS = frozenset(f.name for f in fields(Result))
