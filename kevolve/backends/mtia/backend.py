"""MtiaBackend: caps from the machine model, render through the module template, build
with g++ against kv_mtia.h, run emulated, estimate from the model."""

from __future__ import annotations

import ctypes
import hashlib
import json
import math
import os
import shutil
import threading
from dataclasses import dataclass
from functools import lru_cache

from ...assets import templates_dir
from ...ir.interp import eval_int
from ...ir.nodes import Load, op_dims, walk
from ...plan.model import KernelPlan, Plan
from ...plan.walk import grid_count
from ...schedule.errors import MoveError
from ..base import Backend, Caps, Kernel, KernelSource, check_caps
from ..cstyle.host import c_signature, host_parts, launch_args
from ..target import Target
from ..templating import banner, render
from ..toolchain import cache_dir, cc_version, run_tool, seal, sealed
from .builder import MtiaEmitter
from .language import MTIA_LANG
from .model import MachineModel, kernel_estimate, total_estimate
from .staging import DEVICE_BYTES, ProgramText, Stager, program_cost

CXXFLAGS = ("-O2", "-std=c++17", "-fPIC", "-pthread", "-fvisibility=hidden")
STATS = ("programs", "dma_in", "dma_in_bytes", "dma_out", "dma_out_bytes", "dma_waits",
         "direct_loads", "direct_stores", "dot_calls", "dot_flops", "local_peak",
         "max_programs")  # the order of kv_mtia.h's counters


@dataclass(frozen=True)
class MtiaCaps(Caps):
    """Caps plus the PE array: what the third legality layer and the estimate read."""

    num_pes: int = 64
    local_bytes: int = 384 * 1024
    dma_align: int = 64
    vector_lanes: int = 32


def caps_for(m: MachineModel) -> MtiaCaps:
    return MtiaCaps("mtia", dtypes=("f32", "bf16", "i32", "i64", "i8", "bool"),
                    strategies=frozenset({"auto", "single", "looped", "online", "scan"}),
                    max_tile_elems=m.local_bytes, shared_bytes=m.local_bytes,
                    vector_widths=tuple(w for w in (1, 2, 4, 8, 16, 32, 64)
                                        if w <= m.vector_lanes),
                    max_warps=1 << 30, bind_targets=frozenset({"grid"}),
                    renders=frozenset({"vectorize", "unroll"}),
                    num_pes=m.num_pes, local_bytes=m.local_bytes, dma_align=m.dma_align,
                    vector_lanes=m.vector_lanes)


@dataclass
class _Rendered:
    kernel: KernelPlan
    builder: MtiaEmitter
    text: ProgramText


@lru_cache(maxsize=1)
def header_hash() -> str:
    return hashlib.sha256((templates_dir() / "mtia" / "kv_mtia.h").read_bytes()).hexdigest()[:16]


