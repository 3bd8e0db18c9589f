"""Generated code is part of every archived result's identity (a result's run hash includes
`KernelSource.hash`): a change that alters one byte of a kernel makes its archived results
stale. This test renders every library op at every preset with its default schedule, and
every trace in tests/fixtures/golden_traces.json (schedules the search found on real
hardware), on every built-in backend, and compares the source hashes (or the legality
error's code) with tests/golden_sources.json.

A change that alters generated code on purpose regenerates the table with
`KEVOLVE_GOLDEN=write pytest tests/test_golden_sources.py` and says so in its commit."""

from __future__ import annotations

import json
import os
from pathlib import Path

from kevolve import api
from kevolve.ops import LIBRARY

HERE = Path(__file__).parent
GOLDEN = HERE / "golden_sources.json"
TRACES = HERE / "fixtures" / "golden_traces.json"
BACKENDS = ("cpu", "numba", "cuda", "hip", "mtia", "triton")


def _render(op, trace, backend: str, dims: dict) -> str:
    try:
        return api.lower(op, trace, backend, dims).hash
    except Exception as e:  # legality refusals are part of the contract too
        return f"error:{getattr(e, 'code', type(e).__name__)}"


def sources() -> dict[str, str]:
    out: dict[str, str] = {}
    for name, d in LIBRARY.items():
        for preset in d.shapes:
            op, dims = d.op_for(preset), d.dims(preset)
            for be in BACKENDS:
                out[f"default/{name}/{preset}/{be}"] = _render(op, None, be, dims)
    for k, entry in enumerate(json.loads(TRACES.read_text())):
        d = LIBRARY[entry["op"]]
        op, dims = d.op_for(entry["shape"]), d.dims(entry["shape"])
        for be in BACKENDS:
            out[f"trace{k}/{entry['op']}/{be}"] = _render(op, entry["trace"], be, dims)
    return out


def test_generated_sources_unchanged():
    got = sources()
    if os.environ.get("KEVOLVE_GOLDEN") == "write":
        GOLDEN.write_text(json.dumps(got, indent=1, sort_keys=True) + "\n")
    want = json.loads(GOLDEN.read_text())
    changed = sorted(k for k in want.keys() | got.keys() if want.get(k) != got.get(k))
    assert not changed, (f"{len(changed)} of {len(want)} generated sources changed "
                         f"(first: {changed[:8]}); if on purpose, regenerate with "
                         "KEVOLVE_GOLDEN=write and say so")


def test_table_covers_every_backend_and_some_evolved_schedules():
    want = json.loads(GOLDEN.read_text())
    for be in BACKENDS:
        assert any(k.endswith("/" + be) and not v.startswith("error") for k, v in want.items())
    assert sum(k.startswith("trace") and not v.startswith("error")
               for k, v in want.items()) >= 50
