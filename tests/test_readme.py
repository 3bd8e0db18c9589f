"""README.md's Python example runs as written, on the cpu backend."""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def python_blocks(text: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", text, re.S)


def test_readme_python_example_runs_on_the_cpu_backend(capsys):
    blocks = python_blocks(README.read_text())
    assert blocks, "the README has no python example"
    for code in blocks:
        assert 'backend="cpu"' in code  # the example must run on any machine
        exec(compile(code, str(README), "exec"), {"__name__": "readme_example"})
    assert "omp parallel for" in capsys.readouterr().out  # it printed the generated C
