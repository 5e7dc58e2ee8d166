"""The Spark scan's period of a time-span CTI generation (``tempo.spark.ingress.rows``): an
input whose CTIs come every ``period`` puts each event in period ``start // period``, as the
reference ingress does (``tempo.runtime.ingress``), for every start. Spark's ``/`` divides in
doubles, exact only up to 2**53 ticks (the year 2255): the period came out one too high just
below a period's end for later starts, so the scan would generate a CTI where the reference
does not. It divides in integers (``tempo.plan.windows.floor_div``, the one formula)."""

from __future__ import annotations

import types
from typing import Any

import pytest

pytestmark = pytest.mark.spark


def test_the_spark_scans_period_of_each_start_is_the_references_floor_division(spark_session: Any) -> None:
    from pyspark.sql import functions as F

    from tempo.runtime.ingress import POINT
    from tempo.spark.columns import START as S
    from tempo.spark.ingress.rows import KIND, period_column

    period = 3_000_000  # 3 s
    # Around a period's end: before 1970 (negative ticks), now, past 2**53 (the year 2255), near the year 6537.
    bases = [-(2**57), -5 * period, 0, 1_800_000_000_000_000, 2**53 + 2**52, 2**57]
    starts = [base // period * period + d for base in bases for d in range(-3, 4)]
    frame = types.SimpleNamespace(policy=types.SimpleNamespace(period=period))
    column = period_column(frame)  # type: ignore[arg-type]
    assert column is not None
    rows = spark_session.createDataFrame([(s, POINT) for s in starts], f"`{S}` long, `{KIND}` int")
    got = {r[0]: r[1] for r in rows.select(F.col(S), column).collect()}
    assert got == {s: s // period for s in starts}
