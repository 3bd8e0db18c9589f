"""A kevolve op as a PyTorch operator with autograd: two torch.library custom ops.

`kevolve::<op>_<backend>` runs the forward kernel; `kevolve::<op>_<backend>_backward` runs
the backward kernel: the backward Op derived from the forward IR (kevolve.ir.grad) or the
op's hand-written one (OpDef.backward), with the auxiliary inputs it needs (segment ids,
the inverse index of a gather) computed on the device inside the op. Both have fake
implementations, so they trace under torch.compile(fullgraph=True) as opaque calls.

Where no kernel serves a shape class (or the op has no backward), the original PyTorch
code runs instead: the op's reference, and torch autograd through it for the backward.
Float inputs of another dtype (bf16) run in the op's dtype and come back in theirs.

Called eagerly (not while torch.compile traces), the op skips the dispatcher: a plain
autograd.Function runs the same forward and backward, and a launch for a shape seen before
reuses its kernel, dims and output shapes. A serving batch is a handful of small kernels,
so what the host spends per call is what the model runs at.
"""

from __future__ import annotations

import hashlib
import json
import threading

import torch

from ..ir import grad
from ..ir.interp import eval_int
from ..ir.nodes import dim_offset
from .kernels import KernelTable

_registry: dict[str, KevolveOp] = {}
_lock = threading.Lock()


def _ident(s: str) -> str:
    import re
    return re.sub(r"\W", "_", s)


def _static_dims(op, tensors: dict, params: dict) -> dict:
    """Dims from input shapes (SymInts under torch.compile) and the params given."""
    dims = {k: v for k, v in params.items() if v is not None and v >= 0}
    for b in op.inputs:
        for k, e in enumerate(b.shape):
            do = dim_offset(e)
            if do is not None and do[0] not in dims:
                dims[do[0]] = tensors[b.name].shape[k] - do[1]
    return dims