class MtiaBackend(Backend):
    name = "mtia"
    tensor_lib = "numpy"
    # How callers should treat this backend (caps.device is "mtia", not a CUDA device):
    # kernels run emulated on the host, on numpy arrays; their wall-clock time means
    # nothing, the time to report and search against is diagnostics["estimate_ms"].
    runs_on = "host"
    timing = "estimate"
    target = Target("mtia", tensor_lib="numpy", measured=False)

    def __init__(self, model: MachineModel | None = None, threads: int = 1,
                 cxx: str | None = None):
        self.model = model or MachineModel()
        self.caps = caps_for(self.model)
        self.threads = max(1, int(threads))
        self.cxx = cxx or shutil.which("g++") or shutil.which("c++") or "g++"

    def toolchain(self) -> dict:
        return cc_version()

    def available(self) -> tuple[bool, str]:
        if shutil.which(self.cxx) is None:
            return False, f"no C++ compiler ({self.cxx}); install g++ to run MTIA kernels " \
                "emulated"
        return True, ""

    # -- legality (layer 3) --------------------------------------------------------------
    def check(self, sched, plan: Plan) -> None:
        check_caps(self, sched, plan)
        self._programs(plan)

    def _programs(self, plan: Plan, dims: dict[str, int] | None = None) -> list[_Rendered]:
        op = plan.op
        for b in op.inputs + tuple(s.out for s in op.stages):
            if b.dtype.name not in self.caps.dtypes:
                raise MoveError(None, "backend.dtype", f"the mtia backend has no {b.dtype} "
                                f"(buffer {b.name!r})", f"use one of {self.caps.dtypes}")
        dims = dims or plan.dims_dict
        out = []
        for k in plan.kernels:
            b = MtiaEmitter(plan, k, MTIA_LANG, dims)
            text = Stager(b, b.build(), self.caps.dma_align).run()
            if text.local_bytes > self.caps.local_bytes:
                big = sorted(text.allocs, key=lambda a: -a.elems * a.esize)[:4]
                parts = "; ".join(f"{a.name}: {a.what}, {a.elems * a.esize} bytes"
                                  for a in big)
                raise MoveError(None, "backend.local_memory", f"{k.name}: one program needs "
                                f"{text.local_bytes} bytes of PE local memory, over "
                                f"{self.name}'s {self.caps.local_bytes} bytes per PE "
                                f"(largest: {parts})", "split a block axis of the largest "
                                "tiles into smaller tiles (a smaller split size), or compute "
                                "fewer stages in one program")
            out.append(_Rendered(k, b, text))
        return out

    # -- render --------------------------------------------------------------------------
    def render(self, plan: Plan) -> KernelSource:
        op = plan.op
        progs = self._programs(plan)
        sig = c_signature(plan, MTIA_LANG, "__restrict")
        dims, names, bufs = sig["dims"], sig["names"], sig["buffers"]
        params, args = sig["params"], sig["args"]
        kernels = []
        for r in progs:
            t = r.text
            lines = MTIA_LANG.render(t.allocs, 2)
            rest = "kv_pid"
            for j, (v, count) in enumerate(reversed(t.grid)):
                if j == len(t.grid) - 1:
                    lines.append(f"        const int64_t {v} = {rest};")
                else:
                    lines.append(f"        const int64_t {v} = {rest} % ({count});")
                    rest = f"({rest} / ({count}))"
            lines += MTIA_LANG.render(t.body, 2)
            count = " * ".join(f"({c})" for _, c in t.grid) or "1"
            kernels.append({"name": r.kernel.name, "programs": count,
                            "programs_doc": " x ".join(c for _, c in t.grid) or "1",
                            "local_bytes": t.local_bytes, "body": "\n".join(lines)})
        guards, messages, scratch = host_parts(plan, MTIA_LANG)
        m = self.model
        text = render("mtia/module.cpp.j2", banner=banner("//", op.name, self.name),
                      op=op.name, shape_class=json.dumps(plan.dims_dict), model=m.name,
                      num_pes=m.num_pes, local_bytes=m.local_bytes,
                      header_hash=header_hash(), kernels=kernels, params=params, args=args,
                      buffers=bufs, dims=dims, guards=guards, scratch=scratch,
                      buffer_names=", ".join(names), dim_names=", ".join(dims))
        return KernelSource(self.name, op.name, "cpp", text, "kv_launch", CXXFLAGS,
                            meta={"plan": plan, "guards": messages})

    # -- estimate ------------------------------------------------------------------------
    def estimate(self, plan: Plan, dims: dict[str, int] | None = None) -> dict:
        """Analytical time of `plan` on the machine model (an estimate, not a measurement).
        Jagged axes count at their bound (every segment full): an upper bound."""
        dims = dict(dims or plan.dims_dict)
        m = self.model
        ks = []
        for r in self._programs(plan, dims):
            programs = math.prod(eval_int(grid_count(r.kernel, lp), dims)
                                 for lp in r.kernel.grid)
            cost = program_cost(r.builder, r.text.body, m)
            ks.append(kernel_estimate(r.kernel.name, programs, cost, r.text.local_bytes,
                                      _footprint(r.kernel, dims), m))
        return total_estimate(ks, m)

    # -- build and run -------------------------------------------------------------------
    def build(self, source: KernelSource) -> Kernel:
        lib = compile_cpp(source, self.cxx)
        plan = source.meta["plan"]
        op = plan.op
        dims_order = op_dims(op)
        names = [b.name for b in op.inputs] + list(op.outputs)
        types = {n: op.buffer(n).dtype for n in names}
        lib.kv_launch.restype = ctypes.c_int
        lib.kv_launch.argtypes = [ctypes.POINTER(ctypes.c_void_p),
                                  ctypes.POINTER(ctypes.c_int64),
                                  ctypes.POINTER(ctypes.c_int64)]
        lib.kv_error_message.restype = ctypes.c_char_p
        m = self.model
        cfg = (ctypes.c_int64 * 4)(m.num_pes, self.threads, m.local_bytes, m.dma_align)
        diagnostics = {"compiler": self.cxx, "emulated": True}
        try:
            diagnostics.update(self.estimate(plan))
        except MoveError as e:  # a source rendered for a bigger machine: the emulator's
            diagnostics["estimate_error"] = str(e)  # own capacity check reports it at run

        seen: dict = {}  # input shapes + params -> dims

        def run(inputs, outputs, params):
            rc = lib.kv_launch(*launch_args(op, {**inputs, **outputs}, params, names, types,
                                            dims_order, seen), cfg)
            if rc > 0:
                raise ValueError(source.meta["guards"][rc - 1] + " (this kernel was lowered "
                                 "for another shape class)")
            if rc < 0:
                raise RuntimeError("mtia emulation: " + lib.kv_error_message().decode())
            counts = (ctypes.c_int64 * len(STATS))()
            lib.kv_stats(counts)
            diagnostics["emulator_counts"] = dict(zip(STATS, counts))
        return Kernel(source, run, diagnostics)


