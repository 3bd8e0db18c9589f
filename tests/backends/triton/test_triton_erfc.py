"""`1 + erf(y)` on the Triton backend: rendered through the module's branch-free erfc
helper (cheaper than libdevice's two-path erf in a GELU epilogue, and free of the
cancellation that leaves `1 + erf(y)` at 0 below y = -4), a bare erf left to tl.erf; and
the helper's accuracy against math.erfc, run by Triton's interpreter."""

from __future__ import annotations

import importlib.util
import json
import math
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from kevolve.backends.triton import TritonBackend
from kevolve.ir.builder import axes, compute, dims, erf, input, op
from kevolve.plan import lower
from kevolve.schedule import apply_trace, default_trace

REPO = Path(__file__).resolve().parents[3]


def _source(body_of, interpret: bool = True, dtype: str = "f32"):
    n = dims("n")
    x = input("x", (n,), "f32")
    (i,) = axes("i", n)
    o = op("erf_case", inputs=[x], outputs=[compute("y", (i,), body_of(x[i]), dtype=dtype)])
    d = {"n": 1024}
    return TritonBackend(interpret=interpret).render(
        lower(apply_trace(o, default_trace(o, d)), d))


def _render(body_of, interpret: bool = True, dtype: str = "f32") -> str:
    return _source(body_of, interpret, dtype).text


def _gelu_of(v):
    return 0.5 * v * (1.0 + erf(v * 0.7071067811865476))


def _gemm_source(interpret: bool = False):
    from kevolve import ops

    d = ops.get("gemm_bias_gelu")
    o, dd = d.op_for("small"), d.dims("small")
    return TritonBackend(interpret=interpret).render(lower(apply_trace(o, default_trace(o, dd)),
                                                           dd))


@pytest.mark.parametrize("body_of", [lambda v: 1.0 + erf(v * 0.5),
                                     lambda v: (v + 1.0) * (erf(v) + 1.0)],
                         ids=["one_plus_erf", "erf_plus_one"])
def test_one_plus_erf_renders_as_the_erfc_helper(body_of):
    text = _render(body_of)
    assert "def _kv_erfc(w):" in text
    assert "_kv_erfc(-(" in text and "tl.erf(" not in text


def test_a_bare_erf_stays_libdevice_and_the_module_has_no_helper():
    text = _render(lambda v: 2.0 + erf(v))
    assert "tl.erf(" in text and "_kv_erfc" not in text


def test_the_gemm_epilogue_is_one_gauss_gate_call_with_the_gelu_constants():
    text = _gemm_source(interpret=True).text
    assert "def _kv_gauss_gate(" in text and "_kv_erfc(" not in text and "tl.erf(" not in text
    # 2k = 1, c / 2 = 1 / (2 sqrt 2), -c^2 log2 e, log2 k = -1
    call = re.search(r"_kv_gauss_gate\((.*), ([-\d.e]+), ([-\d.e]+), ([-\d.e]+), ([-\d.e]+)\)",
                     text)
    assert call, text
    k2, h, q, lk = (float(call.group(g)) for g in range(2, 6))
    assert (k2, lk) == (1.0, -1.0)
    assert h == pytest.approx(0.5 / math.sqrt(2.0), rel=1e-15)
    assert q == pytest.approx(-0.5 / math.log(2.0), rel=1e-15)
    assert call.group(1).count("tl.load(p_bias") == 1  # acc + bias, evaluated once


@pytest.mark.parametrize("body_of,k,c", [
    (lambda v: 0.5 * v * (1.0 + erf(v * 0.7071067811865476)), 0.5, 0.7071067811865476),
    (lambda v: (1.0 + erf(v / 2.0)) * (v * 3.0), 3.0, 0.5),
    (lambda v: v * (erf(2.0 * v) + 1.0), 1.0, 2.0)],
    ids=["gelu", "gate_first_div", "no_factor"])
def test_gauss_gates_are_found_in_any_factor_order(body_of, k, c):
    text = _render(body_of)
    call = re.search(r"_kv_gauss_gate\((.*), ([-\d.e]+), ([-\d.e]+), ([-\d.e]+), ([-\d.e]+)\)",
                     text)
    assert call and "_kv_erfc(" not in text, text
    got = [float(call.group(g)) for g in range(2, 6)]
    assert got == pytest.approx([2 * k, c / 2, -c * c / math.log(2.0), math.log2(k)], rel=1e-15)


