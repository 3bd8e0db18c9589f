"""Schedule mutations: pure functions Trace -> Trace (or None when they do not apply).

Structure lives in moves and numbers in `$` decisions, so most mutations touch only
decisions; structural ones add or drop a move. Whether the result is legal is the
caller's question (it lowers each candidate before proposing it)."""

from __future__ import annotations

import random

from ...ir import prefix
from ...ir.nodes import Binary, Dim, Load, Op, Reduce, Unary, op_dims, product_factors, walk
from ...schedule.trace import Move, Trace

MAX_TILE = 1 << 14


def moves_of(t: Trace) -> list[dict]:
    return [m.to_dict() for m in t.moves]


def rebuild(t: Trace, moves: list[dict], decisions: dict | None = None) -> Trace:
    dec = dict(t.decisions) if decisions is None else decisions
    return Trace(t.op, tuple(Move.of(m) for m in moves), tuple(sorted(dec.items())))


def scale_decision(t: Trace, rng: random.Random) -> Trace | None:
    """Halve or double one `$` number (tile sizes are powers of two)."""
    dec = dict(t.decisions)
    if not dec:
        return None
    k = rng.choice(sorted(dec))
    v = dec[k] * 2 if rng.random() < 0.5 else dec[k] // 2
    if not 1 <= v <= MAX_TILE or v == dec[k]:
        return None
    dec[k] = v
    return rebuild(t, moves_of(t), dec)


def _launch(moves: list[dict]) -> dict:
    for m in moves:
        if m["m"] == "launch":
            return m
    m = {"m": "launch"}
    moves.append(m)
    return m


def _without(moves: list[dict], **match) -> list[dict] | None:
    """`moves` less those whose arguments include all of `match`, or None when none does:
    a toggle mutation removes its move where the trace has it and adds it otherwise."""
    kept = [m for m in moves if any(m.get(k) != v for k, v in match.items())]
    return kept if len(kept) < len(moves) else None


def _grid_binds(moves: list[dict], stage: str | None = None) -> list[dict]:
    """The `bind ... to: grid` moves (of one stage, or all)."""
    return [m for m in moves if m["m"] == "bind" and m.get("to") == "grid"
            and stage in (None, m.get("stage"))]


def _acts_on(caps: dict, arg: str) -> bool:
    """Whether the backend acts on this `launch` argument (Caps.launch_args)."""
    return arg in caps.get("launch_args", ())


def scale_warps(t: Trace, rng: random.Random, caps: dict) -> Trace | None:
    if not _acts_on(caps, "num_warps"):
        return None
    moves = moves_of(t)
    ln = _launch(moves)
    w = ln.get("num_warps", 4)
    w = w * 2 if rng.random() < 0.5 else w // 2
    if not 1 <= w <= 32:
        return None
    ln["num_warps"] = w
    return rebuild(t, moves)


def change_stages(t: Trace, rng: random.Random, caps: dict) -> Trace | None:
    if not _acts_on(caps, "num_stages"):
        return None
    moves = moves_of(t)
    ln = _launch(moves)
    s = ln.get("num_stages", 1) + rng.choice((-1, 1))
    if not 1 <= s <= 5:
        return None
    ln["num_stages"] = s
    return rebuild(t, moves)


def change_group(t: Trace, rng: random.Random, caps: dict) -> Trace | None:
    """Halve or double `group_m`, the rows of tiles a 2-d grid walks before its next column:
    it sets which operand panels the programs running at once share in L2 (1: row-major
    order, no grouping). Only for traces with two grid axes, the ones it applies to."""
    if not _acts_on(caps, "group_m"):
        return None
    moves = moves_of(t)
    if len(_grid_binds(moves)) != 2:
        return None
    ln = _launch(moves)
    g = ln.get("group_m") or 1
    g = g * 2 if rng.random() < 0.5 or g == 1 else g // 2
    if g > 64:
        return None
    if g == 1:
        ln.pop("group_m", None)
    else:
        ln["group_m"] = g
    return rebuild(t, moves)