class KevolveOp:
    """Callable as `op(*tensors, **params)` in the op's input order; returns the output
    tensor (or a tuple). `records_fwd`/`records_bwd`: archive (shape, trace) pairs; None
    for kevolve's default schedules; [] for none (the original PyTorch code runs)."""

    def __init__(self, opdef, backend, records_fwd=None, records_bwd=None):
        from .. import api

        self.opdef = opdef
        self.op = opdef.op
        self.backend = api.backend(backend)
        self.inputs = [b.name for b in self.op.inputs]
        self.floats = [b.name for b in self.op.inputs if b.dtype.is_float]
        self.params = [p.name for p in self.op.params]
        self.outputs = list(self.op.outputs)
        from ..ir.dtypes import torch_dtype
        self._dtypes = {b.name: torch_dtype(b.dtype) for b in self.op.inputs}
        self.fwd = KernelTable(self.op, self.backend, records_fwd)
        try:
            self.bwd_spec = grad.for_op(self.op, opdef.backward)
            self.bwd = KernelTable(self.bwd_spec.op, self.backend, records_bwd)
        except grad.NotDifferentiable:
            self.bwd_spec, self.bwd = None, None
        tag = hashlib.sha256(json.dumps([records_fwd, records_bwd], default=str)
                             .encode()).hexdigest()[:8]
        self.name = f"{_ident(opdef.name)}_{_ident(self.backend.name)}_{tag}"
        self._register()

    # -- the two custom ops ----------------------------------------------------------------

    def _register(self):
        ts = ", ".join(f"Tensor {_ident(n)}" for n in self.inputs)
        ps = "".join(f", int {_ident(p)}" for p in self.params)
        outs = "Tensor" if len(self.outputs) == 1 else \
            "(" + ", ".join("Tensor" for _ in self.outputs) + ")"
        fwd = torch.library.custom_op(f"kevolve::{self.name}", mutates_args=(),
                                      schema=f"({ts}{ps}) -> {outs}")(self._forward)
        fwd.register_fake(self._forward_fake)
        saved = ", ".join(f"Tensor o_{_ident(n)}" for n in self.outputs)
        grads = ", ".join(f"Tensor g_{_ident(n)}" for n in self.outputs)
        bwd = torch.library.custom_op(f"kevolve::{self.name}_backward", mutates_args=(),
                                      schema=f"({ts}, {saved}, {grads}{ps}) -> Tensor[]")(
            self._backward)
        bwd.register_fake(self._backward_fake)
        fwd.register_autograd(self._autograd, setup_context=self._setup)
        self.forward_op, self.backward_op = fwd, bwd

    def __call__(self, *tensors, **params):
        args = list(tensors) + [int(params.get(p, -1)) for p in self.params]
        if torch.compiler.is_compiling():
            return self.forward_op(*args)
        return _Eager.apply(self, *args)

    def _split(self, args):
        n = len(self.inputs)
        t = dict(zip(self.inputs, args[:n], strict=True))
        p = {k: v for k, v in zip(self.params, args[n:], strict=True) if v >= 0}
        return t, p

    def _prepare(self, tensors: dict) -> dict:
        return {n: tensors[n].detach().to(t).contiguous() for n, t in self._dtypes.items()}

    def _out_dtype(self, tensors):
        return next((tensors[n].dtype for n in self.floats), torch.float32)

    def _forward(self, *args):
        tensors, given = self._split(args)
        ins = self._prepare(tensors)
        params = self.fwd.params(ins, given)
        k, dims, shapes = self.fwd.launch(ins, params)
        dt = self._out_dtype(tensors)
        if k is None:
            got = self.opdef.torch_eager(tensors, params)
            res = [got[n].to(dt) for n in self.outputs]
        else:
            like = next(iter(ins.values()))
            outs = {n: torch.empty(shape, dtype=t, device=like.device)
                    for n, (shape, t) in shapes.items()}
            k(ins, outs, params)
            res = [outs[n].to(dt) if outs[n].is_floating_point() else outs[n]
                   for n in self.outputs]
        return res[0] if len(res) == 1 else tuple(res)

    def _forward_fake(self, *args):
        tensors, given = self._split(args)
        dims = _static_dims(self.op, tensors, given)
        like = tensors[self.floats[0]] if self.floats else next(iter(tensors.values()))
        res = []
        for n in self.outputs:
            s = self.op.stage(n)
            shape = [eval_int(e, dims) if not _symbolic(dims) else _eval_sym(e, dims)
                     for e in s.out.shape]
            res.append(like.new_empty(shape, dtype=like.dtype if s.out.dtype.is_float
                                      else torch.int64))
        return res[0] if len(res) == 1 else tuple(res)

    def _setup(self, ctx, inputs, output):
        n = len(self.inputs)
        outs = (output,) if len(self.outputs) == 1 else tuple(output)
        ctx.save_for_backward(*inputs[:n], *outs)
        ctx.params = tuple(inputs[n:])

    def _autograd(self, ctx, *grads):
        saved = ctx.saved_tensors
        n = len(self.inputs)
        ins, outs = saved[:n], saved[n:]
        grads = [g if g is not None else torch.zeros_like(o) for g, o in zip(grads, outs,
                                                                             strict=True)]
        got = self.backward_op(*ins, *outs, *grads, *ctx.params)
        by_name = dict(zip(self.floats, got, strict=True))
        return tuple(by_name.get(name) for name in self.inputs) + (None,) * len(self.params)

    def _backward(self, *args):
        n, m = len(self.inputs), len(self.outputs)
        tensors = dict(zip(self.inputs, args[:n], strict=True))
        outs = dict(zip(self.outputs, args[n:n + m], strict=True))
        grads = dict(zip(self.outputs, args[n + m:n + 2 * m], strict=True))
        given = {k: v for k, v in zip(self.params, args[n + 2 * m:], strict=True) if v >= 0}
        got = None
        if self.bwd is not None:
            got = self._backward_kernel(tensors, outs, grads, given)
        if got is None:
            got = self._backward_reference(tensors, grads, given)
        return [got[x].to(tensors[x].dtype) for x in self.floats]

    def _backward_kernel(self, tensors, outs, grads, given):
        from ..ir.dtypes import torch_dtype

        ins = self._prepare(tensors)
        fparams = self.fwd.params(ins, given)
        fdims = _static_dims(self.op, ins, fparams)
        avail = dict(ins)
        for name in self.outputs:
            avail[name] = outs[name].detach().to(torch.float32).contiguous()
            avail["d_" + name] = grads[name].detach().to(torch.float32).contiguous()
        bop = self.bwd_spec.op
        for name in self.bwd_spec.aux:
            b = bop.buffer(name)
            avail[name] = aux_tensor(name, eval_int(b.shape[0], fdims), avail)
        bins = {b.name: avail[b.name].to(torch_dtype(b.dtype)) for b in bop.inputs}
        bparams = self.bwd.params(bins, {k: v for k, v in fparams.items()
                                         if k in {p.name for p in bop.params}})
        k, dims, shapes = self.bwd.launch(bins, bparams)
        if k is None:
            return None
        like = next(iter(bins.values()))
        out = {n: torch.empty(shape, dtype=t, device=like.device)
               for n, (shape, t) in shapes.items()}
        k(bins, out, bparams)
        return {x: out["d_" + x] for x in self.bwd_spec.wrt} | {
            x: torch.zeros_like(tensors[x]) for x in self.floats if x not in self.bwd_spec.wrt}

    def _backward_reference(self, tensors, grads, params):
        with torch.enable_grad(), _autograd_dispatch():
            leaves = {k: (v.detach().requires_grad_(True) if k in self.floats else v)
                      for k, v in tensors.items()}
            p = self.fwd.params(self._prepare(tensors), params)
            got = self.opdef.torch_eager(leaves, p)
            outs = [got[n] for n in self.outputs]
            gs = torch.autograd.grad(outs, [leaves[x] for x in self.floats],
                                     [grads[n].to(o.dtype) for n, o in zip(self.outputs, outs,
                                                                           strict=True)],
                                     allow_unused=True)
        return {x: g if g is not None else torch.zeros_like(tensors[x])
                for x, g in zip(self.floats, gs, strict=True)}

    def _backward_fake(self, *args):
        return [args[self.inputs.index(x)].new_empty(args[self.inputs.index(x)].shape)
                for x in self.floats]


