"""The erf GELU's numerics on the Triton backend: the fits behind the module helpers
`_kv_erfc` and `_kv_gauss_gate` (written by templates/triton/module.j2 from what
`helpers` returns) and the spelling of each call. Why these forms and what they cost on
the H200: docs/numerics.md. tests/backends/triton/test_triton_erfc.py holds every figure below
(its bounds a little above each).

The contract. Relative errors: "exact" is the fit alone in double precision, "in f32" the
helper as a kernel computes it. A module whose outputs are all bf16 or f16 gets the short
fits ("half"), which hold no more accuracy than those outputs do; any f32 output keeps
the long ones.

`1 + erf(y)` is written `_kv_erfc(-(y))`:
  erfc(w) = t exp2(-w^2 log2(e) + P(t)), t = 1 / (1 + |w| / 2), reflected as 2 - erfc(|w|)
  for w < 0; no branch.
  - long: P = ERFC_P * log2(e) (Numerical Recipes' Chebyshev fit, degree 9): 1.2e-7 exact
    over all w; in f32 about 1e-6 up to |w| = 3, then growing with w^2 as the exponent
    rounds (about 1e-5 at |w| = 9).
  - half: P = ERFC_HALF_P (degree 5, minimax of log2(erfc(w)) + w^2 log2(e) - log2(t)
    over 0 <= w <= 9.5, where erfc reaches f32's smallest normal): 7.6e-6 exact; in f32
    8.4e-6 up to |w| = 3 and 1.7e-5 up to 9, against half an ulp of 4.9e-4 (f16) and
    2.0e-3 (bf16).

`k * x * (1 + erf(c * x))`, k, c > 0 (the erf GELU: k = 1/2, c = 1/sqrt 2) is written
`_kv_gauss_gate(x, 2k, c / 2, -c^2 log2(e), log2 k)` (`gauss_gate`), x evaluated once:
  - long: 2k relu(x) - |x| t exp2(-c^2 log2(e) x^2 + P(t) + log2 k), t = 1 / (1 + c|x|/2),
    the long P: the erfc fit with no select and no reflection, as accurate. |x| is
    clamped at 1e4 (the exponential is 0 there) so that x = inf gives inf; NaN propagates.
  - half: 2k relu(x) - a exp2(p(c a) + log2 k), a = min(|x|, GATE_HALF_TOP / c) keeping
    NaN, p = GATE_HALF_W: degree 7 in w, a minimax fit of log2(erfc(w)) over 0 <= w <=
    GATE_HALF_FIT (5.4e-6 in log2 units, 3.7e-6 relative in erfc). The gate's relative
    error is 8.2e-6 in f32 for c|x| <= GATE_HALF_FIT; past that p falls faster than
    log2(erfc), so the subtracted term lies between 0 and the true one (for the GELU an
    absolute error under 6.3e-10) and flushes to 0 from w = 9.05, below GATE_HALF_TOP.
    One exp2 and no reciprocal.

The reciprocal and exp2 are libdevice's fast_dividef and exp2 on a GPU (one MUFU each on
sm_90, where `/` and tl.exp add range fix-ups), `/` and tl.math.exp2 in the interpreter,
which has no libdevice: the same arithmetic either way.
"""

from __future__ import annotations

import math

ERFC = "_kv_erfc"
GATE = "_kv_gauss_gate"

LOG2E = 1.4426950408889634
# P(t), lowest degree first, in natural-log units: Numerical Recipes' erfc fit
ERFC_P = (-1.26551223, 1.00002368, 0.37409196, 0.09678418, -0.18628806, 0.27886807,
          -1.13520398, 1.48851587, -0.82215223, 0.17087277)
# P(t), lowest degree first, in log2 units (log2 e already in): the half fit
ERFC_HALF_P = (-1.8272335121821341, 1.4686830710269672, 0.36708399821141724,
               0.6845489278729172, -1.0231461675237932, 0.3300746677748709)
# p(w) ~ log2(erfc(w)), lowest degree first: the half gate's exponent
GATE_HALF_W = (1.024507386704343e-06, -1.6280756390471545, -0.9170436167611509,
               -0.15247816360620547, 0.03394094847774712, -0.0052338156726585965,
               0.0004877872266629592, -2.0429260858562202e-05)
GATE_HALF_FIT = 4.5  # p is fitted over 0 <= w <= this
GATE_HALF_TOP = 10.2  # and |x| clamped at this / c, past p's flush to 0 at w = 9.05


def one_plus_erf(y: str) -> str:
    """The helper call for 1 + erf(y): erfc(-y), free of the cancellation that leaves
    1 + erf(y) at 0 below y = -4."""
    return f"{ERFC}(-({y}))"


def gauss_gate(x: str, k: float, c: float) -> str:
    """The helper call for k * x * (1 + erf(c * x)), k, c > 0 (constants as constexprs)."""
    return (f"{GATE}({x}, {2.0 * k!r}, {0.5 * c!r}, {-c * c * LOG2E!r}, "
            f"{math.log2(k)!r})")


def erfc_helper(libdevice: bool, half: bool = False) -> dict:
    """What the module template needs to write `_kv_erfc`: P's coefficients in log2 units
    (highest degree first, for Horner), the short fit when every output is bf16 or f16
    (`half`), and the reciprocal and exp2 spellings."""
    coeffs = ERFC_HALF_P if half else tuple(c * LOG2E for c in ERFC_P)
    return {"libdevice": libdevice, "neg_log2e": repr(-LOG2E), "half": half,
            "coeffs": [repr(c) for c in reversed(coeffs)],
            "rcp": "libdevice.fast_dividef(1.0, {})" if libdevice else "1.0 / ({})",
            "exp2": _exp2(libdevice)}


def _exp2(libdevice: bool) -> str:
    """exp2's spelling: libdevice's on a GPU (a bare MUFU.EX2 on sm_90), tl.math.exp2 for
    the interpreter, which has no libdevice."""
    return "libdevice.exp2({})" if libdevice else "tl.math.exp2({})"


def gate_helper(libdevice: bool, half: bool = False) -> dict:
    """What the module template needs to write `_kv_gauss_gate`: erfc_helper's t form, or
    for half-precision outputs the one-exp2 form's terms (coefficient, power of c, highest
    degree first, for Horner), its clamp in w and the exp2 spelling."""
    if not half:
        return erfc_helper(libdevice)
    terms = [(repr(q), i) for i, q in reversed(list(enumerate(GATE_HALF_W)))]
    return {"libdevice": libdevice, "half": True, "exp2": _exp2(libdevice), "w_terms": terms,
            "top": repr(GATE_HALF_TOP)}


def helpers(bodies: list[str], libdevice: bool, half: bool) -> dict:
    """The template's `erfc` and `gate` entries for a module of these kernel bodies: each
    helper that some body calls (None otherwise), the short fits when `half` (every
    output bf16 or f16)."""
    erfc = any(f"{ERFC}(" in b for b in bodies)
    gate = any(f"{GATE}(" in b for b in bodies)
    return {"erfc": erfc_helper(libdevice, half) if erfc else None,
            "gate": gate_helper(libdevice, half) if gate else None}