def _f32_contraction(n) -> bool:
    """sum(A * B) with an f32 operand (casts aside): what `dot_precision` applies to; a
    bf16 contraction that accumulates in f32 renders the same code either way."""
    ab = product_factors(n) or ()
    return any(isinstance(x, Load) and x.buffer.dtype.name == "f32" for x in ab)


def toggle_precision(t: Trace, rng: random.Random, caps: dict, op: Op) -> Trace | None:
    """f32 products on tensor cores (tf32x3) or in f32 (ieee); only for f32 contractions."""
    contracts = any(_f32_contraction(n) for s in op.stages for n in walk(s.body))
    if not _acts_on(caps, "dot_precision") or not contracts:
        return None
    moves = moves_of(t)
    ln = _launch(moves)
    ln["dot_precision"] = "ieee" if ln.get("dot_precision") == "tf32x3" else "tf32x3"
    return rebuild(t, moves)


def toggle_persistent(t: Trace, rng: random.Random, caps: dict) -> Trace | None:
    """Persistent programs (1-8 per multiprocessor, each looping over tiles) or one program
    per tile: a persistent program starts loading its next tile while it finishes the last
    (the H200's gemm_bias_gelu: 1.4-2.6% faster, h200-gelu-power-persistent.json)."""
    if not _acts_on(caps, "persistent"):
        return None
    moves = moves_of(t)
    ln = _launch(moves)
    if ln.pop("persistent", None) is None:
        ln["persistent"] = rng.choice((1, 2, 4, 8))
    else:
        ln.pop("pipeline", None)  # across tiles needs persistent programs
    return rebuild(t, moves)


def cap_persistent(t: Trace, fit: int) -> Trace:
    """`t` with at most `fit` persistent programs per multiprocessor (the largest of 1, 2,
    4, 8 within it); unchanged when it has fewer or none."""
    moves = moves_of(t)
    ln = _launch(moves)
    if not ln.get("persistent") or ln["persistent"] <= fit:
        return t
    ln["persistent"] = max(n for n in (1, 2, 4, 8) if n <= max(1, fit))
    return rebuild(t, moves)


def toggle_pipeline(t: Trace, rng: random.Random, caps: dict) -> Trace | None:
    """A persistent program's software pipeline across tiles (the next tile's loads during
    this tile's epilogue) or within each tile: on the H200, gemm_bias_gelu with both
    operands copied in bulk ran 1.6-1.7% faster across tiles, sustained
    (h200-gemm-kdepth-loops.json)."""
    if not _acts_on(caps, "pipeline"):
        return None
    moves = moves_of(t)
    ln = _launch(moves)
    if not ln.get("persistent"):
        return None
    if ln.pop("pipeline", None) is None:
        ln["pipeline"] = "across_tiles"
    return rebuild(t, moves)


def static_dims(op: Op) -> list[str]:
    """Dims worth compiling in: the inner extents of multi-dim inputs (feature counts,
    widths). Leading extents (rows, samples, total jagged length) and bounds such as a
    batch's longest segment change from call to call, and Triton compiles one kernel per
    constexpr value."""
    inner = {n.name for b in op.inputs if len(b.shape) > 1 for e in b.shape[1:]
             for n in walk(e) if isinstance(n, Dim)}
    return [d for d in op_dims(op) if d in inner]


def toggle_constexpr(t: Trace, rng: random.Random, caps: dict, op: Op) -> Trace | None:
    """Compile one static dim into the kernel, or stop compiling it in."""
    dims = static_dims(op)
    if not _acts_on(caps, "constexpr_dims") or not dims:
        return None
    moves = moves_of(t)
    ln = _launch(moves)
    have = set(ln.get("constexpr_dims", ()))
    have ^= {rng.choice(dims)}
    ln["constexpr_dims"] = sorted(have)
    if not have:
        del ln["constexpr_dims"]
    return rebuild(t, moves)


