"""Exit codes: 0 ok, 1 the kernel or search failed, 2 the user's mistake (one paragraph,
no traceback), for the defects a newcomer met first."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from kevolve.cli import main

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


def test_run_on_the_mtia_emulator_needs_no_gpu(runner):
    r = runner.invoke(main, ["run", "softmax", "--backend", "mtia", "--shape", "small",
                             "--json", "--repeat", "2"])
    assert r.exit_code == 0, r.output + repr(r.exception)
    res = json.loads(r.stdout)
    assert res["verdict"] == "ok" and res["timing"] == "estimate" and res["speedup"] is None


def test_run_exits_1_when_the_kernel_is_wrong(runner, monkeypatch):
    import kevolve.api
    from kevolve.backends.base import Kernel

    real = kevolve.api.build

    def broken(source, be):  # a kernel that writes nothing: its outputs stay poisoned
        k = real(source, be)
        return Kernel(k.source, lambda ins, outs, params: None)
    monkeypatch.setattr(kevolve.api, "build", broken)
    r = runner.invoke(main, ["run", "softmax", "-b", "cpu", "--shape", "small", "--json",
                             "--repeat", "1", "--threads", "1"])
    assert r.exit_code == 1, r.output
    assert json.loads(r.stdout)["verdict"] == "correctness"  # still one JSON document
    assert r.stderr.startswith("kevolve: softmax on cpu is wrong")
    r = runner.invoke(main, ["run", "softmax", "-b", "cpu", "--shape", "small", "--repeat",
                             "1", "--threads", "1"])
    assert r.exit_code == 1 and "Traceback" not in r.output


@pytest.mark.parametrize("args, words", [
    (["lower", "softmax", "-b", "cpu", "--shape", "M=abc"], ["M=abc", "integer"]),
    (["run", "softmax", "-b", "cpu", "--shape", "M=abc"], ["M=abc", "integer"]),
    (["evolve", "softmax", "-b", "cpu", "--shape", "M=abc"], ["M=abc", "integer"]),
    (["lower", "softmax", "-b", "cpu", "--shape", "Q=4"], ["Q=4", "M=..."]),
    (["lower", "layernorm", "-b", "cpu", "--shape", "dtype=7"], ["dtype=7"]),
    (["lower", "softmax", "-b", "cpu", "--shape", "huge"], ["huge", "presets"]),
])
def test_a_bad_shape_is_exit_2_naming_the_option(runner, args, words):
    r = runner.invoke(main, args)
    assert r.exit_code == 2, r.output
    assert "'--shape'" in r.stderr and "Traceback" not in r.output
    for w in words:
        assert w in r.stderr


def test_evolve_on_a_gpu_backend_without_a_gpu_is_exit_2(runner, tmp_path):
    r = runner.invoke(main, ["evolve", "softmax", "-b", "triton", "--budget", "1", "--db",
                             str(tmp_path / "a.db")])
    assert r.exit_code == 2, r.output
    assert "Traceback" not in r.output and "triton" in r.stderr
    assert not (tmp_path / "a.db").exists()


def test_hardware_name_without_a_gpu_is_a_clear_error():
    import torch

    from kevolve.evaluate.hardware import NoDevice, hardware_name

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    with pytest.raises(NoDevice, match="--backend cpu"):
        hardware_name(True)


BLOCK_TORCH = ("import sys; sys.modules['torch'] = None\n"  # `import torch` raises ImportError
               "from kevolve.cli import main; main()")


@pytest.mark.parametrize("args", [
    ["run", "softmax", "-b", "cpu", "--shape", "small"],
    ["demo"],
    ["evolve", "softmax", "-b", "cpu", "--budget", "1", "--db", "x.db"],
    ["bench", "--suite", "cpu", "--ops", "softmax", "--from-archive", "--db", "x.db"],
])
def test_without_torch_the_error_names_the_extra(args, tmp_path):
    out = subprocess.run([sys.executable, "-c", BLOCK_TORCH, *args], capture_output=True,
                         text=True, cwd=tmp_path, timeout=300,
                         env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO)})
    assert out.returncode == 2, out.stdout + out.stderr
    assert "kevolve[torch]" in out.stderr and "Traceback" not in out.stderr
    assert out.stdout == ""
