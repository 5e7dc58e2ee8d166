"""The in-memory executor: tempo's reference semantics, one event at a time."""

from tempo.memory.executor import InMemoryExecutor

__all__ = ["InMemoryExecutor"]