@pytest.mark.parametrize("body_of", [
    lambda v: -0.5 * v * (1.0 + erf(v * 0.7)),   # k < 0: log2 k does not exist
    lambda v: 0.5 * v * (1.0 + erf(v * -0.7)),   # c < 0: the other tail
    lambda v: 0.5 * v * (1.0 + erf((v + 1.0) * 0.7))],  # the gate is of another value
    ids=["negative_k", "negative_c", "other_value"])
def test_other_products_keep_the_erfc_helper(body_of):
    text = _render(body_of)
    assert "_kv_gauss_gate" not in text and "_kv_erfc(-(" in text


def test_gpu_modules_spell_the_reciprocal_and_exp2_with_libdevice_the_interpreter_cannot():
    gpu = _render(lambda v: 1.0 + erf(v), interpret=False)
    assert "from triton.language.extra import libdevice" in gpu
    assert "libdevice.fast_dividef(1.0, 1.0 + 0.5 * z)" in gpu and "libdevice.exp2(" in gpu
    cpu = _render(lambda v: 1.0 + erf(v), interpret=True)
    assert "libdevice" not in cpu
    assert "1.0 / (1.0 + 0.5 * z)" in cpu and "tl.math.exp2(" in cpu
    # the two spell the same arithmetic: only those two calls differ
    swap = {"libdevice.fast_dividef(1.0, 1.0 + 0.5 * z)": "1.0 / (1.0 + 0.5 * z)",
            "libdevice.exp2(": "tl.math.exp2(",
            "from triton.language.extra import libdevice\n": ""}
    for a, b in swap.items():
        gpu = gpu.replace(a, b)
    assert gpu == cpu


@pytest.mark.skipif(importlib.util.find_spec("triton") is None, reason="needs triton")
def test_on_sm90_the_helpers_are_bare_approximations_and_amd_compiles_them_too():
    """libdevice's fast_dividef and exp2 are div.approx.ftz and ex2.approx.ftz in PTX (one
    MUFU each); `/` (div.full) and tl.exp (ex2.approx without ftz) would add range fix-ups
    around them. The gate of bf16 outputs (gemm_bias_gelu's) has the exp2 alone, and keeps
    NaN through its clamp (min.NaN). The same modules compile for AMD, whose libdevice has
    both functions."""
    import re

    from kevolve.backends.triton.aot import compile_aot

    for src, rcp in ((_gemm_source(), False), (_source(_gelu_of, False), True)):
        name = src.meta["plan"].kernels[0].name
        ptx = compile_aot(src, "cuda:90", keep_asm=True)[name]["text"]["ptx"]
        ops_ = set(re.findall(r"\b((?:ex2|div|rcp|min)\.\S+)\s", ptx))
        assert "ex2.approx.ftz.f32" in ops_, ops_
        assert ("div.approx.ftz.f32" in ops_) == rcp, ops_
        assert not {"div.full.f32", "div.rn.f32", "ex2.approx.f32", "rcp.rn.f32"} & ops_, ops_
        assert ("min.NaN.f32" in ops_) == (not rcp), ops_
        gcn = compile_aot(src, "hip:gfx942", keep_asm=True)[name]["text"]["amdgcn"]
        assert "v_exp_f32" in gcn and ("v_rcp_f32" in gcn) == rcp


def _script(call: str) -> str:
    """A program that runs `call` (of the module's helpers, on `x`) over the JSON list of
    numbers (or "inf", "nan") in argv[2], with the module at argv[1], and prints the
    results as JSON (Infinity and NaN included)."""
    return textwrap.dedent("""
        import importlib.util, json, sys
        import torch, triton, triton.language as tl
        spec = importlib.util.spec_from_file_location("m", sys.argv[1])
        m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)

        @triton.jit
        def k(w, o, B: tl.constexpr):
            r = tl.program_id(0) * B + tl.arange(0, B)
            x = tl.load(w + r)
            tl.store(o + r, CALL)

        x = torch.tensor([float(v) for v in json.loads(sys.argv[2])], dtype=torch.float32)
        o = torch.empty_like(x)
        k[(x.numel() // 256,)](x, o, B=256)
        print(json.dumps(o.tolist()))
    """).replace("CALL", call)


SCRIPT = _script("m._kv_erfc(x)")



