"""The machine-wide timing lock: kevolve processes on one machine (several searches, a
bench beside a search, Ray tasks on one node) never time at once, on the CPU or on a GPU
they share. An exclusive `flock` on a file in the temp dir, one file per visible device set
(`CUDA_VISIBLE_DEVICES`, else `all`): the OS releases it when its holder dies, even by
SIGKILL, so a killed candidate never leaves it held. Compiling and checking run unlocked.

KEVOLVE_TIMING_LOCK names the lock file instead (a path that processes in several
containers share, say), or turns the lock off with `off` (timings may then overlap other
processes')."""

from __future__ import annotations

import fcntl
import os
import tempfile

OFF = ("off", "0", "no", "false")


class NodeTimingLock:
    """acquire/release around one timing; a no-op when the lock is turned off."""

    def __init__(self, tag: str | None = None):
        env = os.environ.get("KEVOLVE_TIMING_LOCK", "")
        self.path: str | None
        if env.lower() in OFF:
            self.path = None
        elif env and tag is None:
            self.path = env
        else:
            tag = tag if tag is not None else os.environ.get("CUDA_VISIBLE_DEVICES", "all")
            safe = "".join(c if c.isalnum() else "_" for c in tag) or "all"
            self.path = os.path.join(tempfile.gettempdir(),
                                     f"kevolve-timing-{os.getuid()}-{safe}.lock")
        self._fd: int | None = None

    def acquire(self) -> None:
        if self.path is None:
            return
        self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        fcntl.flock(self._fd, fcntl.LOCK_EX)

    def release(self) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None
