"""No wasted candidates: identical generated code (measured before, or in the same batch)
is answered without a run and uses no budget; the heuristic proposes no trace whose source
equals one it proposed; structural mutations (inline, compute_at, reduction strategy) and
their repairs give legal traces; refusals are counted by reason; the search-quality bench
summarizes what it ran."""

from __future__ import annotations

import json
import random
from dataclasses import asdict

from kevolve.archive.records import Scored
from kevolve.backends.registry import get as get_backend
from kevolve.bench import search_quality as sq
from kevolve.evaluate.job import Result
from kevolve.ir.printer import op_text
from kevolve.ops import LIBRARY
from kevolve.plan import lower
from kevolve.schedule import Trace, apply_trace, default_trace
from kevolve.search import SearchConfig, evolve
from kevolve.search.proposers import mutations as mu
from kevolve.search.proposers.base import ProposalContext
from kevolve.search.proposers.heuristic import HeuristicProposer

SOFTMAX = LIBRARY["softmax"]
SMALL = SOFTMAX.dims("small")
DEFAULT = default_trace(SOFTMAX.op, SMALL)
BASE = json.loads(DEFAULT.to_json())["moves"]
SPLIT = {"m": "split", "stage": "y", "axis": "j", "size": 16, "into": ["jo", "ji"]}
ONLINE = {"m": "reduction", "stage": "s", "strategy": "online"}
TRACES = [
    {"op": "softmax", "moves": BASE + [SPLIT]},
    {"op": "softmax", "moves": [SPLIT] + BASE},  # the same code: moves that commute
    {"op": "softmax", "moves": BASE + [ONLINE]},
    {"op": "softmax", "moves": [ONLINE] + BASE},  # the same code again
    {"op": "softmax", "moves": BASE + [SPLIT, ONLINE]},
]


def _cfg(tmp_path, name, **kw) -> SearchConfig:
    path = tmp_path / "traces.json"
    path.write_text(json.dumps(TRACES))
    base = dict(op="softmax", backend="cpu", budget=4, shape="small",
                db=str(tmp_path / f"{name}.db"), threads=1, repeat=3, timeout_s=600,
                proposer="replay", proposer_options={"path": str(path)}, workers=2)
    base.update(kw)
    return SearchConfig(**base)


def test_identical_code_uses_no_budget(tmp_path):
    s = evolve(_cfg(tmp_path, "on"))
    # default, split, online, split+online evaluated; the two copies reused (one of them
    # a twin in the same batch, answered from its result)
    assert s.evaluated == 4 and s.reused == 2, s.to_json()
    assert [n for n, _ in s.best_so_far] == [1, 2, 3, 4]


def test_without_dedup_copies_use_budget(tmp_path):
    # one at a time: default, split, its copy (reused, charged), online: budget spent
    s = evolve(_cfg(tmp_path, "off", dedup=False, workers=1))
    assert (s.evaluated, s.reused) == (3, 1), s.to_json()
    assert [n for n, _ in s.best_so_far] == [1, 2, 4]


def _ctx(op=SOFTMAX, dims=SMALL) -> ProposalContext:
    t = default_trace(op.op, dims)
    parent = Scored(t.to_json(), Result("ok", time_ms=1.0), candidate_id=1)
    return ProposalContext(op.name, op_text(op.op), "cpu", asdict(get_backend("cpu").caps),
                           t.to_json(), (parent,), parent, 1, 0, dims)


def test_heuristic_never_proposes_the_same_source_twice():
    be = get_backend("cpu")
    h = HeuristicProposer(seed=3)
    ctx = _ctx()
    seen = {be.render(lower(apply_trace(SOFTMAX.op, DEFAULT), SMALL)).hash}
    props = [p for _ in range(4) for p in h.propose(ctx, 6)]
    assert len(props) >= 6
    for p in props:
        h_src = be.render(lower(apply_trace(SOFTMAX.op, Trace.from_json(p.trace_json)),
                                SMALL)).hash
        assert h_src not in seen, p.note
        seen.add(h_src)
    # what it refused is counted by reason, not hidden
    assert h.skipped and all(isinstance(k, str) and v > 0 for k, v in h.skipped.items())
    off = HeuristicProposer(seed=3, dedup_source=False)
    assert "duplicate.source" not in off.skipped


