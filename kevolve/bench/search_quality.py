"""How good is a search: `kevolve bench --suite search`.

Each proposer searches each op of a suite from the default schedule, over several seeds,
each run in a fresh archive (no run sees another's results), at the suite's search shapes
(mid-sized: large enough that times mean something, small enough for a 2-core machine).
Per op and proposer it reports the candidates needed to come within 5% of the best time
any run of this bench found (median over seeds; runs that never got there count as
budget + 1), the best found at equal budget, the duplicates (candidates whose generated
code another had already: reused, and with dedup on not charged to the budget), and the
proposals refused before evaluation by reason. A plot of best-so-far curves comes with it
where matplotlib is installed.

Times from one machine vary from run to run (on a shared 2-core machine a kernel's time
moved by a tenth between runs), more than the 5% the question asks about; so once every
run of an op is done, the schedules each run held as its best along the way (and the
default) are timed again side by side, in interleaved rounds through the search's own
evaluator, and the curves, the best known and the candidates-to-5% are read from those
times. The single timings the runs took stay in the results beside them
(`candidates_to_5pct_single`). A proposer reaching the best in one seed may still be luck:
the median over seeds is the figure to read."""

from __future__ import annotations

import json
import os
import statistics
import tempfile
import time
from collections import Counter

# Mid-sized shapes per op for the CPU suite's searches (overrides of the cpu preset).
SEARCH_SHAPES = {
    "softmax": {"M": 256, "N": 2048},
    "layernorm": {"M": 256, "N": 2048},
    "rmsnorm": {"M": 256, "N": 2048},
    "embedding_bag": {"V": 65536, "D": 64, "B": 1024, "max_len": 20},
    "jagged_sum": {"B": 512, "D": 64, "max_len": 64},
    "dot_interaction": {"B": 512, "F": 27, "D": 64},
}


def candidates_to(curve: list, target: float, budget: int) -> int:
    """The budget spent when best-so-far first came within `target`; budget + 1 if never.
    `curve`: (budget spent, best ms or None) per evaluation."""
    for spent, best in curve:
        if best is not None and best <= target:
            return spent
    return budget + 1


def run_one(op: str, proposer: str, seed: int, budget: int, backend: str, db: str,
            threads: int | None, dedup: bool, proposer_options: dict, repeat: int,
            shape: dict | None, duel: int = 3, confirm: int = 3) -> dict:
    """One search, with `kevolve evolve`'s defaults for duels and the closing re-timing;
    besides its figures, the schedule it held as best after each evaluation (`path`:
    indices into `traces`, parallel to `curve`) for the re-timing."""
    from ..search import SearchConfig, evolve

    opts = dict(proposer_options)
    if not dedup and proposer == "heuristic":  # as it proposed before: no source dedup
        opts.setdefault("dedup_source", False)
    cfg = SearchConfig(op, backend, budget=budget, proposer=proposer,
                       proposer_options=opts, db=db, seed=seed,
                       shape="cpu", shape_overrides=dict(shape or {}), threads=threads,
                       repeat=repeat, dedup=dedup, refresh=0, duel=duel, confirm=confirm)
    traces: list[str] = []
    path: list[int | None] = []

    def on_event(kind, data):  # one "result" per best_so_far point, in the same order
        if kind == "result":
            b = data.get("best")
            if b is None:
                path.append(None)
                return
            if b.trace_json not in traces:
                traces.append(b.trace_json)
            path.append(traces.index(b.trace_json))
    t0 = time.time()
    s = evolve(cfg, on_event)
    spent = s.evaluated + (0 if dedup else s.reused)
    final = None  # the final pick (after the closing re-timing, maybe never best before)
    if s.best is not None:
        if s.best.trace_json not in traces:
            traces.append(s.best.trace_json)
        final = traces.index(s.best.trace_json)
    from ..archive import Archive
    with Archive(db) as a:  # tokens spent (LLM proposers): the equal-budget protocol's other half
        usage = a.usage_totals().values()
    tokens = [sum(u["input_tokens"] or 0 for u in usage),
              sum(u["output_tokens"] or 0 for u in usage)]
    return {"op": op, "proposer": proposer, "seed": seed, "budget": budget,
            "dedup": dedup, "evaluated": s.evaluated, "failed": s.failed,
            "reused": s.reused, "spent": spent,
            "duplicate_share_of_budget": round(s.reused / spent, 4) if spent and not dedup
            else 0.0,
            "duplicate_share_of_proposals": round(s.reused / max(1, s.evaluated + s.reused), 4),
            "refused": dict(s.refused), "stalled": s.stalled, "duels": s.duels,
            "best_ms": s.best.result.time_ms if s.best else None,
            "default_ms": s.default_ms, "curve": s.best_so_far, "tokens": tokens,
            "traces": traces, "path": path, "final": final,
            "seconds": round(time.time() - t0, 1)}


