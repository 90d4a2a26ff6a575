"""Benchmarks, runnable as `python -m bench.<name>`."""
