"""Conformance of operators to their ATen references: each op of a selection is built with
the default schedule on a backend and run on fresh random inputs at its small preset and
its edge shapes (every dim 1; primes; a 16-bit dtype where it has variants). Two checks per
shape, both in float64:

- the op's torch reference (run in float64 on the same inputs, so a kernel more accurate
  than a float32/TF32 torch is never failed) against the reference interpreter: is the spec
  the ATen operator it names?
- the kernel against the interpreter, with the tolerance of the output's dtype.

The pseudo-backend `interp` runs only the first check. A shape in a dtype the backend does
not have (f16 on cpu) is skipped and listed. A verdict is `pass`, `spec` (the spec
and its reference disagree), `wrong` (the kernel's numbers are off), `fail` (a pipeline stage
refused or broke: legality, lowering, render, compile, launch) or `crash` (a kevolve bug)."""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field

import numpy as np

from ..errors import KevolveError
from .check import alloc_outputs, compare, inputs_for, to_host

INTERP = "interp"


@dataclass(frozen=True)
class Conformance:
    """One op on one backend: the verdict over every shape tried."""

    op: str
    backend: str
    verdict: str  # pass | spec | wrong | fail | crash
    max_error: float = 0.0
    reason: str = ""
    stage: str = ""  # the pipeline stage that failed (fail / crash)
    shapes: list[dict] = field(default_factory=list)
    seconds: float = 0.0
    skipped: list[str] = field(default_factory=list)  # dtypes the backend does not have

    @property
    def ok(self) -> bool:
        return self.verdict == "pass"

    def to_dict(self) -> dict:
        d = asdict(self)
        d["max_error"] = None if not np.isfinite(self.max_error) else self.max_error
        return d


def conform_shapes(opdef, edges: bool = True) -> list[dict]:
    """The small preset, then the op's edge shapes (without repeats)."""
    out: list[dict] = []
    for sd in [opdef.shape("small"), *(opdef.edge_shapes if edges else ())]:
        if sd not in out:
            out.append(dict(sd))
    return out


def torch_reference(opdef, op, case) -> dict[str, np.ndarray]:
    """The op's torch reference in float64 on the case's inputs (host, no TF32)."""
    import warnings

    import torch

    from ..ops.base import torch_inputs

    t = torch_inputs(op, case, "cpu", float_dtype=torch.float64)
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch's notes (var of one value is NaN, ...)
        got = opdef.torch_eager(t, case.params)
    return {k: v.double().numpy() if hasattr(v, "double") else np.asarray(v, np.float64)
            for k, v in got.items()}


def conform(opdef, backend=None, *, seeds=(0,), edges: bool = True, cache=None,
            backend_name: str = INTERP, compile_only: bool = False) -> Conformance:
    """Check `opdef` (reference vs interpreter; with a `backend`, its default-schedule
    kernel vs interpreter) at every conform shape and seed; the first problem is the
    verdict. `compile_only`: build each kernel but run none (a GPU backend's compiler on a
    machine without the GPU)."""
    from .. import pipeline
    from ..ir.interp import bind_dims
    from ..ir.interp import run as interpret

    t0 = time.perf_counter()
    worst = 0.0
    shapes = conform_shapes(opdef, edges)
    skipped: set[str] = set()

    def verdict(v, reason="", stage=""):
        return Conformance(opdef.name, backend_name, v, worst, reason, stage, shapes,
                           round(time.perf_counter() - t0, 3), sorted(skipped))

    stage = "reference"
    try:
        for sd in shapes:
            op = opdef.op_for(sd)
            for seed in seeds:
                stage = "reference"
                case = opdef.case(sd, seed)
                ref = interpret(op, case.inputs, case.params)
                if opdef.torch_eager is not None:
                    chk = compare(op, torch_reference(opdef, op, case), ref)
                    if not chk.ok:
                        return verdict("spec", f"shape {sd}: torch vs interpreter: "
                                       f"{chk.message}", "reference")
                if backend is None:
                    continue
                missing = {b.dtype.name for b in op.inputs + tuple(s.out for s in op.stages)
                           if b.dtype.name not in backend.caps.dtypes}
                if missing:  # the backend refuses the dtype up front: not a failure
                    skipped |= missing
                    continue
                lib, device = backend.target.tensor_lib, backend.target.tensor_device
                dims = bind_dims(op, case.inputs, case.params)
                stage = "lower"
                src = pipeline.compile(op, None, dims, backend).source
                stage = "compile"
                k = pipeline.build(src, backend, cache)
                if compile_only:
                    continue
                stage = "launch"
                ins = inputs_for(op, case.inputs, lib, device)
                outs = alloc_outputs(op, dims, lib, device)
                k(ins, outs, case.params)
                chk = compare(op, {n: to_host(v) for n, v in outs.items()}, ref)
                worst = max(worst, chk.max_error)
                if not chk.ok:
                    return verdict("wrong", f"shape {sd}, seed {seed}: {chk.message}",
                                   "correctness")
    except KevolveError as e:
        st = getattr(e, "stage", None) or stage
        return verdict("fail", pipeline.describe(e), st)
    except Exception as e:  # noqa: BLE001 - a launch or a kevolve bug: reported per op
        what = "fail" if stage in ("compile", "launch") else "crash"
        return verdict(what, f"{type(e).__name__}: {str(e).strip()[:400]}", stage)
    return verdict("pass")


