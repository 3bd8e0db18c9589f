"""docs/moves.md is checked, block by block:

- a ```json block is a whole trace; it applies to the library op it names and lowers at that
  op's small preset (and at its gpu preset where the preset's keys are the op's dims);
- a ```json error=CODE block fails with exactly that MoveError code;
- a ```text plan K=V ... block shows what lowering makes of the json block just above it at
  those sizes, in the notation of `summary` below (compared exactly)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from schedlib import EXTRA, opdef, small

from kevolve.plan import lower
from kevolve.plan.model import Plan, PLoop
from kevolve.schedule import MoveError, Trace, apply_trace

DOC = Path(__file__).resolve().parents[2] / "docs" / "moves.md"
FENCE = re.compile(r"^```(json|text)([^\n]*)\n(.*?)^```", re.S | re.M)


def blocks() -> list[tuple[str, str, str]]:
    return [(lang, info.strip(), body) for lang, info, body in FENCE.findall(DOC.read_text())]


def loop_text(lp: PLoop) -> str:
    if lp.role in ("grid", "seq"):
        return f"{lp.name}:{lp.role}"
    return f"{lp.name}:block[{lp.size}]" + (f"@{lp.pos}" if lp.pos is not None else "")


def summary(plan: Plan) -> str:
    """Kernels with their loops (grid, seq, block[size]@layout position), the steps each
    program computes (strategy, the seq loop it sits in, its own reduce loops, whether an
    output computed there is stored too), launch hints
    and the shape-class guards checked at launch."""
    out = []
    for k in plan.kernels:
        out.append(f"kernel {k.name}: " + " ".join(loop_text(lp) for lp in k.loops))
        for st in k.steps:
            line = f"  {st.stage.name}: {st.strategy}"
            if st.online_max:
                line += f" (with {st.online_max})"
            if st.scan:
                line += f" along {st.scan.axis}" + (" reversed" if st.scan.reverse else "")
            line += ", at top" if st.level is None else f", in {st.level}"
            if st.reduce_loops:
                line += ", over " + " ".join(loop_text(lp) for lp in st.reduce_loops)
            if st.store_out:
                line += ", stored"
            out.append(line)
        hints = [f"{n}={v}" for n, v in (("num_warps", k.num_warps),
                                          ("num_stages", k.num_stages),
                                          ("group_m", k.group_m)) if v]
        if hints:
            out.append("  launch: " + " ".join(hints))
        out.extend(f"  guard: {msg}" for _, msg in k.guards)
    return "\n".join(out) + "\n"


def _trace(body: str) -> Trace:
    return Trace.from_json(body)


def _gpu_dims(name: str) -> dict[str, int] | None:
    if name in EXTRA:  # a test op (schedlib): no presets beyond its small dims
        return None
    op, dims = small(name)
    gpu = opdef(name).shapes.get("gpu", {})
    want = {k: v for k, v in gpu.items() if isinstance(v, int)}
    return want if set(want) == set(dims) else None


def _cases():
    out = []
    last = None
    for lang, info, body in blocks():
        if lang == "json":
            last = body
            if info.startswith("error="):
                out.append(pytest.param("error", body, info[len("error="):],
                                        id=f"error-{len(out)}"))
            elif not info:
                out.append(pytest.param("ok", body, None, id=f"ok-{len(out)}"))
        elif lang == "text" and info.startswith("plan"):
            dims = {k: int(v) for k, v in (kv.split("=") for kv in info.split()[1:])}
            out.append(pytest.param("plan", last, (dims, body), id=f"plan-{len(out)}"))
    return out


CASES = _cases()


def test_the_page_has_its_examples():
    kinds = [c.values[0] for c in CASES]
    assert kinds.count("ok") >= 13 and kinds.count("error") >= 5 and kinds.count("plan") >= 3
    names = {json.loads(c.values[1]).get("op") for c in CASES}
    assert {"softmax", "gemm_bias_gelu"} <= names


@pytest.mark.parametrize("kind,body,expect", CASES)
def test_doc_block(kind, body, expect):
    t = _trace(body)
    op, dims = small(t.op)
    if kind == "error":
        with pytest.raises(MoveError) as e:
            lower(apply_trace(op, t), dims)
        assert e.value.code == expect, e.value
        return
    if kind == "ok":
        lower(apply_trace(op, t), dims)
        gpu = _gpu_dims(t.op)
        if gpu:
            lower(apply_trace(op, t), gpu)
        return
    plan_dims, text = expect
    assert summary(lower(apply_trace(op, t), plan_dims)) == text


def test_every_move_has_an_example():
    used = {m.m for c in CASES if c.values[0] == "ok" for m in _trace(c.values[1]).moves}
    from kevolve.schedule import MOVES

    assert used == set(MOVES)


def test_every_code_named_on_the_page_exists():
    """The page names error codes; each must be raised somewhere in the code base."""
    root = Path(__file__).resolve().parents[2] / "kevolve"
    source = "\n".join(p.read_text() for p in root.rglob("*.py"))
    named = set(re.findall(r"`((?:schema|semantics|backend)\.[a-z0-9_]+)`", DOC.read_text()))
    assert len(named) >= 30
    missing = {c for c in named if f'"{c}"' not in source}
    assert not missing, missing


def test_every_code_the_schedule_layer_raises_is_on_the_page():
    root = Path(__file__).resolve().parents[2] / "kevolve"
    files = [*sorted((root / "schedule").glob("*.py")), root / "backends" / "base.py"]
    raised = set()
    for p in files:
        raised |= set(re.findall(r'"((?:schema|semantics|backend)\.[a-z0-9_]+)"', p.read_text()))
    named = set(re.findall(r"`((?:schema|semantics|backend)\.[a-z0-9_]+)`", DOC.read_text()))
    assert raised - named == set()
