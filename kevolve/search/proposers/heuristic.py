"""The offline default proposer: rule-guided mutations plus random exploration.

Rules read the parent's diagnostics: spills or a failed compile shrink tiles; low achieved
bandwidth widens them or adds rows per program; a looped softmax-style sum tries the online
strategy; a split that one stage has and another stage with an axis of the same extent
lacks is copied to it (`echo`: layernorm's two reductions, rmsnorm's reduction and its
output row gain in such pairs); otherwise a random mutation or a crossover of two
same-structure parents. The best parent gets each kind of mutation once before any kind a
second time: improvements come in chains of single moves (tiles, then bulk copies, then a
pipeline across tiles), and a random pick among 23 kinds would leave some untried on the
leader for dozens of rounds.
Where a mutation gives a trace already seen, up to two more follow it: a search whose
parents' neighbourhoods are used up (the H200's gemm search from scratch stopped at 162 of
300 without) goes on a step further.
Structural kinds (inline, compute_at, reduction strategy) often need a follow-up to be
legal: where one is refused, the repairs of mutations.repairs (tile the reduction that now
loops, untile the one that no longer does, drop moves on inlined stages) are tried in turn,
and the first legal chain is proposed (noted `kind+repair`).
Every proposal is lowered here first and checked against the backend and the device's
limits (`prove.prove`), so illegal ones, and ones that could not compile or would spill,
never reach a worker; and rendered, so one whose source equals a source already proposed
(a mutation the backend ignores, moves that commute) is not proposed at all. `skipped`
counts every refusal by reason: MoveError codes, `duplicate.trace`, `duplicate.source`,
`inapplicable.KIND` (the mutation does not apply to the parent).
Kinds are drawn by measured feedback: those whose proposals became elites (parents, the
fastest few, the best) more often are drawn more often (`weight`)."""

from __future__ import annotations

import hashlib
import random
from collections import Counter

from ... import pipeline
from ...backends.usage import resident_programs
from ...ops import resolve
from ...schedule import MoveError, Trace
from . import mutations as mu
from .base import Proposal, ProposalContext, Proposer
from .prove import Backends, prove, unsupported


