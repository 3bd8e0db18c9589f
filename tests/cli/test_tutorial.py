"""docs/ir.md's tutorial runs as written, block after block, in a fresh folder: files are
written (```python file=NAME) and appended to (```python append=NAME), every `kevolve ...`
line of a ```sh block runs as a command and must exit 0, the ```text block after a `kevolve
show` is its output, and a plain ```python block runs as a script there."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "ir.md"
HEAD = "## Tutorial:"


def tutorial_blocks() -> list[tuple[str, str]]:
    """(info string, body) of every fenced block of the tutorial section, in order."""
    text = DOC.read_text()
    start = text.index(HEAD)
    end = text.find("\n## ", start + len(HEAD))
    section = text[start:end if end >= 0 else len(text)]
    return re.findall(r"^```([^\n]*)\n(.*?)^```$", section, re.S | re.M)


def test_the_tutorial_covers_every_step():
    blocks = tutorial_blocks()
    commands = " ".join(body for info, body in blocks if info == "sh")
    for verb in ("show", "lower", "run", "evolve", "export"):
        assert f"kevolve {verb} " in commands, verb
    python = [body for info, body in blocks if info == "python"]
    assert python and "torch.compile" in python[-1]
    assert {info for info, _ in blocks} <= {"sh", "text", "python"} | {
        info for info, _ in blocks if re.fullmatch(r"python (file|append)=[\w.]+", info)}


@pytest.mark.slow
def test_the_tutorial_runs_as_written(tmp_path):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(ROOT), str(tmp_path), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}
    env.pop("KEVOLVE_DB", None)  # the archive the tutorial means: .kevolve/ in its folder
    last = ""
    for n, (info, body) in enumerate(tutorial_blocks()):
        if m := re.fullmatch(r"python (file|append)=([\w.]+)", info):
            with open(tmp_path / m[2], "w" if m[1] == "file" else "a") as f:
                f.write(body)
        elif info == "sh":
            for line in body.splitlines():
                line = line.split("#")[0].strip()
                if not line:
                    continue
                argv = shlex.split(line)
                assert argv[0] == "kevolve", line
                p = subprocess.run([sys.executable, "-m", "kevolve.cli", *argv[1:]],
                                   cwd=tmp_path, env=env, capture_output=True, text=True,
                                   timeout=900)
                assert p.returncode == 0, f"{line}\n{p.stdout}\n{p.stderr}"
                last = p.stdout
        elif info == "text":
            assert body.strip() in last, f"block {n}: the output differs:\n{last}"
        elif info == "python":
            script = tmp_path / f"block{n}.py"
            script.write_text(body)
            p = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env,
                               capture_output=True, text=True, timeout=900)
            assert p.returncode == 0, f"block {n}:\n{p.stdout}\n{p.stderr}"
    assert (tmp_path / "gated_rmsnorm_cpu.py").is_file()
    assert (tmp_path / "gated_rmsnorm.c").read_text().count("#pragma omp") >= 1
