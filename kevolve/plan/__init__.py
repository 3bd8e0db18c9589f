"""Plans: a scheduled op lowered to kernels (model), the lowering itself (lower), and the
one walk every C-family emitter follows over a kernel (walk)."""

from .lower import lower
from .model import AxisMap, KernelPlan, Plan, PLoop, Step

__all__ = ["AxisMap", "KernelPlan", "Plan", "PLoop", "Step", "lower"]
