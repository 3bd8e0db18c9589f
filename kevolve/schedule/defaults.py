"""Default schedules: what runs when nobody searched, derived from the op's structure.

Rules: pointwise producers are inlined; a reducing producer is computed in its consumer's
program when that consumer reads it at its own spatial axes (else it is a kernel of its
own); leading rectangular axes of each kernel's root map to the grid; the rest are tiles.
Matrix products get 2-d output tiles; a reduction that would run in a few programs (a 0-d
output, a few long columns) is split across programs (partial results, then their sum).

Every program's tile, reduction chunks included, is kept within `MAX_TILE` elements, which
is under every built-in backend's limit, so the default is legal by construction at the
dims it is made for. Sizes are `$` decisions (the search mutates them)."""

from __future__ import annotations

from ..ir import prefix
from ..ir.interp import eval_int
from ..ir.nodes import (
    AxisRef,
    Compute,
    Load,
    Op,
    Reduce,
    product_factors,
    rebuild,
    substitute_axes,
    walk,
    walk_stage,
)
from .rfactor import partial_stages, why_not
from .trace import Trace

MAX_TILE = 16384  # elements of one program's tile beyond which defaults split
SPLIT_TILE = 8192  # the tile a split aims for
MIN_TILE = 2048  # below this, trailing grid axes join the tile instead
ROW_CHUNK = 4096  # the chunk a long reduction is looped in, one row per program
MIN_CHUNK = 64  # a reduction chunk narrower than this is slow: the spatial tile shrinks
SHARED_BYTES = 48 * 1024  # the smallest shared memory per block of the GPU backends
THIN = 8  # a contraction with an output side this narrow is a batch of dot products
UNKNOWN = 1 << 30  # the bound of an axis whose extent is not known (no dims)
COLUMN_TILE = 128  # neighbouring columns one program reduces together (a sum down columns)
SCAN_CHUNK = 1024  # the chunk a scan along the contiguous axis walks per trip
SCAN_SIDE = 64  # a scan along another axis: chunks of it by tiles of the contiguous one
FEW_PROGRAMS = 64  # a reducing root with fewer programs than this splits its reduction...
SPLIT_MIN = 1 << 16  # ...when each program would reduce at least this many elements,
SPLIT_PROGRAMS = 512  # into about this many programs in all,
SPLIT_CHUNK = 4096  # each reducing at least this many elements


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


def _bare_contraction(body) -> bool:
    """The body's one reduction is a contraction sum_k(A * B) of (cast) loads, alone or
    under a pointwise epilogue (a cast, a scale, a bias): what lowering hands to a matrix
    unit, the epilogue fused after it. Integer operands are not: their sum stays exact in
    int64, which no matrix unit accumulates."""
    reds = [n for n in walk(body) if isinstance(n, Reduce)]
    if len(reds) != 1 or not _contraction(reds[0]):
        return False
    ab = product_factors(reds[0])
    return ab is not None and all(isinstance(x, Load) and x.buffer.dtype.is_float
                                  for x in ab)


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


def _size(a, dims) -> int:
    """The tile an axis takes whole: its bound rounded up to a power of two."""
    b = _bound(a.bound, dims)
    return UNKNOWN if b is None else p2(b)


def _effective(op: Op, inline: set[str]) -> dict[str, object]:
    """Each stage's body with inlined producers substituted (as lowering will see it)."""
    out: dict[str, object] = {}
    for s in op.stages:
        def sub(n):
            if isinstance(n, Load) and n.buffer.name in inline:
                prod = op.stage(n.buffer.name)
                return substitute_axes(out[prod.name], {a.name: i for a, i in
                                                        zip(prod.axes, n.index)})
            return None
        out[s.name] = rebuild(s.body, sub)
    return out


