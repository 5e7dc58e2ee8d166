"""The record classes ``top_k`` ranks events into, made once per payload class.

``top_k`` is a window aggregate (``AggregateKind.TOP``) giving each window a list of ranked
records, exploded into one event each: a ``Ranked<T>`` has the event's ``rank`` and the
``event`` itself, and a ``Top<T>`` is the window's result holding that list. The classes are
made here, named after the payload class and kept in this module's namespace, so that a
pickled engine state (the live executor's) finds them again once the query is built anew;
a process that has not built the query (a Spark worker unpickling a plan, or a restarted
driver reading a state) makes them when the name is first looked up (``__getattr__``).
"""

from __future__ import annotations

import dataclasses
import importlib
import itertools
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


def __getattr__(name: str) -> type:
    """The class ``name`` (``Ranked_<tag>`` or ``Top_<tag>``), made for the payload class
    whose module and qualified name the tag spells (each ``.`` written as ``_``: every way of
    reading it back is tried, each from its longest importable module, until one names a
    payload class whose classes have this name)."""
    kind, _, tag = name.partition("_")
    if kind not in ("Ranked", "Top") or not tag:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    parts = tag.split("_")
    if len(parts) <= 12:  # 2**11 readings at most
        for seps in itertools.product("._", repeat=len(parts) - 1):
            path = parts[0] + "".join(sep + part for sep, part in zip(seps, parts[1:]))
            found = _class_at(path)
            if found is not None:
                made = dict(zip(("Ranked", "Top"), ranked_classes(found)))[kind]
                if made.__name__ == name:
                    return made
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}: no importable payload class is named by it")


def _class_at(path: str) -> type | None:
    """The class at dotted ``path`` (a module, then attributes), or None."""
    names = path.split(".")
    for cut in range(len(names) - 1, 0, -1):
        try:
            found: Any = importlib.import_module(".".join(names[:cut]))
        except ImportError:
            continue
        for attr in names[cut:]:
            found = getattr(found, attr, None)
        return found if isinstance(found, type) else None
    return None