class _Eager(torch.autograd.Function):
    """The custom ops' forward and backward without the dispatcher (eager calls only)."""

    @staticmethod
    def forward(ctx, kop, *args):
        out = kop._forward(*args)
        outs = (out,) if len(kop.outputs) == 1 else out
        ctx.kop = kop
        n = len(kop.inputs)
        ctx.save_for_backward(*args[:n], *outs)
        ctx.params = tuple(args[n:])
        ctx.mark_non_differentiable(*(o for o in outs if not o.is_floating_point()))
        return out

    @staticmethod
    def backward(ctx, *grads):
        kop = ctx.kop
        saved = ctx.saved_tensors
        n = len(kop.inputs)
        ins, outs = saved[:n], saved[n:]
        grads = [g if g is not None else torch.zeros_like(o) for g, o in zip(grads, outs,
                                                                             strict=True)]
        got = kop._backward(*ins, *outs, *grads, *ctx.params)
        by_name = dict(zip(kop.floats, got, strict=True))
        return (None,) + tuple(by_name.get(x) for x in kop.inputs) + \
            (None,) * len(kop.params)


def _autograd_dispatch():
    """Inside a custom op's implementation the dispatcher skips autograd; the fallback
    backward differentiates the reference there, so it turns autograd dispatch back on."""
    key = torch._C.DispatchKeySet(torch._C.DispatchKey.CPU)
    return torch._C._ForceDispatchKeyGuard(torch._C._dispatch_tls_local_include_set(),
                                           key - key)


def _symbolic(dims: dict) -> bool:
    return any(not isinstance(v, int) for v in dims.values())


def _eval_sym(e, dims):
    """eval_int for SymInts (no int() casts, no Python branching on values)."""
    from ..ir.nodes import Binary, Const, Dim
    if isinstance(e, Const):
        return int(e.value)
    if isinstance(e, Dim):
        return dims[e.name]
    a, b = _eval_sym(e.a, dims), _eval_sym(e.b, dims)
    assert isinstance(e, Binary)
    return {"add": lambda: a + b, "sub": lambda: a - b, "mul": lambda: a * b,
            "floordiv": lambda: a // b, "mod": lambda: a % b,
            "max": lambda: torch.sym_max(a, b), "min": lambda: torch.sym_min(a, b)}[e.op]()


def aux_tensor(name: str, rows: int, avail: dict) -> torch.Tensor:
    """An auxiliary input of a backward (kevolve.ir.grad) computed on the device."""
    if name.startswith(grad.SEG):
        off = avail[name[len(grad.SEG):]]
        r = torch.arange(rows, device=off.device, dtype=off.dtype)
        return torch.searchsorted(off, r, right=True) - 1
    if name.startswith(grad.PERM):
        return torch.argsort(avail[name[len(grad.PERM):]], stable=True)
    if name.startswith(grad.INVOFF):
        idx = avail[name[len(grad.INVOFF):]]
        counts = torch.bincount(idx, minlength=rows - 1)[:rows - 1]
        return torch.cat([counts.new_zeros(1), torch.cumsum(counts, 0)])
    raise KeyError(name)


def kevolve_op(opdef, backend="cpu", records_fwd=None, records_bwd=None) -> KevolveOp:
    """The KevolveOp of `opdef` on `backend` (registered once per process and records)."""
    key = json.dumps([opdef.name, str(backend), records_fwd, records_bwd], default=str)
    with _lock:
        if key not in _registry:
            _registry[key] = KevolveOp(opdef, backend, records_fwd, records_bwd)
        return _registry[key]