def _read_axes(reader: Compute, body, name: str) -> list[str] | None:
    """The reader's spatial axes at which it reads stage `name` (the same at every read),
    or None when some read is at computed or reduce indices."""
    got = None
    for n in walk(body):
        if isinstance(n, Load) and n.buffer.name == name:
            names = [x.axis.name for x in n.index if isinstance(x, AxisRef)]
            spatial = {a.name for a in reader.axes}
            if len(names) != len(n.index) or len(set(names)) != len(names) or \
                    any(x not in spatial for x in names) or got not in (None, names):
                return None
            got = names
    return got


def _recomputed_once(host: Compute, body, name: str) -> bool:
    """Whether stage `name`, computed in the host's programs, is computed once per value:
    it must be read at every host axis that may go on the grid (all but the last, up to the
    first jagged one, as _root_moves binds them; all of a contraction's, whose output tile
    is split both ways). A column statistic read by a row-wise program (softmax over dim 0)
    would otherwise be recomputed by every row's program: the whole reduction once per row."""
    read = set(_read_axes(host, body, name) or ())
    ax = host.axes
    if _contraction(host.body):
        lead = ax
    else:
        n = len(ax) - 1
        for k, a in enumerate(ax[:-1]):
            if a.is_jagged:
                n = min(n, k)
        lead = ax[:max(n, 1)]
    return all(a.name in read for a in lead)


def _placements(op: Op, inline: set[str], eff) -> dict[str, str]:
    """Each non-inlined stage but the last output -> the root it is computed at ('' for
    root). It goes into a consumer's program only when that consumer reads it at its own
    spatial axes (apply and lowering refuse anything else) and every reader runs there after
    it. An output goes there too (and is stored from there: several outputs, one kernel)
    when that consumer's axes range over all of its points, and, if it reduces, every
    reader reads it at the points the program computed (a pointwise one is recomputed for
    the others, as if inlined)."""
    place: dict[str, str] = {}
    for s in reversed(op.stages):
        if s.name in inline:
            continue
        if s.name in op.outputs and not op.consumers(s.name):
            sib = _sibling(op, s, place)
            if sib is not None:
                place[s.name] = sib
            continue
        readers = [c for c in op.stages if c.name not in inline and c.name != s.name and
                   any(isinstance(n, Load) and n.buffer.name == s.name
                       for n in walk(eff[c.name]))]
        hosts = {place.get(c.name) or c.name for c in readers}
        place[s.name] = ""
        if len(hosts) != 1 or s.store is not None or not s.axes:
            continue
        host = op.stage(hosts.pop())
        if not host.axes:  # a 0-d program has no loop to compute it at
            continue
        direct = any(isinstance(n, Load) and n.buffer.name == s.name for n in walk_stage(host))
        through = any(isinstance(n, Load) and n.buffer.name == s.name
                      for p in op.producers(host) for n in walk_stage(p))
        # the program's stages that read it at their own axes (the host, or a stage
        # computed there that reads it: var reads mean, rstd reads var, y reads rstd)
        via = [c for c in [host] + [c for c in readers if place.get(c.name) == host.name]
               if _read_axes(c, eff[c.name], s.name) is not None]
        if not (direct or through) or not via:
            continue
        if direct and _read_axes(host, host.body, s.name) is None:
            continue
        if any(isinstance(n, Reduce) for n in walk(s.body)) and any(
                _read_axes(c, eff[c.name], s.name) is None for c in readers):
            continue  # read elsewhere too: only a pointwise stage is recomputed there
        if not _recomputed_once(host, eff[via[0].name], s.name):
            continue
        if s.name in op.outputs and not _covers(s, host, via[0], eff):
            continue
        place[s.name] = host.name
    return place


def _sibling(op: Op, s: Compute, place: dict[str, str]) -> str | None:
    """The root of a later output that no stage reads and that has each of `s`'s axes
    (same names, same bounds): `s` computed in its program shares its loops (row_moments'
    sum and sum of squares). None without one."""
    if not s.axes or s.store is not None:
        return None
    later = op.stages[op.stages.index(s) + 1:]
    for c in reversed(later):
        if c.name not in op.outputs or op.consumers(c.name) or c.name in place \
                or c.store is not None:
            continue
        names = {a.name: a for a in c.axes}
        if [a.name for a in c.axes] == [a.name for a in s.axes] and all(
                (a.start, a.extent, a.max_extent) == (names[a.name].start,
                                                      names[a.name].extent,
                                                      names[a.name].max_extent)
                for a in s.axes):
            return c.name
    return None


