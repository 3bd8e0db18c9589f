"""Ahead-of-time Triton compilation for a GPU this machine does not have.

`compile_aot(source, "cuda:90")` compiles every `@triton.jit` kernel of a rendered Triton
module with `triton.compile` and an explicit `GPUTarget`, with the signature, launch
options and specializations the module's own launcher would give it at run time, and
returns per kernel the asm kinds produced and resource diagnostics. Without a GPU Triton
leaves registers and spills unknown (they come from loading the binary), so they are read
from the compilers' own reports: `ptxas -v` for NVIDIA, the AMDGPU kernel metadata in the
AMDGCN text for AMD. The ptxas is chosen as the backend chooses it (`ptxas.py`), so the
figures are those of the machine code a run would get.
"""

from __future__ import annotations

import os
import re
import subprocess
import tempfile

from ...errors import CompileError
from ..base import KernelSource
from ..compiler_reports import parse_ptxas as per_kernel
from . import ptxas as ptxas_tool
from .loader import load_module, require_triton

TARGETS = {"cuda:90": ("cuda", 90, 32), "hip:gfx942": ("hip", "gfx942", 64)}
TRITON_TYPES = {"f32": "fp32", "f16": "fp16", "bf16": "bf16", "f64": "fp64", "i32": "i32",
                "i64": "i64", "i8": "i8", "bool": "i1"}
_I32 = (-2**31, 2**31 - 1)


class AotError(CompileError):
    """A kernel did not compile for the target; the message is Triton's (or ptxas')."""


def gpu_target(target: str):
    """'cuda:<capability>' or 'hip:<gfx arch>' as a Triton GPUTarget."""
    from triton.backends.compiler import GPUTarget

    if target in TARGETS:
        return GPUTarget(*TARGETS[target])
    kind, _, arch = target.partition(":")
    if kind == "cuda" and arch.isdigit():
        return GPUTarget("cuda", int(arch), 32)
    m = re.fullmatch(r"gfx(\d+?)\w\w", arch)
    if kind == "hip" and m:  # gfx9 (CDNA) runs 64-wide wavefronts, gfx10+ (RDNA) 32
        return GPUTarget("hip", arch, 32 if int(m.group(1)) >= 10 else 64)
    raise ValueError(f"unknown target {target!r}: use 'cuda:<capability>' (e.g. cuda:90) "
                     f"or 'hip:<gfx arch>' (e.g. hip:gfx942)")


def buffer_dtypes(op) -> dict[str, str]:
    """kevolve dtype name of every buffer a kernel can take: inputs and stage outputs."""
    out = {b.name: b.dtype.name for b in op.inputs}
    out.update({s.name: s.out.dtype.name for s in op.stages})
    return out


def launch_options(k) -> dict:
    """num_warps / num_stages exactly as the module's launcher passes them (render_module):
    4 warps and 1 stage unless the plan says otherwise; 3 stages for kernels with a dot."""
    dot = any(s.strategy == "dot" for s in k.steps)
    return {"num_warps": k.num_warps or 4, "num_stages": k.num_stages or (3 if dot else 1)}


def specialize(arg_names, op, dims: dict[str, int], constexpr: tuple[str, ...] = ()):
    """(signature, constexprs, attrs) as Triton's launcher derives them from the arguments:
    pointers `*<dtype>` 16-byte aligned (torch allocations are); a Python int is i32 when it
    fits, else i64, divisible-by-16 when it is, and a compile-time constant when it is 1 or
    its dim is in `constexpr` (the schedule's constexpr_dims). A dim the shape class does
    not fix is a plain i32. A bulk copy's descriptor is `tensordesc<dtype[R, C]>`."""
    types = buffer_dtypes(op)
    sig, consts, attrs = {}, {}, {}
    for i, name in enumerate(arg_names):
        if name.startswith("p_") and name[2:] in types:
            sig[name] = "*" + TRITON_TYPES[types[name[2:]]]
            attrs[(i,)] = [["tt.divisibility", 16]]
        elif name.startswith("d_"):
            v = dims.get(name[2:])
            if v == 1 or name[2:] in constexpr:
                sig[name] = "constexpr"
                consts[(i,)] = v
                continue
            sig[name] = "i32" if v is None or _I32[0] <= v <= _I32[1] else "i64"
            if v is not None and v % 16 == 0:
                attrs[(i,)] = [["tt.divisibility", 16]]
        elif re.fullmatch(r"t_\w+_\d+x\d+", name) and name[2:].rsplit("_", 1)[0] in types:
            buf, block = name[2:].rsplit("_", 1)  # a bulk copy's descriptor (bulk.BulkTile)
            rows, cols = block.split("x")
            sig[name] = f"tensordesc<{TRITON_TYPES[types[buf]]}[{rows}, {cols}]>"
        else:
            raise AotError(f"kernel parameter {name!r} is neither a buffer pointer (p_<buffer>),"
                           " a dim (d_<name>) nor a tensor descriptor (t_<buffer>_<R>x<C>)")
    return sig, consts, attrs


