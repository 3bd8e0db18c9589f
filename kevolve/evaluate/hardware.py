"""What a result was measured on: hardware names, toolchain versions and the two measured
ceilings (copy bandwidth, matmul rate) that roofline percentages are taken against."""

from __future__ import annotations

import os
import platform
from functools import cache

from .timing import median, time_cpu, time_gpu
from .timing_lock import NodeTimingLock


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


class NoDevice(RuntimeError):
    """A GPU backend was asked to run on a machine without a usable GPU (a user's setup
    problem: the command line reports it in one paragraph, exit 2)."""


def require_gpu(what: str = "this backend") -> None:
    """Raise NoDevice unless torch sees a CUDA (or ROCm) device."""
    try:
        import torch
    except ImportError:
        raise NoDevice(f"{what} runs on a GPU through torch, which is not installed: "
                       "pip install 'kevolve[torch]' (a CUDA build) on a GPU machine") from None
    if not torch.cuda.is_available():
        raise NoDevice(f"{what} runs on a GPU and torch sees none here (torch "
                       f"{torch.__version__}, CUDA {torch.version.cuda or 'not built in'}): "
                       "run it on a GPU machine, use --interpret (Triton's interpreter, "
                       "small shapes) or a CPU backend (--backend cpu)")


def hardware_name(gpu: bool, threads: int | None = None) -> str:
    if gpu:
        require_gpu()
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
    GPUs (the best of a few large shapes), f32 on CPUs with the threads the kernels get
    (`threads`, default every core), recorded as `copy_threads`: a multi-thread kernel
    held against one thread's bandwidth looks faster than the hardware allows. Measured
    under the machine's timing lock: a bandwidth measured beside another process's kernels
    would set every floor too high, and honest kernels would look too good to be true."""
    lock = NodeTimingLock()
    lock.acquire()
    try:
        return _measure_ceilings(gpu, threads)
    finally:
        lock.release()


def _measure_ceilings(gpu: bool, threads: int | None) -> dict:
    if gpu:
        require_gpu()
        import torch
        a = torch.empty(1 << 30, dtype=torch.float32, device="cuda")
        b = torch.empty_like(a)
        t = time_gpu(lambda: b.copy_(a))
        copy = 2 * a.numel() * 4 / (t * 1e-3)
        del a, b
        best = 0.0
        for m, k, n in ((8192, 8192, 8192), (8192, 4096, 4096)):
            x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
            w = torch.randn(k, n, device="cuda", dtype=torch.bfloat16)
            t = time_gpu(lambda x=x, w=w: x @ w)
            best = max(best, 2 * m * k * n / (t * 1e-3))
        return {"copy_bytes_per_s": copy, "matmul_flops": best}
    threads = threads or os.cpu_count() or 1
    copy = cpu_copy_bandwidth(threads)
    try:
        import torch
        torch.set_num_threads(threads)
        x = torch.randn(1024, 1024)
        mm = 2 * 1024 ** 3 / (median(time_cpu(lambda: x @ x, warmup=2, repeat=5)) * 1e-3)
    except ImportError:
        mm = 0.0
    return {"copy_bytes_per_s": copy, "matmul_flops": mm, "copy_threads": threads}


def cpu_copy_bandwidth(threads: int, n: int = 1 << 26) -> float:
    """Bytes read + written per second copying n float32 (256 MiB by default, far beyond
    the caches), in `threads` slices copied at once (numpy releases the GIL while it
    copies), the median of 7 copies."""
    from concurrent.futures import ThreadPoolExecutor

    import numpy as np

    a = np.ones(n, dtype=np.float32)
    b = np.empty_like(a)
    cuts = np.linspace(0, n, threads + 1).astype(int)
    parts = [(b[lo:hi], a[lo:hi]) for lo, hi in zip(cuts[:-1], cuts[1:])]
    with ThreadPoolExecutor(threads) as pool:
        ms = median(time_cpu(lambda: list(pool.map(lambda p: np.copyto(*p), parts)),
                             warmup=0, repeat=7))
    return 2 * a.nbytes / (ms * 1e-3)


def last_level_cache_bytes() -> int:
    """Bytes of last-level cache on this machine (all instances), the larger of what sysfs
    and sysconf say; 256 MiB when neither says."""
    import glob

    level, seen = 0, {}
    for d in glob.glob("/sys/devices/system/cpu/cpu[0-9]*/cache/index[0-9]*"):
        try:
            with open(f"{d}/type") as f:
                if f.read().strip() == "Instruction":
                    continue
            with open(f"{d}/level") as f:
                lv = int(f.read())
            with open(f"{d}/size") as f:
                size = f.read().strip()
            with open(f"{d}/shared_cpu_list") as f:
                shared = f.read().strip()
        except (OSError, ValueError):
            continue
        mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(size[-1:], 1)
        nbytes = int(size.rstrip("KMG") or 0) * mult
        if lv > level:
            level, seen = lv, {}
        if lv == level:
            seen[shared] = nbytes
    total = sum(seen.values())
    try:
        total = max(total, int(os.sysconf("SC_LEVEL3_CACHE_SIZE")))
    except (ValueError, OSError, AttributeError):
        pass
    return total if total > 0 else 256 << 20
