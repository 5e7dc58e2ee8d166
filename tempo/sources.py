"""Where an input's items come from.

A ``Source`` yields input items and may declare default ``AdvanceTimeSettings`` for the
shape it is bound with, as a StreamInsight adapter factory can; settings given to
``Stream.create`` override them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Generic, TypeVar

from tempo.errors import QueryBuildError
from tempo.events import Cti, InputItem
from tempo.settings import AdvanceTimeSettings
from tempo.events import EventShape

T = TypeVar("T")


class Source(Generic[T]):
    """Base class of input sources. Subclasses implement ``items`` and set ``payload_type``."""

    payload_type: type[T]

    def items(self) -> Iterable[InputItem[T]]:
        """The input's items in arrival order. May be called once per run."""
        raise NotImplementedError

    def advance_time_settings(self, shape: EventShape) -> AdvanceTimeSettings | None:
        """The settings this source declares for ``shape`` (None: explicit CTIs only)."""
        return None


class ItemSource(Source[T]):
    """A source over a fixed sequence of items (or a function that yields them on each run)."""

    def __init__(
        self,
        items: Iterable[InputItem[T]] | Callable[[], Iterable[InputItem[T]]],
        payload_type: type[T] | None = None,
        settings: AdvanceTimeSettings | None = None,
    ) -> None:
        self._factory: Callable[[], Iterable[InputItem[T]]] | None
        self._items: Sequence[InputItem[T]] | None
        if callable(items):
            self._factory, self._items = items, None
        else:
            self._factory, self._items = None, tuple(items)
        self._settings = settings
        inferred = payload_type or self._infer_payload_type()
        if inferred is None:
            raise QueryBuildError(
                "cannot tell the payload type of an input with no events: pass payload_type="
            )
        self.payload_type = inferred

    def _infer_payload_type(self) -> type[T] | None:
        for item in self._items or ():
            if not isinstance(item, Cti):
                return type(item.payload)
        return None

    @property
    def materialized(self) -> Sequence[InputItem[T]] | None:
        """The items, when they are a fixed sequence (lets executors validate them up front)."""
        return self._items

    def items(self) -> Iterator[InputItem[T]]:
        if self._items is not None:
            return iter(self._items)
        assert self._factory is not None
        return iter(self._factory())

    def advance_time_settings(self, shape: EventShape) -> AdvanceTimeSettings | None:
        return self._settings

    def __repr__(self) -> str:
        size = f"{len(self._items)} items" if self._items is not None else "generated items"
        return f"ItemSource({self.payload_type.__name__}, {size})"
