"""Benchmark of tempo against hand-written PySpark on the shared workloads W1-W4 (see README.md)."""
