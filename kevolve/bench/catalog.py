"""The aten suite's figures: per op, what kind of work it is and, where kevolve's kernel
does not reach torch.compile, why; over the suite, fast_1 (the share of ops whose kernel is
correct and at least as fast as torch.compile, the figure kernel-generation benchmarks
report), geomean speedups, and the ops that lose grouped by cause.

A cause is read from what the run measured and what kevolve computes anyway: the verdict
and the failing stage of the kernel, whether torch.compile gave a time, the kernel's share
of the roofline floor (kevolve.ir.roofline), whether the op contracts (a sum of products:
a GEMM) or reduces, and the reduction strategies of the kernel's plan (a contraction
lowered without `dot` runs off the tensor cores)."""

from __future__ import annotations

import math

# Causes, in the order the summary lists them: failures first, then slow-but-correct.
BENCH_ERROR = "bench error"
CHECK = "check failure"
LEGALITY = "legality failure"
COMPILE = "compile failure"
RUN = "run failure"
NO_BASELINE = "no torch.compile time"
NEAR_FLOOR = "near the roofline floor"
NO_TENSOR_CORES = "GEMM not on tensor cores"
CONTRACTION = "contraction below the matmul ceiling"
REDUCTION = "reduction-bound"
POINTWISE = "pointwise or copy below the copy floor"
CAUSES = (BENCH_ERROR, CHECK, LEGALITY, COMPILE, RUN, NO_BASELINE, NEAR_FLOOR,
          NO_TENSOR_CORES, CONTRACTION, REDUCTION, POINTWISE)
NEAR = 80.0  # % of the roofline floor from which a kernel is at the hardware's limit
REDUCING = ("single", "looped", "online")


def op_kind(op) -> tuple[bool, bool]:
    """(contracts, reduces): does a stage sum products of two operands (a GEMM or a
    convolution as one), does any stage reduce otherwise?"""
    from ..ir.nodes import Reduce, product_factors, walk

    contracts = reduces = False
    for s in op.stages:
        for n in walk(s.body):
            if isinstance(n, Reduce):
                if product_factors(n) is not None:
                    contracts = True
                else:
                    reduces = True
    return contracts, reduces


def strategies(op, trace, dims: dict, backend) -> list[str] | None:
    """The reduction strategies in the plan of `trace` (None: the default schedule) on
    `backend`; None when it does not lower."""
    from .. import pipeline
    from ..errors import KevolveError

    try:
        plan = pipeline.lower(op, trace, dims, backend).plan
    except KevolveError:
        return None
    return sorted({s.strategy for k in plan.kernels for s in k.steps})


def facts(name: str, row: dict, backend, shape: str) -> dict:
    """What the summary needs beside the timings: the op's family and kind, the plan's
    strategies, the default schedule's speedup over torch.compile, and the cause."""
    import json

    from ..ops import aten, resolve

    d = resolve(name)
    sd = d.shape(shape)
    op = d.op_for(sd)
    contracts, reduces = op_kind(op)
    trace = row.get("trace")
    out = {"family": aten.family_of(d.name), "contracts": contracts, "reduces": reduces,
           "on_device": backend.target.on_device,
           "strategies": strategies(op, json.dumps(trace) if trace else None, d.dims(sd),
                                    backend)}
    dm = default_ms(row)
    if dm and row.get("compile_ms"):
        out["default_speedup_compile"] = row["compile_ms"] / dm
    out["cause"] = cause({**row, **out})
    return out


def default_ms(row: dict) -> float | None:
    """The default schedule's time: its own, or the pick's where the pick is the default."""
    if row.get("default_ms"):
        return row["default_ms"]
    if row.get("default_is_pick") or row.get("trace_source") == "default":
        return row.get("kevolve_ms")
    return None


def fast(row: dict, p: float = 1.0) -> bool:
    """Correct and at least `p` times as fast as torch.compile."""
    return row.get("kevolve_verdict") == "ok" and (row.get("speedup_compile") or 0) >= p


def cause(row: dict) -> str | None:
    """Why the op's kernel does not reach torch.compile (None: it does)."""
    verdict = row.get("kevolve_verdict")
    if verdict == "wrong":
        return CHECK
    if verdict != "ok":
        stage = row.get("kevolve_stage")
        if stage == "bench":
            return BENCH_ERROR
        if stage == "legality":
            return LEGALITY
        if stage in ("render", "compile"):
            return COMPILE
        return RUN
    if not row.get("compile_ms"):
        return NO_BASELINE
    if fast(row):
        return None
    if (row.get("pct_floor") or 0) >= NEAR:
        return NEAR_FLOOR
    strat = row.get("strategies") or []
    if row.get("contracts"):
        return NO_TENSOR_CORES if row.get("on_device") and "dot" not in strat else CONTRACTION
    if row.get("reduces") or any(s in REDUCING for s in strat):
        return REDUCTION
    return POINTWISE


