"""The vectorised executor: bounded queries compiled to polars plans (the ``vectorised``
extra), with exactly the in-memory executor's results."""

from tempo.vectorised.executor import VectorisedExecutor

__all__ = ["VectorisedExecutor"]
