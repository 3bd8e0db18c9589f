"""`kevolve demo`: softmax end to end on the CPU, before the evolve loop exists.

Builds softmax from the library, runs the numpy reference interpreter on a preset shape,
compares it with the torch eager baseline (max error, both times) and prints the IR and
the roofline floor at a nominal CPU bandwidth.
"""

from __future__ import annotations

from collections.abc import Callable

import click
from rich.table import Table
from rich.text import Text

from ._common import console, echo, emit_json, json_option, require_torch

NOMINAL_CPU_BYTES_PER_S = 20e9  # not measured: a round figure for one CPU socket


def _median_time(fn: Callable[[], object], repeat: int) -> tuple[float, object]:
    """Median wall time of `fn` in seconds over `repeat` runs after one warm-up run, and
    what the warm-up returned."""
    from ..evaluate.timing import median, time_cpu

    out = fn()
    return median(time_cpu(fn, warmup=0, repeat=repeat)) / 1e3, out


def _fmt_time(s: float) -> str:
    return f"{s * 1e3:.3f} ms" if s >= 1e-3 else f"{s * 1e6:.1f} us"


@click.command("demo")
@click.option("--op", "op_name", default="softmax", show_default=True,
              help="Library op to run.")
@click.option("--preset", default="cpu", show_default=True, help="Shape preset of the op.")
@click.option("--repeat", default=5, show_default=True, type=click.IntRange(1),
              help="Timed runs per contender (after one warm-up).")
@click.option("--seed", default=0, show_default=True, help="Seed of the random inputs.")
@json_option
def command(op_name: str, preset: str, repeat: int, seed: int, as_json: bool) -> None:
    """Softmax on the CPU: reference interpreter vs torch eager, IR, roofline."""
    import numpy as np

    torch = require_torch("kevolve demo (torch eager is what it compares with)")

    from .. import ops as library
    from ..ir.interp import run
    from ..ir.printer import op_text
    from ..ir.roofline import floor

    d = library.get(op_name)
    shape = d.shape(preset)
    case = d.case(preset, seed=seed)
    if not as_json:
        echo(op_text(d.op))
        echo()

    t_ref, ref = _median_time(lambda: run(d.op, case.inputs, case.params), repeat)
    tensors = {k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in case.inputs.items()}
    with torch.no_grad():
        t_eager, got = _median_time(lambda: d.torch_eager(tensors, dict(case.params)), repeat)
    err = 0.0
    for name in d.op.outputs:
        g = got[name].detach().to(torch.float64).numpy()
        both = ~np.isnan(ref[name])  # elements no stage writes are don't-care
        err = max(err, float(np.max(np.abs(g[both] - ref[name][both]), initial=0.0)))

    fl = floor(d.op, case.inputs, case.params)
    t_floor = fl.time_s(NOMINAL_CPU_BYTES_PER_S, float("inf"))
    if as_json:
        emit_json({"op": d.name, "preset": preset, "shape": shape, "ir": op_text(d.op),
                   "reference_s": t_ref, "eager_s": t_eager,
                   "eager_threads": torch.get_num_threads(), "max_error": err,
                   "floor_bytes": fl.bytes, "floor_flops": fl.flops,
                   "nominal_bytes_per_s": NOMINAL_CPU_BYTES_PER_S, "floor_s": t_floor})
        return
    table = Table(title=f"{d.name} at preset {preset!r}: "
                  + ", ".join(f"{k}={v}" for k, v in shape.items()))
    table.add_column("")
    table.add_column("value", justify="right")
    rows = [
        ("reference interpreter (numpy, float64)", _fmt_time(t_ref)),
        (f"torch eager (CPU, {torch.get_num_threads()} threads)", _fmt_time(t_eager)),
        ("max |torch - reference|", f"{err:.3g}"),
        ("roofline floor: bytes", f"{fl.bytes:,}"),
        ("roofline floor: FLOPs", f"{fl.flops:,}"),
        (f"floor time at a nominal {NOMINAL_CPU_BYTES_PER_S / 1e9:g} GB/s (not measured)",
         _fmt_time(t_floor)),
        ("torch eager vs nominal floor", f"{t_eager / t_floor:.1f}x the floor"
         if t_floor > 0 else "-"),
    ]
    for k, v in rows:
        table.add_row(Text(k), Text(v))
    console().print(table)
