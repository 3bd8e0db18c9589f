"""`kevolve export OP --backend B -o module.py`: the best archived kernel as a PyTorch op
(the module itself is kevolve.export.torch_op's)."""

from __future__ import annotations

import json
from pathlib import Path

import click

from ..export import torch_op
from ._common import OP_HELP, echo, emit_json, json_option, op_argument
from .archive import db_option, open_archive, require_best, require_op


@click.command("export", short_help="Write the best archived kernel as a PyTorch custom op.",
               help="Write a standalone Python module that registers the best archived kernel "
               "of OP on a backend as a PyTorch custom op (torch.library; with autograd, works "
               "under torch.compile). The module embeds the trace, the generated source and "
               "the shape it was tuned for; other shapes are lowered on first use through "
               f"kevolve, which must be installed where the module runs. {OP_HELP}")
@op_argument
@click.option("--backend", "-b", required=True, metavar="NAME", help="Backend, e.g. cpu.")
@click.option("--output", "-o", required=True, metavar="MODULE.py",
              type=click.Path(dir_okay=False, writable=True), help="The module to write.")
@click.option("--hardware", metavar="NAME", help="Only results on this hardware.")
@click.option("--name", "qualname", metavar="NS::NAME",
              help="The custom op's name (default kevolve::<op>_<backend>).")
@db_option
@json_option
def command(op_ref: str, backend: str, output: str, hardware: str | None,
            qualname: str | None, db: str, as_json: bool) -> None:
    from ..ops import resolve

    opdef = resolve(op_ref)
    with open_archive(db) as a:
        name = require_op(a, opdef.name)
        rec = require_best(a, name, backend, hardware, db)
    path = Path(output)
    try:
        text = torch_op.module_text(rec, db, torch_op.ident(path.stem), qualname, opdef)
    except torch_op.NotExportable as e:
        raise click.ClickException(str(e)) from e
    except torch_op.BadOpName as e:
        raise click.UsageError(str(e)) from e
    path.write_text(text)
    r = rec["result"]
    if as_json:
        emit_json({"module": str(path.resolve()), "op": rec["op"], "backend": backend,
                   "candidate_id": rec["candidate_id"], "time_ms": r.time_ms,
                   "hardware": rec["hardware"], "shape": rec["shape"], "db": db})
        return
    echo(f"wrote {path}: {rec['op']} on {backend} (candidate {rec['candidate_id']}, "
         f"{r.time_ms:.4g} ms on {rec['hardware']}), tuned for {json.dumps(rec['shape'])}")
