"""Payload classes: which classes are records, their fields and field types.

Payloads are attrs classes or dataclasses. A field annotated ``X | None`` is nullable;
its type for checking is ``X``.
"""

from __future__ import annotations

import dataclasses
import enum
import types
import typing
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from typing import Any

import attrs

from tempo.errors import QueryBuildError

SCALARS: tuple[type, ...] = (bool, int, float, str, datetime, timedelta)
"""Field types every executor supports natively."""


def is_record_type(tp: object) -> bool:
    """True for attrs classes and dataclasses."""
    return isinstance(tp, type) and (attrs.has(tp) or dataclasses.is_dataclass(tp))


def is_record(value: object) -> bool:
    """True for instances of attrs classes and dataclasses."""
    return is_record_type(type(value))


@dataclasses.dataclass(frozen=True)
class FieldInfo:
    """One field of a payload record."""

    name: str
    dtype: type
    nullable: bool
    element: type | None = None
    """For a list field (``list[X]`` or ``tuple[X, ...]``; ``dtype`` is ``list`` or ``tuple``): ``X``."""
    element_nullable: bool = False


def _strip_optional(annotation: Any) -> tuple[Any, bool]:
    origin = typing.get_origin(annotation)
    if origin is typing.Union or origin is types.UnionType:
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        nullable = len(args) < len(typing.get_args(annotation))
        if len(args) == 1:
            return args[0], nullable
        return object, nullable
    return annotation, False


_FIELDS_CACHE: dict[type, tuple[FieldInfo, ...]] = {}


def record_fields(cls: type) -> tuple[FieldInfo, ...]:
    """The fields of a payload class in declaration order, with resolved types."""
    cached = _FIELDS_CACHE.get(cls)
    if cached is not None:
        return cached
    if not is_record_type(cls):
        raise QueryBuildError(f"payload type {cls!r} is not a record: payloads must be attrs classes or dataclasses")
    try:
        hints = typing.get_type_hints(cls)
    except Exception as exc:  # an unresolvable forward reference names the class to fix
        raise QueryBuildError(f"cannot resolve the field annotations of {cls.__qualname__}: {exc}") from exc
    if attrs.has(cls):
        names = [f.name for f in attrs.fields(cls)]
    else:
        names = [f.name for f in dataclasses.fields(cls)]
    out = []
    for name in names:
        _refuse(cls, name, hints.get(name, object))
        dtype, nullable = _strip_optional(hints.get(name, object))
        element = _list_element(dtype)
        if element is not None:
            out.append(FieldInfo(name, typing.get_origin(dtype), nullable, *element))
            continue
        if not isinstance(dtype, type):
            dtype = object
        out.append(FieldInfo(name, dtype, nullable))
    result = tuple(out)
    _FIELDS_CACHE[cls] = result
    return result


def _refused_types() -> dict[Any, str]:
    import collections.abc
    import datetime as dt
    import decimal

    return {
        decimal.Decimal: "float (or str to keep the exact digits)",
        dict: "a record class (attrs or dataclass) for fixed keys, or a list of records for pairs",
        collections.abc.Mapping: "a record class (attrs or dataclass) for fixed keys, or a list of records for pairs",
        set: "list[X] (a list field; the set semantics are then the query's to keep)",
        frozenset: "list[X] (a list field; the set semantics are then the query's to keep)",
        collections.abc.Set: "list[X] (a list field)",
        bytes: "str",
        bytearray: "str",
        complex: "two float fields",
        dt.date: "datetime (a date at midnight UTC)",
        dt.time: "timedelta since midnight, or int microseconds",
    }


