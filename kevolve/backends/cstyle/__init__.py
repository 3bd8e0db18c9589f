"""The C family's one emitter: a statement tree, one printer driven by a language class
(C with OpenMP, CUDA, HIP, numba's Python, MTIA C++), and the execution models that build
the tree (host loops, one program per GPU block, MTIA staging)."""