def _footprint(k: KernelPlan, dims: dict[str, int]) -> int:
    """Bytes of every buffer a kernel reads or writes."""
    bufs = {st.stage.out.name: st.stage.out for st in k.steps if st.is_root or st.store_out}
    for st in k.steps:
        for n in walk(st.body):
            if isinstance(n, Load):
                bufs[n.buffer.name] = n.buffer
        for a in st.stage.axes + st.stage.reduce_axes:
            for e in (a.start, a.extent):
                bufs.update({n.buffer.name: n.buffer for n in walk(e) if isinstance(n, Load)})
    locals_ = {st.stage.name for st in k.steps if not st.is_root and not st.store_out}
    return sum(math.prod(eval_int(d, dims) for d in b.shape) * DEVICE_BYTES[b.dtype.name]
               for n, b in bufs.items() if n not in locals_)


def compile_cpp(source: KernelSource, cxx: str) -> ctypes.CDLL:
    """Compile against kv_mtia.h into a shared library cached by source hash (the source
    names the header's hash, so a changed header rebuilds). The header's runtime part is
    compiled once per header version and linked into every kernel library."""
    d = cache_dir() / "mtia"
    d.mkdir(parents=True, exist_ok=True)
    so = d / f"{source.hash}.so"
    if not sealed(so):
        rt = _runtime_object(d, cxx, source.flags)
        # another process may be compiling the same source: write it under a name of our
        # own, then rename it into place
        src = d / f"{source.hash}.cpp"
        src_tmp = d / f"{source.hash}.{os.getpid()}.{threading.get_ident()}.tmp.cpp"
        src_tmp.write_text(source.text)
        src_tmp.replace(src)
        tmp = d / f"{source.hash}.{os.getpid()}.{threading.get_ident()}.tmp.so"
        run_tool([cxx, *source.flags, "-shared", f"-I{templates_dir() / 'mtia'}", str(src),
                  str(rt), "-o", str(tmp)], tail=4000, name_command=False)
        seal(tmp, so)
    return ctypes.CDLL(str(so))


def _runtime_object(d, cxx: str, flags) -> object:
    rt = d / f"kv_mtia_rt.{header_hash()}.o"
    if not sealed(rt):
        tmp = d / f"kv_mtia_rt.{os.getpid()}.{threading.get_ident()}.tmp.o"
        run_tool([cxx, *flags, "-DKV_MTIA_RUNTIME", "-x", "c++", "-c",
                  str(templates_dir() / "mtia" / "kv_mtia.h"), "-o", str(tmp)],
                 tail=4000, name_command=False)
        seal(tmp, rt)
    return rt
