"""Every torch reference (library, ATen catalog, examples/) computes on its inputs' device:
on a GPU, a tensor it makes on the default device (the CPU) without `device=` fails or
silently moves the work. Checked without a GPU: with the default device set to `meta`, a
reference on CPU inputs that makes a tensor without naming a device mixes meta and CPU
tensors, which torch refuses, or returns a meta tensor."""

from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from kevolve.evaluate.check import inputs_for  # noqa: E402
from kevolve.ir.specfile import spec_names  # noqa: E402
from kevolve.ops import LIBRARY, aten, resolve  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def refs() -> list[str]:
    out = list(LIBRARY) + [f"aten.{n}" for n in aten.select("all")]
    for f in sorted((ROOT / "examples").glob("*.py")):
        out += [f"{f}:{n}" for n in spec_names(str(f))]
    return out


def test_every_reference_computes_on_its_inputs_device():
    wrong = []
    for ref in refs():
        d = resolve(ref)
        if d.torch_eager is None:
            continue
        sd = d.shape("small")
        case = d.case(sd, 0)
        tins = inputs_for(d.op_for(sd), case.inputs, "torch", "cpu")
        torch.set_default_device("meta")
        try:
            out = d.torch_eager(tins, case.params)
        except RuntimeError as e:
            wrong.append(f"{ref}: {str(e).splitlines()[0][:160]}")
            continue
        finally:
            torch.set_default_device("cpu")
        outs = out.values() if isinstance(out, dict) else \
            out if isinstance(out, (tuple, list)) else [out]
        if any(getattr(o, "device", None) == torch.device("meta") for o in outs):
            wrong.append(f"{ref}: its output is on the default device, not the inputs'")
    assert not wrong, "\n".join(wrong)
