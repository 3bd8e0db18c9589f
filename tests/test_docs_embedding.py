"""docs/embedding.md's toy compiler runs as written."""

from __future__ import annotations

import re
from pathlib import Path

DOC = Path(__file__).resolve().parents[1] / "docs" / "embedding.md"


def test_embedding_guide_runs():
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S)
    assert blocks, "the guide has no python example"
    for code in blocks:
        exec(compile(code, str(DOC), "exec"), {"__name__": "doc_example"})
