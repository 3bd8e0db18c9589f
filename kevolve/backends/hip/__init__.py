"""The HIP backend: the C family's GPU emitter with HIP's language data; hipcc for AMD, or
nvcc through the CUDA runtime for HIP-on-CUDA (backend.py), and the gfx940 → gfx942
code-object rewrite (retarget.py)."""

from .backend import AMD_TARGETS, HipBackend
from .retarget import retarget_code_object

__all__ = ["AMD_TARGETS", "HipBackend", "retarget_code_object"]
