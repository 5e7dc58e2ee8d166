"""Benchmark of tempo against hand-written PySpark on the shared workloads W1-W4 and its own W5-W6 (see README.md)."""
