"""The Triton backend: tile-level kernels, compiled by Triton (or run by its interpreter).

backend.py holds the backend, emitter.py the tile-level rendering, gelu.py the GELU
helpers' numerics, bulk.py tensor-descriptor copies, usage.py the dot estimates,
ptxas.py which ptxas compiles, aot.py compiling for an absent GPU."""

from .backend import TritonBackend, load_module, require_triton

__all__ = ["TritonBackend", "load_module", "require_triton"]