def unroll_loop(t: Trace, rng: random.Random, op: Op, caps: dict) -> Trace | None:
    """Unroll a loop of the root (or stop unrolling it); only where the backend renders
    unroll itself (Triton leaves it to its compiler: on the H200 all 23 unroll mutations
    of a gemm_bias_gelu search rendered code identical to their parents')."""
    if not _renders(caps, "unroll"):
        return None
    moves = moves_of(t)
    root = op.stage(main_root(op, moves))
    names = [a.name for a in root.axes] + [a.name for a in root.reduce_axes]
    for m in moves:
        if m["m"] == "split" and m["stage"] == root.name:
            names += list(m.get("into", [f"{m['axis']}o", f"{m['axis']}i"]))
            names.remove(m["axis"])
    bound = {m["axis"] for m in moves if m["m"] == "bind" and m["stage"] == root.name}
    cands = [n for n in names if n not in bound]
    if not cands:
        return None
    ax = rng.choice(cands)
    off = _without(moves, m="unroll", stage=root.name, axis=ax)
    if off is not None:
        moves = off
    else:
        moves.append({"m": "unroll", "stage": root.name, "axis": ax,
                      "factor": rng.choice((2, 4, 8))})
    return rebuild(t, moves)


def split_tile(t: Trace, rng: random.Random, op: Op) -> Trace | None:
    """Split the root's innermost whole axis into chunks (or undo such a split)."""
    moves = moves_of(t)
    root = op.stage(main_root(op, moves))
    if not root.axes:  # a 0-d output: no axis to tile
        return None
    a = root.axes[-1].name
    sp = _split_of(moves, root.name, a)
    dec = dict(t.decisions)
    if sp is not None:
        if any(m["m"] in ("vectorize", "unroll") and m.get("axis") in
               sp.get("into", [f"{a}o", f"{a}i"]) for m in moves):
            return None
        bound = any(m["m"] == "bind" and m.get("axis") in sp.get("into", [f"{a}o"])
                    for m in moves)
        if bound:
            return None
        moves.remove(sp)
        return rebuild(t, moves, dec)
    if any(m["m"] == "bind" and m["stage"] == root.name and m["axis"] == a for m in moves):
        return None
    key = f"$T_{a}"
    dec[key] = rng.choice((32, 64, 128, 256, 512, 1024))
    moves.append({"m": "split", "stage": root.name, "axis": a, "size": key})
    return rebuild(t, moves, dec)


def toggle_prefetch(t: Trace, rng: random.Random, gpu: bool) -> Trace | None:
    """CPU gathers: drop the prefetch hints, or bring them back at a random distance."""
    if gpu:
        return None
    moves = moves_of(t)
    have = [m for m in moves if m["m"] == "prefetch"]
    if not have:
        return None
    dec = dict(t.decisions)
    dec["$PF"] = rng.choice((2, 4, 8, 16, 32)) if dec.get("$PF") else 8
    for m in have:
        m["distance"] = "$PF"
    return rebuild(t, moves, dec)


def _stage_of(moves, stage):
    return [m for m in moves if m.get("stage") == stage]


def _computed_at(moves) -> dict[str, list]:
    return {m["stage"]: m["at"] for m in moves if m["m"] == "compute_at"}


def online_candidates(op: Op) -> list[str]:
    """Sum stages of the form sum(exp(x - m)) with m a max stage: online-able."""
    out = []
    for s in op.stages:
        b = s.body
        if isinstance(b, Reduce) and b.op == "sum" and isinstance(b.body, Unary) \
                and b.body.op == "exp" and isinstance(b.body.x, Binary) and \
                b.body.x.op == "sub" and isinstance(b.body.x.b, Load):
            out.append(s.name)
    for s in op.stages:  # through an inlined pointwise stage (softmax's e)
        b = s.body
        if isinstance(b, Reduce) and b.op == "sum" and isinstance(b.body, Load):
            try:
                prod = op.stage(b.body.buffer.name)
            except KeyError:
                continue
            pb = prod.body
            if isinstance(pb, Unary) and pb.op == "exp" and s.name not in out:
                out.append(s.name)
    return out


