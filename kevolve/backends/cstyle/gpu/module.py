"""A CUDA or HIP module: every kernel of a plan rendered by the GPU emitter, plus what the
module templates and the loaders need (signature, guards, scratch, launch grid) in C and
as Python expressions over dims."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from ....plan.model import Plan
from ....plan.walk import grid_count, module_signature
from ...base import Backend, KernelSource
from ...pyexpr import Ctx, emit
from ...templating import banner, render
from ..host import HOST_EXPR
from ..languages import CudaLanguage
from .block import GpuEmitter


@dataclass
class KernelInfo:
    name: str
    threads: int
    shared_bytes: int
    path: str  # generic | dot-simt | dot-wmma
    body: str
    shared: list[str] = field(default_factory=list)


def render_module(plan: Plan, lang: CudaLanguage) -> dict:
    """Everything the module templates need, plus a host-side launch description (Python
    expressions over dims) for loaders that launch the compiled kernels themselves."""
    op = plan.op
    sig = module_signature(plan)
    dims, names, allb = list(sig.dims), list(sig.names), list(sig.every)
    inputs = {x.name for x in op.inputs}
    params = [f"{'const ' if n in inputs else ''}{lang.ptr_type(sig.buffer(n).dtype)} "
              f"*__restrict__ p_{n}" for n in allb]
    params += [f"const int64_t d_{d}" for d in dims]
    args = ", ".join([f"p_{n}" for n in allb] + [f"d_{d}" for d in dims])
    kernels: list[KernelInfo] = []
    launch = []
    cctx, pctx = Ctx(), Ctx()
    vec_guards: list = []  # shape guards the vector accesses rely on
    aligned: dict[str, int] = {}  # buffer -> bytes of alignment vector accesses need
    vectors = False
    for k in plan.kernels:
        b = GpuEmitter(plan, k, lang)
        body = "\n".join(lang.render(b.build()))
        kernels.append(KernelInfo(k.name, b.T, b.shared_bytes, b.path, body, b.shared_decls()))
        vec_guards += [g for g in b.vec.guards if g not in vec_guards]
        for n, by in b.vec.aligned.items():
            aligned[n] = max(aligned.get(n, 0), by)
        vectors = vectors or b.vec.used
        gl = [grid_count(k, lp) for lp in k.grid]
        launch.append({"name": k.name, "threads": b.T, "shared_bytes": b.shared_bytes,
                       "path": b.path,
                       "grid": " * ".join(f"({emit(e, pctx, HOST_EXPR, str)})" for e in gl)
                       or "1",
                       "grid_c": " * ".join(f"({emit(e, cctx, lang.expr, str)})"
                                            for e in gl) or "1"})
    guards = [{"cond": emit(c, cctx, lang.expr, lambda n: f"p_{n}"),
               "py": emit(c, pctx, HOST_EXPR, str), "msg": m}
              for c, m in list(sig.guards) + vec_guards]
    align = [{"name": n, "bytes": aligned[n], "msg": f"buffer {n!r} must start on a "
              f"{aligned[n]}-byte boundary (vectorized loads and stores)"}
             for n in names if n in aligned]
    scratch = []
    for n, b in zip(sig.scratch, sig.scratch_buffers()):
        scratch.append({"name": n, "dtype": b.dtype.name, "ctype": lang.ptr_type(b.dtype),
                        "numel": " * ".join(f"({emit(s, pctx, HOST_EXPR, str)})"
                                            for s in b.shape) or "1",
                        "numel_c": " * ".join(f"({emit(s, cctx, lang.expr, str)})"
                                              for s in b.shape) or "1"})
    buffers = [{"name": n, "ctype": lang.ptr_type(sig.buffer(n).dtype)} for n in names]
    # argument unpacking for the emulator's per-kernel entry points (kv_emu_<kernel>)
    emu_args = ", ".join([f"*({lang.ptr_type(sig.buffer(n).dtype)} **)a[{i}]"
                          for i, n in enumerate(allb)] +
                         [f"*(const int64_t *)a[{len(allb) + i}]" for i in range(len(dims))])
    return {"kernels": kernels, "params": ", ".join(params), "args": args, "dims": dims,
            "emu_args": emu_args,
            "buffers": buffers, "guards": guards, "scratch": scratch, "launch": launch,
            "buffer_names": names, "wmma": any(k.path == "dot-wmma" for k in kernels),
            "aligned": align, "vectors": vectors}


def gpu_source(be: Backend, plan: Plan, lang: CudaLanguage, template: str, lang_name: str,
               flags: tuple, **extra) -> KernelSource:
    """Render a plan with a GPU language and a module template into a KernelSource whose
    meta carries what the loaders need (launch grid, guards, scratch) as Python."""
    parts = render_module(plan, lang)
    text = render(template, banner=banner("//", plan.op.name, be.name), op=plan.op.name,
                  shape_class=json.dumps(plan.dims_dict), wavefront=lang.wavefront,
                  kernels=parts["kernels"], params=parts["params"], args=parts["args"],
                  dims=parts["dims"], buffers=parts["buffers"], guards=parts["guards"],
                  scratch=parts["scratch"], launch=parts["launch"],
                  buffer_names=parts["buffer_names"], wmma=parts["wmma"],
                  emu_args=parts["emu_args"], aligned=parts["aligned"],
                  vectors=parts["vectors"], **extra)
    return KernelSource(be.name, plan.op.name, lang_name, text, "kv_launch", flags,
                        meta={"plan": plan, "launch": parts["launch"],
                              # kv_launch's codes: shape guards, then alignment checks
                              "guards": [g["msg"] for g in parts["guards"] + parts["aligned"]],
                              "aligned": parts["aligned"],
                              "guard_exprs": [{"py": g["py"], "msg": g["msg"]}
                                              for g in parts["guards"]],
                              "scratch": parts["scratch"], "wavefront": lang.wavefront,
                              "paths": {k.name: k.path for k in parts["kernels"]}})
