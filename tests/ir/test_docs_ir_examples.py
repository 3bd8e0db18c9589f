"""docs/ir.md's worked examples are real: each complete spec on the page loads, and computes
what the library's operator of the same name computes (or, for an operator the library
lacks, the spec of that name under examples/ or the ATen catalog's), output by output."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from kevolve import ops
from kevolve.ir.interp import run
from kevolve.ir.specfile import load_op, spec_names

DOC = Path(__file__).resolve().parents[2] / "docs" / "ir.md"
SPECS = [b for b in re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S)
         if b.startswith("from kevolve.ir.builder import")]


def test_the_page_has_its_examples():
    assert len(SPECS) >= 5


@pytest.mark.parametrize("code", SPECS, ids=lambda c: re.search(r"op\(\"(\w+)\"", c)[1])
def test_doc_spec_matches_library(code, tmp_path):
    path = tmp_path / "spec.py"
    path.write_text(code)
    op = load_op(str(path))
    lib = _same_op(op.name)
    for shape in ("small", *lib.edge_shapes):
        case = lib.case(shape, seed=1)
        got = run(op, case.inputs, case.params)
        want = run(lib.op, case.inputs, case.params)
        for name in op.outputs:
            np.testing.assert_allclose(got[name], want[name if name in want else
                                                       lib.op.outputs[0]], rtol=1e-12,
                                       atol=1e-12, equal_nan=True)


def _same_op(name: str):
    """The library's operator of that name, the spec under examples/ that defines it, or
    the ATen catalog's."""
    if name in ops.names():
        return ops.get(name)
    for f in sorted((DOC.parents[1] / "examples").glob("*.py")):
        for n in spec_names(str(f)):
            d = ops.resolve(f"{f}:{n}")
            if d.name == name:
                return d
    return ops.resolve(f"aten.{name}")