class HeuristicProposer(Proposer):
    name = "heuristic"

    def __init__(self, seed: int = 0, attempts: int = 40, dedup_source: bool = True, **_):
        self.rng = random.Random(seed)
        self.attempts = attempts
        self.dedup_source = dedup_source
        self.seen: set[str] = set()
        self.sources: set[str] = set()  # hashes of the sources proposed (and the parents')
        self.skipped: Counter = Counter()  # mutations dropped, by MoveError code
        self.tried: dict[int | None, set[str]] = {}  # kinds of mutation tried, by parent
        # Measured feedback: the kind each proposal came from, and per kind how many were
        # proposed, how many became elites (parents, the fastest few, the best) and how
        # many failed; kinds are drawn in proportion to (elites + 1) / (proposed + 2).
        self.kind_of: dict[str, str] = {}
        self.proposed: Counter = Counter()
        self.elite: Counter = Counter()
        self.failed: Counter = Counter()
        self._credited: set[tuple[str, bool]] = set()
        self._backend = Backends()

    def _legal(self, op, t: Trace, ctx: ProposalContext, count: bool = True):
        """The trace's plan where it proves legal, else None (the refusal counted)."""
        try:
            return prove(op, t, ctx.bench_dims, self._backend(ctx.backend), ctx.limits)
        except MoveError as e:
            if count:
                self.skipped[e.code] += 1
            return None
        except Exception as e:
            if not unsupported(e):
                raise
            if count:
                self.skipped["semantics.unsupported"] += 1
            return None

    def _source(self, plan, ctx: ProposalContext) -> str | None:
        """A hash of the source (and launch) the plan renders to; None where it cannot
        be rendered here or source dedup is off."""
        be = self._backend(ctx.backend)
        if not self.dedup_source or be is None or plan is None:
            return None
        try:
            src = pipeline.render(plan, be)
        except Exception:  # the worker reports render failures; here it only dedups
            return None
        launch = repr(src.meta.get("launch")) if isinstance(src.meta, dict) else ""
        return hashlib.sha256(f"{src.hash}\0{launch}".encode()).hexdigest()

    def _see_parent(self, op, t: Trace, ctx: ProposalContext) -> None:
        key = t.to_json()
        if key in self.seen:
            return
        self.seen.add(key)
        h = self._source(self._legal(op, t, ctx, count=False), ctx)
        if h:
            self.sources.add(h)

    def _resident(self, t: Trace | None, op, ctx: ProposalContext) -> Trace | None:
        """`t` with no more persistent programs per multiprocessor than one holds at once
        by the backend's estimate: the rest would only start when whole programs finish,
        and each program would loop over fewer tiles. On the H200, gemm_bias_gelu's
        128x256 kernel (one program per multiprocessor) ran at 0.94 of cuBLAS with 4
        programs per multiprocessor and 0.96-0.98 with 1 or 2, within tiles or across
        (do_bench, 9 rounds; h200-gemm-persistent.json)."""
        if t is None:
            return None
        be = self._backend(ctx.backend)
        try:
            fit = be and resident_programs(be.usage(prove(op, t, ctx.bench_dims, be, {})),
                                           ctx.limits)
        except Exception as e:
            if not (isinstance(e, MoveError) or unsupported(e)):
                raise
            return t  # _legal says why, with its count
        return mu.cap_persistent(t, fit) if fit else t

    def _rules(self, ctx: ProposalContext, parent) -> list[str]:
        """Mutation names worth trying first for this parent, from its diagnostics."""
        d = parent.result.diagnostics or {}
        out = []
        if d.get("compiler.spills") or parent.result.verdict in ("compile", "timeout", "oom"):
            out.append("shrink")
        bw = d.get("achieved_bytes_per_s")
        ceiling = ctx.ceilings.get("copy_bytes_per_s")
        if bw and ceiling and bw < 0.5 * ceiling:
            out += ["grow", "rows"]
        if '"strategy": "online"' not in parent.trace_json and self._onlineable(ctx):
            out.append("online")
        opdef = opdef_of(ctx)
        if opdef is not None and any(
                e.to_json() not in self.seen for e in mu.echo_splits(
                    Trace.from_json(parent.trace_json), _variant_for(opdef, ctx))):
            out.insert(1 if out[:1] == ["shrink"] else 0, "echo")
        return out

    def _onlineable(self, ctx: ProposalContext) -> bool:
        """The op has a softmax-style sum the online strategy applies to."""
        opdef = opdef_of(ctx)
        return opdef is not None and bool(mu.online_candidates(_variant_for(opdef, ctx)))

    def _mutate(self, name: str, t: Trace, op, ctx: ProposalContext) -> Trace | None:
        r, gpu = self.rng, ctx.gpu
        if name in ("grow", "shrink"):
            dec = dict(t.decisions)
            if not dec:
                return None
            k = r.choice(sorted(dec))
            v = dec[k] * 2 if name == "grow" else dec[k] // 2
            if not 1 <= v <= mu.MAX_TILE:
                return None
            dec[k] = v
            return mu.rebuild(t, mu.moves_of(t), dec)
        return {
            "scale": lambda: mu.scale_decision(t, r),
            "warps": lambda: mu.scale_warps(t, r, ctx.caps),
            "stages": lambda: mu.change_stages(t, r, ctx.caps),
            "group": lambda: mu.change_group(t, r, ctx.caps),
            "online": lambda: mu.toggle_online(t, r, op),
            "reduce_split": lambda: mu.toggle_reduce_split(t, r, op),
            "vectorize": lambda: mu.vectorize_inner(t, r, op, ctx.caps),
            "cache": lambda: mu.toggle_cache(t, r, op, ctx.caps),
            "bulk": lambda: mu.toggle_bulk_copy(t, r, op, ctx.caps),
            "bulk_write": lambda: mu.toggle_bulk_write(t, r, op, ctx.caps),
            "rows": lambda: mu.rows_per_program(t, r, op),
            "precision": lambda: mu.toggle_precision(t, r, ctx.caps, op),
            "constexpr": lambda: mu.toggle_constexpr(t, r, ctx.caps, op),
            "persistent": lambda: self._resident(mu.toggle_persistent(t, r, ctx.caps), op, ctx),
            "pipeline": lambda: self._resident(mu.toggle_pipeline(t, r, ctx.caps), op, ctx),
            "prefetch": lambda: mu.toggle_prefetch(t, r, gpu),
            "unroll": lambda: mu.unroll_loop(t, r, op, ctx.caps),
            "split": lambda: mu.split_tile(t, r, op),
            "inline": lambda: mu.toggle_inline(t, r, op),
            "compute_at": lambda: mu.toggle_compute_at(t, r, op),
            "strategy": lambda: mu.reduction_strategy(t, r, op),
            "echo": lambda: mu.echo_split(t, r, op, self.seen),
        }[name]()

    def propose(self, ctx: ProposalContext, n: int) -> list[Proposal]:
        opdef = opdef_of(ctx)
        op = _variant_for(opdef, ctx) if opdef is not None else None
        parents = list(ctx.parents) or ([ctx.best] if ctx.best else [])
        if op is None or not parents:
            return []
        for p in parents:
            self._see_parent(op, Trace.from_json(p.trace_json), ctx)
        self._feedback(ctx)
        names = ["scale", "scale", "warps", "stages", "group", "online", "reduce_split",
                 "vectorize", "cache", "bulk", "bulk_write", "rows", "precision", "constexpr",
                 "persistent", "pipeline", "prefetch", "unroll", "split", "inline",
                 "compute_at", "strategy", "echo"]
        out: list[Proposal] = []
        for _ in range(self.attempts * max(1, n)):
            if len(out) >= n:
                break
            parent = parents[0] if self.rng.random() < 0.5 else self.rng.choice(parents)
            t = Trace.from_json(parent.trace_json)
            rules = self._rules(ctx, parent)
            if len(parents) > 1 and self.rng.random() < 0.15:
                other = Trace.from_json(self.rng.choice(parents).trace_json)
                child, why = mu.crossover(t, other, self.rng), "crossover"
            else:
                why = rules.pop(0) if rules and self.rng.random() < 0.6 else \
                    self._kind(names, parent, parent is parents[0])
                child = self._mutate(why, t, op, ctx)
            key = child and child.to_json()
            for _ in range(2):  # a step further where the neighbourhood is used up
                if key not in self.seen:
                    break
                kind = self.rng.choice(names)
                child, why = self._mutate(kind, child, op, ctx), f"{why}+{kind}"
                key = child and child.to_json()
            if child is None:
                self.skipped[f"inapplicable.{why.split('+')[-1]}"] += 1
                continue
            if key in self.seen:
                self.skipped["duplicate.trace"] += 1
                continue
            self.seen.add(key)
            plan = self._legal(op, child, ctx)
            if plan is None and why.split("+")[0] in STRUCTURAL:
                for fix, fixed in mu.repairs(child, op):
                    k2 = fixed.to_json()
                    if k2 in self.seen:
                        continue
                    plan = self._legal(op, fixed, ctx, count=False)
                    if plan is not None:
                        child, key, why = fixed, k2, f"{why}+{fix}"
                        self.seen.add(key)
                        self.skipped["repaired"] += 1
                        break
            if plan is None:
                continue
            h = self._source(plan, ctx)
            if h is not None and h in self.sources:
                self.skipped["duplicate.source"] += 1
                continue
            if h is not None:
                self.sources.add(h)
            kind = why.split("+")[0]
            self.kind_of[key] = kind
            self.proposed[kind] += 1
            out.append(Proposal(key, parent.candidate_id, self.name, why))
        return out

    def _feedback(self, ctx: ProposalContext) -> None:
        """Credit the kinds whose proposals have since become elites, or failed."""
        for group, counter in (((*ctx.parents, *ctx.top, *((ctx.best,) if ctx.best else ())),
                                self.elite), (ctx.failures, self.failed)):
            for s in group:
                try:
                    key = Trace.from_json(s.trace_json).to_json()
                except MoveError:
                    continue
                kind = self.kind_of.get(key)
                if kind is not None and (key, counter is self.elite) not in self._credited:
                    self._credited.add((key, counter is self.elite))
                    counter[kind] += 1

    def weight(self, kind: str) -> float:
        """How often a kind's proposals became elites, (elites + 1) / (proposed + 2), less
        a share for its failures; never below 0.05, so no kind is shut out."""
        n = self.proposed[kind]
        return max(0.05, (self.elite[kind] + 1) / (n + 2) - 0.5 * self.failed[kind] / (n + 2))

    def _kind(self, names: list[str], parent, leader: bool) -> str:
        """A kind of mutation: for the leader, one not yet tried on it while any is left
        (kinds that do not apply to it count as tried); otherwise drawn by measured
        feedback (weight)."""
        kinds = list(dict.fromkeys(names))
        pick = self.rng.choices(kinds, weights=[self.weight(k) for k in kinds])[0]
        if not leader:
            return pick
        tried = self.tried.setdefault(parent.candidate_id, set())
        fresh = [x for x in kinds if x not in tried]
        why = self.rng.choice(fresh) if fresh else pick
        tried.add(why)
        return why


STRUCTURAL = ("inline", "compute_at", "strategy", "online", "reduce_split", "echo")


def opdef_of(ctx: ProposalContext):
    """The searched op's OpDef (kevolve.ops.resolve), or None where it cannot be found."""
    from ...errors import UserError
    try:
        return resolve(ctx.op_name)
    except UserError:
        return None


def _variant_for(opdef, ctx: ProposalContext):
    """The dtype variant the search runs (its IR name matches; the trace names its op)."""
    for v in [opdef.op, *opdef.variants.values()]:
        if ctx.default_trace_json and Trace.from_json(ctx.default_trace_json).op == v.name:
            return v
    return opdef.op
