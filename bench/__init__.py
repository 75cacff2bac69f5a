"""Benchmarks (not tests): the checkpoint's cost against the raw fsync it needs, throughput,
load speed, memory, and SQLite as the peers store sessions. Run ``python -m bench``."""
