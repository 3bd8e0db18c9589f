"""Benchmarks: suites, the side-by-side runner, and the HTML report."""
