"""Building and running the GPU C-family modules (CUDA, HIP-on-CUDA, CPU emulation).

- `compile_cubin`: nvcc to a cubin, cached by source hash and nvcc version; ptxas' resource
  report (`-Xptxas -v`) is kept beside it and parsed into per-kernel diagnostics.
- `CubinRunner`: loads a cubin lazily (CuPy's RawModule, else cuda-python's driver API) and
  launches its kernels on torch tensors' device pointers, on torch's current stream.
- `compile_emulated` + `emulated_runner`: the same source compiled by g++ against
  templates/cuda/kv_emu.h (CPU threads stand in for GPU threads), called through its host
  stub `kv_launch` on numpy arrays. It checks what the source computes on machines without
  a GPU; it is not a performance model."""

from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import threading
from pathlib import Path

import numpy as np

from ...assets import templates_dir
from ...ir.interp import bind_dims
from ...ir.nodes import op_dims
from ..base import Kernel, KernelSource
from ..toolchain import atomic_write, cache_dir, find_tool, run_tool, seal, sealed, version_tag

__all__ = ["CubinRunner", "compile_cubin", "compile_emulated", "cuda_available",
           "emulated_kernel", "emulated_runner", "find_tool"]


_LOCK = threading.Lock()


def cuda_available(nvcc: str | None = None) -> tuple[bool, str]:
    """Whether cubins can be built (nvcc) and run here (a CUDA GPU, torch, and CuPy or
    cuda-python to load them); else why not."""
    if find_tool("nvcc", nvcc) is None:
        return False, "no nvcc on PATH (install the CUDA toolkit)"
    try:
        import torch
        if not torch.cuda.is_available():
            return False, "nvcc compiles here, but there is no CUDA GPU to run on"
    except ImportError:
        return False, "running needs torch with CUDA: pip install 'kevolve[torch]'"
    try:
        import cupy  # noqa: F401
    except ImportError:
        try:
            import cuda.bindings  # noqa: F401
        except ImportError:
            return False, "running needs CuPy or cuda-python"
    return True, ""


def compile_cubin(source: KernelSource, nvcc: str, sub: str, flags: tuple[str, ...],
                  include: tuple[Path, ...] = ()) -> tuple[Path, str]:
    """nvcc source -> cubin under the cache (per nvcc version); returns (cubin path, ptxas
    log)."""
    d = cache_dir() / sub
    d.mkdir(parents=True, exist_ok=True)
    stem = d / f"{source.hash}-{version_tag(nvcc)}"
    cubin, log = stem.with_suffix(".cubin"), stem.with_suffix(".ptxas.txt")
    if sealed(cubin) and log.exists():
        return cubin, log.read_text()
    src = stem.with_suffix(".cu")
    atomic_write(src, source.text)
    tmp = d / f"{stem.name}.{os.getpid()}.{threading.get_ident()}.cubin"
    cmd = [nvcc, *flags, *[f"-I{p}" for p in include], "-o", str(tmp), str(src)]
    out = run_tool(cmd)
    atomic_write(log, out)
    seal(tmp, cubin)
    return cubin, out


def _emu_runtime(cxx: str, d: Path) -> tuple[Path, str]:
    """The emulator's runtime library (threads, barriers), compiled once per version of the
    emulation headers. Returns (library path, a tag of both headers for module names)."""
    inc = templates_dir() / "cuda"
    tag = hashlib.sha256((inc / "kv_emu.h").read_bytes() + (inc / "kv_emu_rt.h").read_bytes()
                         ).hexdigest()[:12]
    so = d / f"kv_emu_rt-{tag}.so"
    if not sealed(so):
        src = d / f"kv_emu_rt-{tag}.cpp"
        atomic_write(src, '#define KV_EMU_RUNTIME\n#include "kv_emu_rt.h"\n')
        tmp = d / f"kv_emu_rt-{tag}.{os.getpid()}.{threading.get_ident()}.so"
        run_tool([cxx, "-std=c++17", "-O2", "-fPIC", "-shared", "-pthread", f"-I{inc}", str(src),
                  "-o", str(tmp)])
        seal(tmp, so)
    return so, tag


