"""The skill library: the best archived traces of the library ops most like the one being
searched, found by what kinds of computation their IR does (ProposalContext.similar)."""

from __future__ import annotations

import re

from ....archive.records import Scored


def _signature(ir_text: str) -> set[str]:
    """What kinds of computation an op does: its calls and reductions, operators, number of
    stages and whether it is jagged (names of buffers and axes do not count)."""
    lines = [x for x in ir_text.splitlines() if "=" in x and "->" not in x]
    body = " ".join(x.split("=", 1)[1] for x in lines)
    toks = {f"call:{t}" for t in re.findall(r"([A-Za-z_]+)\s*[({]", body)}
    toks |= {f"op:{c}" for c in "+-*/" if c in body}
    toks.add(f"stages:{min(len(lines), 6)}")
    if "offsets" in ir_text or "jagged" in ir_text:
        toks.add("jagged")
    return toks


def similar_ops(archive, op, backend: str, hardware: str | None = None,
                k: int = 3) -> tuple[Scored, ...]:
    """The best archived traces of the (at most k) library ops most like `op`, for
    ProposalContext.similar: a skill library that grows with every search."""
    from ....ir.printer import op_text
    from ....ops import LIBRARY

    mine = _signature(op_text(op))
    found = []
    for name in archive.op_names():
        if name == op.name or name not in LIBRARY:
            continue
        theirs = _signature(op_text(LIBRARY[name].op))
        sim = len(mine & theirs) / max(1, len(mine | theirs))
        if sim <= 0:
            continue
        best = archive.best(name, backend, hardware)
        if best is not None:
            found.append((-sim, name, best))
    return tuple(b for _, _, b in sorted(found, key=lambda x: x[:2])[:k])
