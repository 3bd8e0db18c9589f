"""A fault-injecting backend for tests: the real CPU backend, whose kernels (or compiler)
misbehave on purpose.

`FaultyBackend(fault=MODE, by_warps={"8": MODE, ...}, ...)` renders exactly what the CPU
backend renders, plus a comment naming the fault (so generated code, source hashes and the
search's run hashes differ per fault), and builds the CPU backend's clean source (so the
compiled library is shared with every other CPU test). The built kernel then does what MODE
says. `by_warps` picks the mode per candidate from the plan's `num_warps` (a launch hint the
CPU backend ignores), so one search can hold candidates with different faults.

Registered as backend `faulty` through the `kevolve.backends` entry-point group by
conftest.py (a dist-info folder on sys.path, which spawned workers inherit).

Modes. Faults of the process: segfault, sticky_cuda (raises the error torch raises after
an illegal memory access, which poisons a CUDA context for good), hang (sleeps forever in
the kernel; its pid goes to pid_dir when it starts), oom (allocates
16 MB every 10 ms, touching every page, up to oom_cap_mb, then sleeps), compile_hang (the
"compiler" is a `sleep` child process that never ends; its pid goes to pid_dir).
Kernels that only look right or fast: partial (writes the first half of the output),
cached (returns the output of its first call for every later call of that shape), modify_inputs
(writes its input after computing), modify_inputs_when_timed (the same, from its second call
on the same buffers: only timing calls a kernel twice on them), accumulate_repeat (adds its
result to the output from its second call on the same buffers on: a kernel that expects
zeroed outputs, right once), bench_only (right only when
the output has good_numel elements, else zeros), zeros (computes from all-zero inputs: right
on zeros, wrong on random data), nan (one NaN in the output), one_off (one element off by
`delta`), skip_repeat (does nothing when called again on the same buffers: a timing cheat).
Faults the second round of fault tests added: wrong_modify_inputs (a wrong output that
also writes its input), late_segfault (right, then a thread it started segfaults the
process after the kernel returned), thread_finish (returns at once and finishes the work on
a thread of its own), memo_repeat (when called again on the same input buffers copies the
output it computed for them before: skips the work, not the store), gil_hang (never returns
and holds the GIL all the while, as a numba kernel without nogil in an endless loop),
wrong_at_bench (right, but slow, everywhere except when the output has good_numel elements:
there one element is off).
A compiler that talks: noisy_compile writes a page to stdout (file descriptor 1, as Triton's
PTX dump on a ptxas failure does) and fails.
A compiler that fails late: jit_compile_error (every call raises `PTXASError`, as a JIT such
as Triton does when ptxas fails at a kernel's first launch).
"none" is the honest CPU kernel.
"""

from __future__ import annotations

import ctypes
import os
import subprocess
import threading
import time
from dataclasses import replace

import numpy as np

from kevolve.backends.base import Kernel, KernelSource
from kevolve.backends.cpu import CpuBackend

PROCESS_FAULTS = ("segfault", "hang", "oom", "compile_hang", "sticky_cuda", "late_segfault",
                  "gil_hang")
OUTPUT_FAULTS = ("partial", "cached", "modify_inputs", "modify_inputs_when_timed",
                 "accumulate_repeat", "bench_only", "zeros", "nan", "one_off", "skip_repeat",
                 "wrong_modify_inputs", "thread_finish", "memo_repeat", "wrong_at_bench")
LAUNCH_FAULTS = ("jit_compile_error",)
MODES = ("none",) + PROCESS_FAULTS + OUTPUT_FAULTS + LAUNCH_FAULTS + ("noisy_compile",)


class PTXASError(RuntimeError):
    """Named as Triton's error for a ptxas failure, which it raises at the first launch."""


