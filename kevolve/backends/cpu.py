"""The CPU backend: C with OpenMP, built by the system C compiler, loaded with ctypes.

Grid loops become `omp parallel for`, innermost block loops `omp simd`. Vector math comes
from the C library's libmvec, which glibc only declares under -ffast-math (__FAST_MATH__);
so kernels assume finite values, and max/min reductions start from -/+FLT_MAX, not
infinities. NaN poisoning is unaffected: outputs are checked in Python."""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import subprocess
import threading

import numpy as np

from ..ir.interp import bind_dims
from ..ir.nodes import op_dims
from ..schedule.errors import MoveError
from .base import Backend, Caps, Kernel, KernelSource, cache_dir
from .clike import C_TYPES, CLang, ScalarBuilder, c_expr_lang, c_load, c_signature, print_c
from .pyexpr import Ctx, emit
from .templating import banner, render

CPU_LANG = CLang(
    "c", c_expr_lang(c_load), {"f32": "float", "i64": "int64_t", "i32": "int32_t",
                               "f64": "double", "bool": "int"},
    ident={"sum": "0.0f", "max": "(-FLT_MAX)", "min": "FLT_MAX"},
    combine={"sum": "{a} + {b}", "max": "fmaxf({a}, {b})", "min": "fminf({a}, {b})"},
    omp=True, store_cast={"bf16": "kv_round_bf16({})", "i64": "(int64_t)({})",
                          "i32": "(int32_t)({})"},
    prefetch="__builtin_prefetch(&{}, 0, 0)")

CFLAGS = ("-O3", "-march=native", "-fopenmp", "-ffast-math", "-fPIC", "-std=c11")
# Linked without -ffast-math: gcc would add crtfastmath.o, which flushes subnormals to zero
# for the whole process (numpy and the reference interpreter included) once loaded.
LDFLAGS = ("-shared", "-fopenmp")


class CpuBackend(Backend):
    name = "cpu"
    # bf16 buffers are float32 on the host (kevolve's convention); stores round to bf16.
    caps = Caps("cpu", dtypes=("f32", "bf16", "i32", "i64"), max_tile_elems=1 << 16,
                bind_targets=frozenset({"grid"}), renders=frozenset({"vectorize", "unroll"}))

    def __init__(self, cc: str | None = None, threads: int | None = None):
        self.cc = cc or shutil.which("cc") or shutil.which("gcc") or "cc"
        self.threads = threads

    def available(self) -> tuple[bool, str]:
        if shutil.which(self.cc) is None:
            return False, f"no C compiler ({self.cc}); install gcc or use the numba backend"
        return True, ""

    def render(self, plan) -> KernelSource:
        op = plan.op
        for b in op.inputs + tuple(s.out for s in op.stages):
            if b.dtype.name not in self.caps.dtypes:
                raise MoveError(None, "backend.dtype", f"the cpu backend has no {b.dtype} "
                                f"(buffer {b.name!r})", "use an f32 variant of the op")
        sig = c_signature(plan, "restrict")
        dims, names, bufs = sig["dims"], sig["names"], sig["buffers"]
        params, args = sig["params"], sig["args"]
        kernels = []
        for k in plan.kernels:
            body = "\n".join(print_c(ScalarBuilder(plan, k, CPU_LANG).build(), CPU_LANG))
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

        def run(inputs, outputs, params):
            rc = lib.kv_launch(*launch_args(op, {**inputs, **outputs}, params, names, types,
                                            dims_order))
            if rc:
                raise ValueError(source.meta["guards"][rc - 1] + " (this kernel was lowered "
                                 "for another shape class)")
        return Kernel(source, run, {"cc": self.cc})


def host_parts(plan, lang: CLang) -> tuple[list[str], list[str], list[dict]]:
    """What a host-side C launcher (cpu, mtia) needs beside the kernels: guard conditions,
    their messages (kv_launch returns the 1-based index of the one that failed), and the
    scratch buffers to allocate (name, C type, element count)."""
    ctx = Ctx()
    guards, messages = [], []
    for k in plan.kernels:
        for cond, msg in k.guards:
            guards.append(emit(cond, ctx, lang.expr, lambda n: f"p_{n}"))
            messages.append(msg)
    scratch = []
    for n in plan.scratch:
        b = plan.op.stage(n).out
        size = " * ".join(f"({emit(s, ctx, lang.expr, str)})" for s in b.shape) or "1"
        scratch.append({"name": n, "ctype": C_TYPES[b.dtype.name], "size": size})
    return guards, messages, scratch


def launch_args(op, arrays: dict, params: dict, names: list[str], types: dict,
                dims_order: list[str]):
    """kv_launch's pointer and dims arrays from C-contiguous numpy arrays (or CPU torch
    tensors, which share their memory)."""
    ptrs = (ctypes.c_void_p * len(names))()
    for i, n in enumerate(names):
        a = arrays[n]
        if not isinstance(a, np.ndarray):
            a = a.numpy()
        if a.dtype != types[n].np or not a.flags.c_contiguous:
            raise TypeError(f"buffer {n!r} must be a C-contiguous {types[n].np} "
                            f"array, got {a.dtype}")
        ptrs[i] = a.ctypes.data
    dims = bind_dims(op, arrays, params)
    return ptrs, (ctypes.c_int64 * max(1, len(dims_order)))(*[dims[d] for d in dims_order])


def compile_c(source: KernelSource, cc: str) -> ctypes.CDLL:
    """Compile to a shared library cached by source hash; compiler errors are raised with
    the compiler's message (trimmed) so the evaluator can report them."""
    d = cache_dir() / "cpu"
    d.mkdir(parents=True, exist_ok=True)
    so = d / f"{source.hash}.so"
    if not so.exists():
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
            r = subprocess.run(cmd, capture_output=True, text=True)
            if r.returncode != 0:
                raise CompileError(r.stderr[-4000:])
        obj.unlink()
        tmp.replace(so)
    return ctypes.CDLL(str(so))


class CompileError(RuntimeError):
    """The generated source did not compile; the message is the compiler's."""
