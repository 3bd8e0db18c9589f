"""Settings for the whole test run.

One build cache for the run: every test that compiles a kernel (C, C++, CUDA emulation,
nvcc, hipcc, numba and Triton modules) finds what an earlier test built from the same
source, in this process or in another pytest-xdist worker, instead of compiling it again.
The cache is content-addressed (file names are source hashes) and every backend writes
under a name of its own before renaming into place, so concurrent workers share it safely.
It is $KEVOLVE_CACHE when that is set (the Makefile points it at .kevolve/test-cache, kept
between runs); otherwise a fresh folder for this run, removed at its end, so that a plain
`pytest` neither reads nor fills the user's own ~/.cache/kevolve.

torch.compile baselines are off (KEVOLVE_TORCH_COMPILE=0) except in the tests of them.

Hypothesis runs without its per-example deadline and its too-slow health check: both are
wall-clock limits, which fail on a busy machine and say nothing about correctness.

`slow` marks the cases that cost the most time for the least new coverage (the Triton
interpreter at larger shapes, emulated GPU sweeps); `make check` leaves them out, `make
test` runs everything."""

from __future__ import annotations

import os
import shutil
import tempfile

_OWNED = "_kevolve_test_cache"

try:
    from hypothesis import HealthCheck, settings
except ImportError:  # the tests that use it are skipped or fail on their own import
    pass
else:
    settings.register_profile("kevolve", deadline=None,
                              suppress_health_check=[HealthCheck.too_slow])
    settings.load_profile("kevolve")


def pytest_configure(config):
    # torch.compile baselines cost seconds per op: only the tests about them turn them on
    os.environ.setdefault("KEVOLVE_TORCH_COMPILE", "0")
    # xdist workers inherit the controller's environment, so they see the same folder
    if os.environ.get("KEVOLVE_CACHE"):
        return
    path = tempfile.mkdtemp(prefix="kevolve-test-cache-")
    os.environ["KEVOLVE_CACHE"] = path
    setattr(config, _OWNED, path)


def pytest_unconfigure(config):
    path = getattr(config, _OWNED, None)
    if path:
        os.environ.pop("KEVOLVE_CACHE", None)
        shutil.rmtree(path, ignore_errors=True)
