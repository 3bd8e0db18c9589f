"""Exports: an archived kernel written out for use outside kevolve (torch_op: a PyTorch
custom op module)."""
