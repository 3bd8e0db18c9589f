"""The HIP backend: the GPU C-like emitter with HIP's language data.

    HipBackend()                               # AMD Instinct, wavefront 64, gfx90a
    HipBackend(arch="gfx940")                  # MI300 (pre-production id; LLVM 15 knows it)
    HipBackend(arch="gfx942")                  # MI300X: compiled for gfx940, retargeted
    HipBackend(platform="nvidia")              # HIP-on-CUDA: wavefront 32, nvcc + kevolve's
                                               # hip/hip_runtime.h, runs on NVIDIA GPUs
    HipBackend(emulate=True)                   # g++ + CPU threads, wavefront 64 semantics

For AMD, build compiles device code with `HIP_PLATFORM=amd hipcc --offload-arch=...`
(Debian's hipcc 5.2 / LLVM 15) and reads clang's kernel resource remarks (VGPRs, SGPRs,
spills, LDS, occupancy) into diagnostics. kevolve has no AMD GPU loader yet: an AMD kernel
compiles and reports, but calling it raises. On the HIP-on-CUDA path the same source (at
wavefront 32) is compiled by nvcc to a cubin and launched like the cuda backend's."""

from __future__ import annotations

import os
import threading

from ...assets import templates_dir
from ...schedule.errors import MoveError
from ..base import Backend, Caps, Kernel, KernelSource, check_caps
from ..compiler_reports import parse_amd_remarks, parse_ptxas
from ..cstyle.gpu.block import check_gpu
from ..cstyle.gpu.module import gpu_source
from ..cstyle.languages import HipLanguage
from ..cuda.runtime import CubinRunner, compile_cubin, cuda_available, emulated_kernel
from ..target import Target
from ..toolchain import (
    CompileError,
    atomic_write,
    cache_dir,
    find_tool,
    run_tool,
    seal,
    sealed,
    tool_version,
    version_tag,
)
from .retarget import retarget_code_object

__all__ = ["HipBackend", "AMD_TARGETS", "retarget_code_object"]

# What each AMD target gets from Debian bookworm's hipcc 5.2 (LLVM 15).
AMD_TARGETS = {
    "gfx90a": "compiled (MI200 series; LLVM 15 target)",
    "gfx940": "compiled (MI300 pre-production id; LLVM 15 target)",
    "gfx942": "retargeted: compiled for gfx940, ELF machine flags and target ids rewritten "
              "to gfx942 (LLVM 15 does not know gfx942); never run on hardware",
}
_LDS = {"gfx90a": 64 * 1024, "gfx940": 64 * 1024, "gfx942": 64 * 1024}


def _caps(platform: str, wavefront: int, arch: str) -> Caps:
    shared = 48 * 1024 if platform == "nvidia" else _LDS.get(arch, 64 * 1024)
    return Caps("hip", dtypes=("f32", "bf16", "f16", "i32", "i64", "i8", "bool"),
                max_tile_elems=1 << 20,
                max_threads=1024, shared_bytes=shared, vector_widths=(1, 2, 4, 8),
                max_warps=64, wavefront=wavefront,
                bind_targets=frozenset({"grid", "threads"}),
                renders=frozenset({"vectorize", "cache", "unroll"}),
                launch_args=frozenset({"num_warps", "group_m"}))


