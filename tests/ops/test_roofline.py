"""The roofline floor of library ops matches the counts worked out by hand."""

import pytest

from kevolve import ops
from kevolve.ir.roofline import floor


def floor_of(name, sd, seed=0):
    d = ops.get(name)
    c = d.case(sd, seed)
    return floor(d.op_for(sd), c.inputs, c.params)


@pytest.mark.parametrize("M, N", [(6, 50), (3, 1000), (1, 1)])
def test_softmax_moves_8_bytes_per_element(M, N):
    assert floor_of("softmax", {"M": M, "N": N}).bytes == 8 * M * N


@pytest.mark.parametrize("M, K, N", [(8, 12, 16), (1, 33, 17), (64, 64, 64)])
def test_gemm_flops_and_bytes(M, K, N):
    f = floor_of("gemm", {"M": M, "K": K, "N": N})
    assert f.flops == 2 * M * N * K
    assert f.bytes == 4 * (M * K + K * N + M * N)


def test_gemm_bias_gelu_is_bf16_traffic():
    M, K, N = 8, 12, 16
    f = floor_of("gemm_bias_gelu", {"M": M, "K": K, "N": N})
    assert f.bytes == 2 * (M * K + K * N + N + M * N)
    assert f.flops > 2 * M * N * K  # plus the epilogue


def test_embedding_bag_counts_gathered_rows_not_the_table():
    V, D, B, L = 100_000, 8, 5, 4
    f = floor_of("embedding_bag", {"V": V, "D": D, "B": B, "max_len": L, "lengths": "full"})
    T = B * L
    rows, indices, offsets, out = T * D * 4, T * 8, (B + 1) * 8, B * D * 4
    assert f.bytes == rows + indices + offsets + out
    assert f.bytes < V * D * 4 // 100
    assert f.flops == T * D  # one add per gathered element


def test_embedding_bag_gather_is_capped_at_the_table():
    V, D, B, L = 10, 8, 50, 4  # 200 lookups into 10 rows
    f = floor_of("embedding_bag", {"V": V, "D": D, "B": B, "max_len": L, "lengths": "full"})
    assert f.bytes == V * D * 4 + B * L * 8 + (B + 1) * 8 + B * D * 4


def test_jagged_sum_reads_values_once():
    B, D, L = 4, 3, 5
    f = floor_of("jagged_sum", {"B": B, "D": D, "max_len": L, "lengths": "full"})
    assert f.bytes == B * L * D * 4 + (B + 1) * 8 + B * D * 4


def test_dot_interaction_counts_the_lower_triangle_only():
    B, F, D = 2, 5, 3
    f = floor_of("dot_interaction", {"B": B, "F": F, "D": D})
    pairs = F * (F - 1) // 2
    assert f.flops == 2 * B * pairs * D
    assert f.bytes == 4 * (B * F * D + B * pairs)
