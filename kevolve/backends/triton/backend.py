"""The Triton backend: renders a plan through emitter.py and templates/triton/module.j2,
builds it by importing the module (Triton compiles each kernel at its first launch of a
shape), and reports what each launch compiled. Triton itself is imported only to build."""

from __future__ import annotations

import json

from ...ir.interp import bind_dims
from ...schedule.errors import MoveError
from ..base import Backend, Caps, Kernel, KernelSource, check_caps
from ..compiler_reports import triton_jit
from ..target import Target
from ..templating import banner, render
from . import bulk, ptxas
from .emitter import render_module
from .loader import load_module, require_triton
from .usage import dot_usage


class TritonBackend(Backend):
    name = "triton"
    tensor_lib = "torch"
    caps = Caps("cuda", max_tile_elems=1 << 17, max_warps=32, wavefront=32,
                bind_targets=frozenset({"grid", "threads"}), renders=frozenset(),
                launch_args=frozenset({"num_warps", "num_stages", "group_m", "dot_precision",
                                       "constexpr_dims", "persistent", "pipeline"}),
                bulk_copy=True)

    def __init__(self, interpret: bool = False, device: str | None = None,
                 ptxas: str = "auto", threads: int | None = None):
        self.interpret = interpret
        self.device = device or ("cpu" if interpret else "cuda")
        self.ptxas = ptxas  # "auto", "triton", "torch" or a path: see ptxas.resolve

    @property
    def target(self) -> Target:  # the interpreter runs on the host, on torch CPU tensors
        return Target("cuda", on_device=not self.interpret, tensor_lib="torch")

    def worker_env(self) -> dict[str, str]:  # the interpreter is fixed when triton imports
        return {"TRITON_INTERPRET": "1"} if self.interpret else {}

    def check(self, sched, plan) -> None:
        """Layer 3: the capabilities, and bulk copies only where a tensor descriptor can
        carry the tile (bulk.py)."""
        check_caps(self, sched, plan)
        for kernel, stage, buf, why, hint in bulk.problems(plan):
            at = dict(sched.stage(stage).cache_by).get(buf)
            raise MoveError(at, "backend.bulk_copy", f"{kernel}: cannot copy {buf!r} in bulk "
                            f"for stage {stage!r}: {why}", hint)

    def toolchain(self) -> dict:
        """The ptxas version that compiles this backend's kernels (it changes their code)."""
        got = None if self.interpret else ptxas.resolve(self.ptxas)
        return {"ptxas": got[1]} if got else {}

    def configure_process(self) -> None:
        """Settle the ptxas before this process compiles anything (torch.compile included,
        which otherwise picks torch's own for every later Triton kernel too)."""
        got = None if self.interpret else ptxas.resolve(self.ptxas)
        if got:
            require_triton(self.interpret)
            ptxas.use(got[0])

    def usage(self, plan) -> tuple:
        """Triton pipelines each dot's operand loads through `num_stages` shared-memory
        buffers (3 by default) and keeps the accumulator in registers (usage.dot_usage
        says how close that comes on the H200)."""
        return dot_usage(plan, stages=3, warps=4, wavefront=self.caps.wavefront)

    def limits(self) -> dict:
        """Shared memory per program as Triton's own launch check counts it, 255 registers
        per thread (NVIDIA's ceiling) and the register file a program's threads share
        (the driver's registers per block); the last two not given for AMD GPUs."""
        if self.interpret:
            return {}
        try:
            triton = require_triton(False)
            import torch
            if not torch.cuda.is_available():
                return {}
            props = triton.runtime.driver.active.utils.get_device_properties(
                torch.cuda.current_device())
        except Exception:  # no driver, no device: no limits, so nothing is skipped
            return {}
        out = {"shared_bytes": int(props["max_shared_mem"])}
        if getattr(torch.version, "hip", None) is None:
            out["registers_per_thread"] = 255
            out["registers_per_program"] = int(props["max_num_regs"])
        return out

    def render(self, plan) -> KernelSource:
        parts = render_module(plan, dot_f32=self.interpret, libdevice=not self.interpret)
        text = render("triton/module.j2", banner=banner("#", plan.op.name, self.name),
                      op=plan.op.name, shape_class=json.dumps(plan.dims_dict), **parts)
        return KernelSource(self.name, plan.op.name, "python", text, "launch",
                            meta={"plan": plan})

    def available(self) -> tuple[bool, str]:
        try:
            require_triton(self.interpret)
        except (ImportError, RuntimeError) as e:
            return False, str(e)
        if self.interpret:
            return True, ""
        try:
            import torch
            if not torch.cuda.is_available():
                return False, "no GPU here (use interpret=True for TRITON_INTERPRET mode)"
        except ImportError:
            return False, "torch is needed to launch Triton kernels: pip install 'kevolve[torch]'"
        return True, ""

    def compile_log(self, source: KernelSource) -> tuple[bool, str]:
        """Triton compiles at a kernel's first launch: here every kernel is compiled ahead
        of time for an H100/H200 (sm_90, no GPU needed), with ptxas' registers, spills and
        shared memory per kernel."""
        from .aot import compile_aot

        try:
            info = compile_aot(source, "cuda:90")
        except Exception as e:  # AotError, or Triton missing its CUDA backend
            return False, f"{type(e).__name__}: {e}"
        keys = ("registers", "spill_stores", "spill_loads", "stack_frame", "shared_bytes",
                "num_warps", "num_stages")
        return True, "\n".join(f"{name} (cuda:90): " + ", ".join(
            f"{k} {v[k]}" for k in keys if k in v) for name, v in info.items())

    def build(self, source: KernelSource) -> Kernel:
        require_triton(self.interpret)
        self.configure_process()
        mod = load_module(source, self.interpret)
        op = source.meta["plan"].op

        seen: dict = {}  # input shapes + params -> dims (keeps launches cheap when timed)
        diagnostics: dict = {}

        def run(inputs, outputs, params):
            key = (tuple(tuple(v.shape) for v in inputs.values()), tuple(params.items()))
            dims = seen.get(key)
            first = dims is None
            if first:
                dims = seen[key] = bind_dims(op, inputs, params)
            ran = mod.launch({**inputs, **outputs}, dims)
            if first:
                # Triton compiles at a launch, per specialization of the shape: the report
                # is that of the latest new shape (the evaluator's last is the bench shape)
                diagnostics["kernels"] = triton_jit(ran)
        return Kernel(source, run, diagnostics)
