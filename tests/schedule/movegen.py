"""Hypothesis strategies for moves and traces, drawn from the move grammar in
kevolve.schedule.moves.MOVES (so a new move or argument is covered without editing here)."""

from __future__ import annotations

from hypothesis import strategies as st

from kevolve.ir.nodes import Op
from kevolve.schedule.moves import MOVES

DECISION_NAMES = ("$A", "$B", "$BN", "$W")
POW2S = tuple(1 << k for k in range(17))
names = st.text("abcdefghijklmnopqrstuvwxyz_0123456789", min_size=1, max_size=8)


def arg_value(sch: dict, name_pool=names, refs: bool = True):
    """A value that satisfies one argument's schema (integers may be `$NAME` references)."""
    t = sch.get("type")
    if t == "string":
        return st.sampled_from(sch["enum"]) if "enum" in sch else name_pool
    if t == "array":
        return st.lists(name_pool, min_size=sch.get("minItems", 0),
                        max_size=sch.get("maxItems", 4))
    assert t == "integer", sch
    nums = (st.sampled_from([p for p in POW2S if p <= sch["maximum"]]) if sch.get("pow2")
            else st.integers(sch["minimum"], sch["maximum"]))
    return st.one_of(nums, st.sampled_from(DECISION_NAMES)) if refs else nums


@st.composite
def spec_move(draw, refs: bool = True) -> dict:
    """A move that is well formed by the grammar (names are arbitrary)."""
    spec = MOVES[draw(st.sampled_from(sorted(MOVES)))]
    d = {"m": spec.name}
    for k, sch in spec.args.items():
        if k in spec.required or draw(st.booleans()):
            d[k] = draw(arg_value(sch, refs=refs))
    return d


@st.composite
def spec_trace(draw) -> tuple[str, list[dict], dict[str, int]]:
    """(op name, moves, decisions) with every `$NAME` a move uses defined."""
    moves = draw(st.lists(spec_move(), max_size=10))
    used = {v for m in moves for v in m.values() if isinstance(v, str) and v.startswith("$")}
    extra = draw(st.sets(st.sampled_from(DECISION_NAMES)))
    dec = {k: draw(st.integers(-(1 << 40), 1 << 40)) for k in sorted(used | extra)}
    op = draw(st.one_of(st.sampled_from(["softmax", "gemm_bias_gelu", ""]), st.text(max_size=12)))
    return op, moves, dec


# -- moves aimed at one op: real stage and axis names, plus junk --------------------------

def axis_pool(stage) -> list[str]:
    base = [a.name for a in stage.axes + stage.reduce_axes]
    # real axes weigh most; the others exist only after a split or a fuse
    return base * 4 + [f"{b}o" for b in base] + [f"{b}i" for b in base] + ["xo", "xi", "f"]


@st.composite
def aimed_move(draw, op: Op) -> dict:
    """A well-formed move naming a real stage of `op` and (mostly) real axes of it."""
    spec = MOVES[draw(st.sampled_from(sorted(MOVES)))]
    stage = draw(st.sampled_from(op.stages))
    axes = axis_pool(stage)
    d = {"m": spec.name}
    for k, sch in spec.args.items():
        if k not in spec.required and not draw(st.booleans()):
            continue
        if k == "stage":
            d[k] = stage.name
        elif k == "axis":
            d[k] = draw(st.sampled_from(axes))
        elif k in ("order", "axes"):
            n = 2 if k == "axes" else draw(st.integers(2, 4))
            d[k] = draw(st.lists(st.sampled_from(axes), min_size=n, max_size=n))
        elif k == "at":
            c = draw(st.sampled_from(op.stages))
            d[k] = [c.name, draw(st.sampled_from(axis_pool(c)))]
        elif k == "buffer":
            d[k] = draw(st.sampled_from([b.name for b in op.inputs] +
                                        [s.name for s in op.stages]))
        elif k == "into" and spec.name == "split":
            d[k] = draw(st.sampled_from([["xo", "xi"], ["jo", "ji"], ["io", "ii"], ["q", "q"]]))
        elif k == "into":
            d[k] = draw(st.sampled_from(["f", "i", "fused"]))
        else:
            d[k] = draw(arg_value(sch))
    return d


JUNK = st.one_of(st.none(), st.booleans(), st.integers(-(1 << 70), 1 << 70),
                 st.floats(allow_nan=False), st.text(max_size=6),
                 st.lists(st.one_of(st.integers(), st.text(max_size=3)), max_size=3),
                 st.dictionaries(st.text(max_size=3), st.integers(), max_size=2))
BAD_INTS = st.one_of(st.integers(-(1 << 70), 0), st.integers((1 << 16) + 1, 1 << 70),
                     st.sampled_from([3, 5, 6, 7, 12, 100, 1000, 4095]))


@st.composite
def junk_move(draw, op: Op):
    kind = draw(st.sampled_from(["not_dict", "unknown", "missing", "extra", "wrong_type",
                                 "bad_int", "unknown_axis", "unknown_stage", "undefined_ref"]))
    if kind == "not_dict":
        return draw(st.one_of(st.none(), st.integers(), st.text(max_size=5),
                              st.lists(st.integers(), max_size=2)))
    if kind == "unknown":
        return {"m": draw(st.one_of(st.text(max_size=8).filter(lambda s: s not in MOVES),
                                    JUNK)), "stage": op.stages[0].name}
    d = draw(aimed_move(op))
    keys = [k for k in d if k != "m"]
    if kind == "missing" and keys:
        d.pop(draw(st.sampled_from(keys)))
    elif kind == "extra":
        d[draw(st.text(min_size=1, max_size=6).filter(lambda s: s != "m"))] = draw(JUNK)
    elif kind == "wrong_type" and keys:
        d[draw(st.sampled_from(keys))] = draw(JUNK)
    elif kind == "bad_int":
        ints = [k for k in keys if MOVES[d["m"]].args[k].get("type") == "integer"]
        if ints:
            d[draw(st.sampled_from(ints))] = draw(BAD_INTS)
    elif kind == "unknown_axis" and "axis" in d:
        d["axis"] = draw(st.sampled_from(["nope", "k2", "zz", "x" * 70]))
    elif kind == "unknown_stage" and "stage" in d:
        d["stage"] = draw(st.sampled_from(["nope", "Y", ""]))
    elif kind == "undefined_ref":
        ints = [k for k in keys if MOVES[d["m"]].args[k].get("type") == "integer"]
        if ints:
            d[draw(st.sampled_from(ints))] = "$UNDEFINED"
    return d
