"""MTIA's language: C++ against kv_mtia.h. C syntax and single-precision math from
CStyleLanguage, plus the statements the staging pass adds (local-memory allocations, DMA
copies, waits, intrinsic calls) as print rules, and SIMD loops as the header's macros."""

from __future__ import annotations

from dataclasses import dataclass

from ..cstyle.language import CStyleLanguage

# -- statements the MTIA program adds to the C-family tree -----------------------------------


@dataclass
class Alloc:
    """A tile or accumulator in the PE's local memory, allocated at the program's top."""

    name: str
    ctype: str
    elems: int
    esize: int
    what: str


@dataclass
class Dma:
    out: bool  # local -> DRAM
    tile: str
    dram: str  # DRAM address expression (pointer + offset)
    sizes: list[str]  # per box dim (outer..inner), element counts
    dram_strides: list[str]
    tile_strides: list[int]
    esize: int
    trips: list[float]  # average sizes, for the estimate
    gather: tuple[str, int] | None = None  # (address of the row indices, their size)


@dataclass
class Wait:
    pass


@dataclass
class Call:
    text: str  # a statement: kv_st(...) or kv_dot(...)
    value: str = ""  # computed value (costed like an assignment)
    direct: int = 0  # direct DRAM accesses it makes itself
    dot: tuple[str, float] | None = None  # (operand dtype, FLOPs per call)


# -- their print rules ------------------------------------------------------------------------


def _alloc(lang, s: Alloc, ind: int, in_grid: bool) -> list[str]:
    return [f"{'    ' * ind}{s.ctype} *__restrict {s.name} = kv_local_alloc<{s.ctype}>"
            f"({s.elems}, {s.esize});  // {s.what}"]


def _dma(lang, s: Dma, ind: int, in_grid: bool) -> list[str]:
    pad = "    " * ind
    if s.gather:
        sizes = s.sizes + ["1"] * (2 - len(s.sizes))
        st = s.dram_strides + ["1"] * (2 - len(s.dram_strides))
        args = [s.tile, s.dram, s.gather[0], *sizes, *st,
                str(s.tile_strides[0] if s.tile_strides else 1), str(s.esize),
                str(s.gather[1])]
        return [f"{pad}kv_dma_gather_2d({', '.join(args)});"]
    fn = f"kv_dma_{'out' if s.out else 'in'}_{len(s.sizes)}d"
    dst, src = (s.dram, s.tile) if s.out else (s.tile, s.dram)
    args = [dst, src, *s.sizes, *s.dram_strides, *map(str, s.tile_strides), str(s.esize)]
    return [f"{pad}{fn}({', '.join(args)});"]


def _wait(lang, s: Wait, ind: int, in_grid: bool) -> list[str]:
    return [f"{'    ' * ind}kv_dma_wait();"]


def _call(lang, s: Call, ind: int, in_grid: bool) -> list[str]:
    return [f"{'    ' * ind}{s.text};"]


class MtiaLanguage(CStyleLanguage):
    """C++ for one processing element: SIMD loops through KV_VEC_FOR / KV_RED_FOR (the
    header's vector lanes), no OpenMP, no prefetch (DMA staging moves the data)."""

    name = "mtia"
    simd_head = "KV_VEC_FOR({var}, {hi})"
    reduce_head = "KV_RED_FOR({op}, {acc}, {var}, {hi})"
    rules = {**CStyleLanguage.rules, Alloc: _alloc, Dma: _dma, Wait: _wait, Call: _call}


MTIA_LANG = MtiaLanguage()
