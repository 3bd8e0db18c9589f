"""Compatibility re-export: the plan model lives in kevolve.plan.model."""

from ..plan.model import AxisMap, KernelPlan, Plan, PLoop, Step

__all__ = ["AxisMap", "KernelPlan", "Plan", "PLoop", "Step"]
