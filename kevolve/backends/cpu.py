"""The CPU backend: C with OpenMP, built by the system C compiler, loaded with ctypes.

Grid loops become `omp parallel for`, innermost block loops `omp simd`. Vector math comes
from the C library's libmvec, which glibc only declares under -ffast-math (__FAST_MATH__);
so kernels assume finite values, and max/min reductions start from -/+FLT_MAX, not
infinities. NaN poisoning is unaffected: outputs are checked in Python."""

from __future__ import annotations

import ctypes
import json
import os
import platform
import shutil
import threading

from ..ir.nodes import op_dims
from ..schedule.errors import MoveError
from .base import Backend, Caps, Kernel, KernelSource
from .cstyle.host import c_signature, host_parts, launch_args
from .cstyle.languages import CLanguage
from .cstyle.scalar import ScalarEmitter
from .target import Target
from .templating import banner, render
from .toolchain import c_compile_log, cache_dir, cc_version, run_tool, seal, sealed

__all__ = ["CpuBackend", "CFLAGS", "LDFLAGS", "compile_c"]

CPU_LANG = CLanguage()

# x / y stays an IEEE division, exact where the quotient is: floor(5 / 1) must be 5, not
# floor(4.9999995) from a reciprocal estimate (floor_divide, fmod, remainder). On x86
# -ffast-math alone makes vectorized float division rcpps + one Newton step: -mno-recip.
_EXACT_DIV = ("-fno-reciprocal-math",) + (
    ("-mno-recip",) if platform.machine().lower() in ("x86_64", "amd64") else ())
CFLAGS = ("-O3", "-march=native", "-fopenmp", "-ffast-math", *_EXACT_DIV, "-fPIC", "-std=c11")
# Linked without -ffast-math: gcc would add crtfastmath.o, which flushes subnormals to zero
# for the whole process (numpy and the reference interpreter included) once loaded.
LDFLAGS = ("-shared", "-fopenmp")


class CpuBackend(Backend):
    name = "cpu"
    # bf16 buffers are float32 on the host (kevolve's convention); stores round to bf16.
    caps = Caps("cpu", dtypes=("f32", "bf16", "f16", "i32", "i64", "i8", "bool"),
                max_tile_elems=1 << 16,
                bind_targets=frozenset({"grid"}), renders=frozenset({"vectorize", "unroll"}))

    target = Target("cpu", tensor_lib="numpy", host_threads=True)

    def __init__(self, cc: str | None = None, threads: int | None = None):
        self.cc = cc or shutil.which("cc") or shutil.which("gcc") or "cc"
        self.threads = threads

    def toolchain(self) -> dict:
        return cc_version()

    def compile_log(self, source: KernelSource) -> tuple[bool, str]:
        return c_compile_log(self.cc, source)

    def available(self) -> tuple[bool, str]:
        if shutil.which(self.cc) is None:
            return False, f"no C compiler ({self.cc}); install gcc or use the numba backend"
        return True, ""

    def render(self, plan) -> KernelSource:
        op = plan.op
        for b in op.inputs + tuple(s.out for s in op.stages):
            if b.dtype.name not in self.caps.dtypes:
                raise MoveError(None, "backend.dtype", f"the cpu backend has no {b.dtype} "
                                f"(buffer {b.name!r})", "use a variant of the op in one of "
                                f"{', '.join(self.caps.dtypes)}")
        sig = c_signature(plan, CPU_LANG, "restrict")
        dims, names, bufs = sig["dims"], sig["names"], sig["buffers"]
        params, args = sig["params"], sig["args"]
        kernels = []
        for k in plan.kernels:
            body = "\n".join(CPU_LANG.render(ScalarEmitter(plan, k, CPU_LANG).build()))
            kernels.append({"name": k.name, "body": body})
        guards, messages, scratch = host_parts(plan, CPU_LANG)
        text = render("cpu/module.c.j2", banner=banner("//", op.name, self.name), op=op.name,
                      shape_class=json.dumps(plan.dims_dict), kernels=kernels, params=params,
                      args=args, buffers=bufs, dims=dims, guards=guards, scratch=scratch,
                      buffer_names=", ".join(names), dim_names=", ".join(dims))
        return KernelSource(self.name, op.name, "c", text, "kv_launch", CFLAGS,
                            meta={"plan": plan, "guards": messages})

    def build(self, source: KernelSource) -> Kernel:
        lib = compile_c(source, self.cc)
        plan = source.meta["plan"]
        op = plan.op
        dims_order = op_dims(op)
        names = [b.name for b in op.inputs] + list(op.outputs)
        types = {n: op.buffer(n).dtype for n in names}
        lib.kv_launch.restype = ctypes.c_int
        lib.kv_launch.argtypes = [ctypes.POINTER(ctypes.c_void_p),
                                  ctypes.POINTER(ctypes.c_int64)]
        if self.threads:
            lib.kv_set_threads(ctypes.c_int(self.threads))

        seen: dict = {}  # input shapes + params -> dims

        def run(inputs, outputs, params):
            rc = lib.kv_launch(*launch_args(op, {**inputs, **outputs}, params, names, types,
                                            dims_order, seen))
            if rc:
                raise ValueError(source.meta["guards"][rc - 1] + " (this kernel was lowered "
                                 "for another shape class)")
        return Kernel(source, run, {"cc": self.cc})


def compile_c(source: KernelSource, cc: str) -> ctypes.CDLL:
    """Compile to a shared library cached by source hash; compiler errors are raised with
    the compiler's message (trimmed) so the evaluator can report them."""
    d = cache_dir() / "cpu"
    d.mkdir(parents=True, exist_ok=True)
    so = d / f"{source.hash}.so"
    if not sealed(so):  # missing, or not this user's own build (planted): build it
        # Processes and threads may build the same source at once (parallel tests, search
        # workers): every file is written under a name of its own, then renamed into place.
        own = f"{os.getpid()}.{threading.get_ident()}"
        c = d / f"{source.hash}.c"
        c_tmp = d / f"{source.hash}.{own}.tmp.c"
        c_tmp.write_text(source.text)
        c_tmp.replace(c)
        obj = d / f"{source.hash}.{own}.o"
        tmp = d / f"{source.hash}.{own}.tmp.so"
        for cmd in ([cc, *source.flags, "-c", str(c), "-o", str(obj)],
                    [cc, *LDFLAGS, str(obj), "-o", str(tmp), "-lm"]):
            run_tool(cmd, tail=4000, name_command=False)
        obj.unlink()
        seal(tmp, so)
    return ctypes.CDLL(str(so))