def geomean(xs) -> float | None:
    xs = [x for x in xs if x]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def summary(rows: list[dict], ceilings: dict | None = None) -> dict:
    """The suite's figures from its rows. fast_1 counts every op benched in its
    denominator: a kernel that failed, or an op torch.compile could not time, is not
    fast (as kernel-generation benchmarks count an incorrect solution)."""
    n = len(rows)
    by_cause: dict[str, list[dict]] = {}
    for r in rows:
        c = r.get("cause", cause(r))
        if c is not None:
            by_cause.setdefault(c, []).append(
                {"op": r["op"], "family": r.get("family"),
                 "speedup_compile": r.get("speedup_compile"), "pct_floor": r.get("pct_floor"),
                 "strategies": r.get("strategies"),
                 "message": r.get("kevolve_message") or r.get("compile_error")})
    families: dict[str, list[dict]] = {}
    for r in rows:
        families.setdefault(r.get("family") or "spec", []).append(r)
    c = ceilings or {}
    return {
        "ops": n,
        "correct": sum(r.get("kevolve_verdict") == "ok" for r in rows),
        "timed_vs_compile": sum(bool(r.get("speedup_compile")) for r in rows),
        "fast_1": sum(fast(r) for r in rows) / n if n else None,
        "fast_1_default": sum((r.get("default_speedup_compile") or 0) >= 1
                              and r.get("kevolve_verdict") == "ok" for r in rows) / n
        if n else None,
        "geomean_speedup_compile": geomean(r.get("speedup_compile") for r in rows),
        "geomean_speedup_eager": geomean(r.get("speedup_eager") for r in rows),
        "geomean_default_speedup_compile": geomean(r.get("default_speedup_compile")
                                                   for r in rows),
        "ridge_flop_per_byte": (c["matmul_flops"] / c["copy_bytes_per_s"]
                                if c.get("matmul_flops") and c.get("copy_bytes_per_s")
                                else None),
        "families": {f: {"ops": len(rs), "fast_1": sum(fast(r) for r in rs) / len(rs),
                         "geomean_speedup_compile": geomean(r.get("speedup_compile")
                                                            for r in rs)}
                     for f, rs in families.items()},
        "losses": {k: by_cause[k] for k in CAUSES if k in by_cause},
    }


def _pct(x) -> str:
    return "-" if x is None else f"{100 * x:.0f}%"


def _x(x) -> str:
    return "-" if x is None else f"{x:.3f}x"


def _loss(o: dict) -> str:
    """An op that loses, with its speedup and share of the floor where it was timed."""
    if not o["speedup_compile"]:
        return o["op"]
    floor = "" if o["pct_floor"] is None else f", {o['pct_floor']:.2g}% of the floor"
    return f"{o['op']} ({_x(o['speedup_compile'])}{floor})"


def markdown(res: dict, command: str) -> str:
    """The aten run as Markdown: the command, the summary figures, the ops that lose by
    cause, and every op's row."""
    s = res["aten"]
    lines = [f"# kevolve bench --suite aten on {res['backend']} ({res['hardware']})", "",
             f"Command: `{command}`", "",
             f"{res.get('date', '')}; preset `{res.get('preset')}`, search budget "
             f"{res.get('budget')} per op, {res.get('rounds')} interleaved rounds, medians. "
             "Every kernel is checked against the float64 reference before it is timed and "
             "again on the outputs its timed calls left; a wrong kernel is a check failure, "
             "never a time.", "",
             f"- ops: {s['ops']}, correct kernels: {s['correct']}, timed against "
             f"torch.compile: {s['timed_vs_compile']}",
             f"- fast_1 (correct and >= 1.0x torch.compile, over all {s['ops']} ops): "
             f"{_pct(s['fast_1'])}; default schedule alone: {_pct(s['fast_1_default'])}",
             f"- geomean speedup over torch.compile: {_x(s['geomean_speedup_compile'])} "
             f"(default schedule: {_x(s['geomean_default_speedup_compile'])}); over eager: "
             f"{_x(s['geomean_speedup_eager'])}", ""]
    if s["families"]:
        lines += ["| family | ops | fast_1 | geomean x compile |", "|---|---|---|---|"]
        lines += [f"| {f} | {v['ops']} | {_pct(v['fast_1'])} | "
                  f"{_x(v['geomean_speedup_compile'])} |" for f, v in s["families"].items()]
        lines.append("")
    if s["losses"]:
        lines += ["## Ops that lose, by cause", ""]
        for k, ops in s["losses"].items():
            lines.append(f"- **{k}** ({len(ops)}): " + ", ".join(_loss(o) for o in ops))
        lines.append("")
    lines += ["## Per op", "",
              "| op | family | eager ms | compile ms | default ms | kevolve ms | x compile | "
              "default x compile | % floor | strategies | verdict | cause |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|"]

    def ms(x):
        return "-" if x is None else f"{x:.4g}"
    for r in res["rows"]:
        lines.append(
            f"| {r['op']} | {r.get('family', '-')} | {ms(r.get('eager_ms'))} | "
            f"{ms(r.get('compile_ms'))} | {ms(default_ms(r))} | {ms(r.get('kevolve_ms'))} | "
            f"{_x(r.get('speedup_compile'))} | {_x(r.get('default_speedup_compile'))} | "
            f"{ms(r.get('pct_floor'))} | {','.join(r.get('strategies') or []) or '-'} | "
            f"{r.get('kevolve_verdict', '-')} | {r.get('cause') or '-'} |")
    return "\n".join(lines) + "\n"
