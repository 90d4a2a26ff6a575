"""Benchmarks: run one with ``python -m bench.<name>``; each returns a dict of results."""
