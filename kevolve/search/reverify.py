"""Verifying merged results: what another archive claims is measured again on this machine
before it can count. Each untrusted ok result's candidate is evaluated as a search would
evaluate it (every check shape, the benchmark shape, timing, the roofline check) and the
new result is recorded as this machine's own; the merged one is marked verified and never
counts itself. A claim for an op this kevolve cannot resolve stays untrusted."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from ..archive import Archive, open_archive
from ..errors import KevolveError
from ..schedule import MoveError, Trace
from .config import SearchConfig


@dataclass
class VerifyReport:
    checked: int = 0  # merged results measured again here
    ok: int = 0  # of those, the ones that passed here
    failed: list = field(default_factory=list)  # (candidate, verdict, message)
    skipped: list = field(default_factory=list)  # (candidate, why it could not be verified)

    def to_dict(self) -> dict:
        return {"checked": self.checked, "ok": self.ok,
                "failed": [{"candidate": c, "verdict": v, "message": m}
                           for c, v, m in self.failed],
                "skipped": [{"candidate": c, "why": w} for c, w in self.skipped]}


def reverify(db: str, workers: int = 1, timeout_s: float = 300.0,
             mem_limit_mb: float = 8192.0, threads: int | None = None,
             repeat: int = 15, backend_options: dict | None = None) -> VerifyReport:
    """Measure every untrusted ok result of the archive `db` again on this machine."""
    from .loop import Search
    from .verify import verify

    rep = VerifyReport()
    with open_archive(db) as arch:
        pending = arch.untrusted()
    groups: dict = {}
    for r in pending:
        if not r["result"].ok:  # a failure from elsewhere claims nothing: it stays as it is
            continue
        key = (r["op"], r["backend"], json.dumps(r["shape"], sort_keys=True))
        groups.setdefault(key, []).append(r)
    for (op, backend, shape_json), rows in groups.items():
        try:
            s = Search(SearchConfig(op, backend, db=db, workers=workers, timeout_s=timeout_s,
                                    mem_limit_mb=mem_limit_mb, threads=threads, repeat=repeat,
                                    shape_overrides=json.loads(shape_json),
                                    backend_options=dict(backend_options or {})))
        except (KevolveError, ValueError, TypeError) as e:
            rep.skipped += [(r["candidate_id"], f"op {op!r} on {backend}: {e}") for r in rows]
            continue
        arch = Archive(db, create=False)
        try:
            s.ceilings = arch.ceilings(s.hardware)
            jobs, hashes, of = [], {}, {}
            for r in rows:
                try:
                    rh, fail = s.render_hash(Trace.from_json(r["trace_json"]))
                except MoveError as e:
                    rh, fail = None, e
                if rh is None:
                    rep.skipped.append((r["candidate_id"], f"does not render here: {fail}"))
                    continue
                job = s.job(r["trace_json"], r["candidate_id"], baseline=False, verify=False)
                jobs.append(job)
                hashes[r["candidate_id"]] = rh
                of[r["candidate_id"]] = r
            pool = s.executor()
            try:
                for job, res in list(pool.map(jobs)):
                    res = verify(pool, job, res, 0.0, s.suspicion)
                    cand = job.candidate_id
                    arch.add_result(cand, s.hardware, backend, s.toolchain, res,
                                    hashes[cand], s.bench_shape, list(job.seeds))
                    arch.mark_verified(of[cand]["result_id"])
                    rep.checked += 1
                    if res.ok:
                        rep.ok += 1
                    else:
                        rep.failed.append((cand, res.verdict, res.message[:300]))
            finally:
                pool.close()
        finally:
            arch.close()
    return rep