def retime(op: str, backend: str, shape: dict | None, traces: list[str],
           threads: int | None, repeat: int, rounds: int,
           preset: str = "cpu") -> tuple[dict[str, list[float]], str]:
    """Each trace's times over `rounds` interleaved rounds through the search's evaluator
    at the search shape (`Search.time_rounds`), the op's default schedule first among them
    (a trace that fails gets none); and the default's trace JSON."""
    from ..search import SearchConfig
    from ..search.loop import Search

    search = Search(SearchConfig(op, backend, shape=preset, shape_overrides=dict(shape or {}),
                                 threads=threads, repeat=repeat))
    traces = list(dict.fromkeys([search.default_json, *traces]))
    pool = search.executor()
    try:
        timed = search.time_rounds(pool, [(t, None) for t in traces], rounds)
    finally:
        pool.close()
    return {t: ts for t, (ts, _) in zip(traces, timed, strict=True)}, search.default_json


def apply_retimed(runs: list[dict], times: dict[str, list[float]], default: str) -> None:
    """Each run's re-timed curve (the median re-timed ms of the schedule it held as best at
    each point), best (its final pick) and default, in place."""
    med = {t: statistics.median(v) for t, v in times.items() if v}
    for r in runs:
        tr = r.get("traces") or []
        r["retimed_curve"] = [[spent, med.get(tr[i]) if i is not None else None]
                              for (spent, _), i in zip(r["curve"], r["path"], strict=True)]
        r["retimed_best_ms"] = med.get(tr[r["final"]]) if r.get("final") is not None else None
        r["retimed_default_ms"] = med.get(default)


def summarize(runs: list[dict]) -> list[dict]:
    """Per (op, proposer): median candidates to within 5% of the op's best known, median
    best, duplicate shares and refusals summed over seeds."""
    def lowest(times_of) -> dict:  # op -> the lowest of times_of(run) over its runs
        known: dict = {}
        for r in runs:
            for ms in times_of(r):
                if ms is not None:
                    known[r["op"]] = min(known.get(r["op"], ms), ms)
        return known
    single_known = lowest(lambda r: [r["best_ms"]])
    retimed = all(r.get("retimed_curve") is not None for r in runs) and bool(runs)
    best_known = lowest(lambda r: [ms for _, ms in r["retimed_curve"]]) if retimed \
        else single_known
    groups: dict[tuple, list[dict]] = {}
    for r in runs:
        groups.setdefault((r["op"], r["proposer"]), []).append(r)
    out = []
    for (op, prop), rs in groups.items():
        known, sknown = best_known.get(op), single_known.get(op)
        curve = "retimed_curve" if retimed else "curve"
        to5 = [candidates_to(r[curve], known * 1.05, r["budget"]) if known else
               r["budget"] + 1 for r in rs]
        to5_single = [candidates_to(r["curve"], sknown * 1.05, r["budget"]) if sknown else
                      r["budget"] + 1 for r in rs]
        best_key = "retimed_best_ms" if retimed else "best_ms"
        bests = [r[best_key] for r in rs if r.get(best_key) is not None]
        default_key = "retimed_default_ms" if retimed else "default_ms"
        refused = Counter()
        for r in rs:
            refused.update(r["refused"])
        out.append({
            "op": op, "proposer": prop, "seeds": len(rs), "budget": rs[0]["budget"],
            "best_known_ms": known, "retimed": retimed,
            "candidates_to_5pct": to5, "median_candidates_to_5pct": statistics.median(to5),
            "best_known_ms_single": sknown, "candidates_to_5pct_single": to5_single,
            "median_candidates_to_5pct_single": statistics.median(to5_single),
            "best_found_ms": bests,
            "median_best_ms": statistics.median(bests) if bests else None,
            "default_ms": statistics.median([r[default_key] for r in rs
                                             if r.get(default_key)] or [0]) or None,
            "reused": sum(r["reused"] for r in rs),
            "evaluated": sum(r["evaluated"] for r in rs),
            "duplicate_share_of_budget": round(statistics.mean(
                r["duplicate_share_of_budget"] for r in rs), 4),
            "duplicate_share_of_proposals": round(statistics.mean(
                r["duplicate_share_of_proposals"] for r in rs), 4),
            "refused": dict(refused.most_common()),
            "stalled": sum(r["stalled"] for r in rs),
            "tokens": [sum(r.get("tokens", [0, 0])[i] for r in rs) for i in (0, 1)]})
    return out


