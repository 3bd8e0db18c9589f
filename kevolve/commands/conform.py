"""`kevolve conform`: the ATen catalog (or a family, or some ops) on a backend, each op built
with its default schedule and checked against its torch reference and the interpreter."""

from __future__ import annotations

import click

from ._common import BadInput, Failed, console, echo, emit_json


@click.command("conform", short_help="Check catalog ops against ATen on a backend.")
@click.option("--backend", "-b", "backend_name", default="interp", show_default=True,
              help="A backend, or `interp`: only the spec vs its torch reference.")
@click.option("--ops", "selection", default="all", show_default=True, metavar="SEL",
              help="`all`, a family (unary, reduction, conv, ...), or comma-separated "
                   "op names and families (aten.relu,softmax).")
@click.option("--share", "share_spec", default=None, metavar="K/N",
              help="Only every N-th selected op, starting at the K-th (a rotating slice).")
@click.option("--seeds", type=int, default=1, show_default=True,
              help="Random inputs drawn per shape.")
@click.option("--no-edges", is_flag=True, help="Only the small preset, not the edge shapes.")
@click.option("--interpret", is_flag=True, help="Triton: run in Triton's interpreter (CPU).")
@click.option("--emulate", is_flag=True,
              help="cuda/hip: run the kernels in the backend's CPU emulation.")
@click.option("--compile-only", is_flag=True,
              help="Build every kernel but run none (a GPU backend's compiler, no GPU).")
@click.option("--markdown", "md_path", type=click.Path(dir_okay=False), default=None,
              help="Also write the run as Markdown (command, counts per family, failures "
                   "by stage) to this file.")
@click.option("--log", "log_path", type=click.Path(dir_okay=False), default=None,
              help="Append each op's row as a JSON line to this file as soon as it is "
                   "known (a run cut short keeps what it did).")
@click.option("--json", "as_json", is_flag=True,
              help="One JSON document: a row per op and a summary (exit 1 if any fails).")
def command(backend_name, selection, share_spec, seeds, no_edges, interpret, emulate,
            compile_only, md_path, log_path, as_json) -> None:
    """Run each selected ATen catalog op on BACKEND with the default schedule, at its small
    preset and edge shapes (every dim 1, primes, 16-bit dtypes), on fresh random inputs.
    Each op's torch reference (float64) is checked against the interpreter, and the kernel
    against the interpreter at its output dtype's tolerance. Prints a table (op, verdict,
    max error, reason); exit 0 only if every op passes."""
    import sys

    from ..evaluate.conform import conform_all, markdown, share, summary
    from ..ops import aten

    try:
        names = share(aten.select(selection), share_spec)
    except ValueError as e:
        raise BadInput(str(e)) from None
    if not names:
        raise BadInput(f"--ops {selection!r} selects no op")

    import json

    log = open(log_path, "a") if log_path else None  # noqa: SIM115 - closed below

    def progress(r):
        if log is not None:
            log.write(json.dumps(dict(r.to_dict(), family=aten.family_of(r.op))) + "\n")
            log.flush()
        if not as_json and sys.stderr.isatty():
            click.echo(f"{r.op}: {r.verdict}", err=True)

    try:
        results = conform_all(names, backend_name, interpret=interpret, emulate=emulate,
                              compile_only=compile_only,
                              seeds=tuple(range(seeds)), edges=not no_edges,
                              on_result=progress)
    except RuntimeError as e:
        raise BadInput(str(e)) from None
    finally:
        if log is not None:
            log.close()
    summ = summary(results)
    if md_path:
        cmd = "kevolve " + " ".join(sys.argv[1:]) if sys.argv[0].endswith(("kevolve", "cli.py",
                                                                           "__main__.py")) \
            else f"kevolve conform -b {backend_name} --ops {selection}"
        with open(md_path, "w") as fh:
            fh.write(markdown(results, cmd, aten.family_of) + "\n")
    if as_json:
        emit_json({"backend": backend_name, "interpret": interpret, "emulate": emulate,
                   "compile_only": compile_only, "selection": selection,
                   "share": share_spec, "summary": summ,
                   "results": [dict(r.to_dict(), family=aten.family_of(r.op))
                               for r in results]})
    else:
        from rich.table import Table
        from rich.text import Text

        t = Table(title=f"kevolve conform --backend {backend_name}")
        for col in ("op", "family", "verdict", "max error", "s", "reason"):
            t.add_column(col)
        for r in results:
            err = "-" if r.max_error in (0.0, None) else f"{r.max_error:.3g}"
            t.add_row(Text(r.op), Text(aten.family_of(r.op)), Text(r.verdict), Text(err),
                      Text(f"{r.seconds:.2f}"), Text(r.reason[:160]))
        console().print(t)
        echo(f"{summ['passed']}/{summ['ops']} passed on {backend_name}"
             + "".join(f"; {v}: {n}" for v, n in summ["verdicts"].items() if v != "pass"))
    if summ["passed"] != summ["ops"]:
        raise Failed(f"{summ['ops'] - summ['passed']} of {summ['ops']} ops did not conform "
                     f"on {backend_name}")
