"""The benchmark suites: which ops, at which preset."""

SUITES = {
    # the operators recommendation models live on, at the gpu presets (the H200 targets)
    "ranking": ("softmax", "layernorm", "swish_add", "gemm_bias_gelu", "embedding_bag",
                "jagged_sum", "jagged_softmax", "dot_interaction"),
    # the 2-core development machine's suite, at the cpu presets
    "cpu": ("softmax", "layernorm", "rmsnorm", "embedding_bag", "jagged_sum",
            "dot_interaction"),
}
# The preset each suite benches at; None: the backend's (gpu on a device, else cpu). The
# aten suite's ops come from the catalog (kevolve.ops.aten.select), not from SUITES.
PRESET = {"ranking": "gpu", "cpu": "cpu", "aten": None}
BACKEND = {"ranking": "triton", "cpu": "cpu", "aten": "cpu"}  # a suite's default backend


def preset(suite: str, on_device: bool) -> str:
    """The shape preset `suite` benches at on a backend that is (or is not) on a device."""
    return PRESET.get(suite) or ("gpu" if on_device else "cpu")