def toggle_online(t: Trace, rng: random.Random, op: Op) -> Trace | None:
    cands = [s for s in online_candidates(op) if s in _computed_at(moves_of(t))]
    if not cands:
        return None
    s = rng.choice(cands)
    moves = moves_of(t)
    off = _without(moves, m="reduction", stage=s)
    if off is not None:
        moves = off
    else:
        moves.append({"m": "reduction", "stage": s, "strategy": "online"})
    return rebuild(t, moves)


def _split_of(moves, stage, axis):
    return next((m for m in moves if m["m"] == "split" and m["stage"] == stage
                 and m["axis"] == axis), None)


def toggle_reduce_split(t: Trace, rng: random.Random, op: Op) -> Trace | None:
    """Loop a reduction over chunks (or stop looping): single tile vs looped."""
    moves = moves_of(t)
    at = _computed_at(moves)
    scans = {m["stage"] for m in moves if m["m"] == "reduction" and m["strategy"] == "scan"}
    stages = [s for s in op.stages if s.reduce_axes and (s.name in at or s.name in op.outputs)
              and s.name not in scans]  # a scan has no loop over its window to split
    if not stages:
        return None
    s = rng.choice(stages)
    a = s.reduce_axes[0].name
    dec = dict(t.decisions)
    sp = _split_of(moves, s.name, a)
    if sp is not None:
        moves.remove(sp)
        moves = [m for m in moves if not (m["m"] == "reduction" and m["stage"] == s.name
                                          and m["strategy"] in ("looped",))]
        return rebuild(t, moves, dec)
    key = f"$R_{s.name}_{a}"
    dec[key] = rng.choice((64, 128, 256, 512, 1024))
    moves.append({"m": "split", "stage": s.name, "axis": a, "size": key})
    return rebuild(t, moves, dec)


def _tileable(s, moves: list[dict]) -> list:
    """A stage's axes that a split tiles in a loop: its reduce axes, and its innermost axis
    where that axis is the stage's own (not fixed by `compute_at`, not on the grid)."""
    out = list(s.reduce_axes)
    if s.axes and s.name not in _computed_at(moves) and not any(
            m["m"] == "bind" and m.get("stage") == s.name and m.get("axis") == s.axes[-1].name
            for m in moves):
        out.append(s.axes[-1])
    return out


def echo_splits(t: Trace, op: Op) -> list[Trace]:
    """One stage's tiling repeated on another: a split of a tileable axis, copied with its
    size to every live stage that leaves an axis of the same extent unsplit. Improvements
    on ops of several loops over one axis come in such pairs (layernorm's mean and var
    reductions, rmsnorm's sum and its output row): split alone, each half gains a little,
    and drawing the other half among twenty kinds of mutation takes dozens of candidates."""
    moves = moves_of(t)
    dec = dict(t.decisions)
    inlined = {m["stage"] for m in moves if m["m"] == "inline"}
    at = _computed_at(moves)
    live = [s for s in op.stages if s.name not in inlined and (s.name in at or
                                                              s.name in op.outputs)]
    scans = {m["stage"] for m in moves if m["m"] == "reduction" and m["strategy"] == "scan"}
    axes = {s.name: [a for a in _tileable(s, moves) if s.name not in scans or
                     a not in s.reduce_axes] for s in live}
    out: list[Trace] = []
    seen: set[tuple[str, str]] = set()
    for src in live:
        for a in axes[src.name]:
            sp = _split_of(moves, src.name, a.name)
            if sp is None or "into" in sp:
                continue
            size = dec.get(sp["size"], sp["size"]) if isinstance(sp["size"], str) \
                else sp["size"]
            for dst in live:
                for b in axes[dst.name]:
                    if dst is src or (b.extent, b.start) != (a.extent, a.start) or \
                            _split_of(moves, dst.name, b.name) is not None or \
                            (dst.name, b.name) in seen:
                        continue
                    seen.add((dst.name, b.name))
                    key = (f"$R_{dst.name}_{b.name}" if b in dst.reduce_axes
                           else f"$T_{b.name}")
                    if key in dec:
                        continue
                    out.append(rebuild(t, moves + [{"m": "split", "stage": dst.name,
                                                    "axis": b.name, "size": key}],
                                       {**dec, key: size}))
    return out


