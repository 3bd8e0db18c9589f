"""Losses: per-row cross entropy (a gather of the label's logit), KL divergence, binary
cross entropy with logits, a Huber loss and a mean squared error reduced to a scalar."""

from kevolve.ir.builder import (
    abs_,
    axes,
    axis,
    cast,
    compute,
    dims,
    exp,
    f32,
    i64,
    input,
    log,
    max_,
    maximum,
    op,
    reduce_axis,
    sum_,
    where,
)
from kevolve.ops import define, domain

SIZES = {"small": {"M": 7, "N": 13}, "cpu": {"M": 4096, "N": 512},
         "gpu": {"M": 32768, "N": 4096}}

# -- cross entropy per row: logsumexp(logits[i]) - logits[i, label[i]] ----------------------
M, N = dims("M N")
logits = input("logits", (M, N), f32)
label = input("label", (M,), i64)
i = axis("i", M)
k = reduce_axis("k", N)
mx = compute("mx", (i,), max_(logits[i, k], over=k))
lse = compute("lse", (i,), mx[i] + log(sum_(exp(logits[i, k] - mx[i]), over=k)))
loss = compute("loss", (i,), lse[i] - logits[i, label[i]])   # a gather by the label

CROSS_ENTROPY = define(op("cross_entropy", inputs=[logits, label], outputs=[loss]),
                       presets=SIZES, reference="F.cross_entropy(reduction='none')",
                       doc="loss[i] = -log softmax(logits[i])[label[i]]")

# -- KL(p || q) per row, both distributions given as probabilities ------------------------
M, N = dims("M N")
p = input("p", (M, N), f32)
q = input("q", (M, N), f32)
i = axis("i", M)
k = reduce_axis("k", N)
kl = compute("kl", (i,), sum_(p[i, k] * (log(p[i, k]) - log(q[i, k])), over=k))


def _kl_rows(t, _):
    return (t["p"] * (t["p"].log() - t["q"].log())).sum(-1)


KL_ROWS = define(op("kl_rows", inputs=[p, q], outputs=[kl]), presets=SIZES,
                 reference=_kl_rows,
                 inputs={"p": domain(0.01, 1.0), "q": domain(0.01, 1.0)},
                 doc="kl[i] = sum_j p log(p / q)")

# -- binary cross entropy with logits, elementwise (the numerically stable form) -----------
M, N = dims("M N")
x = input("x", (M, N), f32)
t = input("target", (M, N), f32)
i, j = axes("i j", M, N)
v = x[i, j]
y = compute("y", (i, j), maximum(v, 0.0) - v * t[i, j] + log(1.0 + exp(-abs_(v))))

BCE_LOGITS = define(op("bce_logits", inputs=[x, t], outputs=[y]), presets=SIZES,
                    reference="F.binary_cross_entropy_with_logits(reduction='none')",
                    inputs={"target": domain(0.0, 1.0)},
                    doc="y = max(x, 0) - x * t + log(1 + exp(-|x|))")

# -- Huber loss, mean over each row --------------------------------------------------------
M, N = dims("M N")
a = input("input", (M, N), f32)
bb = input("target", (M, N), f32)
i = axis("i", M)
k = reduce_axis("k", N)
dd = a[i, k] - bb[i, k]
hub = where(abs_(dd) < 1.0, 0.5 * dd * dd, abs_(dd) - 0.5)
y = compute("y", (i,), sum_(hub, over=k) / cast(N, f32))


def _huber_rows(t, _):
    import torch.nn.functional as F

    return F.huber_loss(t["input"], t["target"], reduction="none", delta=1.0).mean(-1)


HUBER_ROWS = define(op("huber_rows", inputs=[a, bb], outputs=[y]), presets=SIZES,
                    reference=_huber_rows, doc="y[i] = mean_j huber(input - target)")

# -- mean squared error over everything: a 0-d output --------------------------------------
M, N = dims("M N")
a = input("input", (M, N), f32)
bb = input("target", (M, N), f32)
r, c = reduce_axis("r", M), reduce_axis("c", N)
dd = a[r, c] - bb[r, c]
y = compute("loss", (), sum_(dd * dd, over=(r, c)) / cast(M * N, f32))

MSE_LOSS = define(op("mse_loss", inputs=[a, bb], outputs=[y]), presets=SIZES,
                  reference="F.mse_loss", doc="loss = mean((input - target)^2)")
