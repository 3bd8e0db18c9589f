"""Plans: a scheduled op lowered to kernels (model), the lowering itself (lower), and the
one walk every C-family emitter follows over a kernel (walk)."""

# kevolve.schedule first: it still re-exports `lower` and `Plan` from here, so it must be
# complete before this package's modules load (removed with that re-export).
from .. import schedule  # noqa: F401  (isort: skip)
from .lower import lower  # noqa: E402
from .model import AxisMap, KernelPlan, Plan, PLoop, Step  # noqa: E402

__all__ = ["AxisMap", "KernelPlan", "Plan", "PLoop", "Step", "lower"]
