"""Resolving `OP --shape ...` for commands that lower or run: presets or NAME=VAL pairs."""

from __future__ import annotations

import click

from ..errors import ShapeError
from ..ops.spec import negative_size

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
                try:
                    over[k] = float(v)  # a float scalar (an epsilon, a slope)
                except ValueError:
                    over[k] = v
        else:
            if preset is not None:
                raise bad_shape(f"two presets given ({preset}, {a}); give one")
            preset = a
    return preset or default_preset, over


def check(opdef, preset: str, over: dict) -> dict:
    """The shape dict of an op: its preset with the overrides, each override checked
    against the preset's keys (a dim takes an integer; dtype and the like a word)."""
    try:
        base = opdef.shape(preset)
    except KeyError:
        raise bad_shape(f"{opdef.name} has no shape preset {preset!r}; presets: "
                        f"{', '.join(opdef.shapes)}") from None
    scalars = {b.name: b.dtype for b in opdef.op.inputs if not b.shape}
    for k, v in over.items():
        if k in scalars and k not in base:
            base = {**base, k: 0.0 if scalars[k].is_float else 0}
        if k not in base:
            raise bad_shape(f"{k}={v}: {opdef.name} has no size or option {k!r}; it takes "
                            + ", ".join(f"{n}=..." for n in base))
        if k in scalars:
            if not isinstance(v, (int, float)) or not scalars[k].is_float and \
                    not isinstance(v, int):
                raise bad_shape(f"{k}={v}: {k} is a {scalars[k].name} scalar of "
                                f"{opdef.name} and takes a number")
            over[k] = float(v) if scalars[k].is_float else v
            continue
        if isinstance(base[k], int) and not isinstance(v, int):
            raise bad_shape(f"{k}={v}: {k} is a size of {opdef.name} and takes an integer")
        if isinstance(base[k], int) and v < 0:
            raise bad_shape(f"{k}={v}: a size cannot be negative")
        if isinstance(base[k], str) and not isinstance(v, str):
            raise bad_shape(f"{k}={v}: {k} takes a word like {base[k]!r}, not a number")
    shape = {**base, **over}
    why = negative_size(opdef.op_for(shape), shape)
    if why:
        raise bad_shape(f"{why}; give sizes that keep it 0 or more")
    return shape


def resolve(op_ref: str, shape_args: tuple[str, ...], gpu: bool):
    """(Op, OpDef, shape dict) for any OP (kevolve.ops.resolve): a preset (default cpu or
    gpu) with the --shape overrides checked against it."""
    from ..ops import resolve as resolve_op

    opdef = resolve_op(op_ref)
    preset, over = parse(shape_args, "gpu" if gpu else "cpu")
    sd = check(opdef, preset, over)
    return opdef.op_for(sd), opdef, sd


def dims_for(op, opdef, sd: dict) -> dict[str, int]:
    """The dims to lower at: the shape's, with a jagged total bounded by its segments."""
    try:
        return opdef.dims(sd)
    except KeyError as e:
        raise ShapeError(f"{e.args[0]}: give it with --shape NAME=VAL") from None


def load_trace(op, path: str | None, dims):
    from pathlib import Path

    from ..api import as_trace

    return as_trace(op, None if path is None else Path(path).read_text(), dims)
