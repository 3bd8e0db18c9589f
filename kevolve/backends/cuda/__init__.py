"""The CUDA backend: the C family's GPU emitter with CUDA's language data (backend.py), and
the runtime that compiles and loads its modules (runtime.py: nvcc → cubin, CuPy or
cuda-python loaders, the CPU emulator), which the HIP-on-CUDA path shares."""

from .backend import CUDA_CAPS, CudaBackend

__all__ = ["CUDA_CAPS", "CudaBackend"]