class FaultyBackend(CpuBackend):
    name = "faulty"

    def __init__(self, fault: str = "none", by_warps: dict | None = None,
                 good_numel: int | None = None, delta: float = 1e-3,
                 oom_cap_mb: int = 2048, pid_dir: str | None = None, hang_s: float = 3600,
                 **cpu_options):
        super().__init__(**cpu_options)
        self.by_warps = {str(k): v for k, v in (by_warps or {}).items()}
        for m in (fault, *self.by_warps.values()):
            if m not in MODES:
                raise ValueError(f"unknown fault {m!r}; modes: {', '.join(MODES)}")
        self.fault, self.good_numel, self.delta = fault, good_numel, delta
        self.oom_cap_mb, self.pid_dir, self.hang_s = oom_cap_mb, pid_dir, hang_s

    def mode_for(self, plan) -> str:
        warps = plan.kernels[0].num_warps if plan.kernels else None
        return self.by_warps.get(str(warps), self.fault)

    def render(self, plan) -> KernelSource:
        src = super().render(plan)
        mode = self.mode_for(plan)
        knobs = {"one_off": f" delta={self.delta!r}", "bench_only": f" good={self.good_numel}",
                 "wrong_at_bench": f" good={self.good_numel}"}
        warps = plan.kernels[0].num_warps if plan.kernels else None
        return replace(src, text=src.text + f"// kevolve test fault: {mode}"
                       f"{knobs.get(mode, '')} (num_warps {warps})\n",
                       meta={**src.meta, "fault": mode, "clean_text": src.text})

    def build(self, source: KernelSource) -> Kernel:
        mode = source.meta["fault"]
        if mode == "compile_hang":
            child = subprocess.Popen(["sleep", str(self.hang_s)])
            if self.pid_dir:
                with open(os.path.join(self.pid_dir, f"compiler.{child.pid}"), "w") as f:
                    f.write(str(child.pid))
            child.wait()
            raise RuntimeError("the fake compiler ended")
        if mode == "noisy_compile":
            os.write(1, b"// ptx of the failed kernel\n" * 200)
            raise RuntimeError("the fake compiler failed after printing its input")
        clean = replace(source, backend="cpu", text=source.meta["clean_text"])
        real = super().build(clean)
        return Kernel(source, _faulty(real, mode, self), dict(real.diagnostics, fault=mode))