def _covers(s: Compute, host: Compute, c: Compute, eff) -> bool:
    """Output `s` computed in `host`'s program writes each of its points exactly when the
    stage `c` it is mapped through reads it at axes over the same ranges as its own, and
    those are axes of the host too."""
    read = _read_axes(c, eff[c.name], s.name)
    if read is None or len(read) != len(s.axes):
        return False
    for a, name in zip(s.axes, read):
        b = c.axis(name)
        try:
            hb = host.axis(name)
        except KeyError:
            return False
        if not (a.start, a.extent, a.max_extent) == (b.start, b.extent, b.max_extent) == \
                (hb.start, hb.extent, hb.max_extent):
            return False
    return True


def default_trace(op: Op, dims: dict[str, int] | None = None) -> Trace:
    moves: list[dict] = []
    dec: dict[str, int] = {}
    inline = {s.name for s in op.stages if s.name not in op.outputs and s.store is None
              and not any(isinstance(n, Reduce) for n in walk(s.body))}
    # an operand of a matrix product (relu(A) in relu(A) @ B) stays a kernel of its own:
    # inlined, the product's operands are no longer loads and it loses the matrix units
    for c in [s for s in op.stages if _bare_contraction(s.body)]:
        for name in {n.buffer.name for r in walk(c.body) if isinstance(r, Reduce)
                     for n in walk(r.body) if isinstance(n, Load)} & inline:
            if not _bare_contraction(_effective(op, {name})[c.name]):
                inline.discard(name)
    eff = _effective(op, inline)
    place = _placements(op, inline, eff)
    roots = [s for s in op.stages if place.get(s.name, s.name) == ""
             or s.name in op.outputs and s.name not in place]
    for r in roots:
        guests = [op.stage(n) for n, h in place.items() if h == r.name]
        guests.sort(key=lambda s: op.stages.index(s))
        _root_moves(op, r, guests, eff, moves, dec, dims)
    for s in op.stages:
        if s.name in inline:
            moves.append({"m": "inline", "stage": s.name, "_k": (1,)})
    for s in op.stages:  # gathers inside reductions (embedding rows): fetch ahead on CPUs
        for buf in _gathered(s):
            dec["$PF"] = 8
            moves.append({"m": "prefetch", "stage": s.name, "buffer": buf, "distance": "$PF",
                          "_k": (3,)})
    return Trace.make(op.name, _ordered(moves), dec)


def _ordered(moves: list[dict]) -> list[dict]:
    """Moves in the order a person would write them: each kernel's loop nest, inlining,
    each placed producer with its own splits (in stage order), prefetches, then the
    splits of the roots' own reductions. Each move carries its place as `_k`."""
    out = sorted(moves, key=lambda m: m["_k"])
    for m in out:
        del m["_k"]
    return out


