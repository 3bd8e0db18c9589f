"""Default schedules: what runs when nobody searched, derived from the op's structure.

Rules: pointwise producers are inlined; reducing producers are computed at their consumer's
program; leading rectangular axes of each output map to the grid; the rest are tiles.
Contractions get 2-d output tiles; 1-d ops get a split. Sizes are `$` decisions."""

from __future__ import annotations

from ..ir.interp import eval_int
from ..ir.nodes import AxisRef, Load, Op, Reduce, product_factors, walk
from .trace import Trace

MAX_TILE = 16384  # elements of one program's tile beyond which defaults split
SPLIT_TILE = 8192  # the tile a split aims for
MIN_TILE = 2048  # below this, trailing grid axes join the tile instead


def p2(n: int) -> int:
    """The power of two at or above `n` (at least 1): tile sizes."""
    return 1 << max(0, (max(int(n), 1) - 1).bit_length())


def _contraction(body) -> bool:
    """sum_k A[.., k] * B[.., k] where A and B each range over a spatial axis the other
    does not (a matrix product, not a sum of squares)."""
    for n in walk(body):
        ab = product_factors(n)
        if ab is None or len(n.axes) != 1:
            continue
        a, b = ab
        if not (isinstance(a, Load) and isinstance(b, Load)):
            continue
        k = n.axes[0].name
        sa = {x.axis.name for x in walk(a) if isinstance(x, AxisRef)}
        sb = {x.axis.name for x in walk(b) if isinstance(x, AxisRef)}
        if k in sa and k in sb and sa - sb and sb - sa:
            return True
    return False


def _gathered(s) -> list[str]:
    """Buffers a stage reads inside a reduction through an index load (table[indices[l]])."""
    out = []
    for r in walk(s.body):
        if isinstance(r, Reduce):
            for n in walk(r.body):
                if isinstance(n, Load) and n.buffer.name not in out and any(
                        isinstance(x, Load) for e in n.index for x in walk(e)):
                    out.append(n.buffer.name)
    return out


def _bound(e, dims):
    try:
        return eval_int(e, dims) if dims is not None else None
    except Exception:
        return None


def default_trace(op: Op, dims: dict[str, int] | None = None) -> Trace:
    moves: list[dict] = []
    dec: dict[str, int] = {}
    roots = list(op.outputs)
    owner: dict[str, str] = {}
    for name in reversed([s.name for s in op.stages]):
        if name in roots:
            owner[name] = name
            continue
        readers = [c.name for c in op.consumers(name)]
        owner[name] = next((owner[r] for r in readers if r in owner), roots[0])
    grid_axis: dict[str, str] = {}
    for rname in roots:
        grid_axis[rname] = _root_moves(op, rname, moves, dec, dims)
    for s in op.stages:
        if s.name in roots:
            continue
        if not any(isinstance(n, Reduce) for n in walk(s.body)) and s.store is None:
            moves.append({"m": "inline", "stage": s.name})
    for s in op.stages:
        if s.name in roots or any(m.get("stage") == s.name for m in moves):
            continue
        r = owner[s.name]
        moves.append({"m": "compute_at", "stage": s.name, "at": [r, grid_axis[r]]})
        if _contraction(s.body):
            k = s.reduce_axes[0]
            dec.setdefault("$BK", 32)
            moves.append({"m": "split", "stage": s.name, "axis": k.name, "size": "$BK"})
        else:
            _maybe_split_reduce(op, s.name, moves, dec, dims)
    for s in op.stages:  # gathers inside reductions (embedding rows): fetch ahead on CPUs
        for buf in _gathered(s):
            dec["$PF"] = 8
            moves.append({"m": "prefetch", "stage": s.name, "buffer": buf, "distance": "$PF"})
    r0 = op.stage(roots[0])
    if _contraction(r0.body) and grid_axis[roots[0]].endswith("o"):
        dec.setdefault("$BK", 32)
        moves.append({"m": "split", "stage": r0.name, "axis": r0.reduce_axes[0].name,
                      "size": "$BK"})
    else:
        _maybe_split_reduce(op, roots[0], moves, dec, dims, own=True)
    return Trace.make(op.name, moves, dec)


