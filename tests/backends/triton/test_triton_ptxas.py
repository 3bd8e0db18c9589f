"""The Triton backend's ptxas is chosen explicitly ("auto": TRITON_PTXAS_PATH if set, else
the newest ptxas the Python packages bundle), recorded in the toolchain (so results compiled
by another ptxas get another run hash), and refused once Triton has compiled with another
in the process. Fake ptxas binaries are shell scripts printing a version."""

from __future__ import annotations

import os

import pytest

from kevolve.archive import RunKey
from kevolve.backends.triton import TritonBackend, ptxas
from kevolve.evaluate.hardware import toolchain

pytest.importorskip("triton")


def fake(tmp_path, name: str, release: str):
    p = tmp_path / name
    p.write_text("#!/bin/sh\necho 'ptxas: NVIDIA (R) Ptx optimizing assembler'\n"
                 f"echo 'Cuda compilation tools, release {release[:4]}, V{release}'\n")
    p.chmod(0o755)
    return p


@pytest.fixture
def two(tmp_path, monkeypatch):
    """Triton bundling 12.8 and torch bundling 13.0, no TRITON_PTXAS_PATH, and a process in
    which Triton has compiled nothing yet (earlier tests compile: their cached ptxas version
    is forgotten here, and again after, so none of these fakes stays in Triton's cache)."""
    from triton.backends.nvidia import compiler

    got = {"triton": fake(tmp_path, "ptxas-triton", "12.8.93"),
           "torch": fake(tmp_path, "ptxas-torch", "13.0.88")}
    monkeypatch.setattr(ptxas, "bundled", lambda: got)
    monkeypatch.setenv(ptxas.ENV, "set-then-removed")  # so that teardown restores it
    monkeypatch.delenv(ptxas.ENV)
    compiler.get_ptxas_version.cache_clear()
    yield got
    compiler.get_ptxas_version.cache_clear()


def test_auto_is_the_newest_bundled_unless_the_environment_names_one(two, tmp_path,
                                                                      monkeypatch):
    assert ptxas.resolve("auto") == (str(two["torch"]), "13.0.88")
    assert ptxas.resolve("triton") == (str(two["triton"]), "12.8.93")
    mine = fake(tmp_path, "mine", "12.9.41")
    assert ptxas.resolve(str(mine)) == (str(mine), "12.9.41")
    monkeypatch.setenv(ptxas.ENV, str(mine))
    assert ptxas.resolve("auto") == (str(mine), "12.9.41")


def test_bad_choices_say_what_to_use(two, tmp_path, monkeypatch):
    monkeypatch.setattr(ptxas, "bundled", lambda: {"triton": two["triton"]})
    with pytest.raises(ValueError, match="torch bundles no ptxas here; use 'triton'"):
        ptxas.resolve("torch")
    with pytest.raises(ValueError, match="is not an executable file; use one of auto"):
        ptxas.resolve(str(tmp_path / "nowhere"))
    odd = tmp_path / "odd"
    odd.write_text("#!/bin/sh\necho hello\n")
    odd.chmod(0o755)
    with pytest.raises(ValueError, match="does not report a ptxas version"):
        ptxas.resolve(str(odd))


def test_the_choice_is_in_the_toolchain_and_the_run_hash(two):
    new, old = TritonBackend(), TritonBackend(ptxas="triton")
    assert toolchain(new)["ptxas"] == "13.0.88"
    assert toolchain(old)["ptxas"] == "12.8.93"
    assert RunKey("s", "triton", toolchain(new), "gpu:x").stable_hash() != \
        RunKey("s", "triton", toolchain(old), "gpu:x").stable_hash()
    assert "ptxas" not in toolchain(TritonBackend(interpret=True))


def test_the_choice_is_settled_before_the_first_compile(two, monkeypatch):
    from triton.backends.nvidia import compiler

    compiler.get_ptxas_version.cache_clear()
    try:
        TritonBackend(ptxas="triton").configure_process()
        assert os.environ[ptxas.ENV] == str(two["triton"])
        TritonBackend(ptxas="torch").configure_process()  # nothing compiled yet: allowed
        assert os.environ[ptxas.ENV] == str(two["torch"])
        assert "13.0.88" in compiler.get_ptxas_version(90)  # what Triton's cache key reads
        TritonBackend(ptxas="torch").configure_process()  # the same again: fine
        with pytest.raises(RuntimeError, match=r"has already compiled with ptxas 13\.0\.88 "
                           r"\(.*ptxas-torch\) .* asked for 12\.8\.93 .* Start a fresh"):
            TritonBackend(ptxas="triton").configure_process()
        assert os.environ[ptxas.ENV] == str(two["torch"])
    finally:
        compiler.get_ptxas_version.cache_clear()


def test_a_compile_with_the_same_version_before_is_no_conflict(two, tmp_path):
    """Triton compiled with its own ptxas (no variable set); asking for a copy of the same
    version elsewhere is allowed."""
    from triton.backends.nvidia import compiler

    same = fake(tmp_path, "copy-of-torch", "13.0.88")
    compiler.get_ptxas_version.cache_clear()
    try:
        TritonBackend(ptxas="torch").configure_process()
        compiler.get_ptxas_version(90)
        TritonBackend(ptxas=str(same)).configure_process()
        assert os.environ[ptxas.ENV] == str(same)
    finally:
        compiler.get_ptxas_version.cache_clear()


def test_auto_after_a_compile_is_what_compiled(two):
    """Triton compiled with its own ptxas (no variable set): "auto" keeps that one rather
    than the newer one torch bundles, and an explicit other version is refused."""
    from triton import knobs
    from triton.backends.nvidia import compiler

    compiler.get_ptxas_version.cache_clear()
    try:
        compiler.get_ptxas_version(90)
        real = knobs.nvidia.ptxas.path
        assert real not in {str(p) for p in two.values()}
        assert ptxas.resolve("auto")[0] == real
        with pytest.raises(RuntimeError, match="Start a fresh process"):
            TritonBackend(ptxas="torch").configure_process()
        assert not os.environ.get(ptxas.ENV)
    finally:
        compiler.get_ptxas_version.cache_clear()

