"""The backend interface: capabilities as data, render -> KernelSource, build -> Kernel, and
what the layers above may ask instead of a backend's name: its `target` (where kernels run,
how they are fed and timed) and a few hooks (`worker_env`, `compile_log`, `notes`)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

from ..plan.model import Plan
from ..schedule.errors import MoveError
from ..schedule.state import Schedule
from .target import Target


@dataclass(frozen=True)
class Caps:
    """What a target can honour, declared as data (the third legality layer reads it)."""

    device: str  # cpu | cuda | hip | mtia
    dtypes: tuple[str, ...] = ("f32", "f16", "bf16", "i32", "i64", "i8", "bool")
    moves: frozenset[str] = frozenset({"split", "reorder", "fuse", "bind", "vectorize",
                                       "unroll", "inline", "compute_at", "cache",
                                       "reduction", "launch"})
    strategies: frozenset[str] = frozenset({"auto", "single", "looped", "online", "scan"})
    max_tile_elems: int = 1 << 16  # elements of one program's block tile
    max_threads: int = 1024
    shared_bytes: int = 0
    vector_widths: tuple[int, ...] = (1, 2, 4, 8, 16)
    max_warps: int = 32
    wavefront: int = 32
    bind_targets: frozenset[str] = frozenset({"grid"})
    # Moves this backend renders itself; the others in `moves` are accepted and left to its
    # compiler (Triton vectorizes and stages tiles on its own), so proposers skip them.
    renders: frozenset[str] = frozenset({"vectorize"})
    # `launch` arguments this backend acts on (the others are accepted and ignored), so
    # proposers do not spend evaluations on traces that render the same code.
    launch_args: frozenset[str] = frozenset()
    # `cache ... copy: bulk` rendered with a copy engine (Triton: TMA tensor descriptors for
    # contraction operands); elsewhere a bulk copy is a thread copy like any other.
    bulk_copy: bool = False


@dataclass(frozen=True)
class KernelSource:
    backend: str
    op: str
    lang: str  # python | c | cuda | hip | cpp
    text: str
    entry: str
    flags: tuple[str, ...] = ()
    meta: dict = field(default_factory=dict, compare=False, hash=False)

    @property
    def hash(self) -> str:
        h = hashlib.sha256()
        for part in (self.backend, self.lang, self.entry, self.text, *self.flags):
            h.update(part.encode())
            h.update(b"\0")
        return h.hexdigest()[:20]


class Kernel:
    """A built, callable kernel: `kernel(inputs, outputs, params)` writes into `outputs`."""

    def __init__(self, source: KernelSource, fn, diagnostics: dict | None = None):
        self.source = source
        self._fn = fn
        self.diagnostics = {} if diagnostics is None else diagnostics  # a JIT fills it later

    def __call__(self, inputs: dict[str, Any], outputs: dict[str, Any],
                 params: dict[str, int] | None = None) -> None:
        self._fn(inputs, outputs, params or {})


class Backend:
    """Every backend takes `threads=` (kernels whose target has `host_threads` use it)."""

    name: str = "?"
    caps: Caps = Caps("cpu")
    tensor_lib: str = "numpy"  # numpy | torch: what run() takes

    @property
    def target(self) -> Target:
        """Where kernels run, what they take, whether their times are measured. This default
        reads `caps.device` and `tensor_lib` (any device but "cpu" is an accelerator);
        emulated and interpreted modes override it."""
        return Target(self.caps.device, on_device=self.caps.device != "cpu",
                      tensor_lib=self.tensor_lib)

    def worker_env(self) -> dict[str, str]:
        """Environment variables a worker process needs before it imports anything (an
        interpreter mode fixed at import time)."""
        return {}

    def compile_log(self, source: KernelSource) -> tuple[bool, str]:
        """Compile `source` again and return (ok, the compiler's messages), for people
        reading why a candidate failed. By default: build it and list its diagnostics."""
        try:
            k = self.build(source)
        except Exception as e:
            return False, f"{type(e).__name__}: {e}"
        diag = "\n".join(f"{key}: {v}" for key, v in sorted(k.diagnostics.items()))
        return True, diag or "(built; the backend reported no diagnostics)"

    def notes(self) -> str:
        """What pays on this target, in a few paragraphs of Markdown, for the LLM proposer's
        prompt ("" when none are written; kevolve's sit in backends/notes/<name>.md)."""
        from .notes import notes
        return notes(self.name)

    def check(self, sched: Schedule, plan: Plan) -> None:
        """Layer 3: raise MoveError for what this backend cannot honour."""
        check_caps(self, sched, plan)

    def render(self, plan: Plan) -> KernelSource:
        raise NotImplementedError

    def build(self, source: KernelSource) -> Kernel:
        raise NotImplementedError

    def available(self) -> tuple[bool, str]:
        """Can this machine build (and run) kernels of this backend? (ok, reason)."""
        return True, ""

    def toolchain(self) -> dict:
        """Versions of the tools this backend's builds depend on beyond the Python packages
        (recorded with every result, part of its run hash)."""
        return {}

    def configure_process(self) -> None:
        """Process-wide settings this backend's builds need, made before anything compiles
        (the bench calls it before torch.compile runs)."""

    def usage(self, plan: Plan) -> tuple:
        """Estimated per-program needs of the plan's kernels (usage.Usage), which
        proposers hold against `limits()` to skip what cannot compile or would spill.
        Empty where this backend makes no estimate."""
        return ()

    def limits(self) -> dict:
        """This machine's per-program limits for `usage` (`shared_bytes`,
        `registers_per_thread`, `registers_per_program`); empty where unknown or no device is
        present."""
        return {}


def check_caps(backend: Backend, sched: Schedule, plan: Plan) -> None:
    caps = backend.caps
    for s in sched.stages:
        if s.reduction not in caps.strategies:
            raise MoveError(s.reduction_by, "backend.strategy", f"{backend.name} cannot "
                            f"reduce with strategy {s.reduction!r}",
                            f"use one of {sorted(caps.strategies)}")
        for lp in s.loops:
            if lp.bind and lp.bind not in caps.bind_targets:
                raise MoveError(None, "backend.bind", f"{backend.name} cannot bind "
                                f"{s.name}.{lp.name} to {lp.bind}",
                                f"bind to one of {sorted(caps.bind_targets)}")
            if lp.vector and lp.vector not in caps.vector_widths:
                raise MoveError(None, "backend.vector_width", f"{backend.name} has no vector "
                                f"width {lp.vector}", f"use one of {caps.vector_widths}")
        if s.caches and "cache" not in caps.moves:
            raise MoveError(None, "backend.cache", f"{backend.name} does not cache tiles", "")
    if sched.num_warps and sched.num_warps > caps.max_warps:
        raise MoveError(None, "backend.num_warps", f"num_warps {sched.num_warps} exceeds "
                        f"{backend.name}'s limit of {caps.max_warps}",
                        f"use at most {caps.max_warps}")
    for k in plan.kernels:
        for st in k.steps:
            elems = 1
            sizes = {}
            # the step's own tile: the kernel's loops its axes map onto, and its reduce
            # loops (a reduction computed at a grid loop does not hold the root's tile)
            mine = {name for m in st.spatial for name in m.loops}
            for lp in [x for x in k.loops if x.name in mine] + list(st.reduce_loops):
                if lp.role == "block":
                    sizes[lp.pos] = max(sizes.get(lp.pos, 1), lp.size)
            for v in sizes.values():
                elems *= v
            if st.strategy == "dot":  # operands and accumulator: 2-d tiles (x a batch)
                kb = max(lp.size for lp in st.reduce_loops if lp.role == "block")
                batch = sizes.get(0, 1) if k.rank == 3 else 1
                a, b = (sizes.get(p, 1) for p in (k.rank - 2, k.rank - 1))
                elems = batch * max(a * b, a * kb, kb * b)
            if elems > caps.max_tile_elems:
                raise MoveError(None, "backend.tile_too_large", f"{k.name}: step "
                                f"{st.stage.name!r} works on a tile of {elems} elements, over"
                                f" {backend.name}'s limit of {caps.max_tile_elems}",
                                "split an axis into smaller tiles")