def compile_emulated(source: KernelSource, cxx: str | None = None) -> ctypes.CDLL:
    """g++ -DKV_EMULATE: the module's kernels on CPU threads, its host stub `kv_launch`."""
    cxx = cxx or shutil.which("g++") or shutil.which("c++") or "g++"
    d = cache_dir() / "gpu-emu"
    d.mkdir(parents=True, exist_ok=True)
    rt, tag = _emu_runtime(cxx, d)
    so = d / f"{source.hash}-{tag}.so"
    if not sealed(so):
        src = d / f"{source.hash}.cpp"
        atomic_write(src, source.text)
        tmp = d / f"{source.hash}.{os.getpid()}.{threading.get_ident()}.so"
        run_tool([cxx, "-std=c++17", "-O1", "-fPIC", "-shared", "-pthread", "-DKV_EMULATE",
                  "-w", f"-I{templates_dir() / 'cuda'}", "-x", "c++", str(src), "-x", "none",
                  str(rt), f"-Wl,-rpath,{d}", "-o", str(tmp)])
        seal(tmp, so)
    ctypes.CDLL(str(rt), mode=ctypes.RTLD_GLOBAL)
    return ctypes.CDLL(str(so))


def guard_error(msg: str) -> ValueError:
    return ValueError(msg + " (this kernel was lowered for another shape class)")


def align_error(msg: str) -> ValueError:
    return ValueError(msg + " (pass buffers that start on such a boundary, e.g. not a "
                      "view at an odd offset)")


def launch_error(source: KernelSource, rc: int) -> ValueError:
    """The error for kv_launch's return code `rc` > 0: a shape guard or an alignment."""
    msgs = source.meta["guards"]
    if rc > len(msgs) - len(source.meta.get("aligned", ())):
        return align_error(msgs[rc - 1])
    return guard_error(msgs[rc - 1])


def emulated_runner(source: KernelSource, lib: ctypes.CDLL):
    """Call the host stub on numpy arrays (bf16 buffers are float32 on the host, converted
    to bf16 bits on the way in and back on the way out)."""
    plan = source.meta["plan"]
    op = plan.op
    names = [b.name for b in op.inputs] + list(op.outputs)
    dims_order = op_dims(op)
    types = {n: op.buffer(n).dtype for n in names}
    fn = lib.kv_launch
    fn.restype = ctypes.c_int
    fn.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_int64),
                   ctypes.c_void_p]

    def run(inputs, outputs, params):
        arrays = {**inputs, **outputs}
        keep, back = [], []
        ptrs = (ctypes.c_void_p * len(names))()
        for i, n in enumerate(names):
            a = arrays[n]
            if not isinstance(a, np.ndarray):
                a = a.numpy()
            t = types[n]
            if t.name == "bf16":
                if a.dtype != np.float32:
                    raise TypeError(f"bf16 buffer {n!r} must be float32 on the host")
                dev = bf16_bits(a)
                if n in outputs:
                    back.append((n, a, dev))
            else:
                if a.dtype != t.np or not a.flags.c_contiguous:
                    raise TypeError(f"buffer {n!r} must be a C-contiguous {t.np} array, "
                                    f"got {a.dtype}")
                dev = a
            keep.append(dev)
            ptrs[i] = dev.ctypes.data
        dims = bind_dims(op, arrays, params)
        dv = (ctypes.c_int64 * max(1, len(dims_order)))(*[dims[d] for d in dims_order])
        with _LOCK:  # the emulator keeps one block's state in process globals
            rc = fn(ptrs, dv, None)
        if rc > 0:
            raise launch_error(source, rc)
        if rc < 0:
            raise RuntimeError(f"kv_launch failed with {rc}")
        for _n, a, dev in back:
            a[...] = bf16_float(dev).reshape(a.shape)
    return run


