"""The numba backend: the C-like loop tree printed as Python and compiled by numba
(`prange` over the grid, fastmath). For machines without a C compiler; no vector exp."""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import threading

from ..ir.interp import bind_dims
from ..ir.nodes import op_dims
from .base import Backend, Caps, Kernel, KernelSource, cache_dir
from .clike import CLang, ScalarBuilder, print_py
from .pyexpr import Ctx, PyLang, emit
from .templating import banner, render


def _np_load(ptr: str, off: str, mask, ld) -> str:
    return f"{ptr}[{off}]"


_U = {"exp": "math.exp({})", "log": "math.log({})", "sqrt": "math.sqrt({})",
      "rsqrt": "(1.0 / math.sqrt({}))", "sigmoid": "(1.0 / (1.0 + math.exp(-({}))))",
      "erf": "math.erf({})", "abs": "abs({})", "tanh": "math.tanh({})", "not": "(not ({}))"}
_CAST = {"f32": "np.float32({})", "f64": "np.float64({})", "bf16": "kv_round_bf16({})",
         "f16": "np.float16({})", "i32": "np.int32({})", "i64": "np.int64({})",
         "bool": "bool({})"}

NUMBA_LANG = CLang(
    "numba",
    PyLang(unary={k: v.format for k, v in _U.items()}, maximum="max", minimum="min",
           where=lambda c, a, b: f"(({a}) if ({c}) else ({b}))", load=_np_load,
           cast=lambda c, t: _CAST[t.name].format(c), float_const=repr, int_maximum="max",
           int_minimum="min"),
    types={}, ident={"sum": "np.float32(0.0)", "max": "-np.inf", "min": "np.inf"},
    combine={"sum": "{a} + {b}", "max": "max({a}, {b})", "min": "min({a}, {b})"},
    min_call="min({a}, {b})", to_acc="{}", zero="0.0",
    store_cast={"bf16": "kv_round_bf16({})"})


def require_numba():
    try:
        import numba  # noqa: F401
    except ImportError as e:
        raise ImportError("the numba backend needs numba: pip install 'kevolve[numba]'") from e


class NumbaBackend(Backend):
    name = "numba"
    caps = Caps("cpu", max_tile_elems=1 << 16, bind_targets=frozenset({"grid"}))

    def available(self) -> tuple[bool, str]:
        try:
            require_numba()
        except ImportError as e:
            return False, str(e)
        return True, ""

    def render(self, plan) -> KernelSource:
        op = plan.op
        dims = op_dims(op)
        names = [b.name for b in op.inputs] + list(op.outputs)
        allb = names + list(plan.scratch)
        params = ", ".join([f"p_{n}" for n in allb] + [f"d_{d}" for d in dims])
        kernels = [{"name": k.name,
                    "body": "\n".join(print_py(ScalarBuilder(plan, k, NUMBA_LANG).build()))}
                   for k in plan.kernels]
        ctx = Ctx()
        guards = [{"cond": emit(c, ctx, NUMBA_LANG.expr, str), "msg": m}
                  for k in plan.kernels for c, m in k.guards]
        scratch = []
        for n in plan.scratch:
            b = op.stage(n).out
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
        if not path.exists():  # another process may be importing it: write, then rename
            tmp = path.with_suffix(f".{os.getpid()}.{threading.get_ident()}.tmp")
            tmp.write_text(source.text)
            tmp.replace(path)
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
