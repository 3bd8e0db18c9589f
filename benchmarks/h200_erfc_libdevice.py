"""Does spelling the erfc helper's reciprocal and exp2 with libdevice speed up
gemm_bias_gelu on the H200, and is the helper still accurate there? kevolve's archived best
schedule is rendered by the current Triton backend (libdevice's fast_dividef and exp2, log2 e
folded into the fit) and, as the baseline, with the helper the backend rendered before
(`tl.fdiv` and `tl.exp`, as the study kernels still spell it), then timed beside cuBLAS's
bare matmul and torch.compile in interleaved rounds. Both helpers are also run alone
against math.erfc.

    PYTHONPATH=.:benchmarks python3 benchmarks/h200_erfc_libdevice.py --out $OUT
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
import re

# the archive of the H200 searches, committed beside the results
ARCHIVE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results", "h200-archive.db")


def previous_helper() -> str:
    """The helper the backend rendered before: the study kernels' `_erfc` (`tl.fdiv` and
    `tl.exp`, h200_gemm_mainloop.py), the same arithmetic, under the module's name."""
    import inspect

    from h200_gemm_mainloop import _erfc

    return inspect.getsource(_erfc.fn).replace("def _erfc(", "def _kv_erfc(")


def replace_helper(text: str, helper: str) -> str:
    """The module with its `_kv_erfc` replaced by `helper` (source of the same name)."""
    new, n = re.subn(r"@triton\.jit\ndef _kv_erfc\(w\):\n(?:    .*\n|\n(?=    ))*",
                     lambda m: helper, text)
    assert n == 1, "helper not found in the module"
    return new


def with_previous_helper(text: str) -> str:
    """The module with its `_kv_erfc` replaced by the previous backend's."""
    new = replace_helper(text, previous_helper())
    assert "libdevice.exp2" not in new
    return new


def erfc_errors(mod, rec, name: str) -> None:
    """Largest relative error of the module's helper against math.erfc on the GPU."""
    import torch
    import triton
    import triton.language as tl

    f = mod._kv_erfc

    @triton.jit
    def k(w, o, B: tl.constexpr):
        r = tl.program_id(0) * B + tl.arange(0, B)
        tl.store(o + r, f(tl.load(w + r)))

    w = torch.linspace(-9, 9, 1 << 16, dtype=torch.float32, device="cuda")
    o = torch.empty_like(w)
    k[(w.numel() // 256,)](w, o, B=256)
    ws, got = w.double().tolist(), o.double().tolist()
    rel = [abs(g - math.erfc(x)) / math.erfc(x) for g, x in zip(got, ws)]
    rec(name + "_erfc_rel_err", {"abs_w_le_3": max(r for r, x in zip(rel, ws) if abs(x) <= 3),
                                 "all": max(rel)})


def archived_best_gemm(db: str, rec):
    """kevolve's archived best gemm_bias_gelu schedule lowered for the Triton backend at
    the benchmark shape, the backend, the case and its inputs as bf16 CUDA tensors."""
    import numpy as np
    import torch

    import kevolve
    from kevolve.agent.archive import Archive
    from kevolve.ir.interp import bind_dims
    from kevolve.ops import get

    d = get("gemm_bias_gelu")
    sd = d.shape("gpu")
    op = d.op_for(sd)
    case = d.make(sd, np.random.default_rng(0))
    be = kevolve.backend("triton")
    best = Archive(db, readonly=True).best("gemm_bias_gelu", "triton")
    rec("trace", best.trace_json)
    src = kevolve.lower(op, best.trace_json, be, bind_dims(op, case.inputs, case.params))
    ts = tuple(torch.as_tensor(case.inputs[k].astype(np.float32)).to("cuda", torch.bfloat16)
               for k in ("A", "W", "bias"))
    return src, be, case, ts


def kevolve_call(src, be, case, ins: dict, ref, rec, name: str, other=None,
                 report: bool = False):
    """Build `src`, check it against `ref` (recorded as NAME_err; with `other`, another
    kernel's bf16 output, also the share of elements that differ from it; with `report`,
    the kernels' compile report as NAME_kernel) and return a call."""
    import torch

    import kevolve

    k = kevolve.build(src, be)
    outs = {"y": torch.full_like(ref, float("nan"), dtype=torch.bfloat16)}
    k(ins, outs, case.params)
    torch.cuda.synchronize()
    rec(name + "_err", (outs["y"].double() - ref).abs().max().item())
    if other is not None:
        rec(name + "_differs", (outs["y"] != other).double().mean().item())
    if report:
        rec(name + "_kernel", k.diagnostics.get("kernels"))
    return lambda: k(ins, outs, case.params)


def record_failure(rec, name: str, e: Exception) -> None:
    """A variant that does not build or check is recorded as NAME_error; the rest go on."""
    msg = " ".join(str(e).split())[:600]
    rec(name + "_error", f"{type(e).__name__}: {msg}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--db", default=ARCHIVE)
    args = ap.parse_args()
    import torch
    from h200_erf_store_stream import interleaved
    from h200_triton_structures import recorder

    from kevolve.backends.triton import load_module

    rec = recorder(os.path.join(args.out, "erfc-libdevice.json"))
    src, be, case, (A, W, bias) = archived_best_gemm(args.db, rec)
    srcs = {"kevolve_libdevice": src,
            "kevolve_previous": dataclasses.replace(src, text=with_previous_helper(src.text))}
    ins = {"A": A, "W": W, "bias": bias}
    ref = torch.nn.functional.gelu(torch.addmm(bias.double(), A.double(), W.double()))
    f = torch.compile(lambda a, w, b: torch.nn.functional.gelu(torch.addmm(b, a, w)))
    f(A, W, bias)
    runs = {"bare_mm": lambda: A @ W, "compile": lambda: f(A, W, bias)}
    for name, s in srcs.items():
        erfc_errors(load_module(s, False), rec, name)
        runs[name] = kevolve_call(s, be, case, ins, ref, rec, name)
    times = interleaved(runs, rec, args.rounds, "erfc_")
    bare = times["bare_mm"]["ms"]
    rec("bare_over", {k: bare / v["ms"] for k, v in times.items()})


if __name__ == "__main__":
    main()
