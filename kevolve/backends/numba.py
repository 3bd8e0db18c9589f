"""The numba backend: the C-like loop tree printed as Python and compiled by numba
(`prange` over the grid, fastmath). For machines without a C compiler; no vector exp."""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import threading

from ..errors import MissingExtra
from ..ir.interp import bind_dims
from ..plan.walk import module_signature
from ..schedule.errors import MoveError
from .base import Backend, Caps, Kernel, KernelSource
from .cstyle.languages import NumbaLanguage
from .cstyle.scalar import ScalarEmitter
from .pyexpr import Ctx, emit
from .templating import banner, render
from .toolchain import cache_dir, seal, sealed

NUMBA_LANG = NumbaLanguage()


def require_numba():
    try:
        import numba  # noqa: F401
    except ImportError as e:
        raise MissingExtra("the numba backend needs numba: pip install 'kevolve[numba]'") from e


class NumbaBackend(Backend):
    name = "numba"
    # no f16: numba's nopython mode has no float16 arithmetic (its kernels fail at launch)
    caps = Caps("cpu", dtypes=("f32", "bf16", "i32", "i64", "i8", "bool"), max_tile_elems=1 << 16,
                bind_targets=frozenset({"grid"}))

    def __init__(self, threads: int | None = None):
        self.threads = threads  # accepted like every backend's; numba's own threads decide

    def available(self) -> tuple[bool, str]:
        try:
            require_numba()
        except ImportError as e:
            return False, str(e)
        return True, ""

    def render(self, plan) -> KernelSource:
        op = plan.op
        for b in op.inputs + tuple(s.out for s in op.stages):
            if b.dtype.name not in self.caps.dtypes:
                raise MoveError(None, "backend.dtype", f"the numba backend has no {b.dtype} "
                                f"(buffer {b.name!r})", "use a variant of the op in one of "
                                f"{', '.join(self.caps.dtypes)}, or the cpu backend")
        sig = module_signature(plan)
        dims, names = list(sig.dims), list(sig.names)
        params = ", ".join([f"p_{n}" for n in sig.every] + [f"d_{d}" for d in dims])
        kernels = [{"name": k.name,
                    "body": "\n".join(NUMBA_LANG.render(ScalarEmitter(plan, k, NUMBA_LANG)
                                                         .build()))}
                   for k in plan.kernels]
        for k in kernels:  # an accumulating kernel's programs run in order: no prange
            k["parallel"] = "prange(" in k["body"]
        ctx = Ctx()
        guards = [{"cond": emit(c, ctx, NUMBA_LANG.expr, str), "msg": m} for c, m in sig.guards]
        scratch = []
        for n, b in zip(sig.scratch, sig.scratch_buffers()):
            size = " * ".join(f"({emit(s, ctx, NUMBA_LANG.expr, str)})" for s in b.shape)
            scratch.append({"name": n, "size": size or "1", "dtype": b.dtype.np.name})
        text = render("numba/module.py.j2", banner=banner("#", op.name, self.name),
                      op=op.name, shape_class=json.dumps(plan.dims_dict), kernels=kernels,
                      params=params, args=params, dims=dims, guards=guards, buffers=names,
                      scratch=scratch)
        return KernelSource(self.name, op.name, "python", text, "launch",
                            meta={"plan": plan})

    def build(self, source: KernelSource) -> Kernel:
        require_numba()
        d = cache_dir() / "numba"
        d.mkdir(parents=True, exist_ok=True)
        path = d / f"k_{source.hash}.py"
        if not sealed(path):  # another process may be importing it: write, then rename
            tmp = path.with_suffix(f".{os.getpid()}.{threading.get_ident()}.tmp")
            tmp.write_text(source.text)
            seal(tmp, path)
        name = f"kevolve_numba_{source.hash}"
        mod = sys.modules.get(name)
        if mod is None:
            spec = importlib.util.spec_from_file_location(name, path)
            mod = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(mod)
            sys.modules[name] = mod
        op = source.meta["plan"].op

        def run(inputs, outputs, params):
            mod.launch({**inputs, **outputs}, bind_dims(op, inputs, params))
        return Kernel(source, run)
