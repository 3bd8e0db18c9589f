"""The GPU execution model of the C family: one program per thread block (CUDA, HIP)."""
