"""The staging pass over one program's loop tree (DMA tiles, direct accesses, the dot
engine, local-memory allocation), and what the program costs on the machine model."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from ...ir.nodes import Const, Expr
from ..cstyle.scalar import ptr
from ..cstyle.stmts import Assign, Decl, For
from ..pyexpr import Ctx, emit, strides
from .builder import TOKEN, Access, DotSite, MtiaEmitter
from .language import MTIA_LANG, Alloc, Call, Dma, Wait
from .model import MachineModel, ProgramCost

DEVICE_BYTES = {"f32": 4, "bf16": 2, "f16": 2, "i32": 4, "i64": 8, "i8": 1, "f64": 8, "bool": 1}
IDENT = re.compile(r"\b[A-Za-z_]\w*\b")


# -- the staging pass ------------------------------------------------------------------------


@dataclass
class Tile:
    name: str
    key: tuple
    where: tuple[int, int]  # (id of the list holding the DMA, index it precedes)
    order: list[int]  # tile stride per range dim, in buffer order


@dataclass
class Frame:
    stmts: list
    index: int
    defined: frozenset
    loop: For | None = None


@dataclass
class ProgramText:
    allocs: list[Alloc]
    body: list
    grid: list[tuple[str, str]]  # (var, count) outer..inner
    local_bytes: int


class Stager:
    """Resolves the builder's load/store tokens into DMA-staged tiles or direct accesses,
    turns marked contractions into kv_dot calls and hoists local arrays to the top."""

    def __init__(self, b: MtiaEmitter, tree: list, dma_align: int):
        self.b, self.align = b, dma_align
        self.grid: list[tuple[str, str]] = []
        body = tree
        while len(body) == 1 and isinstance(body[0], For) and body[0].kind == "grid":
            self.grid.append((body[0].var, body[0].hi))
            body = body[0].body
        self.body = body
        self.inits: dict[str, str] = {}
        self.names: set[str] = set()
        for s in _walk_stmts(body):
            if isinstance(s, Decl):
                self.names.add(s.name)
                if s.init is not None and s.ctype == "i64":
                    self.inits[s.name] = s.init
            elif isinstance(s, For):
                self.names.add(s.var)
        self.tiles: dict[tuple, Tile] = {}
        self.allocs: list[Alloc] = []
        self.inserts: dict[tuple[int, int], list[Dma]] = {}  # (list, index) -> DMAs
        self.lists: dict[int, list] = {}
        self.resolved: dict[int, tuple[Tile, dict[str, int]] | None] = {}
        self.kernel_outputs = set(b.k.writes)
        self.n = 0

    def run(self) -> ProgramText:
        grid_vars = frozenset(v for v, _ in self.grid)
        self.grid = [(v, self.resolve(hi, [])) for v, hi in self.grid]
        self.walk(self.body, grid_vars, [])
        for (lid, idx), dmas in sorted(self.inserts.items(), key=lambda t: -t[0][1]):
            self.lists[lid][idx:idx] = [*dmas, Wait()]
        arrays = []
        self.body[:] = self._hoist(self.body, arrays)
        allocs = arrays + self.allocs
        local = sum(_round_up(a.elems * a.esize, self.align) for a in allocs)
        return ProgramText(allocs, self.body, self.grid, local)

    # -- walk ----------------------------------------------------------------------------
    def walk(self, stmts: list, defined: frozenset, chain: list[Frame]) -> None:
        defined = set(defined)
        self.lists[id(stmts)] = stmts
        for i, s in enumerate(stmts):
            here = chain + [Frame(stmts, i, frozenset(defined))]
            if isinstance(s, For):
                s.hi = self.resolve(s.hi, here)
                here[-1].loop = s
                self.walk(s.body, frozenset(defined | {s.var}), here)
                site = self.b.dots.get(id(s))
                if site is not None:
                    call = self.dot_call(site, s, here[-1])
                    if call is not None:
                        stmts[i] = call
            elif isinstance(s, Decl):
                if s.init is not None:
                    s.init = self.resolve(s.init, here)
                defined.add(s.name)
            elif isinstance(s, Assign):
                m = TOKEN.fullmatch(s.target)
                if m and m.group(1) == "S":
                    stmts[i] = self.store(int(m.group(2)), s, here)
                else:
                    s.target = self.resolve(s.target, here)
                    s.value = self.resolve(s.value, here)

    def resolve(self, text: str, chain: list[Frame]) -> str:
        def sub(m: re.Match) -> str:
            n = int(m.group(2))
            a = self.b.accesses[n]
            staged = self.stage_load(n, a, chain) if a.dims is not None else None
            self.resolved[n] = staged
            if staged is None:
                return f"kv_ld({ptr(a.buf.name)}, {self.resolve(a.offset, chain)})"
            tile, st = staged
            idx = " + ".join(v if k == 1 else f"{v} * {k}" for v, k in st.items())
            return f"{tile.name}[{idx}]"
        return TOKEN.sub(sub, text)

    # -- slabs ---------------------------------------------------------------------------
    def _box(self, a: Access, chain: list[Frame]):
        """(frame the DMA goes next to, per-var bounds, per-var loops, resolved dim texts),
        or None. A load's DMA goes before the outermost loop of its slab, hoisted further
        out of every loop it does not depend on; a store's DMA goes after that loop."""
        loops: dict[str, int] = {}
        for d in a.dims:
            if d.kind != "scalar":
                k = next((j for j in range(len(chain) - 1, -1, -1)
                          if chain[j].loop is not None and chain[j].loop.var == d.var), None)
                if k is None:
                    return None
                loops[d.var] = k
        outer = min(loops.values())
        top = chain[outer]
        bounds = {v: chain[k].loop.hi for v, k in loops.items()}
        texts = [d.text for d in a.dims] + list(bounds.values()) + \
            [d.clamp for d in a.dims if d.clamp]
        deps = set().union(*(self._deps(t) for t in texts))
        if not deps <= top.defined:
            return None
        if not a.store:
            outer = next(j for j in range(outer + 1) if deps <= chain[j].defined)
            top = chain[outer]
        texts = {id(d): self.resolve(d.text, chain[:outer + 1]) for d in a.dims}
        for d in a.dims:
            if d.clamp:
                lim = self.resolve(d.clamp, chain[:outer + 1])
                bounds[d.var] = f"kv_max(0, kv_min({bounds[d.var]}, {lim}))"
        return top, bounds, {v: chain[k].loop for v, k in loops.items()}, texts

    def _deps(self, text: str) -> set[str]:
        """Local names a text reads, through the offsets of the loads it contains."""
        out = set(IDENT.findall(TOKEN.sub(" ", text))) & self.names
        for _, n in TOKEN.findall(text):
            out |= self._deps(self.b.accesses[int(n)].offset)
        return out

    def _canon(self, s: str, depth: int = 0) -> str:
        if depth > 20:
            return s
        return IDENT.sub(lambda m: f"({self._canon(self.inits[m.group(0)], depth + 1)})"
                         if m.group(0) in self.inits else m.group(0), s)

    def stage_load(self, n: int, a: Access, chain: list[Frame]):
        if a.buf.name in self.kernel_outputs:
            return None
        box = self._box(a, chain)
        if box is None:
            return None
        top, bounds, loops, texts = box
        key = (a.buf.name,) + tuple(
            (d.kind, self._canon(texts[id(d)])) + ((self._canon(bounds[d.var]), d.size,
                                                    d.index and d.index.name)
                                                   if d.kind != "scalar" else ())
            for d in a.dims)
        tile = self.tiles.get(key)
        if tile is None or not any(id(f.stmts) == tile.where[0] and f.index >= tile.where[1]
                                   for f in chain):
            tile = self._new_tile(key, a, top, bounds, loops, texts, out=False)
        ranges = [d for d in a.dims if d.kind != "scalar"]
        return tile, {d.var: s for d, s in zip(ranges, tile.order)}

    def _new_tile(self, key, a: Access, top: Frame, bounds, loops, texts,
                  out: bool) -> Tile:
        self.n += 1
        ranges = [d for d in a.dims if d.kind != "scalar"]
        order, stride = [], 1
        for d in reversed(ranges):
            order.append(stride)
            stride *= d.size
        order.reverse()
        name = f"{'o' if out else 't'}_{a.buf.name}{self.n}"
        dt = a.buf.dtype.name
        esize = DEVICE_BYTES[dt]
        self.allocs.append(Alloc(name, MTIA_LANG.buffer_types[dt], stride, esize,
                                 f"{'output' if out else 'input'} tile of {a.buf.name} "
                                 f"({'x'.join(str(d.size) for d in ranges)}) for stage "
                                 f"{a.step!r}"))
        bstr = strides(a.buf.shape)
        base = " + ".join(f"({texts[id(d)]}) * {self._dim_text(s)}"
                          if self._dim_text(s) != "1" else f"({texts[id(d)]})"
                          for d, s in zip(a.dims, bstr) if d.kind != "gather") or "0"
        gather = None
        for d in ranges:
            if d.kind == "gather":
                (ist,) = strides(d.index.shape)
                addr = f"{ptr(d.index.name)} + ({texts[id(d)]})"
                gather = (addr if ist == Const(1) else f"{addr} * {self._dim_text(ist)}",
                          DEVICE_BYTES[d.index.dtype.name])
        dma = Dma(out, name, f"{ptr(a.buf.name)} + {base}",
                  [bounds[d.var] for d in ranges],
                  [self._dim_text(s) for d, s in zip(a.dims, bstr) if d.kind != "scalar"],
                  order[:-1], esize, [self.b.trips(loops[d.var].var) for d in ranges], gather)
        tile = Tile(name, key, (id(top.stmts), top.index), order)
        self.inserts.setdefault((id(top.stmts), top.index + (1 if out else 0)), []).append(dma)
        if not out:
            self.tiles[key] = tile
        return tile

    def _dim_text(self, s: Expr) -> str:
        return emit(s, Ctx(), self.b.lang.expr, ptr)

    def store(self, n: int, s: Assign, chain: list[Frame]):
        a = self.b.accesses[n]
        value = self.resolve(s.value, chain)
        box = self._box(a, chain) if a.dims is not None else None
        if box is None:
            fn = "kv_atomic_add" if a.add else "kv_st"
            return Call(f"{fn}({ptr(a.buf.name)}, {self.resolve(a.offset, chain)}, "
                        f"{value})", value, 1)
        top, bounds, loops, texts = box
        tile = self._new_tile(None, a, top, bounds, loops, texts, out=True)
        ranges = [d for d in a.dims if d.kind != "scalar"]
        idx = " + ".join(d.var if k == 1 else f"{d.var} * {k}"
                         for d, k in zip(ranges, tile.order))
        return Assign(f"{tile.name}[{idx}]", value)

    # -- dot engine ----------------------------------------------------------------------
    def dot_call(self, site: DotSite, fk: For, frame: Frame) -> Call | None:
        toks = [int(t) for kind, t in TOKEN.findall(site.raw) if kind == "L"]
        if len(toks) != 2 or any(self.resolved.get(t) is None for t in toks):
            return None
        want_a = {site.m_loop.var, fk.var}
        want_b = {fk.var, site.n_loop.var}
        got = {frozenset(self.resolved[t][1]): self.resolved[t] for t in toks}
        if set(got) != {frozenset(want_a), frozenset(want_b)} or want_a == want_b:
            return None
        (ta, sa), (tb, sb) = got[frozenset(want_a)], got[frozenset(want_b)]
        m, n, k = site.m_loop.hi, site.n_loop.hi, fk.hi
        deps = set().union(*(self._deps(t) for t in (m, n, k)))
        if not deps <= frame.defined or site.assign.target != f"{site.acc}[b0 * {site.ldc} + b1]":
            return None
        accs = [self.b.accesses[t] for t in toks]
        dt = "f32" if any(x.buf.dtype.name == "f32" for x in accs) else accs[0].buf.dtype.name
        trips = [self.b.trips(v) for v in (site.m_loop.var, site.n_loop.var, fk.var)]
        return Call(f"kv_dot({site.acc}, {site.ldc}, {ta.name}, {sa[site.m_loop.var]}, "
                    f"{sa[fk.var]}, {tb.name}, {sb[fk.var]}, {sb[site.n_loop.var]}, "
                    f"{m}, {n}, {k})", dot=(dt, 2.0 * math.prod(trips)))

    # -- local arrays --------------------------------------------------------------------
    def _hoist(self, stmts: list, arrays: list[Alloc]) -> list:
        out = []
        for s in stmts:
            if isinstance(s, Decl) and s.size:
                arrays.append(Alloc(s.name, self.b.lang.types[s.ctype], s.size,
                                    DEVICE_BYTES.get(s.ctype, 4), f"accumulator {s.name}"))
                continue
            if isinstance(s, For):
                s.body[:] = self._hoist(s.body, arrays)
            out.append(s)
        return out


