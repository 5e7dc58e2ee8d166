"""The record classes ``top_k`` ranks events into, made once per payload class.

``top_k`` is a window aggregate (``AggregateKind.TOP``) giving each window a list of ranked
records, exploded into one event each: a ``Ranked<T>`` has the event's ``rank`` and the
``event`` itself, and a ``Top<T>`` is the window's result holding that list. The classes are
made here, named after the payload class and kept in this module's namespace, so that a
pickled engine state (the live executor's) finds them again once the query is built anew.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

_MADE: dict[type, tuple[type, type]] = {}


def ranked_classes(payload_type: type) -> tuple[type, type]:
    """``(Ranked, Top)`` for events of ``payload_type``: ``Ranked(rank: int, event: T)`` and
    ``Top(ranked: list[Ranked])``."""
    made = _MADE.get(payload_type)
    if made is not None:
        return made
    tag = re.sub(r"\W", "_", f"{payload_type.__module__}_{payload_type.__qualname__}")
    ranked: Any = dataclasses.make_dataclass(f"Ranked_{tag}", [("rank", int), ("event", payload_type)], frozen=True)
    top: Any = dataclasses.make_dataclass(f"Top_{tag}", [("ranked", list[ranked])], frozen=True)
    for cls in (ranked, top):
        cls.__module__ = __name__
        globals()[cls.__name__] = cls
    _MADE[payload_type] = (ranked, top)
    return ranked, top
