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


def bad_shape(message: str) -> click.BadParameter:
    """Exit 2, naming the option: `Invalid value for '--shape': ...`."""
    return click.BadParameter(message, param_hint="'--shape'")


def parse(shape_args: tuple[str, ...], default_preset: str | None):
    """(preset or None, overrides). A value that is not an integer stays a string (a dtype,
    a lengths distribution); `check` says whether the op takes a string there."""
    preset, over = None, {}
    for a in shape_args:
        if "=" in a:
            k, _, v = a.partition("=")
            k, v = k.strip(), v.strip()
            if not k or not v:
                raise bad_shape(f"{a!r}: give NAME=VAL, e.g. N=1024")
            try:
                over[k] = int(v)
            except ValueError:
                over[k] = v
        else:
            if preset is not None:
                raise bad_shape(f"two presets given ({preset}, {a}); give one")
            preset = a
    return preset or default_preset, over


def check(opdef, preset: str, over: dict) -> dict:
    """The shape dict of a library op: its preset with the overrides, each override checked
    against the preset's keys (a dim takes an integer; dtype and the like a word)."""
    try:
        base = opdef.shape(preset)
    except KeyError:
        raise bad_shape(f"{opdef.name} has no shape preset {preset!r}; presets: "
                        f"{', '.join(opdef.shapes)}") from None
    for k, v in over.items():
        if k not in base:
            raise bad_shape(f"{k}={v}: {opdef.name} has no size or option {k!r}; it takes "
                            + ", ".join(f"{n}=..." for n in base))
        if isinstance(base[k], int) and not isinstance(v, int):
            raise bad_shape(f"{k}={v}: {k} is a size of {opdef.name} and takes an integer")
        if isinstance(base[k], int) and v < 0:
            raise bad_shape(f"{k}={v}: a size cannot be negative")
        if isinstance(base[k], str) and not isinstance(v, str):
            raise bad_shape(f"{k}={v}: {k} takes a word like {base[k]!r}, not a number")
    return {**base, **over}


def resolve(op_ref: str, shape_args: tuple[str, ...], gpu: bool):
    """(Op, OpDef or None, shape dict) for a library op or a spec file."""
    from ..ops import LIBRARY
    from ..ops import resolve as resolve_op

    preset, over = parse(shape_args, "gpu" if gpu else "cpu")
    if op_ref in LIBRARY:
        d = LIBRARY[op_ref]
        sd = check(d, preset, over)
        return d.op_for(sd), d, sd
    op = resolve_op(op_ref)
    if not over:
        raise ShapeError(f"{op_ref} is not a library op and has no presets: give its sizes "
                         "with --shape NAME=VAL for each dim")
    words = [f"{k}={v}" for k, v in over.items() if not isinstance(v, int)]
    if words:
        raise bad_shape(f"{words[0]}: the sizes of {op_ref} are integers")
    return op, None, over


def dims_for(op, opdef, sd: dict) -> dict[str, int]:
    from ..ir.nodes import op_dims, tiling_dims

    if opdef is not None:
        return opdef.dims(sd)
    missing = [d for d in tiling_dims(op) if d not in sd]
    if missing:
        raise ShapeError(f"give --shape {missing[0]}=VAL (dims: {', '.join(op_dims(op))})")
    return {k: int(v) for k, v in sd.items() if k in op_dims(op)}


def load_trace(op, path: str | None, dims):
    from pathlib import Path

    from ..api import as_trace

    return as_trace(op, None if path is None else Path(path).read_text(), dims)
