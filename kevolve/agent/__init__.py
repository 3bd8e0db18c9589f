"""The evolve loop: evaluation, archive, search, proposers, executors."""
