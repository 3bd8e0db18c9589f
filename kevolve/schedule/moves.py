"""The move grammar: each move's arguments as data, so validation, the JSON schema, the
docs and the LLM prompt all come from one table. Moves name stages and axes, never
positions; a move that creates axes names them."""

from __future__ import annotations

from dataclasses import dataclass

# Names (stages, axes, buffers, and the fresh axis names a move creates) end up as
# identifiers in generated source: word characters only, so no other text gets into it.
NAME = {"type": "string", "minLength": 1, "maxLength": 64,
        "pattern": r"^[A-Za-z0-9_]+$"}
# A decision's name: `$` and word characters (a move refers to it as "$NAME").
DECISION_PATTERN = r"^\$[A-Za-z0-9_]{1,64}$"
INT = {"type": "integer", "minimum": 1, "maximum": 1 << 20}
POW2 = {"type": "integer", "minimum": 1, "maximum": 1 << 16, "pow2": True}


@dataclass(frozen=True)
class MoveSpec:
    name: str
    args: dict  # arg -> JSON schema fragment
    required: tuple[str, ...]
    doc: str


def _enum(*vals):
    return {"type": "string", "enum": list(vals)}


MOVES: dict[str, MoveSpec] = {m.name: m for m in (
    MoveSpec("split", {"stage": NAME, "axis": NAME, "size": POW2,
                       "into": {"type": "array", "items": NAME, "minItems": 2, "maxItems": 2},
                       "tail": _enum("mask", "guard")},
             ("stage", "axis", "size"),
             "Split an axis into an outer loop and an inner tile of `size` (a power of two). "
             "The tail is masked (default) or guarded at launch (extent must divide)."),
    MoveSpec("reorder", {"stage": NAME, "order": {"type": "array", "items": NAME,
                                                  "minItems": 2}},
             ("stage", "order"), "Reorder the named loop axes (others keep their places)."),
    MoveSpec("fuse", {"stage": NAME, "axes": {"type": "array", "items": NAME, "minItems": 2,
                                              "maxItems": 2}, "into": NAME},
             ("stage", "axes"), "Fuse two adjacent loop axes into one (outer*inner)."),
    MoveSpec("bind", {"stage": NAME, "axis": NAME, "to": _enum("grid", "threads")},
             ("stage", "axis", "to"),
             "Map a spatial loop axis to the launch grid (one program per index) or to "
             "threads of a block."),
    MoveSpec("vectorize", {"stage": NAME, "axis": NAME, "width": POW2},
             ("stage", "axis", "width"), "Vectorize a tile axis with `width` lanes."),
    MoveSpec("unroll", {"stage": NAME, "axis": NAME, "factor": INT},
             ("stage", "axis", "factor"), "Unroll a loop axis by `factor`."),
    MoveSpec("inline", {"stage": NAME}, ("stage",),
             "Substitute a pointwise producer into every consumer (no buffer, no loop)."),
    MoveSpec("compute_at", {"stage": NAME,
                            "at": {"type": "array", "items": NAME, "minItems": 2,
                                   "maxItems": 2}},
             ("stage", "at"), "Compute a producer inside its consumer's loop `at` = "
             "[consumer, axis]: its values stay in registers/local memory. An output "
             "computed there is also stored from there (several outputs in one kernel); "
             "`consumer` may then be a sibling output with the same axes."),
    MoveSpec("cache", {"stage": NAME, "buffer": NAME, "scope": _enum("shared", "local"),
                       "copy": _enum("threads", "bulk"), "parts": POW2},
             ("stage", "buffer", "scope"),
             "Stage the tile of `buffer` that `stage` reads in shared or local memory; "
             "`copy: bulk` (scope shared) has a copy engine move whole tiles (on NVIDIA "
             "Hopper through Triton: TMA tensor descriptors) instead of the program's "
             "threads (`threads`, the default). `buffer` may be the stage's own output with "
             "`copy: bulk`: its tile is written from shared memory by the copy engine, in "
             "`parts` pieces along its last axis (default 1; each piece needs its own "
             "staging buffer no longer)."),
    MoveSpec("prefetch", {"stage": NAME, "buffer": NAME, "distance": INT},
             ("stage", "buffer"),
             "Fetch the rows a gathered load of `buffer` will read `distance` iterations "
             "ahead (default 8): hides the latency of embedding-table gathers on CPUs. "
             "Tile backends ignore it (their hardware runs loads ahead already)."),
    MoveSpec("reduction", {"stage": NAME, "strategy": _enum("single", "looped", "online",
                                                            "split", "scan"),
                           "factor": INT},
             ("stage", "strategy"),
             "How a stage reduces: one tile (single), a loop over tiles (looped), an online "
             "max+sum pass (online, softmax-style), split across programs (split), or, for a "
             "prefix reduction (k in [0, j + 1) or [j, N) of a stage axis j: cumsum), a "
             "running value carried along j in order (scan: O(N) per row, not O(N^2))."),
    MoveSpec("launch", {"num_warps": POW2, "num_stages": INT, "group_m": INT,
                        "dot_precision": _enum("ieee", "tf32x3"),
                        "constexpr_dims": {"type": "array", "items": NAME, "maxItems": 16},
                        "persistent": {"type": "integer", "minimum": 1, "maximum": 32},
                        "pipeline": _enum("tile", "across_tiles")},
             (),
             "Launch hints: warps per program, software-pipeline stages, grouped "
             "program ordering for 2-d grids, how f32 matrix-unit products are formed "
             "(ieee, or tf32x3: three tf32 products, f32-accurate on tensor cores), "
             "which dims are compile-time constants (Triton: one compile per value), and "
             "persistent programs (`persistent` per multiprocessor, each looping over "
             "the grid's tiles instead of one program per tile), and how far a persistent "
             "program's software pipeline reaches (`pipeline`: within each tile's loop, "
             "the default, or `across_tiles`: the next tile's loads start during this "
             "tile's epilogue)."),
)}


def json_schema() -> dict:
    """Plain JSON Schema for one move (used by the LLM proposer's tool definition)."""
    variants = []
    for m in MOVES.values():
        props = {"m": {"const": m.name}}
        for k, v in m.args.items():
            props[k] = {kk: vv for kk, vv in v.items() if kk != "pow2"}
            if "$" not in str(v.get("type")) and v.get("type") in ("integer",):
                props[k] = {"anyOf": [props[k], {"type": "string", "pattern": r"^\$\w+$"}]}
        variants.append({"type": "object", "description": m.doc, "properties": props,
                         "required": ["m", *m.required], "additionalProperties": False})
    return {"oneOf": variants}


def trace_schema() -> dict:
    return {"type": "object", "properties": {
        "version": {"const": 1}, "op": {"type": "string"},
        "moves": {"type": "array", "items": json_schema(), "maxItems": 64},
        "decisions": {"type": "object", "additionalProperties": {"type": "integer"},
                      "propertyNames": {"pattern": DECISION_PATTERN}}},
        "required": ["moves"]}