def _fit_terms(text: str) -> int:
    helper = text[text.index("def _kv_erfc(w):"):text.index("return tl.where(w >= 0")]
    return helper.count("p = ") + 1  # the first line holds two coefficients


@pytest.mark.parametrize("dtype,terms", [("f32", 10), ("bf16", 6), ("f16", 6)])
def test_the_fit_is_as_long_as_the_outputs_precision_needs(dtype, terms):
    assert _fit_terms(_render(lambda v: 1.0 + erf(v), dtype=dtype)) == terms


def test_one_full_precision_output_keeps_the_long_fit():
    n = dims("n")
    x = input("x", (n,), "f32")
    (i,) = axes("i", n)
    o = op("two_outputs", inputs=[x], outputs=[
        compute("y", (i,), 1.0 + erf(x[i]), dtype="bf16"),
        compute("z", (i,), x[i] * 2.0, dtype="f32")])
    d = {"n": 1024}
    text = TritonBackend(interpret=True).render(lower(apply_trace(o, default_trace(o, d)),
                                                      d)).text
    assert _fit_terms(text) == 10


# (output dtype, largest relative error for |w| <= 3, over -9..9). The long fit: its 1.2e-7
# and f32 rounding of the exp2 argument (log2 e folded in, as tl.exp did on the GPU); past
# |w| = 3 (erfc under 2e-5) that rounding grows with w*w: about 8e-6 at |w| = 9. The short
# fit (bf16 and f16 outputs): 7.6e-6 of its own, still 20x under f16's half ulp (4.9e-4).
BOUNDS = {"f32": (1.5e-6, 2e-5), "bf16": (1e-5, 2.5e-5)}


@pytest.mark.skipif(importlib.util.find_spec("triton") is None
                    or importlib.util.find_spec("torch") is None, reason="needs triton and torch")
@pytest.mark.parametrize("dtype", sorted(BOUNDS))
def test_the_helper_matches_math_erfc_in_relative_error(tmp_path, dtype):
    mod = tmp_path / "m.py"
    mod.write_text(_render(lambda v: 1.0 + erf(v), dtype=dtype))
    # both tails (erfc(9) is 4e-37, erfc(-9) is 2), zero and the bend near |w| = 1
    ws = [-9.0 + 18.0 * i / 1023 for i in range(1024)]
    ws[0:4] = [0.0, 1e-30, -1e-30, 0.92]
    ws = [float(f"{w:.6g}") for w in ws]  # exact in f32 and in the reference alike
    p = subprocess.run([sys.executable, "-c", SCRIPT, str(mod), json.dumps(ws)],
                       capture_output=True, text=True, timeout=600, cwd=REPO,
                       env=dict(os.environ, TRITON_INTERPRET="1"))
    assert p.returncode == 0, p.stderr[-2000:]
    got = json.loads(p.stdout.splitlines()[-1])
    import numpy as np

    wf = np.asarray(ws, dtype=np.float32).astype(np.float64)
    rel = [abs(g - math.erfc(w)) / math.erfc(w) for g, w in zip(got, wf)]
    near, everywhere = BOUNDS[dtype]
    assert max(r for r, w in zip(rel, wf) if abs(w) <= 3) < near
    assert max(rel) < everywhere
    assert got[-1] > 0.0  # erfc(9) = 4e-37: no cancellation to 0


# The gate's: f32 outputs use the same long fit in t, relative everywhere; bf16 and f16
# outputs the one-exp2 form (GATE_HALF_W, degree 7 in w fitted over 0 <= w <= 4.5: 3.7e-6
# of its own, 8.2e-6 with f32 rounding), relative up to |x| = 4.5 sqrt 2 and past it no
# larger than the GELU itself (6.3e-10 at the edge). (near: |x| <= 3 sqrt 2, fitted range,
# the edge in x, largest absolute error past it)
GATE_BOUNDS = {"f32": (1.5e-6, 2e-5, math.inf, 0.0),
               "bf16": (1.2e-5, 1.2e-5, 4.5 * math.sqrt(2.0), 6.5e-10)}

GATE_SCRIPT = _script("m._kv_gauss_gate(x, 1.0, 0.35355339059327373, -0.7213475204444816, -1.0)")



def _gelu(x: float) -> float:
    """The erf GELU in float64 through erfc: no cancellation in the lower tail."""
    return 0.5 * x * math.erfc(-x / math.sqrt(2.0))


@pytest.mark.skipif(importlib.util.find_spec("triton") is None
                    or importlib.util.find_spec("torch") is None, reason="needs triton and torch")
