"""The interpreter stays tractable at the cpu preset (it is the oracle for CPU candidates):
it completes and agrees with torch. No timing assertions."""

import numpy as np
import pytest
import torch

from kevolve import ops
from kevolve.ir import interp
from kevolve.ops.base import torch_inputs


@pytest.mark.slow  # millions of elements through the interpreter
@pytest.mark.parametrize("name", ["softmax", "jagged_sum", "embedding_bag"])
def test_interp_at_cpu_preset_matches_torch(name):
    d = ops.get(name)
    c = d.case("cpu", seed=0)
    got = interp.run(d.op, c.inputs, c.params)
    want = d.torch_eager(torch_inputs(d.op, c), c.params)  # float32, as a user would run it
    for k, g in got.items():
        w = want[k].to(torch.float64).numpy()
        assert g.shape == w.shape and g.size > 10**5
        # float32 sums of many terms: absolute error grows with the output's scale
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=2e-6 * np.abs(w).max(), err_msg=k)