def echo_split(t: Trace, rng: random.Random, op: Op, seen=frozenset()) -> Trace | None:
    """One of `echo_splits`, preferring those not in `seen` (trace JSON)."""
    cands = echo_splits(t, op)
    fresh = [c for c in cands if c.to_json() not in seen]
    return rng.choice(fresh or cands) if cands else None


def _renders(caps: dict, move: str) -> bool:
    return move in caps.get("renders", ())


def vectorize_inner(t: Trace, rng: random.Random, op: Op, caps: dict) -> Trace | None:
    """Vector accesses along the root's innermost tile axis (CPU SIMD lanes, CUDA/HIP
    per-thread float4s), or stop; only where the backend renders vectorize itself."""
    widths = [w for w in caps.get("vector_widths", ()) if w > 1]
    if not _renders(caps, "vectorize") or not widths:
        return None
    moves = moves_of(t)
    root = op.stage(main_root(op, moves))
    if not root.axes:  # a 0-d output: no axis to vectorize
        return None
    axis = root.axes[-1].name
    sp = _split_of(moves, root.name, axis)
    name = sp.get("into", [f"{axis}o", f"{axis}i"])[1] if sp else axis
    off = _without(moves, m="vectorize", stage=root.name)
    if off is not None:
        moves = off
    else:
        w = rng.choice(widths)
        if sp is not None:
            size = sp["size"] if isinstance(sp["size"], int) else dict(t.decisions).get(
                sp["size"], 0)
            if size and size % w:
                return None
        moves.append({"m": "vectorize", "stage": root.name, "axis": name, "width": w})
    return rebuild(t, moves)


def cache_candidates(op: Op) -> list[tuple[str, str]]:
    """(stage, input buffer) pairs a `cache` move can name: each stage's direct reads."""
    names = {b.name for b in op.inputs}
    out = []
    for s in op.stages:
        for n in walk(s.body):
            if isinstance(n, Load) and n.buffer.name in names and \
                    (s.name, n.buffer.name) not in out:
                out.append((s.name, n.buffer.name))
    return out


def toggle_cache(t: Trace, rng: random.Random, op: Op, caps: dict) -> Trace | None:
    """Stage the tile one stage reads of an input in shared memory (a row read by several
    stages is then read from memory once), or stop; only where the backend renders it."""
    moves = moves_of(t)
    inlined = {m["stage"] for m in moves if m["m"] == "inline"}
    pairs = [p for p in cache_candidates(op) if p[0] not in inlined]
    if not _renders(caps, "cache") or not pairs:
        return None
    stage, buf = rng.choice(pairs)
    off = _without(moves, m="cache", stage=stage, buffer=buf)
    if off is not None:
        moves = off
    else:
        moves.append({"m": "cache", "stage": stage, "buffer": buf, "scope": "shared"})
    return rebuild(t, moves)


def contraction_operands(op: Op) -> list[tuple[str, str]]:
    """(stage, buffer) for each input buffer a contraction stage multiplies: what a bulk
    copy can carry (Triton: TMA tensor descriptors for tl.dot operands)."""
    names = {b.name for b in op.inputs}
    out = []
    for s in op.stages:
        for x in product_factors(s.body) or ():
            if isinstance(x, Load) and x.buffer.name in names and \
                    (s.name, x.buffer.name) not in out:
                out.append((s.name, x.buffer.name))
    return out


def toggle_bulk_copy(t: Trace, rng: random.Random, op: Op, caps: dict) -> Trace | None:
    """Copy one contraction operand's tiles with the copy engine, or with the threads again;
    only where the backend has one (Caps.bulk_copy). On the H200 gemm_bias_gelu's kernel
    issued a fifth fewer instructions with both operands so copied
    (benchmarks/results/h200-gemm-counters*)."""
    pairs = contraction_operands(op)
    if not caps.get("bulk_copy") or not pairs:
        return None
    moves = moves_of(t)
    stage, buf = rng.choice(pairs)
    off = _without(moves, m="cache", stage=stage, buffer=buf, copy="bulk")
    if off is not None:
        moves = off
    else:
        moves = [m for m in moves if not (m["m"] == "cache" and m["stage"] == stage
                                          and m["buffer"] == buf)]
        moves.append({"m": "cache", "stage": stage, "buffer": buf, "scope": "shared",
                      "copy": "bulk"})
    return rebuild(t, moves)


