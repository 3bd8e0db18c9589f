"""Specs for the conform command's tests: one that is its reference, one that is not."""

from kevolve.ir.builder import axes, compute, dims, f32, input, maximum, op
from kevolve.ops import define

M, N = dims("M N")
x = input("x", (M, N), f32)
i, j = axes("i j", M, N)
RELU = define(op("my_relu", inputs=[x], outputs=[compute("y", (i, j), maximum(x[i, j], 0.0))]),
              reference="torch.relu")
NOT_RELU = define(op("not_relu", inputs=[x], outputs=[
    compute("y", (i, j), maximum(x[i, j], 0.1))]), reference="torch.relu")
