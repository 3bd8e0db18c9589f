"""What keeps one candidate's evaluation from leaking into another's, or into its own
figures: threads a kernel starts are noticed (work finished on a thread after the call
returned does not count, and a thread that faults later would be blamed on whoever runs
next), and a device's deferred errors are drawn out before a result leaves the worker.

Python threads are counted through `threading.setprofile`: every thread the threading
module starts runs the hook once, before its target, and the hook removes itself. Native
threads (OpenMP pools, numba's threading layer) are not counted: kernels start those
legitimately, and the outputs' NaN poisoning before every timed call is what catches work
left to them after a call returns."""

from __future__ import annotations

import sys
import threading

_started = [0]


def _count(frame, event, arg):  # the profile hook: counts this thread once, then leaves
    _started[0] += 1
    sys.setprofile(None)


def watch_threads() -> None:
    """Count the Python threads started from now on in this process (idempotent)."""
    if threading.getprofile() is not _count:
        threading.setprofile(_count)


class ThreadMark:
    """The Python threads alive, and started, at one moment; `since()` names those started
    after it (alive or already finished)."""

    def __init__(self):
        watch_threads()
        self.alive = {t.ident for t in threading.enumerate()}
        self.started = _started[0]

    def since(self) -> str | None:
        new = [t for t in threading.enumerate() if t.ident not in self.alive]
        n = max(len(new), _started[0] - self.started)
        if not n:
            return None
        running = sum(t.is_alive() for t in new)
        return (f"{n} thread(s) started by the kernel call ({running} still running when it "
                "returned); a kernel's work must be done, and its threads joined, before it "
                "returns: work finished after the call does not count, and a thread left "
                "behind would run into the next candidate")


def device_health(gpu: bool) -> str | None:
    """None when the device has no error pending; else the error a synchronize raised (an
    asynchronous CUDA error that surfaced late). A worker reporting one is replaced."""
    if not gpu:
        return None
    try:
        import torch

        torch.cuda.synchronize()
        torch.zeros(1, device="cuda").add_(1).item()
    except Exception as e:  # the poisoned context's error, whatever its class
        return f"{type(e).__name__}: {e}"
    return None