def summary(results: list[Conformance]) -> dict:
    """Counts by verdict, and the failing ops grouped by stage."""
    counts: dict[str, int] = {}
    by_stage: dict[str, list[str]] = {}
    for r in results:
        counts[r.verdict] = counts.get(r.verdict, 0) + 1
        if not r.ok:
            by_stage.setdefault(r.stage or r.verdict, []).append(r.op)
    return {"ops": len(results), "passed": counts.get("pass", 0), "verdicts": counts,
            "failures_by_stage": by_stage}


def make_backend(name: str, interpret: bool = False, emulate: bool = False,
                 compile_only: bool = False):
    """(backend or None for `interp`, why it cannot run here or ""). `interpret`: Triton's
    interpreter; `emulate`: a GPU backend's CPU emulation; `compile_only` needs only the
    backend's compiler."""
    if name == INTERP:
        return None, ""
    from ..backends.registry import get

    opts = ({"interpret": True} if interpret else {}) | ({"emulate": True} if emulate else {})
    be = get(name, **opts)
    ok, why = be.available()
    return be, ("" if ok or compile_only else why)


def share(names: list[str], spec: str | None) -> list[str]:
    """The `K/N` share of `names`: every N-th op starting at K (a rotating CI slice)."""
    if not spec:
        return names
    k, _, n = spec.partition("/")
    k, n = int(k), int(n)
    if n < 1 or not 0 <= k < n:
        raise ValueError(f"share {spec!r}: give K/N with 0 <= K < N")
    return names[k::n]


def conform_all(names: list[str], backend_name: str = INTERP, *, interpret: bool = False,
                emulate: bool = False, compile_only: bool = False, seeds=(0,),
                edges: bool = True, on_result=None) -> list[Conformance]:
    """`conform` for each catalog op of `names` (aten names) on one backend; kernels are
    shared through one build cache."""
    from ..ir.specfile import is_spec_ref
    from ..ops import resolve

    be, why = make_backend(backend_name, interpret, emulate, compile_only)
    if why:
        raise RuntimeError(f"backend {backend_name} cannot run here: {why}")
    cache: dict = {}
    out = []
    for n in names:
        r = conform(resolve(n if n.startswith("aten.") or is_spec_ref(n) else "aten." + n), be,
                    seeds=seeds, edges=edges, cache=cache, backend_name=backend_name,
                    compile_only=compile_only)
        out.append(r)
        if on_result is not None:
            on_result(r)
    return out


def markdown(results: list[Conformance], command: str, family_of=None) -> str:
    """A conformance run as Markdown: the command, counts per family, and every op that did
    not pass, grouped by the stage that failed, with its reason."""
    fam = family_of or (lambda n: "")
    s = summary(results)
    backend = results[0].backend if results else "?"
    lines = [f"# Conformance of the ATen catalog on {backend}", "", "```", command, "```", "",
             f"**{s['passed']} of {s['ops']} ops pass** on {backend}"
             + "".join(f"; {v}: {n}" for v, n in s["verdicts"].items() if v != "pass") + ".",
             ""]
    skipped = sorted({d for r in results for d in r.skipped})
    if skipped:
        lines += [f"Shapes in {', '.join(skipped)} were skipped: the backend does not have "
                  "that dtype.", ""]
    fams: dict[str, list[int]] = {}
    for r in results:
        c = fams.setdefault(fam(r.op), [0, 0])
        c[0] += r.ok
        c[1] += 1
    lines += ["| family | pass | ops |", "| --- | --- | --- |"]
    lines += [f"| {f} | {p} | {n} |" for f, (p, n) in fams.items()]
    lines.append("")
    if s["failures_by_stage"]:
        lines += ["## Failures by stage", ""]
        bad = {r.op: r for r in results if not r.ok}
        for stage, ops in s["failures_by_stage"].items():
            lines += [f"### {stage} ({len(ops)})", "", "| op | verdict | reason |",
                      "| --- | --- | --- |"]
            for n in ops:
                why = " ".join(bad[n].reason.split())[:300].replace("|", "\\|")
                lines.append(f"| {n} | {bad[n].verdict} | {why} |")
            lines.append("")
    return "\n".join(lines)