def markdown(res: dict) -> str:
    lines = [f"# Search quality: {res['backend']} on {res['hardware']}", "",
             f"Command: `{res['command']}`", ""]
    lines += [f"Runs from: `{c}`" for c in res.get("sources", ())]
    lines += ["",
             f"Seeds {res['seeds']}, budget {res['budget']} per run, dedup "
             f"{'on' if res['dedup'] else 'off'}, threads {res['threads']}.", ""]
    retimed = any(s.get("retimed") for s in res["summary"])
    if retimed:
        lines += [f"Times re-timed: every schedule a run held as its best, and the default, "
                  f"timed again side by side over {res.get('retime_rounds')} interleaved "
                  f"rounds after the runs (medians). *Single timings*: the candidates to 5% "
                  f"read from the times the runs took, against the lowest of them.", ""]
    lines += ["| op | proposer | median candidates to 5% | per seed | median best ms | "
              "best known ms | default ms | duplicates / budget | duplicates / proposals | "
              "top refusals | tokens in/out |" + (" to 5%, single timings |" if retimed
                                                   else ""),
              "|" + " --- |" * (12 if retimed else 11)]
    for s in res["summary"]:
        ref = ", ".join(f"{k} {v}" for k, v in list(s["refused"].items())[:4])
        lines.append(
            f"| {s['op']} | {s['proposer']} | {s['median_candidates_to_5pct']} | "
            f"{' '.join(map(str, s['candidates_to_5pct']))} | {_n(s['median_best_ms'])} | "
            f"{_n(s['best_known_ms'])} | {_n(s['default_ms'])} | "
            f"{100 * s['duplicate_share_of_budget']:.1f}% | "
            f"{100 * s['duplicate_share_of_proposals']:.1f}% | {ref or '-'} | "
            f"{'/'.join(map(str, s.get('tokens', (0, 0))))} |" + (
                f" {s['median_candidates_to_5pct_single']} "
                f"({' '.join(map(str, s['candidates_to_5pct_single']))}) |" if retimed
                else ""))
    lines += ["", f"A run that never came within 5% counts as budget + 1 "
              f"({res['budget'] + 1})."]
    return "\n".join(lines) + "\n"


def _n(x) -> str:
    return "-" if x is None else f"{x:.4g}"


