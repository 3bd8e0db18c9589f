"""The default schedule is legal by construction: for every library op at every preset, and
for random valid operators (specgen: pointwise chains, reductions over any axes incl. 0-d
outputs, reduce-then-normalize, gathers, jagged reductions and jagged elementwise ops,
contractions with epilogues and thin ones, several outputs), the default lowers and passes
every backend's checks at real sizes, and at small awkward sizes (1, primes, empty
segments) it matches the reference interpreter on cpu and numba; the Triton interpreter
runs in test_default_triton.py (a process of its own)."""

from __future__ import annotations

import opcheck
import pytest
import specgen
from hypothesis import HealthCheck, given, settings

from kevolve import pipeline
from kevolve.backends.registry import get
from kevolve.ops import LIBRARY

BACKENDS = ("cpu", "numba", "cuda", "hip", "mtia", "triton")
FAST = settings(deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)


@pytest.mark.parametrize("backend", BACKENDS)
def test_library_defaults_lower_on_every_backend(backend):
    be = get(backend)
    for d in LIBRARY.values():
        for preset in d.shapes:
            pipeline.lower(d.op_for(preset), None, d.dims(preset), be)


def _example_refs():
    import glob
    from pathlib import Path

    from kevolve.ir.specfile import spec_names

    root = Path(__file__).resolve().parents[2] / "examples"
    return [f"{f}:{n}" for f in sorted(glob.glob(str(root / "*.py"))) for n in spec_names(f)]


@pytest.mark.parametrize("backend", BACKENDS)
def test_example_defaults_lower_on_every_backend(backend):
    """The operators under examples/ (users' specs, not tuned for) at their presets: e.g.
    cross_entropy's two row-blocked kernels (mx, and loss with lse inside) keep a block
    size each (one shared `$BLOCK` gave mx a tile of 1024 rows x N)."""
    from kevolve.ops import resolve

    be = get(backend)
    for ref in _example_refs():
        d = resolve(ref)
        for preset in d.shapes:
            pipeline.lower(d.op_for(preset), None, d.dims(preset), be)


@settings(FAST, max_examples=150)
@given(specgen.recipes())
def test_random_op_defaults_lower_at_real_sizes(recipe):
    built = specgen.build(recipe)
    for dims in (specgen.lowering_dims(built, "large"), specgen.lowering_dims(built, "small")):
        for backend in BACKENDS:
            pipeline.lower(built.op, None, dims, get(backend))


def _check(recipe, backend, **kw):
    built = specgen.build(recipe)
    problems = opcheck.check(built.op, specgen.lowering_dims(built, "small"),
                             get(backend, **kw), built.params,
                             make=lambda rng: specgen.make_inputs(built, rng))
    assert not problems, (recipe, problems[:2])


@settings(FAST, max_examples=40)
@given(specgen.recipes())
def test_random_op_defaults_match_reference_on_cpu(recipe):
    _check(recipe, "cpu")


@settings(FAST, max_examples=12)
@given(specgen.recipes())
def test_random_op_defaults_match_reference_on_numba(recipe):
    _check(recipe, "numba")