def _root_moves(op: Op, r: Compute, guests: list[Compute], eff, moves: list[dict],
                dec: dict, dims) -> None:
    rname = r.name
    ax = list(r.axes)
    pre, _ = prefix.match(r, eff[rname])
    if pre is not None and not guests:
        moves += [{**m, "_k": (0,)} for m in _scan_moves(r, pre.axis, dec, dims)]
        return
    own_moves: list[dict] = []
    tiles: dict[str, int] = {}  # root axis -> its tile size (1 on the grid)
    outer: dict[str, str] = {}  # root axis split into a loop -> that loop's name
    grid: list[str] = []
    contraction = _contraction(eff[rname]) or any(_contraction(eff[g.name]) for g in guests)
    last2 = [_bound(a.bound, dims) for a in ax[-2:]]
    thin = any(b is not None and b < THIN for b in last2)
    small_tail = all((b or UNKNOWN) <= 64 for b in last2)
    dot_ok = _bare_contraction(eff[rname]) or any(_bare_contraction(eff[g.name]) for g in guests)
    # a contraction over a segment whose bounds follow an output axis (sum over a jagged
    # l of w[b, l] * v[l, d]) cannot tile that axis: b must stay one per program
    varying = {n.axis.name for c in [r, *guests] for a in c.reduce_axes
               for e in (a.start, a.extent) for n in walk(e) if isinstance(n, AxisRef)}
    tileable = len(ax) >= 2 and not varying & {ax[-2].name, ax[-1].name}
    if tileable and contraction and dot_ok and not small_tail and not thin:
        i, j = ax[-2].name, ax[-1].name
        # Each contraction computed in this program keeps an output tile (f32) in shared
        # memory on the C-like GPU backends: together within the smallest limit (48 KiB).
        n_dots = sum(_contraction(eff[g.name]) for g in guests) + _contraction(eff[rname])
        side = 128
        while n_dots > 1 and side > 16 and n_dots * side * side * 4 > SHARED_BYTES:
            side //= 2
        dec.update({"$BM": side, "$BN": side})
        own_moves += [{"m": "split", "stage": rname, "axis": i, "size": "$BM",
                       "into": [f"{i}o", f"{i}i"]},
                      {"m": "split", "stage": rname, "axis": j, "size": "$BN",
                       "into": [f"{j}o", f"{j}i"]},
                      {"m": "reorder", "stage": rname,
                       "order": [f"{i}o", f"{j}o", f"{i}i", f"{j}i"]}]
        for a in ax[:-2]:
            own_moves.append({"m": "bind", "stage": rname, "axis": a.name, "to": "grid"})
        own_moves += [{"m": "bind", "stage": rname, "axis": f"{i}o", "to": "grid"},
                      {"m": "bind", "stage": rname, "axis": f"{j}o", "to": "grid"},
                      {"m": "launch", "num_warps": 8, "num_stages": 3, "group_m": 8}]
        moves += [{**m, "_k": (0,)} for m in own_moves]
        level = f"{j}o"
        for g in guests:
            k = (2, op.stages.index(g))
            moves.append({"m": "compute_at", "stage": g.name, "at": [rname, level], "_k": k})
            if _bare_contraction(eff[g.name]):
                dec.setdefault("$BK", 32)
                moves.append({"m": "split", "stage": g.name, "axis": g.reduce_axes[0].name,
                              "size": "$BK", "_k": k})
        if _bare_contraction(eff[rname]):
            dec.setdefault("$BK", 32)
            moves.append({"m": "split", "stage": rname, "axis": r.reduce_axes[0].name,
                          "size": "$BK", "_k": (4,)})
        return

    red_own = _reduce_width(r, dims)
    if _bare_contraction(eff[rname]) and tileable and not thin and \
            all(_size(a, dims) >= 16 for a in ax[-2:]):
        red_own = 1  # a matrix-unit step: its operand tiles, not their product, count
    if len(ax) == 1:
        a = ax[0]
        ext = _size(a, dims)
        block = min(1024, ext, max(1, MAX_TILE // min(red_own, MIN_CHUNK * 16)))
        if red_own > 1 and not a.is_jagged and _reduces_across(eff[rname], a.name):
            # a sum down columns: one program per column would read it with a stride of
            # a row; a tile of neighbouring columns reads whole row pieces per chunk
            block = min(COLUMN_TILE, ext)
            key = _decide(dec, "$BLOCK", block, rname)
            own_moves += [{"m": "split", "stage": rname, "axis": a.name, "size": key,
                           "into": [f"{a.name}o", f"{a.name}i"]},
                          {"m": "bind", "stage": rname, "axis": f"{a.name}o", "to": "grid"}]
            grid.append(f"{a.name}o")
            tiles[a.name] = block
        elif a.is_jagged or red_own >= 1024 or block < 16 and red_own > 1:
            own_moves.append({"m": "bind", "stage": rname, "axis": a.name, "to": "grid"})
            grid.append(a.name)
            tiles[a.name] = 1
        else:
            key = _decide(dec, "$BLOCK", block, rname)
            own_moves += [{"m": "split", "stage": rname, "axis": a.name, "size": key,
                           "into": [f"{a.name}o", f"{a.name}i"]},
                          {"m": "bind", "stage": rname, "axis": f"{a.name}o", "to": "grid"}]
            grid.append(f"{a.name}o")
            tiles[a.name] = block
        own_moves.append({"m": "launch", "num_warps": 4})
    elif ax:
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
        # a reduction whose bounds follow a tile axis (k in [j, N)) stays whole beside the
        # tile; where the two outgrow a program, that axis goes on the grid, one per
        # program, and the reduction is looped over in chunks
        for k, a in enumerate(ax):
            if k < n_grid or a.name not in varying or a.is_jagged:
                continue
            whole = 1  # the largest of the stages' reductions that follow `a`
            for c in [r, *guests]:
                w = 1
                for x in c.reduce_axes:
                    if a.name in {n.axis.name for e in (x.start, x.extent) for n in walk(e)
                                  if isinstance(n, AxisRef)}:
                        w *= _size(x, dims) if dims is not None else UNKNOWN
                whole = max(whole, w)
            if (tile_from(n_grid) or UNKNOWN) * whole > MAX_TILE:
                n_grid = k + 1
        for a in ax[:n_grid]:
            own_moves.append({"m": "bind", "stage": rname, "axis": a.name, "to": "grid"})
            grid.append(a.name)
            tiles[a.name] = 1
        tile = tile_from(n_grid) or 1024
        for a in ax[n_grid:]:
            tiles[a.name] = _size(a, dims) if dims is not None else 1024
        # The tile and the reduction chunk share one program's budget.
        budget = MAX_TILE if red_own == 1 else max(1, MAX_TILE // min(red_own, MIN_CHUNK))
        if tile > budget and dims is not None:
            # Too large for one program's registers: loop over chunks of a tile axis.
            a = ax[n_grid]
            rest = tile // p2(_bound(a.bound, dims))
            if rest <= budget:
                aim = SPLIT_TILE if red_own == 1 else budget
                size = 1 << (max(1, aim // rest).bit_length() - 1)  # a power of two
                key = _decide(dec, f"$B{a.name.upper()}", size, rname)
                own_moves.append({"m": "split", "stage": rname, "axis": a.name, "size": key})
                outer[a.name] = f"{a.name}o"
                tiles[a.name] = size
                tile = size * rest
        own_moves.append({"m": "launch", "num_warps": 16 if tile >= 16384 else 8
                          if tile >= 2048 else 4})
    else:  # a 0-d output: one program, its reductions looped in chunks
        own_moves.append({"m": "launch", "num_warps": 8})
    moves += [{**m, "_k": (0,)} for m in own_moves]
    order = grid + [outer[a.name] for a in ax if a.name in outer]
    for g in guests:
        read = _root_read(r, g, guests, eff)
        deps = [outer[x] for x in read if x in outer]
        level = max(deps + grid[-1:], key=order.index)  # grid or split loop: one exists
        k = (2, op.stages.index(g))
        moves.append({"m": "compute_at", "stage": g.name, "at": [rname, level], "_k": k})
        width = 1
        for x in read:
            width *= tiles.get(x, 1)
        pre, _ = prefix.match(g, eff[g.name])
        along = read[[a.name for a in g.axes].index(pre.axis)] if pre is not None else None
        if along is not None and along not in grid and outer.get(along, level) == level:
            # a running value along an axis of this program's tile (logcumsumexp's max)
            moves.append({"m": "reduction", "stage": g.name, "strategy": "scan", "_k": k})
        elif _bare_contraction(eff[g.name]) and not thin:
            dec.setdefault("$BK", 32)
            moves.append({"m": "split", "stage": g.name, "axis": g.reduce_axes[0].name,
                          "size": "$BK", "_k": k})
        else:
            _split_reduces(g, width, tiles, moves, dec, dims, k)
    width = 1
    for a in ax:
        width *= tiles.get(a.name, 1)
    factor = _split_factor(op, r, guests, contraction, grid, tiles, red_own, dims)
    if factor > 1:
        # Too few programs for a long reduction: partial results over `factor` chunks
        # (schedule.rfactor), each chunk's reduction tiled like a row's
        key = _decide(dec, f"$RF_{rname.upper()}", factor, rname)
        moves.append({"m": "reduction", "stage": rname, "strategy": "split", "factor": key,
                      "_k": (4,)})
        part, _ = partial_stages(r, factor)
        _split_reduces(part, width, tiles, moves, dec, dims, (4,))
    elif red_own > 1 or not _bare_contraction(eff[rname]):
        _split_reduces(r, width, tiles, moves, dec, dims, (4,))


def _split_factor(op: Op, r: Compute, guests, contraction: bool, grid: list[str],
                  tiles: dict[str, int], red_own: int, dims) -> int:
    """Chunks to split root `r`'s reduction into across programs (1: none): where its
    grid has fewer than FEW_PROGRAMS programs (a loss to a scalar, a sum down a few long
    columns) and each program would reduce at least SPLIT_MIN elements (its reduction times
    its tile), enough chunks for about SPLIT_PROGRAMS programs in all, each at least
    SPLIT_CHUNK elements and MIN_CHUNK steps of the reduction."""
    width = 1
    for a in r.axes:
        width *= max(tiles.get(a.name, 1), 1)
    if dims is None or guests or contraction or red_own * width < SPLIT_MIN or \
            why_not(op, r) is not None:
        return 1
    programs = 1
    for a in r.axes:
        if a.name in grid or f"{a.name}o" in grid:
            programs *= -(-_size(a, dims) // max(tiles.get(a.name, 1), 1))
    if programs >= FEW_PROGRAMS:
        return 1
    want = min(SPLIT_PROGRAMS // programs, red_own * width // SPLIT_CHUNK,
               red_own // MIN_CHUNK)
    return p2(want) // 2 if p2(want) > want else p2(want) if want >= 2 else 1


def _root_read(r: Compute, g: Compute, guests: list[Compute], eff) -> list[str]:
    """The root's axes that guest `g`'s axes follow: where the root reads it, or where a
    guest that reads it does, mapped on to the root in turn."""
    read = _read_axes(r, eff[r.name], g.name)
    if read is not None:
        return read
    if g.name not in (n.buffer.name for c in [r, *guests] for n in walk(eff[c.name])
                      if isinstance(n, Load)):
        return [a.name for a in g.axes]  # a sibling output: the root's axes, by name
    for c in guests:
        got = _read_axes(c, eff[c.name], g.name) if c is not g else None
        if got is not None:
            cread = dict(zip((a.name for a in c.axes), _root_read(r, c, guests, eff)))
            return [cread[x] for x in got]
    return []


def _scan_moves(r: Compute, j: str, dec: dict, dims) -> list[dict]:
    """A prefix reduction (cumsum) as a running value along its axis `j`, walked in chunks
    inside each program: O(N) per row. The other axes go to the grid; when `j` is not the
    contiguous axis, the contiguous one is tiled too, so that every step of the walk reads
    a contiguous tile (one running value per lane)."""
    name = r.name
    last = r.axes[-1]
    moves: list[dict] = []
    grid: list[str] = []
    lanes: list[str] = []
    side = SCAN_CHUNK
    if last.name != j:
        side = SCAN_SIDE
        size = _size(last, dims)
        if size > SCAN_SIDE:
            key = _decide(dec, "$BL", SCAN_SIDE, name)
            moves.append({"m": "split", "stage": name, "axis": last.name, "size": key,
                          "into": [f"{last.name}o", f"{last.name}i"]})
            lanes = [f"{last.name}o", f"{last.name}i"]
        else:
            lanes = [None, last.name]
    for a in r.axes:
        if a.name not in (j, last.name):
            moves.append({"m": "bind", "stage": name, "axis": a.name, "to": "grid"})
            grid.append(a.name)
    if lanes and lanes[0]:
        moves.append({"m": "bind", "stage": name, "axis": lanes[0], "to": "grid"})
        grid.append(lanes[0])
    walk = [j]
    if _size(r.axis(j), dims) > side:
        key = _decide(dec, "$BS", side, name)
        moves.append({"m": "split", "stage": name, "axis": j, "size": key,
                      "into": [f"{j}o", f"{j}i"]})
        walk = [f"{j}o", f"{j}i"]
    order = grid + walk + lanes[1:]
    if len(order) > 1:
        moves.append({"m": "reorder", "stage": name, "order": order})
    moves.append({"m": "reduction", "stage": name, "strategy": "scan"})
    moves.append({"m": "launch", "num_warps": 4})
    return moves


def _decide(dec: dict, key: str, value: int, stage: str) -> str:
    """The decision name for `value`: `key`, unless another kernel's step already holds a
    different value under it (two row-blocked roots, two reductions over `k`): then
    `key_stage`, so that neither overwrites the other's size."""
    if dec.get(key, value) != value:
        key = f"{key}_{stage}"
    dec[key] = value
    return key


def _reduces_across(body, axis: str) -> bool:
    """Whether every load that a reduction of `body` walks has spatial axis `axis`, and no
    reduce axis, in its last (contiguous) index: the reduction runs down columns."""
    reds = [n for n in walk(body) if isinstance(n, Reduce)]
    red = {a.name for r in reds for a in r.axes}
    loads = [n for r in reds for n in walk(r.body) if isinstance(n, Load) and n.index
             and {x.axis.name for e in n.index for x in walk(e)
                  if isinstance(x, AxisRef)} & red]
    if not loads:
        return False
    for ld in loads:
        last = {x.axis.name for x in walk(ld.index[-1]) if isinstance(x, AxisRef)}
        if axis not in last or last & red:
            return False
    return True


def _reduce_width(s: Compute, dims) -> int:
    """Elements of all of a stage's reduce axes taken whole (1 without reductions)."""
    w = 1
    for a in s.reduce_axes:
        w *= _size(a, dims)
    return min(w, UNKNOWN)


def _split_reduces(s: Compute, width: int, tiles: dict[str, int], moves: list[dict],
                   dec: dict, dims, k: tuple) -> None:
    """Keep a step's reduce tile within the budget left by its spatial tile (`width`):
    loop over chunks of its reduce axes, the first first. An axis whose bounds vary across
    a tile axis stays whole (a loop needs one trip count per program)."""
    if not s.reduce_axes or dims is None:
        return
    budget = max(1, MAX_TILE // max(width, 1))
    have = 1
    for a in s.reduce_axes:
        b = _size(a, dims)
        deps = {n.axis.name for e in (a.start, a.extent) for n in walk(e)
                if isinstance(n, AxisRef)}
        rest = 1
        for x in s.reduce_axes[s.reduce_axes.index(a) + 1:]:
            rest *= _size(x, dims)
        if have * b * rest <= budget or any(tiles.get(d, 1) > 1 for d in deps):
            have *= b
            continue
        cap = budget // max(have * min(rest, MIN_CHUNK), 1)  # left for this axis' chunk
        size = max(1, min(b, cap // 4 if width > 1 else min(cap, ROW_CHUNK)))
        size = p2(size) if p2(size) == size else p2(size) // 2  # a power of two, below
        key = _decide(dec, f"$B{a.name.upper()}", size, s.name)
        moves.append({"m": "split", "stage": s.name, "axis": a.name, "size": key, "_k": k})
        have *= size
