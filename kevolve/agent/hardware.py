"""What a result was measured on: hardware names, toolchain versions and the two measured
ceilings (copy bandwidth, matmul rate) that roofline percentages are taken against."""

from __future__ import annotations

import os
import platform
import time
from functools import cache


@cache
def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return " ".join(line.split(":", 1)[1].split())
    except OSError:
        pass
    return platform.processor() or platform.machine()


def hardware_name(gpu: bool, threads: int | None = None) -> str:
    if gpu:
        import torch
        return f"gpu:{torch.cuda.get_device_name()}"
    return f"cpu:{cpu_model()}:{threads or os.cpu_count()}t"


def toolchain(be) -> dict:
    """Versions of what turns a trace into timed machine code: Python packages and what the
    backend `be` reports (the C compiler, nvcc, Triton's ptxas). kevolve's own version is not
    here: it is in every generated file's banner, hence in the source hash, the same from a
    checkout and from an install."""
    return {**_packages(), **be.toolchain()}


@cache
def _packages() -> dict:
    from importlib.metadata import PackageNotFoundError, version

    out = {"python": platform.python_version()}
    for pkg in ("numpy", "torch", "triton", "numba"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            pass
    return out


def measure_ceilings(gpu: bool, threads: int | None = None) -> dict:
    """Copy bandwidth (bytes read + written per second) and matmul rate (FLOP/s): bf16 on
    GPUs (the best of a few large shapes), f32 on CPUs (threads fixed)."""
    if gpu:
        import torch
        from triton.testing import do_bench
        a = torch.empty(1 << 30, dtype=torch.float32, device="cuda")
        b = torch.empty_like(a)
        t = do_bench(lambda: b.copy_(a), return_mode="median")
        copy = 2 * a.numel() * 4 / (t * 1e-3)
        del a, b
        best = 0.0
        for m, k, n in ((8192, 8192, 8192), (8192, 4096, 4096)):
            x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
            w = torch.randn(k, n, device="cuda", dtype=torch.bfloat16)
            t = do_bench(lambda x=x, w=w: x @ w, return_mode="median")
            best = max(best, 2 * m * k * n / (t * 1e-3))
        return {"copy_bytes_per_s": copy, "matmul_flops": best}
    try:
        import torch
        if threads:
            torch.set_num_threads(threads)
        a = torch.ones(1 << 26)  # 256 MiB, copied with the same threads the kernels get
        b = torch.empty_like(a)
        ts = []
        for _ in range(7):
            t0 = time.perf_counter()
            b.copy_(a)
            ts.append(time.perf_counter() - t0)
        copy = 2 * a.numel() * 4 / sorted(ts)[len(ts) // 2]
        del a, b
    except ImportError:
        import numpy as np
        a = np.ones(1 << 26, dtype=np.float32)
        b = np.empty_like(a)
        t0 = time.perf_counter()
        np.copyto(b, a)
        copy = 2 * a.nbytes / (time.perf_counter() - t0)
    try:
        import torch
        if threads:
            torch.set_num_threads(threads)
        x = torch.randn(1024, 1024)
        for _ in range(2):
            x @ x
        ts = []
        for _ in range(5):
            t0 = time.perf_counter()
            x @ x
            ts.append(time.perf_counter() - t0)
        mm = 2 * 1024 ** 3 / sorted(ts)[len(ts) // 2]
    except ImportError:
        mm = 0.0
    return {"copy_bytes_per_s": copy, "matmul_flops": mm}