def compile_aot(source: KernelSource, target: str, keep_asm: bool = False,
                ptxas: str = "auto") -> dict:
    """Compile each kernel of a Triton KernelSource for `target`; no GPU needed.

    Returns {kernel name: {"target", "asm" (kinds produced), "num_warps", "num_stages",
    "signature", "shared" (Triton's shared-memory bytes), plus the parsed diagnostics}}:
    cuda: registers, spill_stores, spill_loads (bytes), stack_frame, shared_bytes (static
    shared memory), barriers; hip: vgpr_count, sgpr_count, vgpr_spill_count,
    sgpr_spill_count, lds (group segment bytes), scratch (private segment bytes), occupancy.
    `keep_asm` adds the texts. `ptxas` is the triton backend's option of that name; cuda
    results also carry `ptxas_version`."""
    triton = require_triton(interpret=False)
    from triton.compiler import ASTSource

    if source.backend != "triton":
        raise ValueError(f"compile_aot takes Triton sources, not {source.backend!r}")
    tgt = gpu_target(target)
    ptxas_version = None
    if tgt.backend == "cuda":  # the ptxas a run would use, settled as the backend does
        got = ptxas_tool.resolve(ptxas)
        if got:
            ptxas_tool.use(got[0])
            ptxas_version = got[1]
    plan = source.meta["plan"]
    mod = load_module(source, False)
    out = {}
    for k in plan.kernels:
        fn = getattr(mod, k.name)
        sig, consts, attrs = specialize(fn.arg_names, plan.op, plan.dims_dict,
                                        k.constexpr_dims)
        opts = launch_options(k)
        try:
            ck = triton.compile(ASTSource(fn, sig, consts, attrs), target=tgt, options=opts)
        except Exception as e:  # Triton raises CompilationError, RuntimeError, ...
            raise AotError(f"{k.name} for {target}: {type(e).__name__}: {e}") from e
        info = {"target": target, "asm": sorted(ck.asm), "signature": sig, **opts,
                "shared": int(ck.metadata.shared)}
        if tgt.backend == "cuda":
            info.update(ptxas_info(ck.asm["ptx"]))
            if ptxas_version:
                info["ptxas_version"] = ptxas_version
        else:
            info.update(amdgcn_info(ck.asm["amdgcn"]))
        if keep_asm:
            info["text"] = {kind: v for kind, v in ck.asm.items() if isinstance(v, str)}
        out[k.name] = info
    return out


def ptxas_path() -> str:
    """The ptxas Triton ships (or TRITON_PTXAS_PATH, through Triton's own knob)."""
    from triton.backends.nvidia.compiler import get_ptxas

    return get_ptxas(90).path


def ptxas_info(ptx: str, ptxas: str | None = None) -> dict:
    """Registers, spills, stack and static shared memory from `ptxas -v` on PTX text, for
    the architecture its `.target` line names (Triton emits sm_90a for capability 90)."""
    m = re.search(r"^\s*\.target\s+(sm_\w+)", ptx, re.M)
    if not m:
        raise AotError("PTX without a .target line")
    with tempfile.TemporaryDirectory(prefix="kevolve-ptxas-") as d:
        src, obj = os.path.join(d, "k.ptx"), os.path.join(d, "k.cubin")
        with open(src, "w") as f:
            f.write(ptx)
        r = subprocess.run([ptxas or ptxas_path(), "-v", "--gpu-name", m.group(1), src,
                            "-o", obj], capture_output=True, text=True)
    log = r.stdout + r.stderr
    if r.returncode != 0:
        raise AotError(f"ptxas failed ({r.returncode}): {log[-2000:]}")
    return parse_ptxas(log)


def parse_ptxas(log: str) -> dict:
    """The one kernel's figures from `ptxas -v` output (compiler_reports.parse_ptxas), with
    the log itself; an output without a register count is an error, not zeros."""
    if not re.search(r"Used \d+ registers", log):
        raise AotError(f"no register count in ptxas output: {log[-2000:]}")
    kernels = per_kernel(log)
    if len(kernels) != 1:
        raise AotError(f"expected one kernel in ptxas output, found {len(kernels)}: "
                       f"{log[-2000:]}")
    (info,) = kernels.values()
    return {**info, "ptxas_log": log.strip()}


_AMD_KEYS = {"vgpr_count": r"\.vgpr_count:\s+(\d+)", "sgpr_count": r"\.sgpr_count:\s+(\d+)",
             "vgpr_spill_count": r"\.vgpr_spill_count:\s+(\d+)",
             "sgpr_spill_count": r"\.sgpr_spill_count:\s+(\d+)",
             "lds": r"\.group_segment_fixed_size:\s+(\d+)",
             "scratch": r"\.private_segment_fixed_size:\s+(\d+)"}


def amdgcn_info(asm: str) -> dict:
    """Registers, spills, LDS and scratch from the AMDGPU metadata block of AMDGCN text."""
    out = {}
    for key, pat in _AMD_KEYS.items():
        m = re.search(pat, asm)
        if m is None:
            raise AotError(f"no {key} in the AMDGCN metadata")
        out[key] = int(m.group(1))
    m = re.search(r";\s*Occupancy:\s*(\d+)", asm)
    out["occupancy"] = int(m.group(1)) if m else None
    return out
