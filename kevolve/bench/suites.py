"""The benchmark suites: which ops, at which preset."""

SUITES = {
    # the operators recommendation models live on, at the gpu presets (the H200 targets)
    "ranking": ("softmax", "layernorm", "swish_add", "gemm_bias_gelu", "embedding_bag",
                "jagged_sum", "jagged_softmax", "dot_interaction"),
    # the 2-core development machine's suite, at the cpu presets
    "cpu": ("softmax", "layernorm", "rmsnorm", "embedding_bag", "jagged_sum",
            "dot_interaction"),
}
PRESET = {"ranking": "gpu", "cpu": "cpu"}
BACKEND = {"ranking": "triton", "cpu": "cpu"}  # the backend a suite runs on by default
