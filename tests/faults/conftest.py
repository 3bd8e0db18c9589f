"""Registers tests/faults/faulty_backend.py as backend `faulty` through the
`kevolve.backends` entry-point group, the way a third-party package would: a dist-info
folder on sys.path (spawned workers inherit sys.path, so they find it too)."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent


@pytest.fixture(scope="module")
def faulty(tmp_path_factory):
    site = tmp_path_factory.mktemp("faulty_site")
    dist = site / "kevolve_faulty-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: kevolve-faulty\n"
                                   "Version: 0.1\n")
    (dist / "entry_points.txt").write_text("[kevolve.backends]\n"
                                           "faulty = faulty_backend:FaultyBackend\n")
    added = [p for p in (str(site), str(HERE)) if p not in sys.path]
    sys.path[:0] = added
    importlib.invalidate_caches()
    from kevolve.backends.registry import names

    assert names()["faulty"] == "faulty_backend:FaultyBackend"
    yield "faulty"
    for p in added:
        sys.path.remove(p)
    importlib.invalidate_caches()
