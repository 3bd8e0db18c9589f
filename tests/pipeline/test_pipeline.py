"""The one compile pipeline: stages name themselves in what they raise, build caches by
source hash, and no other module strings apply → lower → render together."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from kevolve import api, pipeline
from kevolve.backends.cpu import CpuBackend
from kevolve.errors import CompileError, InternalError, UserError
from kevolve.ops import LIBRARY
from kevolve.schedule import MoveError, default_trace

ROOT = Path(__file__).resolve().parents[2] / "kevolve"
SOFTMAX = LIBRARY["softmax"]
DIMS = SOFTMAX.dims("small")
OP = SOFTMAX.op_for("small")


def test_compile_gives_what_the_api_gives():
    be = CpuBackend()
    c = pipeline.compile(OP, None, DIMS, be)
    assert c.source.hash == api.lower(OP, None, be, DIMS).hash
    assert c.lowered.trace == default_trace(OP, DIMS)
    assert c.lowered.plan == api.plan(OP, None, DIMS)


def test_an_illegal_move_is_a_legality_error_as_itself():
    bad = {"version": 1, "op": "softmax", "moves": [{"m": "inline", "stage": "nope"}],
           "decisions": {}}
    with pytest.raises(MoveError) as info:
        pipeline.lower(OP, bad, DIMS, CpuBackend())
    assert isinstance(info.value, UserError) and info.value.stage == "legality"


class _Broken(CpuBackend):
    name = "broken"

    def __init__(self, where: str):
        super().__init__()
        self.where, self.builds = where, 0

    def render(self, plan):
        if self.where == "render":
            raise ValueError("no rule for this step")
        if self.where == "render_move":  # a backend finding an illegal trace while rendering
            raise MoveError(None, "backend.tile", "too big", "")
        return super().render(plan)

    def build(self, source):
        self.builds += 1
        if self.where == "compile":
            raise CompileError("kernel.c:3: error: expected ';'")
        return super().build(source)


def test_a_bug_in_a_stage_is_an_internal_error_naming_the_stage():
    with pytest.raises(InternalError) as info:
        pipeline.compile(OP, None, DIMS, _Broken("render"))
    e = info.value
    assert e.stage == "render" and isinstance(e.__cause__, ValueError)
    assert pipeline.describe(e) == "ValueError: no rule for this step"


def test_a_move_error_found_while_rendering_is_still_legality():
    with pytest.raises(MoveError) as info:
        pipeline.compile(OP, None, DIMS, _Broken("render_move"))
    assert info.value.stage == "legality"


def test_a_compile_error_propagates_as_itself_from_the_compile_stage():
    be = _Broken("compile")
    seen = []
    with pytest.raises(CompileError) as info:
        pipeline.build(pipeline.compile(OP, None, DIMS, be, seen.append), be,
                       on_stage=seen.append)
    assert info.value.stage == "compile"
    assert seen == ["legality", "render", "compile"]


def test_build_caches_by_source_hash():
    be, cache = _Broken("none"), {}
    c = pipeline.compile(OP, None, DIMS, be)
    k1 = pipeline.build(c, be, cache)
    k2 = pipeline.build(pipeline.compile(OP, None, DIMS, be), be, cache)
    assert k1 is k2 and be.builds == 1 and set(cache) == {c.source.hash}


# -- the law: no other module runs the stages itself ---------------------------------------

BELOW = ("backends", "schedule", "plan", "ir", "ops")  # what the pipeline is built from


def _stages_called(path: Path) -> set[str]:
    """Which of apply_trace / the plan lowering / a render a module calls."""
    tree = ast.parse(path.read_text(), str(path))
    lowering = set()  # local names bound to the plan lowering (schedule's or plan's `lower`)
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and \
                node.module.split(".")[-1] in ("schedule", "plan", "lower"):
            lowering |= {a.asname or a.name for a in node.names if a.name == "lower"}
    out = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) \
            else None
        if name == "apply_trace":
            out.add("apply_trace")
        elif isinstance(f, ast.Name) and name in lowering:
            out.add("lower")
        elif isinstance(f, ast.Attribute) and name == "render" and len(node.args) == 1 \
                and not node.keywords:  # Backend.render(plan); a Jinja template takes kwargs
            out.add("render")
    return out


def test_only_the_pipeline_runs_the_stages():
    offenders = {}
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT)
        if rel.parts[0] in BELOW or rel == Path("pipeline.py"):
            continue
        got = _stages_called(path)
        if {"apply_trace", "lower"} <= got or "render" in got:
            offenders[str(rel)] = sorted(got)
    assert not offenders, f"modules that run the compile stages themselves: {offenders}"


def test_the_law_sees_a_copy_of_the_pipeline(tmp_path):
    copy = tmp_path / "copy.py"
    copy.write_text("from ..schedule import apply_trace\nfrom ..plan import lower as lw\n"
                    "def f(op, t, d, be):\n    s = apply_trace(op, t)\n    p = lw(s, d)\n"
                    "    return be.render(p)\n")
    assert _stages_called(copy) == {"apply_trace", "lower", "render"}