def toggle_bulk_write(t: Trace, rng: random.Random, op: Op, caps: dict) -> Trace | None:
    """Write a 2-d output through the copy engine, in 1, 2 or 4 pieces (a smaller staging
    buffer), or with the threads again; only where the backend has one (Caps.bulk_copy).
    On the H200, gemm_bias_gelu's 128x256 kernel ran 1.3-2.1% faster, sustained, written
    in 2 pieces (h200-gemm-kdepth-loops.json); where the tile cannot go through a
    descriptor the backend's check refuses the trace and the proposer skips it."""
    outs = [n for n in op.outputs if len(op.stage(n).out.shape) == 2]
    if not caps.get("bulk_copy") or not outs:
        return None
    moves = moves_of(t)
    name = rng.choice(outs)
    buf = op.stage(name).out.name
    off = _without(moves, m="cache", stage=name, buffer=buf)
    if off is not None:
        return rebuild(t, off)
    moves.append({"m": "cache", "stage": name, "buffer": buf, "scope": "shared",
                  "copy": "bulk", "parts": rng.choice((1, 2, 4))})
    return rebuild(t, moves)


def rows_per_program(t: Trace, rng: random.Random, op: Op) -> Trace | None:
    """Several rows per program: split the first grid axis into (grid, tile) and move the
    producers computed at it to the new grid axis."""
    moves = moves_of(t)
    root = op.stage(main_root(op, moves))
    binds = _grid_binds(moves, root.name)
    if not binds:
        return None
    a = binds[-1]["axis"]
    ax = next((x for x in root.axes if x.name == a), None)
    if ax is None or ax.is_jagged or _split_of(moves, root.name, a):
        return None
    o, i = f"{a}o", f"{a}i"
    dec = dict(t.decisions)
    key = f"$ROWS_{a}"
    dec[key] = rng.choice((2, 4, 8))
    out = []
    for m in moves:
        if m is binds[-1]:
            out.append({"m": "split", "stage": root.name, "axis": a, "size": key,
                        "into": [o, i]})
            out.append({"m": "bind", "stage": root.name, "axis": o, "to": "grid"})
        elif m["m"] == "compute_at" and m["at"] == [root.name, a]:
            out.append({**m, "at": [root.name, o]})
        else:
            out.append(m)
    others = [x.name for x in root.axes if x.name != a]
    names = [x["axis"] for x in out if x["m"] == "bind" and x["stage"] == root.name]
    if others and any(n in names for n in others):
        return None
    return rebuild(t, out, dec)


# -- structure: inlining, compute_at, reduction strategy, and the repairs that follow -------

def main_root(op: Op, moves: list[dict]) -> str:
    """The kernel root the search tunes: the last output in stage order that is not
    computed in another stage's program (with several outputs in one kernel, the one that
    stores the others)."""
    at = _computed_at(moves)
    roots = [s.name for s in op.stages if s.name in op.outputs and s.name not in at]
    return roots[-1] if roots else op.outputs[-1]


def _root_grid_axis(moves: list[dict], op: Op) -> list | None:
    """[root, its outermost grid axis]: where a producer is computed per program."""
    root = main_root(op, moves)
    binds = _grid_binds(moves, root)
    return [root, binds[0]["axis"]] if binds else None


def _pointwise_producers(op: Op) -> list[str]:
    return [s.name for s in op.stages if s.name not in op.outputs and not s.reduce_axes]


def _reads(op: Op, stage: str) -> set[str]:
    """Names of the buffers a stage loads."""
    return {n.buffer.name for n in walk(op.stage(stage).body) if isinstance(n, Load)}