def emulated_kernel(source: KernelSource, emulate: bool, loader: str) -> Kernel | None:
    """The kernel run on the CPU instead of a GPU: the source compiled by the host C++
    compiler against kevolve's emulation header (`emulate`), or the Python launch path
    driving the emulated kernels (`loader="emulator"`); None for a real GPU build."""
    meta = {"emulated": True, "paths": source.meta["paths"]}
    if emulate:
        return Kernel(source, emulated_runner(source, compile_emulated(source)), meta)
    if loader == "emulator":
        return Kernel(source, CubinRunner(source, None, "emulator"), meta)
    return None


def bf16_bits(a: np.ndarray) -> np.ndarray:
    """float32 values -> bf16 bit patterns (round to nearest even)."""
    u = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32)
    r = ((u + (np.uint32(0x7FFF) + ((u >> 16) & 1))) >> 16).astype(np.uint16)
    nan = np.isnan(a.reshape(-1)).reshape(a.shape) if a.size else np.zeros(a.shape, bool)
    r[nan] = 0x7FC0
    return r


def bf16_float(h: np.ndarray) -> np.ndarray:
    return (h.astype(np.uint32) << 16).view(np.float32)


LOADERS = (None, "cupy", "cuda-python", "emulator")


class CubinRunner:
    """Launch a cubin's kernels on torch CUDA tensors. The module is loaded on first call
    (CuPy's RawModule, else cuda-python), so building needs no GPU and no CuPy. With
    loader="emulator" the same launch path (grid, guards, scratch, argument order) drives
    the module's emulated kernels on torch CPU tensors instead: no GPU, no cubin."""

    def __init__(self, source: KernelSource, cubin: Path | None, loader: str | None = None):
        if loader not in LOADERS:
            raise ValueError(f"loader must be one of {LOADERS[1:]} (or None), not {loader!r}")
        self.source, self.cubin, self.loader = source, cubin, loader
        plan = source.meta["plan"]
        self.op = plan.op
        self.names = [b.name for b in self.op.inputs] + list(self.op.outputs)
        self.dims_order = op_dims(self.op)
        self.launch = source.meta["launch"]
        self.guards = source.meta["guard_exprs"]
        self.scratch = source.meta["scratch"]
        self.aligned = [(self.names.index(a["name"]), a["bytes"], a["msg"])
                        for a in source.meta.get("aligned", ())]
        self.fns = None
        self.kind = None
        self.seen: dict = {}

    def _load(self):
        if self.loader == "emulator":  # the module's kv_emu_<kernel> entry points, on CPU
            lib = compile_emulated(self.source)
            fns = {}
            for k in self.launch:
                f = getattr(lib, f"kv_emu_{k['name']}")
                f.restype = None
                f.argtypes = [ctypes.c_longlong, ctypes.POINTER(ctypes.c_void_p)]
                fns[k["name"]] = f
            self.fns, self.kind, self._lib = fns, "emulator", lib
            return
        if self.loader in (None, "cupy"):
            try:
                import cupy
                mod = cupy.RawModule(path=str(self.cubin))
                self.fns = {k["name"]: mod.get_function(k["name"]) for k in self.launch}
                self.kind = "cupy"
                self._cupy = cupy
                return
            except ImportError:
                if self.loader == "cupy":
                    raise ImportError("loader='cupy' needs CuPy "
                                      "(pip install cupy-cuda13x)") from None
        try:
            try:
                from cuda.bindings import driver as cu
            except ImportError:
                from cuda import cuda as cu
        except ImportError as e:
            raise ImportError("running CUDA kernels needs CuPy (pip install cupy-cuda12x or "
                              "cupy-cuda13x) or cuda-python (pip install cuda-python)") from e
        err, mod = cu.cuModuleLoadData(self.cubin.read_bytes())
        _check(cu, err)
        fns = {}
        for k in self.launch:
            err, f = cu.cuModuleGetFunction(mod, k["name"].encode())
            _check(cu, err)
            fns[k["name"]] = f
        self.fns, self.kind, self._cu, self._mod = fns, "cuda-python", cu, mod

    def __call__(self, inputs, outputs, params):
        import torch
        if self.fns is None:
            self._load()
        arrays = {**inputs, **outputs}
        key = (tuple(tuple(v.shape) for v in inputs.values()), tuple(sorted(params.items())))
        env = self.seen.get(key)
        if env is None:
            dims = bind_dims(self.op, arrays, params)
            env = {f"d_{d}": int(dims[d]) for d in self.dims_order}
            for g in self.guards:
                if not eval(g["py"], {"__builtins__": {}, "max": max, "min": min,
                                      "int": int, "float": float}, dict(env)):
                    raise guard_error(g["msg"])
            self.seen[key] = env
        first = arrays[self.names[0]]
        dev = first.device
        ptrs = []
        for n in self.names:
            t = arrays[n]
            if t.device != dev or not t.is_contiguous():
                raise TypeError(f"buffer {n!r} must be a contiguous tensor on {dev}")
            ptrs.append(t.data_ptr())
        for i, nbytes, msg in self.aligned:  # vector accesses: checked per call
            if ptrs[i] % nbytes:
                raise align_error(msg)
        scratch = []
        for s in self.scratch:
            numel = int(eval(s["numel"], {"__builtins__": {}, "max": max, "min": min}, env))
            scratch.append(torch.empty(max(numel, 1), dtype=_TORCH[s["dtype"]], device=dev))
            ptrs.append(scratch[-1].data_ptr())
        dvals = [env[f"d_{d}"] for d in self.dims_order]
        stream = torch.cuda.current_stream(dev).cuda_stream if dev.type == "cuda" else 0
        for k in self.launch:
            grid = int(eval(k["grid"], {"__builtins__": {}, "max": max, "min": min}, env))
            if grid <= 0:
                continue
            if grid >= 1 << 31:
                raise ValueError(f"{k['name']}: {grid} blocks exceed the grid limit of 2^31-1")
            self._launch(k, grid, ptrs, dvals, stream)

    def _launch(self, k, grid, ptrs, dvals, stream):
        f = self.fns[k["name"]]
        if self.kind == "emulator":
            vals = [ctypes.c_void_p(p) for p in ptrs] + [ctypes.c_int64(d) for d in dvals]
            args = (ctypes.c_void_p * len(vals))(*[ctypes.addressof(v) for v in vals])
            with _LOCK:
                f(grid, args)
            return
        if self.kind == "cupy":
            cp = self._cupy
            args = tuple(np.uint64(p) for p in ptrs) + tuple(np.int64(d) for d in dvals)
            if stream:
                with cp.cuda.ExternalStream(stream):
                    f((grid,), (k["threads"],), args)
            else:
                f((grid,), (k["threads"],), args)
            return
        cu = self._cu
        vals = tuple(ptrs) + tuple(dvals)
        types = (ctypes.c_void_p,) * len(ptrs) + (ctypes.c_int64,) * len(dvals)
        err, = cu.cuLaunchKernel(f, grid, 1, 1, k["threads"], 1, 1, 0, cu.CUstream(stream),
                                 (vals, types), 0)
        _check(cu, err)


def _check(cu, err) -> None:
    if int(err) != 0:
        raise RuntimeError(f"CUDA driver error {err}")


class _TorchDtypes(dict):
    """kevolve dtype name -> torch dtype (ir.dtypes.torch_dtype), remembered once asked."""

    def __missing__(self, key):
        from ...ir.dtypes import torch_dtype

        v = torch_dtype(key)
        self[key] = v
        return v


_TORCH = _TorchDtypes()
