"""Former name of kevolve.ir.specfile, kept so `from kevolve.ir.spec import load_op` works
for one release; `resolve_op` is now `kevolve.ops.resolve`."""

from .specfile import is_spec_ref, load_op, split_ref

__all__ = ["load_op", "is_spec_ref", "split_ref"]
