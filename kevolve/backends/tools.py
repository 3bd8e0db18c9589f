"""Compatibility re-export (the Triton backend imports tool_version from here): compiler
tools live in kevolve.backends.toolchain."""

from .toolchain import c_compile_log, cc_version, tool_version, version_tag

__all__ = ["c_compile_log", "cc_version", "tool_version", "version_tag"]