def _refuse(cls: type, name: str, annotation: Any) -> None:
    """A field of a type some executor has no column for is refused when the query is built,
    on every executor alike, naming it (docs/semantics.md 2.5): not a silent run in memory and
    a failure later elsewhere. Every executor holds ``SCALARS`` and records, each maybe
    ``| None``, and lists of them (``list[X]``, ``tuple[X, ...]``); nothing else."""
    refused = _refused_types()

    def shown(tp: Any) -> str:
        return tp.__qualname__ if isinstance(tp, type) and not typing.get_args(tp) else str(tp).replace("typing.", "")

    def refuse(tp: Any, use: str) -> None:
        raise QueryBuildError(
            f"payload field {cls.__qualname__}.{name} is typed {shown(tp)}, which tempo's executors do not all hold "
            f"(the vectorised and Spark executors have no column for it), so no executor takes it; use {use}"
        )

    def check(tp: Any, outer: Any) -> None:
        if typing.get_origin(tp) in (typing.Union, types.UnionType):
            if len([a for a in typing.get_args(tp) if a is not type(None)]) > 1:  # X | Y: a column holds one type
                refuse(tp, "one type per field (a str, or a record with a field per kind)")
            tp = _strip_optional(tp)[0]
        origin = typing.get_origin(tp)
        if _list_element(tp) is not None:
            if outer is not None:
                refuse(outer, "a list of records, each holding a list")
            check(typing.get_args(tp)[0], tp)
            return
        base = origin if origin is not None else tp
        if base in refused:
            refuse(tp, refused[base])
        if origin is typing.Literal:
            refuse(tp, "the values' own type (str, int, ...)")
        if base in (list, tuple) or origin is not None:
            refuse(tp, "list[X] or tuple[X, ...] of one element type")
        if base in SCALARS or is_record_type(base):
            return
        if isinstance(base, type) and issubclass(base, enum.Enum):
            refuse(tp, "str (the member's name) or int (its value)")
        refuse(tp, f"one of {', '.join(t.__name__ for t in SCALARS)}, a record class (attrs or dataclass), or a list of one")

    check(annotation, None)


def _list_element(annotation: Any) -> tuple[type, bool] | None:
    """``(X, nullable)`` for ``list[X]`` and ``tuple[X, ...]`` (X maybe ``| None``); else None."""
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is list and len(args) == 1:
        element = args[0]
    elif origin is tuple and len(args) == 2 and args[1] is Ellipsis:
        element = args[0]
    else:
        return None
    element, nullable = _strip_optional(element)
    return (element if isinstance(element, type) else object), nullable


def field_names(cls: type) -> tuple[str, ...]:
    return tuple(f.name for f in record_fields(cls))


def record_values(value: object) -> dict[str, object]:
    """A record instance's field values by name."""
    return {f.name: getattr(value, f.name) for f in record_fields(type(value))}


def _has_datetimes(cls: type) -> bool:
    return any(f.dtype is datetime or (is_record_type(f.dtype) and _has_datetimes(f.dtype)) for f in record_fields(cls))


def datetime_conformer(cls: type, naive: bool) -> Callable[[Any], Any] | None:
    """A function giving a payload of ``cls`` whose datetime fields (nested records included)
    follow one convention: naive UTC when ``naive``, else aware UTC; the payload itself when
    they already do. None when ``cls`` has no datetime field.

    Every time is an instant (naive means UTC), and results show times in the query's
    convention (docs/semantics.md 8): the Spark executor's payloads come back so from its
    columns, and the in-memory executor passes its output payloads through this."""
    if not is_record_type(cls) or not _has_datetimes(cls):
        return None
    fields = record_fields(cls)
    nested = {f.name: datetime_conformer(f.dtype, naive) for f in fields if is_record_type(f.dtype)}
    times = [f.name for f in fields if f.dtype is datetime]
    replace = attrs.evolve if attrs.has(cls) else dataclasses.replace

    def conform_time(v: datetime) -> datetime:
        if naive:
            return v if v.tzinfo is None else v.astimezone(timezone.utc).replace(tzinfo=None)
        if v.tzinfo is None:
            return v.replace(tzinfo=timezone.utc)
        return v if v.utcoffset() == timedelta(0) and v.tzinfo is timezone.utc else v.astimezone(timezone.utc)

    def conform(payload: Any) -> Any:
        changes: dict[str, Any] = {}
        for name in times:
            v = getattr(payload, name)
            if isinstance(v, datetime):
                w = conform_time(v)
                if w is not v:
                    changes[name] = w
        for name, inner in nested.items():
            v = getattr(payload, name)
            if inner is not None and v is not None:
                w = inner(v)
                if w is not v:
                    changes[name] = w
        return replace(payload, **changes) if changes else payload

    return conform