def _walk_stmts(stmts: list):
    for s in stmts:
        yield s
        if isinstance(s, For):
            yield from _walk_stmts(s.body)


def _round_up(n: int, a: int) -> int:
    return -(-n // a) * a


# -- cost of a program (the estimate walks the same tree it prints) ------------------------

_FUNCS = re.compile(r"\b(expf|logf|erff|tanhf|sqrtf|fmaxf|fminf)\(")
_BINOPS = re.compile(r" (?:[-+*/<>]|<=|>=|==|!=|&&|\|\||\?) ")
_SLOW = {"expf", "logf", "erff", "tanhf", "sqrtf"}


def _strip_index(s: str) -> str:
    """Drop index arithmetic (inside [...] and the offset of kv_ld) from a value string."""
    out, depth, i = [], 0, 0
    while i < len(s):
        if s.startswith("kv_ld(", i) and depth == 0:
            j, d = i + 6, 1
            while j < len(s) and d:
                d += {"(": 1, ")": -1}.get(s[j], 0)
                j += 1
            out.append("L")
            i = j
            continue
        c = s[i]
        if c == "[":
            depth += 1
        elif c == "]":
            depth -= 1
        elif depth == 0:
            out.append(c)
        i += 1
    return "".join(out)


def _direct_loads(text: str) -> list[str]:
    """The argument text of every kv_ld(...) in `text` (nested ones included)."""
    out = []
    for mm in re.finditer(r"\bkv_ld\(", text):
        j, depth = mm.end(), 1
        while j < len(text) and depth:
            depth += {"(": 1, ")": -1}.get(text[j], 0)
            j += 1
        out.append(text[mm.end():j - 1])
    return out


def _ops(value: str, m: MachineModel) -> int:
    v = _strip_index(value)
    n = len(_BINOPS.findall(v))
    for f in _FUNCS.findall(v):
        n += m.transcendental_cycles if f in _SLOW else 1
    return n


def program_cost(b: MtiaEmitter, stmts: list, m: MachineModel) -> ProgramCost:
    c = ProgramCost()

    def go(ss: list, mult: float, vec: float | None, variant: set[str]) -> None:
        for s in ss:
            if isinstance(s, For):
                t = b.trips(s.var)
                if s.kind == "simd":
                    inner = {s.var} | {x.name for x in _walk_stmts(s.body)
                                       if isinstance(x, Decl)}
                    go(s.body, mult, t, inner)
                else:
                    go(s.body, mult * t, None, set())
                continue
            if isinstance(s, Dma):
                elems = math.prod(s.trips)
                contiguous = s.dram_strides[-1] == "1" and not (s.gather and len(s.trips) == 1)
                runs, run = (elems / s.trips[-1], s.trips[-1]) if contiguous and s.trips[-1] \
                    else (elems, 1)  # (an empty box moves nothing)
                c.dma_count += mult
                c.dma_bytes += mult * elems * s.esize
                c.dma_burst_bytes += mult * m.bursts(runs, run * s.esize)
                if s.gather:  # the DMA engine reads the row indices too
                    c.dma_bytes += mult * s.trips[0] * s.gather[1]
                    c.dma_burst_bytes += mult * m.bursts(1, s.trips[0] * s.gather[1])
                continue
            if isinstance(s, Call) and s.dot:
                dt, flops = s.dot
                c.dot_flops[dt] = c.dot_flops.get(dt, 0.0) + mult * flops
                continue
            value, direct, flt = "", 0, True
            if isinstance(s, Assign):
                value = s.value
            elif isinstance(s, Decl) and s.init:
                value, flt = s.init, s.ctype.startswith("f")
            elif isinstance(s, Call):
                value, direct = s.value, s.direct
            else:
                continue
            ops = _ops(value, m) if flt else 0
            loads = _direct_loads(value) + (_direct_loads(s.target)
                                            if isinstance(s, Assign) else [])
            if vec is None:
                c.scalar_cycles += mult * ops
                c.direct += mult * (direct + len(loads))
            else:
                # a direct load whose address does not change along the vector loop is
                # charged once per loop (hoisted), the others once per element
                per_elem = sum(1 for x in loads if set(IDENT.findall(x)) & variant)
                c.vector_cycles += mult * math.ceil(vec / m.vector_lanes) * ops
                c.direct += mult * (vec * (direct + per_elem) + len(loads) - per_elem)
    go(stmts, 1.0, None, set())
    return c
