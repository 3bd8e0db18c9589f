"""Compatibility re-export (the Triton backend imports tool_version from here): compiler
tools live in kevolve.backends.toolchain."""

from .toolchain import tool_version, version_tag

__all__ = ["tool_version", "version_tag"]