def toggle_inline(t: Trace, rng: random.Random, op: Op) -> Trace | None:
    """Inline a pointwise producer into its consumers (recomputed there, no buffer), or
    make it a kernel of its own (a grid over its rows) with the producers it reads computed
    inside it: its values go through memory once instead of being recomputed."""
    names = _pointwise_producers(op)
    if not names:
        return None
    stage = rng.choice(names)
    moves = moves_of(t)
    if any(m["m"] == "inline" and m["stage"] == stage for m in moves):
        s = op.stage(stage)
        if not s.axes:
            return None
        a0 = s.axes[0].name
        reads = _reads(op, stage)
        out = []
        for m in moves:
            if m["m"] == "inline" and m["stage"] == stage:
                out.append({"m": "bind", "stage": stage, "axis": a0, "to": "grid"})
            elif m["m"] == "compute_at" and m["stage"] in reads:
                out.append({**m, "at": [stage, a0]})
            else:
                out.append(m)
        return rebuild(t, out)
    moves = [m for m in moves if not (m.get("stage") == stage and m["m"] in
                                      ("compute_at", "cache", "reduction", "split", "bind"))]
    root = main_root(op, moves)
    at = _root_grid_axis(moves, op)
    moves = [{**m, "at": at} if m["m"] == "compute_at" and m["at"][0] == stage and at
             else m for m in moves]
    return rebuild(t, moves + [{"m": "inline", "stage": stage}]) if root != stage else None


def toggle_compute_at(t: Trace, rng: random.Random, op: Op) -> Trace | None:
    """Compute a producer inside the root's program (its values stay in registers or cache)
    or as a loop nest of its own before the root (materialized in memory). An output other
    than the root is a producer too: computed in the root's program it is stored from there
    (several outputs, one kernel), or it goes back to a kernel of its own."""
    moves = moves_of(t)
    inlined = {m["stage"] for m in moves if m["m"] == "inline"}
    root = main_root(op, moves)
    order = [s.name for s in op.stages]
    names = [s.name for s in op.stages if s.name != root and s.name not in inlined
             and (s.name not in op.outputs or order.index(s.name) < order.index(root))]
    if not names:
        return None
    stage = rng.choice(names)
    off = _without(moves, m="compute_at", stage=stage)
    if off is not None:  # materialized: its own loop nest, bound to the grid on its rows
        off = [m for m in off if not (m.get("stage") == stage and m["m"] in
                                      ("reduction", "cache"))]
        s = op.stage(stage)
        return rebuild(t, off + [{"m": "bind", "stage": stage, "axis": s.axes[0].name,
                                  "to": "grid"}] if s.axes else off)
    at = _root_grid_axis(moves, op)
    if at is None:
        return None
    nest = _spatial_nest(moves, op.stage(stage)) if stage in op.outputs else []
    moves = [m for m in moves if not (m.get("stage") == stage and m["m"] == "bind")
             and not any(m is x for x in nest)]
    return rebuild(t, moves + [{"m": "compute_at", "stage": stage, "at": at}])


def _spatial_nest(moves: list[dict], s) -> list[dict]:
    """The moves that shape a stage's own spatial loops (splits, reorders, fusions,
    vectorize, unroll): a stage computed in another's program follows that program's loops,
    so they no longer mean anything."""
    red = {a.name for a in s.reduce_axes}
    for m in moves:  # loops split off a reduce axis are its own too
        if m["m"] == "split" and m["stage"] == s.name and m["axis"] in red:
            red |= set(m.get("into") or (m["axis"] + "o", m["axis"] + "i"))
    return [m for m in moves if m.get("stage") == s.name and (
        m["m"] in ("reorder", "fuse") or
        m["m"] in ("split", "vectorize", "unroll") and m["axis"] not in red)]


STRATEGIES = ("single", "looped", "online", "split", "scan")


