"""Resolving `OP --shape ...` for commands that lower or run: presets or NAME=VAL pairs."""

from __future__ import annotations

import click

from ..errors import ShapeError

SHAPE_HELP = ("A preset (small, cpu, gpu) and/or NAME=VAL overrides, e.g. --shape cpu "
              "--shape N=1024. Default: cpu on CPU backends, gpu on GPU backends.")

shape_option = click.option("--shape", "shape_args", multiple=True, metavar="PRESET|NAME=VAL",
                            help=SHAPE_HELP)
backend_option = click.option("--backend", "-b", "backend_name", required=True,
                              metavar="NAME", help="Backend name (see `kevolve backends`).")
schedule_option = click.option("--schedule", "schedule_path", metavar="TRACE.json",
                               type=click.Path(exists=True, dir_okay=False),
                               help="A schedule trace (default: the op's default schedule).")


def parse(shape_args: tuple[str, ...], default_preset: str):
    """(preset or None, overrides)."""
    preset, over = None, {}
    for a in shape_args:
        if "=" in a:
            k, _, v = a.partition("=")
            try:
                over[k.strip()] = int(v)
            except ValueError:
                over[k.strip()] = v.strip()
        else:
            if preset is not None:
                raise ShapeError(f"two presets given ({preset}, {a}); give one")
            preset = a
    return preset or default_preset, over


def resolve(op_ref: str, shape_args: tuple[str, ...], gpu: bool):
    """(Op, OpDef or None, shape dict) for a library op or a spec file."""
    from ..ops import LIBRARY
    from ..ops import resolve as resolve_op

    preset, over = parse(shape_args, "gpu" if gpu else "cpu")
    if op_ref in LIBRARY:
        d = LIBRARY[op_ref]
        sd = {**d.shape(preset), **over}
        return d.op_for(sd), d, sd
    op = resolve_op(op_ref)
    if not over:
        raise ShapeError(f"{op_ref} is not a library op and has no presets: give its sizes "
                         "with --shape NAME=VAL for each dim")
    return op, None, over


def dims_for(op, opdef, sd: dict) -> dict[str, int]:
    from ..ir.nodes import op_dims

    if opdef is not None:
        return opdef.dims(sd)
    missing = [d for d in op_dims(op) if d not in sd]
    if missing:
        raise ShapeError(f"give --shape {missing[0]}=VAL (dims: {', '.join(op_dims(op))})")
    return {k: int(v) for k, v in sd.items() if k in op_dims(op)}


def load_trace(op, path: str | None, dims):
    from pathlib import Path

    from ..api import as_trace

    return as_trace(op, None if path is None else Path(path).read_text(), dims)