@pytest.mark.parametrize("dtype", sorted(GATE_BOUNDS))
def test_the_gauss_gate_matches_the_gelu_in_relative_error_and_keeps_inf_and_nan(tmp_path,
                                                                                  dtype):
    mod = tmp_path / "m.py"
    mod.write_text(_render(_gelu_of, dtype=dtype))
    xs = [float(f"{-12.0 + 24.0 * i / 1023:.6g}") for i in range(1024)]
    xs[0:7] = [0.0, 1e-30, -1e-30, 1.3, -1.3, 1e30, -1e30]
    xs[-3:] = ["inf", "-inf", "nan"]
    p = subprocess.run([sys.executable, "-c", GATE_SCRIPT, str(mod), json.dumps(xs)],
                       capture_output=True, text=True, timeout=600, cwd=REPO,
                       env=dict(os.environ, TRITON_INTERPRET="1"))
    assert p.returncode == 0, p.stderr[-2000:]
    got = json.loads(p.stdout.splitlines()[-1])
    import numpy as np

    assert got[-3] == math.inf and got[-2] == 0.0 and math.isnan(got[-1])
    assert got[5] == float(np.float32(1e30)) and got[6] == 0.0 and got[0] == 0.0

    xf = np.asarray(xs[:-3], dtype=np.float32).astype(np.float64)
    ref = np.array([_gelu(x) for x in xf])
    out = np.asarray(got[:-3])
    near, fitted, edge, tail = GATE_BOUNDS[dtype]
    rel = np.abs(out - ref) / np.where(ref == 0.0, 1.0, np.abs(ref))
    assert rel[np.abs(xf) <= 3 * math.sqrt(2.0)].max() < near
    assert rel[np.abs(xf) <= edge].max() < fitted
    past = np.abs(xf) > edge
    assert past.any() == (dtype != "f32")  # bf16: x = -12 ... -6.4 and 6.4 ... 12
    assert (np.abs(out - ref)[past] <= tail).all()
    low = past & (xf < 0)  # between the GELU and 0: the gate's term never overshoots
    assert ((out[low] <= 0.0) & (out[low] >= ref[low] - 1e-45)).all()
    assert out[xf <= -12.7].tolist() == [0.0] * int((xf <= -12.7).sum())


def _gate_helper(text: str) -> str:
    i = text.index("def _kv_gauss_gate(")
    return text[i:text.index("\n\n\n", i)]


@pytest.mark.parametrize("dtype", ["bf16", "f16"])
def test_half_precision_gates_take_one_exp2_and_no_reciprocal(dtype):
    half = _gate_helper(_render(_gelu_of, dtype=dtype))
    full = _gate_helper(_render(_gelu_of))
    assert half.count("tl.math.exp2(") == 1 and "1.0 / (" not in half
    assert "propagate_nan=tl.PropagateNan.ALL" in half  # the clamp keeps NaN
    assert half.count("p = ") == 7  # degree 7: the first line holds two coefficients
    assert "1.0 / (1.0 + H * a)" in full and full.count("tl.math.exp2(") == 1


def test_the_half_gates_polynomial_is_log2_erfc_within_its_stated_error():
    """GATE_HALF_W against math.erfc in double over the fitted range (3.7e-6 relative in
    erfc is 5.4e-6 in log2 units); past it, falling and under log2(erfc) (the gate's term
    between 0 and the true one), and under f32's smallest normal from w = 9.05 to the
    clamp, where the exponential must flush to 0."""
    from kevolve.backends.triton.gelu import GATE_HALF_FIT, GATE_HALF_TOP, GATE_HALF_W

    def p(w: float) -> float:
        return sum(q * w ** i for i, q in enumerate(GATE_HALF_W))

    ws = [GATE_HALF_FIT * i / 2000 for i in range(2001)]
    assert max(abs(p(w) - math.log2(math.erfc(w))) for w in ws) < 5.5e-6
    past = [GATE_HALF_FIT + (GATE_HALF_TOP - GATE_HALF_FIT) * i / 2000 for i in range(2001)]
    ps = [p(w) for w in past]
    assert all(b < a for a, b in zip(ps, ps[1:]))
    assert all(q < math.log2(math.erfc(w)) for q, w in zip(ps[1:], past[1:]))
    assert max(q for q, w in zip(ps, past) if w >= 9.05) < -126.0