def _root_moves(op: Op, rname: str, moves: list[dict], dec: dict, dims) -> str:
    r = op.stage(rname)
    ax = list(r.axes)
    contraction = _contraction(r.body) or any(
        _contraction(p.body) for p in op.producers(r))
    if len(ax) == 1:
        a = ax[0].name
        dec["$BLOCK"] = 1024
        moves += [{"m": "split", "stage": rname, "axis": a, "size": "$BLOCK",
                   "into": [f"{a}o", f"{a}i"]},
                  {"m": "bind", "stage": rname, "axis": f"{a}o", "to": "grid"},
                  {"m": "launch", "num_warps": 4}]
        return f"{a}o"
    small_tail = all((_bound(a.bound, dims) or 1 << 30) <= 64 for a in ax[-2:])
    if contraction and not small_tail:
        i, j = ax[-2].name, ax[-1].name
        dec.update({"$BM": 128, "$BN": 128})
        moves += [{"m": "split", "stage": rname, "axis": i, "size": "$BM",
                   "into": [f"{i}o", f"{i}i"]},
                  {"m": "split", "stage": rname, "axis": j, "size": "$BN",
                   "into": [f"{j}o", f"{j}i"]},
                  {"m": "reorder", "stage": rname, "order": [f"{i}o", f"{j}o", f"{i}i", f"{j}i"]}]
        for a in ax[:-2]:
            moves.append({"m": "bind", "stage": rname, "axis": a.name, "to": "grid"})
        moves += [{"m": "bind", "stage": rname, "axis": f"{i}o", "to": "grid"},
                  {"m": "bind", "stage": rname, "axis": f"{j}o", "to": "grid"},
                  {"m": "launch", "num_warps": 8, "num_stages": 3, "group_m": 8}]
        return f"{j}o"
    n_grid = len(ax) - (2 if contraction else 1)
    for k, a in enumerate(ax[:-1]):
        if a.is_jagged:
            n_grid = min(n_grid, k)
    n_grid = max(n_grid, 1)

    def tile_from(n: int) -> int | None:
        t = 1
        for a in ax[n:]:
            b = _bound(a.bound, dims)
            if b is None:
                return None
            t *= p2(b)
        return t

    # Programs too small to hide latency: fold trailing grid axes back into the tile.
    while n_grid > 1 and (tile_from(n_grid) or MIN_TILE) < MIN_TILE:
        n_grid -= 1
    for a in ax[:n_grid]:
        moves.append({"m": "bind", "stage": rname, "axis": a.name, "to": "grid"})
    tile = tile_from(n_grid) or 1024
    if tile > MAX_TILE:
        # Too large for one program's registers: loop over chunks of the first tile axis.
        a = ax[n_grid]
        rest = tile // p2(_bound(a.bound, dims))
        size = 1 << (max(1, SPLIT_TILE // rest).bit_length() - 1)  # a power of two
        key = f"$B{a.name.upper()}"
        dec[key] = size
        moves.append({"m": "split", "stage": rname, "axis": a.name, "size": key})
        tile = size * rest
    moves.append({"m": "launch", "num_warps": 16 if tile >= 16384 else 8 if tile >= 2048
                  else 4})
    return ax[n_grid - 1].name


def _maybe_split_reduce(op: Op, name: str, moves: list[dict], dec: dict, dims,
                        own: bool = False) -> None:
    """Keep a program's reduce tile modest: split long reduce axes into a loop over chunks."""
    s = op.stage(name)
    if not s.reduce_axes or _contraction(s.body):
        return
    if dims is None:
        return
    k = s.reduce_axes[0]
    b = _bound(k.bound, dims)
    width = 1
    if own:
        for a in s.axes[1:]:
            width *= p2(_bound(a.bound, dims) or 1)
    if b is not None and p2(b) * width > MAX_TILE:
        size = max(1, min(p2(b), MAX_TILE // max(width, 1) // 4))
        key = f"$B{k.name.upper()}"
        dec[key] = size
        moves.append({"m": "split", "stage": name, "axis": k.name, "size": key})
