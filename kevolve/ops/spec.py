"""The spec API: turn an Op into an operator every command takes (`define`), and declare what
the IR cannot know about valid inputs (`lengths`, `domain`).

    from kevolve.ir.builder import ...
    from kevolve.ops import define, lengths, domain

    pooled = op("segment_max", inputs=[values, offsets], outputs=[out])
    SEGMENT_MAX = define(pooled, reference=my_torch_fn,
                         inputs={"offsets": lengths("skewed")})

A spec file may also bind a bare Op: `define(op)` is then implied (presets and inputs
derived from the IR, no reference: the baseline is kevolve's default schedule).

`reference` is the PyTorch code the kernel must beat (timed in eager mode and under
torch.compile) and a second oracle:
- a callable `(tensors: dict[str, Tensor], params: dict[str, int]) -> Tensor | tuple |
  dict[str, Tensor]` (a tuple in the op's output order);
- or a string naming a torch function, called with the op's input tensors positionally in
  the op's input order: `"torch.logsumexp(dim=-1)"`, `"F.softplus"` (F is
  torch.nn.functional), `"aten.mse_loss"` (torch.ops.aten). Keyword arguments in the
  parentheses are Python literals; scalar params are not passed.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Mapping

from ..ir.errors import SpecError
from ..ir.interp import eval_int
from ..ir.nodes import Binary, Dim, Op, walk
from .base import PRESETS, OpDef
from .inputs import LENGTH_DISTS, Domain, Lengths, analyse, free_dims


def user_location() -> str | None:
    """`file:line` of the innermost caller outside the kevolve package (the user's spec)."""
    import os
    import sys

    pkg = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    f = sys._getframe(1)
    while f is not None:
        if not os.path.abspath(f.f_code.co_filename).startswith(pkg + os.sep):
            return f"{f.f_code.co_filename}:{f.f_lineno}"
        f = f.f_back
    return None


__all__ = ["define", "domain", "lengths", "derived_presets", "derived_edges"]

_SMALL = (5, 7, 6, 9, 4, 11, 3, 8, 10, 12)
_PRIMES = (13, 3, 17, 5, 11, 7, 19, 2, 23, 29)
# largest buffer (elements) and loop nest (iterations) of the derived cpu / gpu presets
_LIMITS = {"cpu": (1 << 21, 1 << 30), "gpu": (1 << 25, 1 << 36)}
_SIZES = tuple(1 << k for k in range(1, 15))


def lengths(dist: str = "uniform") -> Lengths:
    """A jagged offsets input whose segment lengths follow `dist`: uniform, skewed, full,
    empty or one_long (empty segments occur in uniform and skewed; a shape's "lengths" key
    overrides the distribution, e.g. --shape lengths=full)."""
    d = {"all_empty": "empty"}.get(dist, dist)
    if d not in LENGTH_DISTS:
        raise SpecError(f"unknown length distribution {dist!r}",
                        f"use one of {', '.join(LENGTH_DISTS)}", loc=user_location())
    return Lengths(d)


def domain(lo: float | None = None, hi: float | None = None, *, positive: bool = False,
           nonzero: bool = False, integer: bool = False) -> Domain:
    """Values of an input: uniform in [lo, hi] (either may be left open), or > 0, or away
    from 0, optionally rounded to integers."""
    if lo is not None and hi is not None and lo > hi:
        raise SpecError(f"domain(lo={lo}, hi={hi}) is empty", "give lo <= hi",
                        loc=user_location())
    return Domain(lo, hi, positive, nonzero, integer)


def define(op: Op | Mapping[str, Op], *, presets: dict[str, dict] | None = None,
           reference: Callable | str | None = None, inputs: dict | None = None,
           edge_shapes=None, doc: str = "", backward=None) -> OpDef:
    """An OpDef for `op` (or for dtype variants {"f32": op32, "bf16": op16}, chosen by a
    preset's "dtype"). Missing presets ("small", "cpu", "gpu") and edge shapes are derived
    from the IR; see the module docstring for `reference`."""
    loc = user_location()
    variants = dict(op) if isinstance(op, Mapping) else {}
    base = next(iter(variants.values())) if variants else op
    if not isinstance(base, Op):
        raise SpecError(f"define() takes an Op, not {type(base).__name__}",
                        "pass the result of kevolve.ir.builder.op(...)", loc=loc)
    decl = dict(inputs or {})
    names = {b.name for b in base.inputs}
    for k, v in decl.items():
        if k not in names:
            raise SpecError(f"inputs= names {k!r}, which is not an input of {base.name} "
                            f"(inputs: {', '.join(sorted(names))})", "", loc=loc)
        if not isinstance(v, (Lengths, Domain)):
            raise SpecError(f"inputs[{k!r}] is a {type(v).__name__}",
                            "declare it with lengths(...) or domain(...)", loc=loc)
    an = analyse(base, decl)
    shapes = dict(derived_presets(base, an))
    for k, sd in (presets or {}).items():
        if not isinstance(sd, dict):
            raise SpecError(f"preset {k!r} is not a dict of sizes", "", loc=loc)
        shapes[k] = dict(sd)
    missing = [d for d in free_dims(base, an) if any(d not in sd for sd in shapes.values())]
    if missing:
        raise SpecError(f"a preset of {base.name} does not give dim {missing[0]!r}",
                        f"give {missing[0]} in every preset (dims: "
                        f"{', '.join(free_dims(base, an))})", loc=loc)
    edges = tuple(edge_shapes) if edge_shapes is not None else derived_edges(base, an)
    if edge_shapes is None:
        # a scalar the small preset fixes (an epsilon, a margin) keeps its value at the edge
        # shapes: drawn at random it can leave the domain the op is meant for (eps < 0)
        fixed = {b.name: shapes["small"][b.name] for b in base.inputs
                 if not b.shape and b.name in shapes.get("small", {})}
        edges = tuple({**fixed, **e} for e in edges)
    return OpDef(base.name, base, shapes, torch_eager=reference_fn(reference, base, loc),
                 edge_shapes=edges, doc=doc or (f"{base.name} (spec)"), variants=variants,
                 inputs=decl, reference=reference, backward=backward)


# -- presets from the IR -------------------------------------------------------------------


def _bound(e, env) -> int | None:
    if all(n.name in env for n in walk(e) if isinstance(n, Dim)):
        try:
            return eval_int(e, env)
        except Exception:
            return None
    return None


def _env(op: Op, an, values: dict[str, int]) -> dict[str, int]:
    env = dict(values)
    for dim, off in an.totals.items():
        b = next(x for x in op.inputs if x.name == off)
        nseg = _bound(b.shape[0], env)
        ml = [x for x in (_bound(e, env) for e in an.offsets.get(off, ())) if x is not None]
        ml = min(ml) if ml else env.get("max_len", 8)
        env[dim] = max((nseg or 1) - 1, 0) * ml
    return env


def _size(op: Op, env: dict[str, int]) -> tuple[int, int]:
    """(largest buffer in elements, largest loop nest in iterations) at these dims."""
    buf = work = 0
    for b in list(op.inputs) + [s.out for s in op.stages]:
        n = 1
        for e in b.shape:
            n *= max(_bound(e, env) or 1, 1)
        buf = max(buf, n)
    for s in op.stages:
        n = 1
        for a in s.axes + s.reduce_axes:
            e = a.max_extent if a.max_extent is not None else a.extent
            n *= max(_bound(e, env) or 1, 1)
        work = max(work, n)
    return buf, work


def _sizes_of(op: Op):
    """Every buffer dim and axis extent written over dims alone (L - K + 1, F * (F - 1))."""
    for b in list(op.inputs) + [s.out for s in op.stages]:
        yield from b.shape
    for st in op.stages:
        for a in st.axes + st.reduce_axes:
            yield a.max_extent if a.max_extent is not None else a.extent


def negative_size(op: Op, shape: Mapping) -> str | None:
    """What in `op` a shape dict makes negative (a buffer dim, an axis extent written over
    dims alone), said with the values; None when every such size is 0 or more."""
    from ..ir.printer import expr as expr_text

    env = {k: v for k, v in shape.items() if isinstance(v, int) and not isinstance(v, bool)}
    where = [(f"input {b.name!r}", b.shape) for b in op.inputs] + \
        [(f"stage {st.name!r}", st.out.shape) for st in op.stages] + \
        [(f"axis {a.name!r} of stage {st.name!r}", (a.extent,)) for st in op.stages
         for a in st.axes + st.reduce_axes]
    for what, sizes in where:
        for e in sizes:
            v = _bound(e, env)
            if v is not None and v < 0:
                vals = ", ".join(f"{n}={env[n]}" for n in sorted(
                    {x.name for x in walk(e) if isinstance(x, Dim)}))
                return f"{what} has size {expr_text(e)} = {v} at {vals}"
    return None


def _fit(op: Op, an, shape: dict) -> dict:
    """`shape` with the dims that a size shrinks with (K in L - K + 1, G in C // G) halved
    until every size written over dims alone is at least 1: sizes drawn one per dim know
    nothing of the op's constraints (a convolution's kernel longer than its input, more
    groups than channels). A size `C // G` of two dims is taken as exact (channels split
    into groups): C is rounded down to a multiple of G."""
    shape = dict(shape)
    exact = {(e.a.name, e.b.name) for s in _sizes_of(op) for e in walk(s)
             if isinstance(e, Binary) and e.op == "floordiv" and isinstance(e.a, Dim)
             and isinstance(e.b, Dim)}

    def small(e, env) -> bool:
        v = _bound(e, env)
        return v is not None and v < 1

    for _ in range(64):
        env = _env(op, an, {k: v for k, v in shape.items() if isinstance(v, int)})
        bad = next((e for e in _sizes_of(op) if small(e, env)), None)
        if bad is None:
            for a, b in exact:
                if isinstance(shape.get(a), int) and isinstance(shape.get(b), int):
                    shape[a] = max(shape[a] // shape[b], 1) * shape[b]
            return shape
        v = _bound(bad, env)
        shrink = [d for d in {n.name for n in walk(bad) if isinstance(n, Dim)}
                  if shape.get(d, 1) > 1 and (_bound(bad, {**env, d: 1}) or v) > v]
        if not shrink:
            return shape
        for d in shrink:
            shape[d] = max(1, shape[d] // 2)
    return shape


def derived_presets(op: Op, an=None) -> dict[str, dict]:
    """small (distinct small sizes), cpu and gpu (one power of two for every dim, the
    largest whose buffers and loop nests fit the preset's budget)."""
    an = an or analyse(op)
    free = free_dims(op, an)
    extra = {"lengths": "uniform"} if an.offsets else {}
    out = {"small": _fit(op, an, {d: _SMALL[i % len(_SMALL)] for i, d in enumerate(free)})
           | extra}
    for name in PRESETS[1:]:
        max_buf, max_work = _LIMITS[name]
        best = _SIZES[0]
        for v in _SIZES:
            buf, work = _size(op, _env(op, an, {d: v for d in free}))
            if buf > max_buf or work > max_work:
                break
            best = v
        out[name] = {d: best for d in free} | extra
    return out


def derived_edges(op: Op, an=None) -> tuple[dict, ...]:
    """Every dim 1; distinct primes; and for jagged ops empty, one long and full segments."""
    an = an or analyse(op)
    free = free_dims(op, an)
    ones = {d: 1 for d in free}
    primes = _fit(op, an, {d: _PRIMES[i % len(_PRIMES)] for i, d in enumerate(free)})
    if not an.offsets:
        return (ones, primes)
    small = _fit(op, an, {d: _SMALL[i % len(_SMALL)] for i, d in enumerate(free)})
    return (ones | {"lengths": "uniform"}, primes | {"lengths": "uniform"},
            small | {"lengths": "empty"}, small | {"lengths": "one_long"},
            small | {"lengths": "full"}, primes | {"lengths": "skewed"})


# -- the reference -------------------------------------------------------------------------


def _outputs(op: Op, got) -> dict:
    """A reference's return value as {output name: tensor}, in the op's output order."""
    if isinstance(got, dict):
        return got
    if isinstance(got, (tuple, list)):
        if len(got) != len(op.outputs):
            raise SpecError(f"the reference of {op.name} returned {len(got)} values for "
                            f"{len(op.outputs)} outputs ({', '.join(op.outputs)})", "")
        return dict(zip(op.outputs, got, strict=True))
    return {op.outputs[0]: got}


def _parse_name(text: str, loc):
    """'torch.x.y(k=1)' -> (['torch', 'x', 'y'], {'k': 1}); a SpecError otherwise."""
    try:
        node = ast.parse(text.strip(), mode="eval").body
        kwargs = {}
        if isinstance(node, ast.Call):
            if node.args:
                raise ValueError("positional arguments (the inputs are passed positionally)")
            kwargs = {k.arg: ast.literal_eval(k.value) for k in node.keywords}
            node = node.func
        parts = []
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        if not isinstance(node, ast.Name):
            raise ValueError("not a dotted name")
        parts.append(node.id)
    except (SyntaxError, ValueError) as e:
        raise SpecError(f"reference {text!r} is not a torch function name: {e}",
                        "write e.g. 'torch.logsumexp(dim=-1)', 'F.softplus' or "
                        "'aten.mse_loss'", loc=loc) from None
    parts.reverse()
    roots = {"torch": ["torch"], "F": ["torch", "nn", "functional"],
             "aten": ["torch", "ops", "aten"]}
    if parts[0] not in roots:
        raise SpecError(f"reference {text!r} must start with torch., F. or aten.", "",
                        loc=loc)
    return roots[parts[0]] + parts[1:], kwargs


def reference_fn(reference, op: Op, loc=None) -> Callable | None:
    """The reference as `(tensors, params) -> {output: tensor}` (None without one)."""
    if reference is None:
        return None
    if isinstance(reference, str):
        path, kwargs = _parse_name(reference, loc)
        names = [b.name for b in op.inputs]

        def by_name(t, p):
            import importlib

            obj = importlib.import_module("torch")
            for part in path[1:]:
                obj = getattr(obj, part)
            return _outputs(op, obj(*[t[n] for n in names], **kwargs))
        by_name.__qualname__ = reference
        by_name.loc = loc
        return by_name
    if not callable(reference):
        raise SpecError(f"reference is a {type(reference).__name__}",
                        "pass a function (tensors, params) -> tensor(s), or a torch "
                        "function's name", loc=loc)

    def call(t, p):
        return _outputs(op, reference(t, p))
    call.__qualname__ = getattr(reference, "__qualname__", "reference")
    call.loc = loc
    return call