def plot(res: dict, path: str) -> str | None:
    """Best-so-far curves (time / best known) per op, one line per proposer and seed; None
    without matplotlib."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    ops = list(dict.fromkeys(r["op"] for r in res["runs"]))
    known = {s["op"]: s["best_known_ms"] for s in res["summary"]}
    fig, axes = plt.subplots(1, len(ops), figsize=(4 * len(ops), 3.2), squeeze=False)
    colours = {}
    for ax, op in zip(axes[0], ops):
        for r in (r for r in res["runs"] if r["op"] == op):
            curve = r.get("retimed_curve") or r["curve"]
            pts = [(x, y / known[op]) for x, y in curve if y is not None and known[op]]
            if not pts:
                continue
            c = colours.setdefault(r["proposer"], f"C{len(colours)}")
            ax.step(*zip(*pts), where="post", color=c, alpha=0.7,
                    label=r["proposer"] if r["seed"] == res["first_seed"] else None)
        ax.axhline(1.05, color="grey", linestyle=":", linewidth=1)
        ax.set_title(op)
        ax.set_xlabel("candidates (budget spent)")
        ax.set_ylabel("best so far / best known")
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def run(ops: tuple[str, ...], proposers: tuple[str, ...], seeds: int, budget: int,
        backend: str = "cpu", threads: int | None = 1, dedup: bool = True,
        proposer_options: dict | None = None, repeat: int = 7, out_dir: str | None = None,
        command: str = "", on_run=None, label: str = "", retime_rounds: int = 3) -> dict:
    """Every (op, proposer, seed) search, then each op's runs' best schedules re-timed
    side by side over `retime_rounds` interleaved rounds (0: not re-timed; the figures are
    then the runs' single timings); results as a dict (and results.json, report.md and
    curves.png under `out_dir` when given)."""
    from ..evaluate import hardware

    runs = []
    with tempfile.TemporaryDirectory(prefix="kevolve-search-bench-") as tmp:
        for op in ops:
            mine = len(runs)
            for prop in proposers:
                for seed in range(seeds):
                    db = os.path.join(tmp, f"{op}-{prop}-{seed}.db".replace("/", "_"))
                    r = run_one(op, prop, seed, budget, backend, db, threads, dedup,
                                (proposer_options or {}).get(prop, {}), repeat,
                                SEARCH_SHAPES.get(op))
                    if label:  # which version of a proposer (kept apart by combine)
                        r["proposer"] = f"{prop} [{label}]"
                    runs.append(r)
                    if on_run:
                        on_run(r)
            if retime_rounds:
                times, default = retime(op, backend, SEARCH_SHAPES.get(op),
                                        [t for r in runs[mine:] for t in r["traces"]],
                                        threads, repeat, retime_rounds)
                apply_retimed(runs[mine:], times, default)
    res = {"command": command, "backend": backend,
           "hardware": hardware.hardware_name(False, threads), "threads": threads,
           "seeds": seeds, "first_seed": 0, "budget": budget, "dedup": dedup,
           "retime_rounds": retime_rounds,
           "shapes": {o: SEARCH_SHAPES.get(o, {}) for o in ops},
           "summary": summarize(runs), "runs": runs}
    if out_dir:
        write(res, out_dir)
    return res


def combine(results: list[dict], command: str = "") -> dict:
    """Several benches' results as one, so that every run is held against one best known
    per op; a run without dedup is labelled `PROPOSER (dedup off)`."""
    runs = []
    for res in results:
        for r in res["runs"]:
            label = r["proposer"] + ("" if r.get("dedup", True) else " (dedup off)")
            runs.append({**r, "proposer": label})
    first = results[0]
    budgets = sorted({r["budget"] for r in runs})
    return {**{k: first[k] for k in ("backend", "hardware", "threads", "first_seed")},
            "command": command, "seeds": max(res["seeds"] for res in results),
            "budget": budgets[-1], "dedup": all(res["dedup"] for res in results),
            "sources": [res.get("command", "") for res in results],
            "shapes": {k: v for res in results for k, v in res.get("shapes", {}).items()},
            "summary": summarize(runs), "runs": runs}


def write(res: dict, out_dir: str) -> None:
    """results.json, report.md and (with matplotlib) curves.png under out_dir."""
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "results.json"), "w") as f:
        json.dump(res, f, indent=1)
    with open(os.path.join(out_dir, "report.md"), "w") as f:
        f.write(markdown(res))
    plot(res, os.path.join(out_dir, "curves.png"))