class HipBackend(Backend):
    name = "hip"

    def __init__(self, platform: str = "amd", arch: str | None = None,
                 wavefront: int | None = None, hipcc: str | None = None,
                 nvcc: str | None = None, emulate: bool = False, loader: str | None = None,
                 threads: int | None = None):
        if platform not in ("amd", "nvidia"):
            raise ValueError(f"platform must be 'amd' or 'nvidia', not {platform!r}")
        self.platform = platform
        self.arch = arch or ("gfx90a" if platform == "amd" else "sm_90")
        self.wavefront = wavefront or (64 if platform == "amd" else 32)
        self.hipcc, self.nvcc = hipcc, nvcc
        self.emulate = emulate
        self.loader = loader  # HIP-on-CUDA: cupy | cuda-python | None (either)
        self.lang = HipLanguage(self.wavefront)
        self.caps = _caps(platform, self.wavefront, self.arch)
        self.tensor_lib = "numpy" if emulate else "torch"
        self.runs_on = "host" if emulate else "device"

    @property
    def target(self) -> Target:  # the CPU emulator and its launcher run on the host
        host = self.emulate or self.loader == "emulator"
        return Target("hip", on_device=not host, tensor_lib=self.tensor_lib)

    def available(self) -> tuple[bool, str]:
        if self.emulate:
            return (True, "") if find_tool("g++") else (False, "emulation needs g++")
        if self.platform == "amd":
            if find_tool("hipcc", self.hipcc) is None:
                return False, "no hipcc on PATH (Debian: apt-get install hipcc)"
            return False, ("hipcc compiles here; kevolve has no AMD GPU loader yet "
                           "(HipBackend(platform='nvidia') runs HIP source on NVIDIA GPUs)")
        return cuda_available(self.nvcc)

    def check(self, sched, plan) -> None:
        want = 64 if self.platform == "amd" else 32
        if self.wavefront != want:
            what = "AMD Instinct (gfx9) runs wavefronts of 64" if self.platform == "amd" \
                else "the HIP-on-CUDA path runs on NVIDIA warps of 32"
            raise MoveError(None, "backend.wavefront", f"hip: rendering for a wavefront of "
                            f"{self.wavefront}, but {what}",
                            f"render with wavefront={want} for platform={self.platform!r}")
        check_caps(self, sched, plan)
        check_gpu(self, sched, plan, self.lang)

    def toolchain(self) -> dict:
        """The compiler's version: nvcc for HIP-on-CUDA, hipcc for AMD; none for the CPU
        emulation."""
        if self.emulate:
            return {}
        if self.platform == "nvidia":
            nvcc = find_tool("nvcc", self.nvcc)
            return {"nvcc": tool_version(nvcc)} if nvcc else {}
        hipcc = find_tool("hipcc", self.hipcc)
        return {"hipcc": tool_version(hipcc, "amd")} if hipcc else {}

    @property
    def flags(self) -> tuple[str, ...]:
        if self.platform == "nvidia":
            return (f"-arch={self.arch}", "-cubin", "-O3", "-std=c++17", "-x", "cu",
                    "-Xptxas", "-v", "-lineinfo")
        arch = "gfx940" if self.arch == "gfx942" else self.arch
        return (f"--offload-arch={arch}", "-O3", "-std=c++17", "--cuda-device-only", "-c",
                "-Rpass-analysis=kernel-resource-usage")

    def render(self, plan) -> KernelSource:
        note = ("AMD Instinct" if self.platform == "amd"
                else "HIP-on-CUDA: nvcc with kevolve's hip/hip_runtime.h")
        return gpu_source(self, plan, self.lang, "hip/module.hip.j2", "hip", self.flags,
                          target_note=note)

    def build(self, source: KernelSource) -> Kernel:
        if (emu := emulated_kernel(source, self.emulate, self.loader)) is not None:
            return emu
        if self.platform == "nvidia":
            nvcc = find_tool("nvcc", self.nvcc)
            if nvcc is None:
                raise CompileError("no nvcc on PATH: HIP-on-CUDA compiles with nvcc")
            cubin, log = compile_cubin(source, nvcc, "hip-on-cuda", source.flags,
                                       include=(templates_dir() / "hip",))
            diag = {"arch": self.arch, "platform": "nvidia", "cubin": str(cubin),
                    "kernels": parse_ptxas(log), "paths": source.meta["paths"]}
            return Kernel(source, CubinRunner(source, cubin, self.loader), diag)
        path, log = self.compile_amd(source)
        diag = {"arch": self.arch, "platform": "amd", "code_object": str(path),
                "kernels": parse_amd_remarks(log), "paths": source.meta["paths"],
                "target_status": AMD_TARGETS.get(self.arch, "untested target")}

        def run(inputs, outputs, params):
            raise RuntimeError(f"the HIP kernels for {self.arch} were compiled "
                               f"({path.name}), but kevolve has no AMD GPU loader yet")
        return Kernel(source, run, diag)

    def compile_amd(self, source: KernelSource):
        """hipcc (HIP_PLATFORM=amd) device-only compile to a code object under the cache;
        gfx942 is compiled for gfx940 and retargeted. Returns (path, remarks log)."""
        hipcc = find_tool("hipcc", self.hipcc)
        if hipcc is None:
            raise CompileError("no hipcc on PATH: the hip backend compiles AMD code with "
                               "hipcc (Debian: apt-get install hipcc)")
        d = cache_dir() / "hip"
        d.mkdir(parents=True, exist_ok=True)
        base = "gfx940" if self.arch == "gfx942" else self.arch
        stem = f"{source.hash}-{version_tag(hipcc, 'amd')}"  # another hipcc, another object
        obj, logf = d / f"{stem}.{base}.co", d / f"{stem}.{base}.log"
        if not (sealed(obj) and logf.exists()):
            src = d / f"{source.hash}.hip"
            atomic_write(src, source.text)
            tmp = d / f"{stem}.{base}.{os.getpid()}.{threading.get_ident()}.tmp"
            env = dict(os.environ, HIP_PLATFORM="amd")
            atomic_write(logf, run_tool([hipcc, *source.flags, str(src), "-o", str(tmp)],
                                        env=env))
            seal(tmp, obj)
        log = logf.read_text()
        if base == self.arch:
            return obj, log
        out = d / f"{stem}.{self.arch}.co"
        if not sealed(out):
            tmp = out.with_name(f"{out.name}.{os.getpid()}.{threading.get_ident()}.tmp")
            tmp.write_bytes(retarget_code_object(obj.read_bytes(), base, self.arch))
            seal(tmp, out)
        return out, log
