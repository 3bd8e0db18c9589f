"""Defects the ATen catalog found on the CPU backends, each pinned by the catalog op that
showed it, run with the default schedule at its small preset and edge shapes against torch
and the interpreter (kevolve.evaluate.conform):

- x / y under -ffast-math became a reciprocal estimate on x86 (floor(5 / 1) = 4):
  floor_divide, fmod, remainder;
- abs of an index printed as fabsf (a float subscript): reflect padding;
- max over two dependent axes (adaptive pooling) read the inner axis' extent outside the
  loop that bound it;
- a gather fixed per output point (x[i, target[i]] under a sum over classes) was given a
  prefetch whose guard named an unbound axis;
- Triton's launcher printed an extent min(M, N) as tl.minimum, which exists only inside
  @triton.jit (trace);
- Triton refused a block mask (a where() branch over a block) on a load whose pointer is
  one per program (x[i, target[i]], v[i] under where(i == j, ...)): the offset is spread
  to the mask's shape (multi_margin_loss, diag_embed);
- numba raised ZeroDivisionError where C and torch give nan (the variance of one value:
  var_all at every dim 1)."""

from __future__ import annotations

import pytest

from kevolve.backends.registry import get
from kevolve.evaluate.conform import conform
from kevolve.ops import resolve

OPS = ["floor_divide", "fmod", "remainder", "pad_reflect", "adaptive_max_pool2d",
       "multi_margin_loss", "trace", "diag_embed", "var_all"]


@pytest.mark.parametrize("backend", ["cpu", "numba", "mtia", "triton"])
@pytest.mark.parametrize("name", OPS)
def test_catalog_op_conforms(backend, name):
    be = get(backend, interpret=True) if backend == "triton" else get(backend)
    ok, why = be.available()
    if not ok:
        pytest.skip(why)
    r = conform(resolve(f"aten.{name}"), be, seeds=(0, 1), backend_name=backend)
    assert r.ok, f"{r.verdict} at {r.stage}: {r.reason}"


def test_cpu_division_is_exact():
    from kevolve.backends.cpu import CFLAGS

    assert "-fno-reciprocal-math" in CFLAGS