def _faulty(kernel: Kernel, mode: str, be: FaultyBackend):
    state: dict = {"calls": {}, "cache": {}, "last": None}

    def honest(inputs, outputs, params):
        kernel(inputs, outputs, params)

    def ptrs(inputs, outputs):
        return tuple(a.ctypes.data for a in (*inputs.values(), *outputs.values()))

    def first_float_input(inputs):
        return next(a for a in inputs.values() if a.dtype.kind == "f")

    def run(inputs, outputs, params):
        if mode == "none":
            honest(inputs, outputs, params)
        elif mode == "segfault":
            ctypes.string_at(0)
        elif mode == "sticky_cuda":  # what torch raises after a kernel's illegal access
            raise RuntimeError("CUDA error: an illegal memory access was encountered\n"
                               "CUDA kernel errors might be asynchronously reported")
        elif mode == "hang":
            if be.pid_dir:  # tell the test the kernel is hanging now, and where
                with open(os.path.join(be.pid_dir, f"hang.{os.getpid()}"), "w") as f:
                    f.write(str(os.getpid()))
            while True:
                time.sleep(0.05)
        elif mode == "oom":
            hoard, mb = [], 0
            while mb < be.oom_cap_mb:
                hoard.append(np.ones(2 << 20))  # 16 MB, every page written
                mb += 16
                time.sleep(0.01)
            while True:  # the watchdog missed it: the timeout ends it (the test then fails)
                time.sleep(0.05)
        elif mode == "partial":
            tmp = {n: np.empty_like(o) for n, o in outputs.items()}
            honest(inputs, tmp, params)
            for n, o in outputs.items():
                half = o.size // 2
                o.reshape(-1)[:half] = tmp[n].reshape(-1)[:half]
        elif mode == "cached":
            key = tuple(o.shape for o in outputs.values())
            if key not in state["cache"]:
                honest(inputs, outputs, params)
                state["cache"][key] = {n: o.copy() for n, o in outputs.items()}
            for n, o in outputs.items():
                o[...] = state["cache"][key][n]
        elif mode == "modify_inputs":
            honest(inputs, outputs, params)
            first_float_input(inputs).reshape(-1)[0] += 1.0
        elif mode == "modify_inputs_when_timed":
            honest(inputs, outputs, params)
            key = tuple(a.ctypes.data for a in inputs.values())
            state["calls"][key] = state["calls"].get(key, 0) + 1
            if state["calls"][key] == 1:  # held, so its addresses are not reused (as below)
                state.setdefault("kept", []).append(inputs)
            if state["calls"][key] > 1:
                first_float_input(inputs).reshape(-1)[0] += 1.0
        elif mode == "accumulate_repeat":
            key = ptrs(inputs, outputs)
            if state["calls"].get(key):
                tmp = {n: np.empty_like(o) for n, o in outputs.items()}
                honest(inputs, tmp, params)
                for n, o in outputs.items():
                    o += tmp[n]
            else:
                honest(inputs, outputs, params)
                # every first call's arrays are held: once freed, their addresses could come
                # back as a later check's fresh outputs, which would count as a repeat
                state["calls"][key] = 1
                state.setdefault("kept", []).append((inputs, outputs))
        elif mode == "bench_only":
            if sum(o.size for o in outputs.values()) == be.good_numel:
                honest(inputs, outputs, params)
            else:
                for o in outputs.values():
                    o[...] = 0
        elif mode == "zeros":
            honest({n: np.zeros_like(a) for n, a in inputs.items()}, outputs, params)
        elif mode == "nan":
            honest(inputs, outputs, params)
            o = next(iter(outputs.values()))
            o.reshape(-1)[o.size // 2] = np.nan
        elif mode == "one_off":
            honest(inputs, outputs, params)
            o = next(iter(outputs.values()))
            o.reshape(-1)[(o.size * 7) // 11] += be.delta
        elif mode == "skip_repeat":
            key = ptrs(inputs, outputs)
            if key != state["last"]:
                honest(inputs, outputs, params)
                # holding the arrays keeps their addresses from being reused by the next
                # (fresh, NaN-poisoned) outputs, which would then be skipped too
                state["last"], state["held"] = key, (inputs, outputs)
        elif mode == "wrong_at_bench":
            honest(inputs, outputs, params)
            honest(inputs, outputs, params)  # slower than the honest kernel: never top-k
            if sum(o.size for o in outputs.values()) == be.good_numel:
                o = next(iter(outputs.values()))
                o.reshape(-1)[0] += 1.0
        elif mode == "wrong_modify_inputs":
            honest(inputs, outputs, params)
            for o in outputs.values():
                o[...] = 0
            for a in inputs.values():
                if a.dtype.kind == "f":
                    a[...] = 7.0
        elif mode == "late_segfault":
            honest(inputs, outputs, params)

            def die():
                time.sleep(0.3)
                ctypes.string_at(0)
            threading.Thread(target=die, daemon=True).start()
        elif mode == "thread_finish":
            t = threading.Thread(target=honest, args=(inputs, outputs, params), daemon=True)
            t.start()
            state.setdefault("threads", []).append(t)
        elif mode == "memo_repeat":
            key = tuple(a.ctypes.data for a in inputs.values())
            if key in state["cache"]:
                for n, o in outputs.items():
                    o[...] = state["cache"][key][n]
            else:
                honest(inputs, outputs, params)
                state["cache"][key] = {n: o.copy() for n, o in outputs.items()}
                state.setdefault("kept", []).append(inputs)
        elif mode == "gil_hang":
            if be.pid_dir:
                with open(os.path.join(be.pid_dir, f"hang.{os.getpid()}"), "w") as f:
                    f.write(str(os.getpid()))
            ctypes.PyDLL(None).sleep(int(be.hang_s))  # a PyDLL call keeps the GIL
        elif mode == "jit_compile_error":
            raise PTXASError("PTXAS error: Internal Triton PTX codegen error\nptxas fatal   : "
                             "(C7602) Insufficient registers (128) to compile instruction")
        else:  # pragma: no cover - the constructor refuses unknown modes
            raise ValueError(mode)

    return run