def test_structural_mutations_give_legal_traces_or_are_repaired():
    op = SOFTMAX.op
    legal = {"inline": 0, "compute_at": 0, "strategy": 0}
    for seed in range(16):
        rng = random.Random(seed)
        for kind, fn in (("inline", mu.toggle_inline), ("compute_at", mu.toggle_compute_at),
                         ("strategy", mu.reduction_strategy)):
            child = fn(DEFAULT, rng, op)
            assert child is not None and child != DEFAULT
            for cand in [child] + [t for _, t in mu.repairs(child, op)]:
                try:
                    lower(apply_trace(op, cand), SMALL)
                except Exception:
                    continue
                legal[kind] += 1
                break
    assert all(v > 0 for v in legal.values()), legal
    # un-inlining softmax's exp makes it a kernel of its own with its max computed inside
    t = mu.toggle_inline(DEFAULT, random.Random(0), op)
    moves = json.loads(t.to_json())["moves"]
    assert {"m": "bind", "stage": "e", "axis": "i", "to": "grid"} in moves
    assert {"m": "compute_at", "stage": "mx", "at": ["e", "i"]} in moves
    lower(apply_trace(op, t), SMALL)
    # a looped reduction without a tile is repaired by tiling it
    looped = mu.rebuild(DEFAULT, BASE + [{"m": "reduction", "stage": "s",
                                          "strategy": "looped"}])
    fixes = dict(mu.repairs(looped, op))
    assert "tile:s" in fixes
    lower(apply_trace(op, fixes["tile:s"]), SMALL)


def test_search_quality_summary_counts_candidates_to_5pct():
    curve = [(1, 2.0), (2, 1.5), (3, 1.04), (4, 1.0)]
    assert sq.candidates_to(curve, 1.05, 4) == 3
    assert sq.candidates_to(curve, 0.5, 4) == 5  # never: budget + 1
    runs = [dict(op="softmax", proposer="heuristic", seed=s, budget=4, best_ms=b,
                 default_ms=2.0, curve=c, reused=r, evaluated=4, refused={"x": 1},
                 stalled=False, duplicate_share_of_budget=0.0,
                 duplicate_share_of_proposals=r / (4 + r))
            for s, (b, c, r) in enumerate([(1.0, curve, 1), (1.5, curve[:2], 0)])]
    (row,) = sq.summarize(runs)
    assert row["best_known_ms"] == 1.0 and row["candidates_to_5pct"] == [3, 5]
    assert row["median_candidates_to_5pct"] == 4 and row["refused"] == {"x": 2}
    res = {"backend": "cpu", "hardware": "h", "command": "kevolve bench --suite search",
           "seeds": 2, "budget": 4, "dedup": True, "threads": 1, "summary": [row],
           "runs": runs, "first_seed": 0}
    md = sq.markdown(res)
    assert "| softmax | heuristic | 4.0 | 3 5 |" in md and "kevolve bench --suite search" in md


def test_search_quality_combines_benches_against_one_best_known():
    def res(dedup, best):
        run = dict(op="softmax", proposer="heuristic", seed=0, budget=4, best_ms=best,
                   default_ms=2.0, curve=[(1, 2.0), (2, best)], reused=1, evaluated=3,
                   refused={}, stalled=False, dedup=dedup,
                   duplicate_share_of_budget=0.25 if not dedup else 0.0,
                   duplicate_share_of_proposals=0.25)
        return {"backend": "cpu", "hardware": "h", "threads": 1, "first_seed": 0,
                "seeds": 1, "budget": 4, "dedup": dedup, "command": f"c{dedup}",
                "runs": [run]}
    both = sq.combine([res(False, 1.0), res(True, 1.5)], "kevolve bench")
    rows = {r["proposer"]: r for r in both["summary"]}
    assert set(rows) == {"heuristic", "heuristic (dedup off)"}
    assert rows["heuristic"]["best_known_ms"] == 1.0  # the other bench's best
    assert rows["heuristic"]["candidates_to_5pct"] == [5]  # never within 5% of it
    assert rows["heuristic (dedup off)"]["candidates_to_5pct"] == [2]
    assert both["sources"] == ["cFalse", "cTrue"]


