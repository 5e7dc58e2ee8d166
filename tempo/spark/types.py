"""Payload classes as Spark schemas, and rows back into payloads.

Datetime fields travel through Spark as timestamps but cross the driver boundary as
integer microseconds, so no local time zone can shift them.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as st

from tempo.errors import UnsupportedError
from tempo.expr.schema import FieldInfo, is_record_type, record_fields
from tempo.ticks import from_ticks, to_ticks

_SCALARS: dict[type, st.DataType] = {
    bool: st.BooleanType(),
    int: st.LongType(),
    float: st.DoubleType(),
    str: st.StringType(),
    datetime: st.TimestampType(),
    timedelta: st.DayTimeIntervalType(),  # microseconds, as a timedelta holds them: exact both ways
}


def spark_type(tp: type) -> st.DataType:
    """The Spark type of a payload field type."""
    if tp in _SCALARS:
        return _SCALARS[tp]
    if is_record_type(tp):
        return payload_schema(tp)
    raise UnsupportedError(
        "Spark",
        f"a payload field of type {getattr(tp, '__qualname__', tp)!r}",
        "it has no column type for it (supported: bool, int, float, str, datetime, timedelta and records)",
    )


def field_type(f: FieldInfo) -> st.DataType:
    """The Spark type of a payload field: a list field is an array of its elements."""
    if f.element is not None:
        return st.ArrayType(spark_type(f.element), True)
    return spark_type(f.dtype)


def payload_schema(cls: type) -> st.StructType:
    """The Spark schema of a payload class (every field nullable)."""
    return st.StructType([st.StructField(f.name, field_type(f), True) for f in record_fields(cls)])


def wire_schema(cls: type) -> st.StructType:
    """The schema payload values are shipped in from the driver: datetimes as longs."""

    def wired(f: FieldInfo) -> st.DataType:
        if f.dtype is datetime:
            return st.LongType()
        if f.element is datetime:
            return st.ArrayType(st.LongType(), True)
        return field_type(f)

    return st.StructType([st.StructField(f.name, wired(f), True) for f in record_fields(cls)])


def _wired(v: Any) -> Any:
    if isinstance(v, datetime):
        return to_ticks(v)
    if is_record_type(type(v)):
        return tuple(to_wire(v))
    return v


def to_wire(payload: Any) -> list[Any]:
    """A payload's field values for ``wire_schema``."""
    out: list[Any] = []
    for f in record_fields(type(payload)):
        v = getattr(payload, f.name)
        if f.element is not None and v is not None:
            v = [_wired(i) for i in v]
        else:
            v = _wired(v)
        out.append(v)
    return out


def wire_columns(cls: type, prefix: str = "") -> list[Any]:
    """A relation's payload columns (named with ``prefix``) in ``wire_schema`` form
    (datetimes as ticks), for ``from_wire`` on the driver."""
    from pyspark.sql import functions as F

    def wired(f: FieldInfo) -> Any:
        col = F.col(f"`{prefix}{f.name}`")
        if f.dtype is datetime:
            return F.unix_micros(col).alias(f"{prefix}{f.name}")
        if f.element is datetime:
            return F.transform(col, F.unix_micros).alias(f"{prefix}{f.name}")
        return col

    return [wired(f) for f in record_fields(cls)]


def driver_frame(spark: SparkSession, leading: list[st.StructField], payload_type: type, rows: list[tuple[Any, ...]]) -> DataFrame:
    """Rows made on the driver as a relation: the ``leading`` columns, then the payload's
    (each row ends with ``to_wire`` of its payload; datetimes become timestamps again)."""
    from pyspark.sql import functions as F

    df = spark.createDataFrame(rows, st.StructType(leading + list(wire_schema(payload_type).fields)))
    for f in record_fields(payload_type):
        if f.dtype is datetime:
            df = df.withColumn(f.name, F.timestamp_micros(F.col(f"`{f.name}`")))
        elif f.element is datetime:
            df = df.withColumn(f.name, F.transform(F.col(f"`{f.name}`"), F.timestamp_micros))
    return df


def from_wire(cls: type, values: Any, naive: bool) -> Any:
    """A payload from values in ``wire_schema`` order (datetimes as ticks), or by field name:
    a nested record read through Arrow (``to_pylist``) is a dict, whose iteration gives its
    keys."""
    fields = record_fields(cls)
    if isinstance(values, Mapping):
        values = [values[f.name] for f in fields]
    args = []
    for f, v in zip(fields, values):
        if v is not None and f.element is not None:
            v = f.dtype(_unwired(f.element, i, naive) for i in v)
        elif v is not None:
            v = _unwired(f.dtype, v, naive)
        args.append(v)
    return cls(*args)


def _unwired(dtype: type, v: Any, naive: bool) -> Any:
    if v is not None and dtype is datetime:
        # A nested record's datetime comes back as one (``wire_schema`` keeps its timestamp type).
        return from_ticks(to_ticks(v) if isinstance(v, datetime) else v, naive)
    if v is not None and is_record_type(dtype):
        return from_wire(dtype, v, naive)
    return v


def column_type(dtype: st.DataType) -> str:
    """The word ``tempo.tables.check_columns`` uses for a Spark column type (the same words
    as for the pyarrow types the in-memory executor reads, so messages agree)."""
    from tempo import tables as t

    for types_, word in (
        ((st.TimestampType, st.TimestampNTZType), t.TIMESTAMP),
        ((st.LongType, st.IntegerType, st.ShortType, st.ByteType), t.INTEGER),
        ((st.DoubleType, st.FloatType), t.FLOAT),
        ((st.DecimalType,), t.DECIMAL),
        ((st.BooleanType,), t.BOOLEAN),
        ((st.StringType, st.VarcharType, st.CharType), t.STRING),
        ((st.DateType,), t.DATE),
        ((st.DayTimeIntervalType,), t.DURATION),
        ((st.StructType,), t.STRUCT),
        ((st.NullType,), t.NULL),
    ):
        if isinstance(dtype, types_):
            return word
    if isinstance(dtype, st.ArrayType):
        return t.list_of(column_type(dtype.elementType))
    return str(dtype.simpleString())


def frame_columns(schema: st.StructType) -> dict[str, str]:
    """A DataFrame's columns as name -> type word."""
    return {f.name: column_type(f.dataType) for f in schema.fields}
