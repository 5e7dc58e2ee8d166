"""Payloads in wire form (``tempo.spark.types``): a result of the cluster engine's keys comes
back to the driver through Arrow, where a nested record (``top_k``'s ranked events) is a
dict; through Spark's rows it is a tuple. Both give the payload back."""

from __future__ import annotations

import attrs
import pytest

pytest.importorskip("pyspark")

from tempo.plan.ranked import ranked_classes  # noqa: E402
from tempo.spark.types import from_wire, to_wire, wire_schema  # noqa: E402


@attrs.frozen
class Reading:
    key: int
    value: float
    label: str | None


def test_a_nested_record_comes_back_from_arrow_and_from_rows() -> None:
    import pyarrow as pa

    rank, top = ranked_classes(Reading)
    payload = top(ranked=[rank(1, Reading(7, 0.5, "a")), rank(2, Reading(8, -1.25, None))])
    wired = to_wire(payload)
    as_rows = from_wire(top, wired, naive=False)
    from pyspark.sql.pandas.types import to_arrow_schema

    schema = to_arrow_schema(wire_schema(top))  # the columns a DataFrame's toArrow gives
    table = pa.Table.from_arrays([pa.array([value], type=f.type) for f, value in zip(schema, wired)], schema=schema)
    assert isinstance(table.column(0).to_pylist()[0][0], dict)  # a nested record, as Arrow reads it back
    as_arrow = from_wire(top, [table.column(name).to_pylist()[0] for name in table.column_names], naive=False)
    assert as_rows == payload == as_arrow
