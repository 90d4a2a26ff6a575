"""Benchmarks: ``python -m bench`` (the whole side-by-side table, ``--quick`` for a smoke),
or one measurement alone with ``python -m bench.<name>``."""
