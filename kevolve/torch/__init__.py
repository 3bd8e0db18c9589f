"""kevolve ops inside PyTorch models: custom ops with autograd, and `accelerate(model)`.

    import kevolve.torch
    swaps = kevolve.torch.accelerate(model, archive=".kevolve/archive.db")

- autograd.py: a kevolve op as two torch.library custom ops (forward and backward kernels,
  fake implementations for torch.compile), falling back to the op's PyTorch reference;
- kernels.py:  per shape class, lower and build (trace per shape bucket from an archive);
- swap.py:     `accelerate`, which replaces matching modules in place.

Needs torch (imported when this package is).
"""

from __future__ import annotations

from .autograd import KevolveOp, kevolve_op
from .swap import Swap, accelerate

__all__ = ["KevolveOp", "Swap", "accelerate", "kevolve_op"]
