"""Sources only Spark reads as they are (a DataFrame, a table of the Spark catalog), and how
the Spark executor reads every table source into a DataFrame.

``tempo.sources`` re-exports ``DataFrameSource`` and ``SparkTableSource`` lazily, so that
``import tempo`` does not import pyspark.
"""

from __future__ import annotations

import os
from typing import Any, TypeVar

import pyarrow.types as pa_types
from pyspark.sql import DataFrame, SparkSession

from tempo.errors import InputRule, InputSchemaError, UnsupportedError
from tempo.spark.session import session_setting
from tempo.sources import ArrowSource, CsvSource, DeltaSource, JsonSource, ParquetSource, TableSource, is_uri

T = TypeVar("T")


class SharedScan:
    """One DataFrame that several inputs are parts of, each the rows holding its own value of
    ``column`` (a Kafka topic's partitions). A live query reads it once a micro-batch and
    splits its rows by that column: a reader per input would each read the whole DataFrame
    when its source cannot push the filter down (Spark's Kafka source cannot), and readers
    asked for their offsets one by one see a transaction's records at different points."""

    def __init__(self, df: Any, column: str) -> None:
        self.df = df
        self.column = column

    def __repr__(self) -> str:
        return f"SharedScan(by {self.column!r})"


class DataFrameSource(TableSource[T]):
    """Rows of a Spark DataFrame (the in-memory executor collects it through Arrow).

    ``shared``: the DataFrame is the part of a ``SharedScan`` whose column holds the given
    value (``df`` is that part, so any executor may read it alone); a live query reads the
    inputs of one shared scan together."""

    def __init__(
        self, df: Any, payload_type: type[T], start: str | None, *, shared: tuple[SharedScan, Any] | None = None, **columns: Any
    ) -> None:
        super().__init__(payload_type, start, **columns)
        self.df = df
        self.shared = shared

    def arrow_table(self) -> Any:
        return self.df.toArrow()

    def __repr__(self) -> str:
        return f"DataFrameSource({self.payload_type.__name__})"


class SparkTableSource(TableSource[T]):
    """Rows of a table in the Spark catalog."""

    def __init__(self, name: str, payload_type: type[T], start: str | None, **columns: Any) -> None:
        super().__init__(payload_type, start, **columns)
        self.name = name

    def arrow_table(self) -> Any:
        raise UnsupportedError("in-memory", repr(self), "it is a table of the Spark catalog: only the Spark executor can read it")

    def __repr__(self) -> str:
        return f"SparkTableSource({self.name!r}, {self.payload_type.__name__})"


def spark_path(path: str) -> str:
    """``path`` as Spark is given it: a local path made absolute against Python's working
    directory, where tempo's own checks read it. Spark would resolve a relative path against
    its JVM's working directory, which is where the JVM started, not where the script has
    moved since. A URI is Hadoop's to resolve."""
    return path if is_uri(path) else os.path.abspath(path)


def read_table(spark: SparkSession, input_name: str, source: TableSource[Any]) -> DataFrame:
    """The rows of a table source as Spark reads them (files and catalog tables by Spark's
    own readers, Arrow tables through ``createDataFrame``)."""
    source.check_readable(input_name)
    if isinstance(source, ParquetSource):
        if any(pa_types.is_timestamp(t) and t.unit == "ns" for t in arrow_types(source).values()):
            # Spark has no nanosecond timestamp: it refuses to infer the schema of a Parquet
            # TIMESTAMP(NANOS) column (PARQUET_TYPE_ILLEGAL) unless told to read it as the
            # long it is stored as. Only the inference needs the setting (the scan reads the
            # long as asked), so it is set for this read alone; ``table_columns`` reads the
            # longs as nanoseconds, exactly (``arrow_types`` says which columns they are).
            with session_setting(spark, "spark.sql.legacy.parquet.nanosAsLong", "true"):
                return spark.read.parquet(spark_path(source.path))
        return spark.read.parquet(spark_path(source.path))
    if isinstance(source, CsvSource):
        return spark.read.option("header", True).option("inferSchema", True).csv(spark_path(source.path))
    if isinstance(source, JsonSource):
        return spark.read.schema(json_spark_schema(source)).json(spark_path(source.path))
    if isinstance(source, DeltaSource):
        reader = spark.read.format("delta")
        if source.version is not None:
            reader = reader.option("versionAsOf", source.version)
        return reader.load(spark_path(source.path))
    if isinstance(source, DataFrameSource):
        df: DataFrame = source.df
        return df
    if isinstance(source, SparkTableSource):
        if not spark.catalog.tableExists(source.name):
            raise InputSchemaError(input_name, f"{source!r} names no table or view of the Spark catalog", InputRule.SOURCE_MISSING)
        return spark.table(source.name)
    if isinstance(source, ArrowSource):
        # Nanosecond timestamps and durations go as the longs they hold (Spark's Arrow
        # conversion would cut or refuse a value below a microsecond): ``table_columns`` reads
        # them exactly, as it reads a Parquet file's.
        table = source.table
        for i, f in enumerate(table.schema):
            if (pa_types.is_timestamp(f.type) or pa_types.is_duration(f.type)) and f.type.unit == "ns":
                import pyarrow as pa

                table = table.set_column(i, f.name, table.column(i).cast(pa.int64()))
        return spark.createDataFrame(table)
    raise UnsupportedError(
        "Spark",
        repr(source),
        "it is not a table source the Spark executor knows (Parquet, CSV, JSON, Delta, Arrow, DataFrame, catalog table)",
    )


def arrow_types(source: TableSource[Any]) -> dict[str, Any]:
    """The Arrow types of a Parquet or Arrow source's columns, as pyarrow reads them (a
    Parquet file's footer, with the Arrow schema pyarrow writes there), or empty for other
    sources and files the driver cannot open: what Spark reads as a long but is a
    nanosecond timestamp or a duration (of any unit) is read as one (``table_columns``)."""
    if isinstance(source, ArrowSource):
        return {f.name: f.type for f in source.table.schema}
    if not isinstance(source, ParquetSource):
        return {}
    try:
        import pyarrow.parquet as pq

        return {f.name: f.type for f in pq.ParquetDataset(source.path).schema}
    except Exception:  # a path pyarrow cannot open: Spark's own types stand
        return {}


def json_spark_schema(source: JsonSource[Any]) -> Any:
    """The Spark schema of a JSON source's rows: its ``json_schema``, so that Spark reads
    the same columns with the same types as the in-memory executor."""
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_arrow_schema(source.json_schema())
