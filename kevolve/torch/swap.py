"""`accelerate(model)`: swap a model's operators for kevolve ops, without editing the model.

What is swapped:
- every `nn.EmbeddingBag` in sum or mean mode (no per-sample weights, padding index or max
  norm): kevolve's embedding_bag, sharing the module's weight;
- modules named in `modules` ({class or class name: kevolve op name}): a module whose
  forward takes the op's tensor inputs in order and returns its output(s); the op's integer
  params come from `bounds` ({param: value}, or {module path: {param: value}} for one
  module), else the module's attribute of that name, else the inputs (a jagged max length
  read from the offsets: one device sync per call). A bound must be at least the true
  value; kernels are specialized on its power of two.

Kernels come from the archive (per shape bucket, kevolve.torch.kernels) when one is given:
an op the archive has no kernel for keeps the original module. Without an archive every
swapped op runs kevolve's default schedule. The backend follows the model's device (triton
on CUDA, cpu otherwise) unless `backend` says otherwise. Gradients flow through the
backward kernels (kevolve.torch.autograd); it all works under torch.compile(fullgraph=True).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from .autograd import kevolve_op


@dataclass(frozen=True)
class Swap:
    """One module replaced: its path in the model, its class, the kevolve op."""

    path: str
    was: str
    op: str
    kernels: str  # "archive" | "default"


class KevolveModule(nn.Module):
    """Runs a KevolveOp in place of `original` (kept for reference and for fallback)."""

    def __init__(self, kop, original: nn.Module, params: dict[str, int]):
        super().__init__()
        self.kop, self.original, self.params = kop, original, dict(params)

    def forward(self, *tensors):
        return self.kop(*tensors, **self.params)

    def extra_repr(self) -> str:
        return f"kevolve::{self.kop.name}, params={self.params}"


class KevolveEmbeddingBag(nn.Module):
    """nn.EmbeddingBag's forward (1-d input with offsets, or 2-d fixed bags) on kevolve's
    embedding_bag; the weight is the original module's Parameter."""

    def __init__(self, kop, original: nn.EmbeddingBag, params: dict[str, int]):
        super().__init__()
        self.kop, self.original, self.params = kop, original, dict(params)
        self.weight = original.weight

    def forward(self, input, offsets=None, per_sample_weights=None):
        if per_sample_weights is not None:
            return self.original(input, offsets, per_sample_weights)
        if input.dim() == 2:
            b, n = input.shape
            offsets = torch.arange(0, (b + 1) * n, n, device=input.device)
            input = input.reshape(-1)
        elif not self.original.include_last_offset:
            offsets = torch.cat([offsets, offsets.new_full((1,), input.numel())])
        return self.kop(self.weight, input.long(), offsets.long(), **self.params)


def _device(model: nn.Module) -> torch.device:
    p = next(model.parameters(), None)
    return p.device if p is not None else torch.device("cpu")


def _records(archive, name: str, backend: str, hardware):
    if archive is None:
        return None
    from ..archive import Archive

    with Archive(archive, create=False, readonly=True) as a:
        return [(r["shape"], r["trace_json"]) for r in a.best_by_shape(name, backend,
                                                                        hardware)]


def _bag_ok(m: nn.EmbeddingBag) -> bool:
    return m.mode in ("sum", "mean") and m.padding_idx is None and m.max_norm is None


def accelerate(model: nn.Module, archive=None, *, backend: str | None = None,
               hardware: str | None = None, modules: dict | None = None,
               bounds: dict[str, int] | None = None) -> list[Swap]:
    """Replace the model's matching modules in place (see the module docstring); returns
    what was swapped."""
    from ..ops import resolve

    be = backend or ("triton" if _device(model).type == "cuda" else "cpu")
    wanted = {(k if isinstance(k, str) else k.__name__): v for k, v in (modules or {}).items()}
    bounds = dict(bounds or {})
    swaps: list[Swap] = []
    kops: dict[str, object] = {}

    def kop_for(name: str):
        if name not in kops:
            fwd = _records(archive, name, be, hardware)
            if fwd is not None and not fwd:
                kops[name] = None  # the archive has no kernel: keep the original module
            else:
                bwd = _records(archive, name + "_backward", be, hardware) or None
                kops[name] = kevolve_op(resolve(name), be, fwd, bwd)
        return kops[name]

    def visit(parent: nn.Module, prefix: str):
        for child_name, child in list(parent.named_children()):
            path = f"{prefix}{child_name}"
            new = None
            if type(child) is nn.EmbeddingBag and _bag_ok(child):
                name = "embedding_bag" if child.mode == "sum" else "embedding_bag_mean"
                kop = kop_for(name)
                if kop is not None:
                    new = KevolveEmbeddingBag(kop, child, _params(kop, child, bounds, path))
            elif type(child).__name__ in wanted:
                name = wanted[type(child).__name__]
                kop = kop_for(name)
                if kop is not None:
                    new = KevolveModule(kop, child, _params(kop, child, bounds, path))
            if new is None:
                visit(child, path + ".")
                continue
            setattr(parent, child_name, new)
            swaps.append(Swap(path, type(child).__name__, name,
                              "default" if archive is None else "archive"))

    visit(model, "")
    return swaps


def _params(kop, module: nn.Module, bounds: dict, path: str) -> dict[str, int]:
    out = {}
    mine = bounds.get(path) if isinstance(bounds.get(path), dict) else {}
    for p in kop.params:
        if p in mine:
            out[p] = int(mine[p])
        elif isinstance(bounds.get(p), int):
            out[p] = int(bounds[p])
        elif isinstance(getattr(module, p, None), int):
            out[p] = int(getattr(module, p))
    return out