def reduction_strategy(t: Trace, rng: random.Random, op: Op) -> Trace | None:
    """Another reduction strategy for one reducing stage: one tile, a loop over tiles, one
    online pass (softmax-style sums), split across programs, or a running value along the
    window's axis (prefix reductions: cumsum)."""
    moves = moves_of(t)
    stages = [s for s in op.stages if s.reduce_axes]
    if not stages:
        return None
    s = rng.choice(stages)
    cur = next((m["strategy"] for m in moves if m["m"] == "reduction"
                and m["stage"] == s.name), None)
    choices = [x for x in STRATEGIES if x != cur and
               (x != "online" or s.name in online_candidates(op)) and
               (x != "scan" or prefix.match(s, s.body)[0] is not None)]
    strategy = rng.choice(choices)
    moves = [m for m in moves if not (m["m"] == "reduction" and m["stage"] == s.name)]
    moves.append({"m": "reduction", "stage": s.name, "strategy": strategy})
    return rebuild(t, moves)


def repairs(t: Trace, op: Op) -> list[tuple[str, Trace]]:
    """Follow-up moves that can make a structural mutation legal, each (name, trace):
    tile a reduction that now loops, untile one that no longer does, drop moves on stages
    that are now inlined. The caller keeps the first that proves legal."""
    moves = moves_of(t)
    out = []
    strat = {m["stage"]: m["strategy"] for m in moves if m["m"] == "reduction"}
    dec = dict(t.decisions)
    for st, how in strat.items():
        s = op.stage(st)
        if not s.reduce_axes:
            continue
        a = s.reduce_axes[0].name
        sp = _split_of(moves, st, a)
        if how in ("looped", "online") and sp is None:
            key = f"$R_{st}_{a}"
            out.append((f"tile:{st}", rebuild(t, moves + [
                {"m": "split", "stage": st, "axis": a, "size": key}], {**dec, key: 256})))
        if how == "single" and sp is not None:
            out.append((f"untile:{st}", rebuild(t, [m for m in moves if m is not sp])))
        if how == "split":
            # partial results over 64 chunks (a `$` factor the search scales), each chunk's
            # reduction looped in tiles of its own stage, `st_rf` (1024 elements a tile)
            fk, rk, rf = f"$RF_{st}", f"$R_{st}_rf_{a}", f"{st}_rf"
            fixed = [dict(m, factor=m.get("factor") or fk)
                     if m["m"] == "reduction" and m["stage"] == st else m for m in moves]
            extra = {fk: 64} if any(m.get("factor") == fk for m in fixed) else {}
            rest = [x.name for x in s.reduce_axes[1:]]
            for ax, key, size in [(a, rk, 4 if rest else 1024)] + [
                    (x, f"$R_{st}_rf_{x}", 256) for x in rest]:
                if _split_of(moves, st, ax) is None and _split_of(moves, rf, ax) is None:
                    fixed.append({"m": "split", "stage": rf, "axis": ax, "size": key})
                    extra[key] = size
            out.append((f"split:{st}", rebuild(t, fixed, {**dec, **extra})))
    inlined = {m["stage"] for m in moves if m["m"] == "inline"}
    stray = [m for m in moves if m["m"] != "inline" and m.get("stage") in inlined]
    if stray:
        out.append(("drop-inlined", rebuild(t, [m for m in moves if m not in stray])))
    out.append(("drop-reduction", rebuild(t, [m for m in moves if m["m"] != "reduction"])))
    return out


def crossover(a: Trace, b: Trace, rng: random.Random) -> Trace | None:
    """Same structure, mixed numbers: each decision from one parent or the other."""
    if a.moves != b.moves or a.decisions == b.decisions:
        return None
    da, db = dict(a.decisions), dict(b.decisions)
    dec = {k: (da if rng.random() < 0.5 else db).get(k, da.get(k)) for k in da}
    return rebuild(a, moves_of(a), dec)


__all__ = ["scale_decision", "scale_warps", "change_stages", "toggle_online", "toggle_precision",
           "toggle_persistent", "toggle_pipeline", "toggle_reduce_split", "vectorize_inner",
           "rows_per_program", "toggle_bulk_copy", "toggle_bulk_write", "contraction_operands",
           "crossover", "walk"]