def test_a_proposer_that_only_repeats_code_stalls_instead_of_looping(tmp_path):
    base = [m for m in BASE if m["m"] != "launch"]  # launch has no effect on cpu
    copies = [{"op": "softmax", "moves": base[k:] + base[:k] + [{"m": "launch",
                                                                 "num_warps": w}]}
              for k in range(len(base)) for w in (1, 2, 16)]
    path = tmp_path / "copies.json"
    path.write_text(json.dumps(copies))
    s = evolve(SearchConfig("softmax", "cpu", budget=5, shape="small", threads=1, repeat=3,
                            db=str(tmp_path / "a.db"), proposer="replay", workers=1,
                            proposer_options={"path": str(path)}))
    assert s.stalled and s.evaluated < 5 and s.reused >= 4, s.to_json()


def test_winners_are_re_timed_before_they_are_crowned(tmp_path):
    s = evolve(_cfg(tmp_path, "confirm", confirm=3, confirm_rounds=2))
    assert len(s.confirmed) >= 2, s.to_json()
    for c in s.confirmed:
        assert c["rounds"] == 2 and c["spread"] >= 0 and c["median_ms"] > 0
    # the best is the fastest by its re-timed median, and says how far its rounds spread
    re = {c["candidate"]: c["median_ms"] for c in s.confirmed}
    if s.best.candidate_id in re:  # (else a candidate of other code, slower when first timed)
        assert re[s.best.candidate_id] == min(re.values())
        assert s.best.result.time_ms == re[s.best.candidate_id]
        assert s.best_spread is not None
    # no copy of a re-timed candidate's code keeps its single timing in the population
    assert s.best.result.time_ms <= min(re.values())
    from kevolve.archive import Archive
    with Archive(tmp_path / "confirm.db") as a:
        got = [a.results(c)[-1]["result"] for c in re]
    assert all(r.diagnostics["confirmed"]["rounds"] == 2 for r in got)


def test_heuristic_draws_kinds_by_measured_feedback():
    from dataclasses import replace
    h = HeuristicProposer(seed=5)
    ctx = _ctx()
    first = h.propose(ctx, 4)
    win, lose = first[0], first[1]
    kw, kl = win.note.split("+")[0], lose.note.split("+")[0]
    ok = Scored(win.trace_json, Result("ok", time_ms=0.5), candidate_id=7)
    bad = Scored(lose.trace_json, Result("compile", message="boom"), candidate_id=8)
    h.propose(replace(ctx, best=ok, parents=(ok,), top=(ok,), failures=(bad,)), 2)
    assert h.elite[kw] == 1 and h.failed[kl] == 1
    h.propose(replace(ctx, best=ok, parents=(ok,), top=(ok,), failures=(bad,)), 2)
    assert h.elite[kw] == 1  # credited once
    untried = next(k for k in ("inline", "compute_at", "strategy", "split", "unroll")
                   if not h.proposed[k])
    if kw != kl:
        assert h.weight(kw) > h.weight(kl)
    assert h.weight(untried) == 0.5 and h.weight(kw) >= 0.05


class _ScriptedPool:
    """An executor whose timings are given per candidate: the duel's outcome is known."""

    def __init__(self, ms: dict):
        self.ms, self.jobs = ms, []

    def map(self, jobs):
        for j in jobs:
            self.jobs.append(j.candidate_id)
            yield j, Result("ok", time_ms=self.ms[j.candidate_id])


def test_a_lucky_timing_leads_only_if_it_wins_the_duel(tmp_path):
    import random

    from kevolve.search.config import Summary
    from kevolve.search.loop import Search
    from kevolve.search.population import Population

    search = Search(_cfg(tmp_path, "duel", duel=3))
    search._measured = []  # no archive writer: the duel itself is under test
    inc = Scored(json.dumps(TRACES[0]), Result("ok", time_ms=1.0), candidate_id=1)
    lucky = Scored(json.dumps(TRACES[2]), Result("ok", time_ms=0.8), candidate_id=2)
    for again, leader in (({1: 1.0, 2: 1.1}, 1), ({1: 1.0, 2: 0.9}, 2)):
        pop = Population(random.Random(0))
        pop.add(inc)
        pop.add(lucky)
        assert pop.best.candidate_id == 2  # on its single timing
        summ, pool = Summary("softmax", "cpu", "h"), _ScriptedPool(again)
        search._duel(pool, pop, lucky, inc, summ)
        assert sorted(pool.jobs) == [1, 1, 1, 2, 2, 2]  # three interleaved rounds each
        assert pool.jobs[:2] in ([1, 2], [2, 1]) and pool.jobs[2:4] in ([1, 2], [2, 1])
        (d,) = summ.duels
        assert d["won"] == (leader == 2) and d["candidate_ms"] == again[2]
        assert pop.best.candidate_id == leader
        assert pop.best.result.time_ms == again[leader]  # both keep their duel medians
        assert pop.best.result.diagnostics["duel"]["rounds"] == 3
    # a candidate slower than the best on its single timing is not dueled
    summ, pool = Summary("softmax", "cpu", "h"), _ScriptedPool({1: 1.0, 2: 1.0})
    search._duel(pool, pop, replace_time(inc, 2.0), pop.best, summ)
    assert not pool.jobs and not summ.duels


