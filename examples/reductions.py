"""Row and column reductions: one value per row (or column) of a matrix."""

from kevolve.ir.builder import (
    abs_,
    axes,
    axis,
    cast,
    compute,
    dims,
    exp,
    f32,
    input,
    log,
    max_,
    op,
    reduce_axis,
    sum_,
)
from kevolve.ops import define

SIZES = {"small": {"M": 7, "N": 13}, "cpu": {"M": 4096, "N": 512},
         "gpu": {"M": 32768, "N": 4096}}

# -- logsumexp over the last dim ------------------------------------------------------------
M, N = dims("M N")
x = input("x", (M, N), f32)
i = axis("i", M)
k = reduce_axis("k", N)
mx = compute("mx", (i,), max_(x[i, k], over=k))
y = compute("y", (i,), mx[i] + log(sum_(exp(x[i, k] - mx[i]), over=k)))

LOGSUMEXP = define(op("logsumexp", inputs=[x], outputs=[y]), presets=SIZES,
                   reference="torch.logsumexp(dim=-1)", doc="y[i] = log sum_j exp(x[i, j])")

# -- population variance of each row --------------------------------------------------------
M, N = dims("M N")
x = input("x", (M, N), f32)
i = axis("i", M)
k = reduce_axis("k", N)
mean = compute("mean", (i,), sum_(x[i, k], over=k) / cast(N, f32))
y = compute("y", (i,), sum_((x[i, k] - mean[i]) * (x[i, k] - mean[i]), over=k)
            / cast(N, f32))

ROW_VAR = define(op("row_var", inputs=[x], outputs=[y]), presets=SIZES,
                 reference="torch.var(dim=-1, correction=0)", doc="y[i] = var(x[i, :])")

# -- row sum and sum of squares: two sibling outputs over the same rows, one kernel ----------
# Neither output reads the other; the default schedule computes `s` in `q`'s program
# (compute_at of an output at a sibling with its axes), so x is read once for both.
M, N = dims("M N")
x = input("x", (M, N), f32)
i = axis("i", M)
k = reduce_axis("k", N)
s = compute("s", (i,), sum_(x[i, k], over=k))
q = compute("q", (i,), sum_(x[i, k] * x[i, k], over=k))


def _row_moments(t, p):
    x = t["x"]
    return x.sum(-1), (x * x).sum(-1)


ROW_MOMENTS = define(op("row_moments", inputs=[x], outputs=[s, q]), presets=SIZES,
                     reference=_row_moments, doc="s[i] = sum_j x[i, j]; q[i] = sum_j x[i, j]^2")

# -- largest magnitude of each row (an absmax for quantization scales) ----------------------
M, N = dims("M N")
x = input("x", (M, N), f32)
i = axis("i", M)
k = reduce_axis("k", N)
y = compute("y", (i,), max_(abs_(x[i, k]), over=k))


def _row_absmax(t, p):
    return t["x"].abs().amax(dim=-1)


ROW_ABSMAX = define(op("row_absmax", inputs=[x], outputs=[y]), presets=SIZES,
                    reference=_row_absmax, doc="y[i] = max_j |x[i, j]|")

# -- column sums (a reduction over the leading dim) -----------------------------------------
M, N = dims("M N")
x = input("x", (M, N), f32)
j = axis("j", N)
r = reduce_axis("r", M)
y = compute("y", (j,), sum_(x[r, j], over=r))

COL_SUM = define(op("col_sum", inputs=[x], outputs=[y]), presets=SIZES,
                 reference="torch.sum(dim=0)", doc="y[j] = sum_i x[i, j]")

# -- mean over the middle dim of a [B, L, D] tensor (sequence mean pooling) -----------------
B, L, D = dims("B L D")
x = input("x", (B, L, D), f32)
b, d = axes("b d", B, D)
s = reduce_axis("s", L)
y = compute("y", (b, d), sum_(x[b, s, d], over=s) / cast(L, f32))

SEQ_MEAN = define(op("seq_mean", inputs=[x], outputs=[y]),
                  presets={"small": {"B": 3, "L": 7, "D": 5},
                           "cpu": {"B": 64, "L": 256, "D": 256},
                           "gpu": {"B": 256, "L": 1024, "D": 1024}},
                  reference="torch.mean(dim=1)", doc="y[b, d] = mean_s x[b, s, d]")
