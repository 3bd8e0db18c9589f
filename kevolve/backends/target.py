"""What the layers above the backends may ask about one: a `Target` value instead of its name.

The evaluator, the search, the bench and the commands decide where inputs live, whether a
time means anything and whether to pass a thread count from these fields alone, so a new
backend (or an emulated or interpreted mode of an old one) needs no code above it.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Target:
    """Where a backend's kernels run and how they are fed and timed."""

    device: str  # the hardware the code is written for: cpu | cuda | hip | mtia | ...
    # Kernels run on an accelerator: inputs go to torch's "cuda" device, times are device
    # events. False for CPU backends, emulators and interpreters (they run on the host).
    on_device: bool = False
    tensor_lib: str = "numpy"  # numpy | torch: what a kernel takes as inputs and outputs
    # Wall-clock times are the kernel's own. False where they are an emulator's, and the
    # time to report is the backend's estimate (BuildReport.estimate_ms).
    measured: bool = True
    # Kernels run on host threads, so their times depend on `threads=` (the search passes it).
    host_threads: bool = False

    @property
    def tensor_device(self) -> str:
        """torch's name for where inputs and outputs live."""
        return "cuda" if self.on_device else "cpu"


@dataclass(frozen=True)
class BuildReport:
    """What a build says about its kernels: per-kernel compiler figures (registers, spills,
    shared memory) and, where kernels are not measured, the backend's time estimate."""

    kernels: dict = field(default_factory=dict)
    estimate_ms: float | None = None

    @classmethod
    def of(cls, diagnostics: dict) -> BuildReport:
        """Read from a Kernel's diagnostics (a JIT fills them at its first launch)."""
        est = diagnostics.get("estimate_ms")
        kernels = diagnostics.get("kernels")
        return cls(dict(kernels) if isinstance(kernels, dict) else {},
                   float(est) if isinstance(est, (int, float)) else None)
