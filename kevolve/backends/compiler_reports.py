"""What the GPU compilers report about each kernel (registers, spills, shared memory), parsed
into one dict per kernel: the diagnostics the search reads (spills shrink tiles) for the
CUDA, HIP and Triton backends alike."""

from __future__ import annotations

import re

_PTXAS_FN = re.compile(r"Compiling entry function '(\w+)'")
_PTXAS_PROPS = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, "
                          r"(\d+) bytes spill loads")
_PTXAS_USED = re.compile(r"Used (\d+) registers(?:, used (\d+) barriers)?"
                         r"(?:, (\d+) bytes smem)?")


def parse_ptxas(log: str) -> dict[str, dict]:
    """Per kernel: registers, spill stores/loads (bytes), stack frame, static shared memory
    and barriers from `ptxas -v` output (through nvcc's `-Xptxas -v` or Triton's ptxas);
    figures ptxas leaves out are 0."""
    out: dict[str, dict] = {}
    cur = None
    for line in log.splitlines():
        m = _PTXAS_FN.search(line)
        if m:
            cur = out.setdefault(m.group(1), {"registers": 0, "spill_stores": 0,
                                              "spill_loads": 0, "stack_frame": 0,
                                              "shared_bytes": 0, "barriers": 0})
            continue
        if cur is None:
            continue
        m = _PTXAS_PROPS.search(line)
        if m:
            cur.update(stack_frame=int(m.group(1)), spill_stores=int(m.group(2)),
                       spill_loads=int(m.group(3)))
        m = _PTXAS_USED.search(line)
        if m:
            cur.update(registers=int(m.group(1)), barriers=int(m.group(2) or 0),
                       shared_bytes=int(m.group(3) or 0))
    return out


_AMD_FN = re.compile(r"remark: Function Name: (\w+)")
_AMD_ITEM = re.compile(r"remark:\s+([A-Za-z ]+?)(?: \[[^\]]*\])?: (\d+)")
_AMD_KEYS = {"SGPRs": "sgprs", "VGPRs": "vgprs", "AGPRs": "agprs", "ScratchSize": "scratch",
             "Occupancy": "occupancy", "SGPRs Spill": "sgpr_spill",
             "VGPRs Spill": "vgpr_spill", "LDS Size": "shared_bytes"}


def parse_amd_remarks(log: str) -> dict[str, dict]:
    """Per kernel: SGPRs, VGPRs, AGPRs, spills, scratch, occupancy and LDS bytes from
    clang's `-Rpass-analysis=kernel-resource-usage` remarks."""
    out: dict[str, dict] = {}
    cur = None
    for line in log.splitlines():
        m = _AMD_FN.search(line)
        if m:
            cur = out.setdefault(m.group(1), {})
            continue
        m = _AMD_ITEM.search(line)
        if m and cur is not None:
            key = _AMD_KEYS.get(m.group(1).strip())
            if key:
                cur[key] = int(m.group(2))
    for d in out.values():
        d["registers"] = d.get("vgprs", 0)
    return out


def triton_jit(compiled: dict) -> dict[str, dict]:
    """Per kernel, from the kernels Triton's JIT compiled at a launch (name -> its
    CompiledKernel, None where nothing ran): registers, local memory (the driver's
    per-thread local bytes; Triton kernels use local memory only to spill) and shared
    memory."""
    out = {}
    for name, ck in compiled.items():
        regs = getattr(ck, "n_regs", None)
        if regs is None:  # the interpreter, or a launch that compiled nothing
            continue
        out[name] = {"registers": int(regs), "local_bytes": 4 * int(ck.n_spills),
                     "shared_bytes": int(getattr(ck.metadata, "shared", 0) or 0)}
    return out


def totals(diagnostics: dict) -> dict[str, int]:
    """A build's per-kernel reports (`diagnostics["kernels"]`) summed up for the search:
    `spills` over all kernels (NVIDIA spill-store bytes, AMD spilled VGPRs and SGPRs,
    Triton's local bytes: nonzero means something spills, which the heuristic answers with
    smaller tiles), and the largest register count, stack frame (AMD: scratch; Triton:
    local bytes) and shared memory of any kernel. Empty when the build reported nothing, or
    reported something else than compiler figures by kernel name (MTIA's list of estimates)."""
    kernels = diagnostics.get("kernels")
    ks = [k for k in kernels.values() if isinstance(k, dict)] if isinstance(kernels, dict) \
        else []
    if not ks:
        return {}
    return {"spills": sum(k.get("spill_stores", 0) + k.get("vgpr_spill", 0)
                          + k.get("sgpr_spill", 0) + k.get("local_bytes", 0) for k in ks),
            "registers": max(k.get("registers", 0) for k in ks),
            "stack_frame": max(k.get("stack_frame", k.get("scratch", k.get("local_bytes", 0)))
                               for k in ks),
            "shared_bytes": max(k.get("shared_bytes", 0) for k in ks)}
