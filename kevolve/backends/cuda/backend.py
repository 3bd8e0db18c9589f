"""The CUDA backend: the GPU C-like emitter with CUDA's language data, compiled by nvcc to a
cubin and launched on torch tensors through CuPy (or cuda-python).

    be = CudaBackend()                 # nvcc -arch=sm_90 -cubin; run needs a GPU + CuPy
    be = CudaBackend(emulate=True)     # g++ and CPU threads: checks the source, no GPU

Building needs only nvcc: ptxas' report (registers, spills, stack frame, shared memory per
kernel) lands in `kernel.diagnostics["kernels"]`. The module is loaded on the first call,
so CI without a GPU compiles every op and reads the report."""

from __future__ import annotations

from ..base import Backend, Caps, Kernel, KernelSource, check_caps
from ..compiler_reports import parse_ptxas
from ..cstyle.gpu.block import check_gpu
from ..cstyle.gpu.module import gpu_source
from ..cstyle.languages import CudaLanguage
from ..target import Target
from ..toolchain import CompileError, find_tool, tool_version
from .runtime import CubinRunner, compile_cubin, cuda_available, emulated_kernel

__all__ = ["CudaBackend", "CUDA_CAPS", "CUDA_LANG"]

CUDA_LANG = CudaLanguage()

# H200 / sm_90: 1024 threads per block; 48 KiB of static shared memory per block (227 KiB
# with the dynamic opt-in, which kevolve does not use yet); 32-lane warps.
CUDA_CAPS = Caps("cuda", dtypes=("f32", "bf16", "f16", "i32", "i64", "i8", "bool"),
                 max_tile_elems=1 << 20, max_threads=1024, shared_bytes=48 * 1024,
                 vector_widths=(1, 2, 4, 8), max_warps=64, wavefront=32,
                 bind_targets=frozenset({"grid", "threads"}),
                 renders=frozenset({"vectorize", "cache", "unroll"}),
                 launch_args=frozenset({"num_warps", "group_m"}))


class CudaBackend(Backend):
    name = "cuda"
    tensor_lib = "torch"
    runs_on = "device"
    caps = CUDA_CAPS
    lang = CUDA_LANG

    def __init__(self, arch: str = "sm_90", nvcc: str | None = None, emulate: bool = False,
                 loader: str | None = None, threads: int | None = None):
        self.arch = arch
        # cupy | cuda-python | None (CuPy, else cuda-python); "emulator": the same Python
        # launcher drives the CPU emulation on torch CPU tensors (tests the launch path)
        self.loader = loader
        self.nvcc = nvcc
        self.emulate = emulate
        if emulate:  # numpy arrays on the host, CPU threads; times mean nothing
            self.tensor_lib = "numpy"
            self.runs_on = "host"

    @property
    def target(self) -> Target:  # the CPU emulator and its launcher run on the host
        host = self.emulate or self.loader == "emulator"
        return Target("cuda", on_device=not host, tensor_lib=self.tensor_lib)

    @property
    def flags(self) -> tuple[str, ...]:
        gencode = (f"-gencode=arch=compute_{self.arch[3:]},code={self.arch}"
                   if self.arch.endswith("a") else f"-arch={self.arch}")
        return (gencode, "-cubin", "-O3", "-std=c++17", "-Xptxas", "-v", "-lineinfo")

    def available(self) -> tuple[bool, str]:
        if self.emulate:
            return (True, "") if find_tool("g++") else (False, "emulation needs g++")
        return cuda_available(self.nvcc)

    def check(self, sched, plan) -> None:
        check_caps(self, sched, plan)
        check_gpu(self, sched, plan, self.lang)

    def toolchain(self) -> dict:
        """nvcc's version (it compiles the machine code); none for the CPU emulation."""
        nvcc = None if self.emulate else find_tool("nvcc", self.nvcc)
        return {"nvcc": tool_version(nvcc)} if nvcc else {}

    def render(self, plan) -> KernelSource:
        return gpu_source(self, plan, self.lang, "cuda/module.cu.j2", "cuda", self.flags)

    def build(self, source: KernelSource) -> Kernel:
        if (emu := emulated_kernel(source, self.emulate, self.loader)) is not None:
            return emu
        nvcc = find_tool("nvcc", self.nvcc)
        if nvcc is None:
            raise CompileError("no nvcc on PATH: the cuda backend compiles with the CUDA "
                               "toolkit's nvcc")
        cubin, log = compile_cubin(source, nvcc, "cuda", source.flags)
        diag = {"arch": self.arch, "cubin": str(cubin), "kernels": parse_ptxas(log),
                "paths": source.meta["paths"]}
        return Kernel(source, CubinRunner(source, cubin, self.loader), diag)
