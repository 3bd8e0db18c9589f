"""Evaluating candidates: one job (job.py) passes through the stages cheapest first
(evaluator.py), is judged against the one float64 reference (oracle.py, check.py) and timed
by the one timer (timing.py), in a worker process (worker.py) or on a Ray cluster
(executors.py); hardware.py names what it ran on and measures the ceilings."""

from .job import FAILURES, STAGES, EvalJob, Result

__all__ = ["FAILURES", "STAGES", "EvalJob", "Result"]
