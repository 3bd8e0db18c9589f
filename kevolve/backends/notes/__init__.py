"""Short per-backend hardware notes (what pays on each target), shipped with kevolve and
put into the LLM proposer's prompt, like KernelEvolve's knowledge base. One Markdown file
per backend name, read by `Backend.notes()`; a backend without notes gets none."""

from __future__ import annotations

from importlib import resources


def notes(backend: str) -> str:
    """The notes for a backend name ("" when kevolve ships none for it)."""
    if not backend.replace("_", "").isalnum():
        return ""
    try:
        return resources.files(__name__).joinpath(f"{backend}.md").read_text("utf-8")
    except (FileNotFoundError, OSError):
        return ""


def available() -> list[str]:
    return sorted(p.name[:-3] for p in resources.files(__name__).iterdir()
                  if p.name.endswith(".md"))
