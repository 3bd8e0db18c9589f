"""The kernel cache is sealed: a shared library or module planted in it (another user of a
shared cache folder, a copied cache) is never loaded; kevolve rebuilds over it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

BUILD = """
import numpy as np
from kevolve import api
from kevolve.ops import LIBRARY
d = LIBRARY["softmax"]
shape = d.shape("small")
src = api.lower(d.op_for(shape), None, "cpu", d.dims(shape))
print(src.hash)
k = api.build(src)
case = d.case(shape, 0)
from kevolve.evaluate.check import alloc_outputs, inputs_for
from kevolve.ir.interp import bind_dims
op = d.op_for(shape)
ins = inputs_for(op, case.inputs)
outs = alloc_outputs(op, bind_dims(op, case.inputs, case.params))
k(ins, outs, case.params)
print("FINITE", bool(np.isfinite(outs["y"]).all()))
"""

PLANTED = r"""
#include <stdio.h>
__attribute__((constructor)) static void planted(void) {
    FILE *f = fopen("%s", "w"); if (f) { fputs("loaded", f); fclose(f); }
}
"""


def run(env: dict) -> list[str]:
    r = subprocess.run([sys.executable, "-c", BUILD], env=env, capture_output=True, text=True,
                       cwd=REPO)
    assert r.returncode == 0, r.stderr[-3000:]
    return r.stdout.split()


@pytest.mark.skipif(not any(os.access(os.path.join(p, "cc"), os.X_OK)
                            for p in os.environ.get("PATH", "").split(os.pathsep)),
                    reason="needs a C compiler")
def test_a_library_planted_in_the_cache_is_not_loaded(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(REPO), "KEVOLVE_CACHE": str(tmp_path / "cache"),
           "XDG_CONFIG_HOME": str(tmp_path / "config")}
    h, _, ok = run(env)
    assert ok == "True"
    so = tmp_path / "cache" / "cpu" / f"{h}.so"
    assert so.exists() and (so.parent / (so.name + ".seal")).exists()
    key = tmp_path / "config" / "kevolve" / "cache.key"
    assert key.stat().st_mode & 0o077 == 0

    marker = tmp_path / "planted-was-loaded"
    c = tmp_path / "planted.c"
    c.write_text(PLANTED % marker)
    subprocess.run(["cc", "-shared", "-fPIC", str(c), "-o", str(so)], check=True)
    _, _, ok = run(env)
    assert not marker.exists()  # before: the planted library's constructor ran
    assert ok == "True"  # rebuilt from source, and right


def test_seals_verify_only_this_users_own_builds(tmp_path, monkeypatch):
    from kevolve.backends import toolchain

    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    toolchain.cache_key.cache_clear()
    try:
        out, tmp = tmp_path / "k.so", tmp_path / "k.tmp"
        tmp.write_bytes(b"built")
        toolchain.seal(tmp, out)
        assert toolchain.sealed(out)
        out.write_bytes(b"planted")
        assert not toolchain.sealed(out)
        assert not toolchain.sealed(tmp_path / "missing.so")
        (tmp_path / "other.so").write_bytes(b"built")  # a seal is for its own name
        (tmp_path / "other.so.seal").write_text((tmp_path / "k.so.seal").read_text())
        assert not toolchain.sealed(tmp_path / "other.so")
    finally:
        toolchain.cache_key.cache_clear()
