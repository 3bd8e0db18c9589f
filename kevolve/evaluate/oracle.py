"""The one reference every kernel is judged against, in float64: the IR's interpreter on the
host, or, where the kernel's inputs live on a device (a GPU's large shapes, too slow for the
interpreter), the op's torch eager code run in float64 on those same inputs."""

from __future__ import annotations

import numpy as np


def reference(opdef, op, case, device_inputs: dict | None = None) -> dict[str, np.ndarray]:
    """Float64 host arrays of `op`'s outputs on `case`. `device_inputs`: the case's inputs as
    torch tensors on a device (kevolve.evaluate.check.inputs_for): the reference is then
    `opdef.torch_eager` in float64 there; without them (or without a torch reference), the
    interpreter on the host."""
    if device_inputs is None or opdef.torch_eager is None:
        from ..ir.interp import run

        return run(op, case.inputs, case.params)
    import torch

    t64 = {k: (v.double() if v.is_floating_point() else v) for k, v in device_inputs.items()}
    with torch.no_grad():
        return {k: v.double().cpu().numpy()
                for k, v in opdef.torch_eager(t64, case.params).items()}
