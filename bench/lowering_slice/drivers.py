"""Each approach as one call from a tempo stream to its output (the released events, projected
as ``VectorisedExecutor.to_polars`` / ``SparkExecutor.to_dataframe`` give them), all on
tempo's own ingress (inputs read and admitted, the CTI replay, the spans): only the
lowering of the plan differs.

Spark calls come in two steps, ``prepare`` (tempo's ingress: the same for every approach)
and ``lower`` (the plan built on the driver, no action), so the plan-build time is the
lowering's alone.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tempo.api.stream import Stream
from tempo.plan.query import Query
from tempo.tables import Span


def _spans_of(spans: dict[str, Span]) -> dict[str, Callable[[], Span | None]]:
    return {n: (lambda s=s: s) for n, s in spans.items()}


# ---- polars -------------------------------------------------------------------------------


def polars_ingress(stream: Stream[Any]) -> tuple[Query, Any, dict[str, Any], dict[str, Any]]:
    from tempo.runtime.ingress import TimestampMode
    from tempo.vectorised.compiler import check_supported
    from tempo.vectorised.ingress import admit_inputs

    query = Query.build(stream.node)
    check_supported(query)
    replay, inputs, _, spans = admit_inputs(query, TimestampMode())
    return query, replay, inputs, spans


def tempo_polars(stream: Stream[Any]) -> Any:
    from tempo.vectorised import VectorisedExecutor

    return VectorisedExecutor().to_polars(stream)


def dialect_polars(stream: Stream[Any]) -> Any:
    from bench.lowering_slice.dialect import PolarsDialect
    from bench.lowering_slice.rules import Lowering

    query, replay, inputs, spans = polars_ingress(stream)
    return Lowering(PolarsDialect(), query, replay, inputs, spans).output().collect()


def ibis_polars(stream: Stream[Any]) -> Any:
    import ibis

    from bench.lowering_slice import ibis_slice

    query, replay, inputs, spans = polars_ingress(stream)
    con = ibis.polars.connect()
    tables = {}
    for name, lf in inputs.items():
        con.create_table(f"tempo_{name}", lf, overwrite=True)
        tables[name] = con.table(f"tempo_{name}")
    expr = ibis_slice.Lowering(query, replay, tables, spans).output()
    return con.to_polars(expr)


# ---- Spark --------------------------------------------------------------------------------


class SparkPrepared:
    """tempo's Spark ingress for one stream (``SparkExecutor._prepare``, and the input check
    ``to_dataframe`` makes before it builds the plan)."""

    def __init__(self, spark: Any, stream: Stream[Any]) -> None:
        from tempo.spark import SparkExecutor

        self.spark, self.stream = spark, stream
        self.executor = SparkExecutor(spark)
        self.prepared = self.executor._prepare(stream)
        if any(a.outcome is not None for a in self.prepared.admitted.values()):
            self.executor._finish(self.prepared, self.executor._outcomes(self.prepared)[1], with_items=False)


def tempo_spark_lower(p: SparkPrepared) -> Any:
    """Today's compiler on the prepared inputs, with ``to_dataframe``'s final projection."""
    from tempo.expr.schema import record_fields
    from tempo.result import END_COLUMN, START_COLUMN
    from tempo.spark.columns import END as E
    from tempo.spark.columns import START as S
    from tempo.spark.columns import quoted
    from tempo.spark.compiler import Compiler

    c = p.prepared.compiler
    compiler = Compiler(p.spark, c.query, c.replay, c.inputs, c.spans)  # afresh: nothing built yet
    names = [f.name for f in record_fields(p.stream.payload_type)]
    return compiler.output().selectExpr(
        f"timestamp_micros({S}) AS {quoted(START_COLUMN)}", f"timestamp_micros({E}) AS {quoted(END_COLUMN)}", *map(quoted, names)
    )


def dialect_spark_lower(p: SparkPrepared) -> Any:
    from bench.lowering_slice.dialect import SparkDialect
    from bench.lowering_slice.rules import Lowering

    c = p.prepared.compiler
    return Lowering(SparkDialect(), c.query, c.replay, c.inputs, _spans_of(c.spans)).output()


class IbisSpark:
    """ibis's PySpark backend on the session, with tempo's admitted inputs as temporary views."""

    def __init__(self, spark: Any) -> None:
        import ibis

        self.con = ibis.pyspark.connect(spark)

    def lower(self, p: SparkPrepared) -> Any:
        """The ibis expression compiled to Spark SQL, and that SQL as a DataFrame (no action)."""
        from bench.lowering_slice import ibis_slice

        c = p.prepared.compiler
        tables = {}
        for name, df in c.inputs.items():
            view = f"tempo_{name}_{id(df)}"
            df.createOrReplaceTempView(view)
            tables[name] = self.con.table(view)
        expr = ibis_slice.Lowering(c.query, c.replay, tables, _spans_of(c.spans), backend="pyspark").output()
        return p.spark.sql(self.con.compile(expr))