def replace_time(s: Scored, ms: float) -> Scored:
    from dataclasses import replace
    return replace(s, result=replace(s.result, time_ms=ms))


def test_searches_with_duels_record_them_in_the_archive(tmp_path):
    s = evolve(_cfg(tmp_path, "duels", duel=2, workers=1, budget=5))
    from kevolve.archive import Archive
    with Archive(tmp_path / "duels.db") as a:
        for d in s.duels:
            for cand in (d["candidate"], d["incumbent"]):
                assert a.results(cand)[-1]["result"].diagnostics["duel"]["rounds"] == 2
    # one best-so-far point per evaluation, duels or not
    bests = [b for _, b in s.best_so_far if b is not None]
    assert s.best is not None and len(bests) == s.evaluated
    for d in s.duels:
        assert d["won"] == (d["candidate_ms"] < d["incumbent_ms"])


def test_search_bench_reads_its_curves_from_re_timed_schedules():
    a, b, c = "A", "B", "C"  # three schedules; single timings said C < B < A
    runs = [dict(op="softmax", proposer="heuristic", seed=s, budget=3, best_ms=bm,
                 default_ms=2.0, curve=cv, traces=tr, path=pa, final=len(tr) - 1, reused=0,
                 evaluated=3, refused={}, stalled=False, duplicate_share_of_budget=0.0,
                 duplicate_share_of_proposals=0.0)
            for s, (bm, cv, tr, pa) in enumerate([
                (1.0, [(1, 2.0), (2, 1.5), (3, 1.0)], [a, b, c], [0, 1, 2]),
                (1.5, [(1, 2.1), (2, 2.1), (3, 1.5)], [a, b], [0, 0, 1])])]
    single = sq.summarize([dict(r) for r in runs])[0]
    assert single["candidates_to_5pct"] == [3, 4] and not single["retimed"]
    # side by side, B is the fastest and C no faster than A
    sq.apply_retimed(runs, {a: [2.0, 2.0, 2.2], b: [1.2, 1.1, 1.2], c: [2.0, 2.1, 1.9]}, a)
    assert runs[0]["retimed_curve"] == [[1, 2.0], [2, 1.2], [3, 2.0]]
    assert runs[0]["retimed_best_ms"] == 2.0 and runs[1]["retimed_best_ms"] == 1.2
    (row,) = sq.summarize(runs)
    assert row["retimed"] and row["best_known_ms"] == 1.2
    assert row["candidates_to_5pct"] == [2, 3]  # from the re-timed curves
    assert row["candidates_to_5pct_single"] == [3, 4] and row["default_ms"] == 2.0
    res = {"backend": "cpu", "hardware": "h", "command": "c", "seeds": 2, "budget": 3,
           "dedup": True, "threads": 1, "summary": [row], "runs": runs, "first_seed": 0,
           "retime_rounds": 3}
    md = sq.markdown(res)
    assert "over 3 interleaved rounds" in md and "| 3.5 (3 4) |" in md


def test_search_bench_re_times_schedules_side_by_side():
    split = json.dumps(TRACES[0])
    times, default = sq.retime("softmax", "cpu", None, [DEFAULT.to_json(), split], 1, 3, 2,
                               preset="small")
    assert default == DEFAULT.to_json()
    assert [len(v) for v in times.values()] == [2, 2]
    assert all(t > 0 for v in times.values() for t in v)
