"""Sources only Spark reads as they are (a DataFrame, a table of the Spark catalog), and how
the Spark executor reads every table source into a DataFrame.

``tempo.sources`` re-exports ``DataFrameSource`` and ``SparkTableSource`` lazily, so that
``import tempo`` does not import pyspark.
"""

from __future__ import annotations

from typing import Any, TypeVar

from pyspark.sql import DataFrame, SparkSession

from tempo.errors import InputSchemaError, UnsupportedError
from tempo.sources import ArrowSource, CsvSource, JsonSource, ParquetSource, TableSource

T = TypeVar("T")


class DataFrameSource(TableSource[T]):
    """Rows of a Spark DataFrame (the in-memory executor collects it through Arrow)."""

    def __init__(self, df: Any, payload_type: type[T], start: str | None, **columns: Any) -> None:
        super().__init__(payload_type, start, **columns)
        self.df = df

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


def read_table(spark: SparkSession, input_name: str, source: TableSource[Any]) -> DataFrame:
    """The rows of a table source as Spark reads them (files and catalog tables by Spark's
    own readers, Arrow tables through ``createDataFrame``)."""
    source.check_readable(input_name)
    if isinstance(source, ParquetSource):
        return spark.read.parquet(source.path)
    if isinstance(source, CsvSource):
        return spark.read.option("header", True).option("inferSchema", True).csv(source.path)
    if isinstance(source, JsonSource):
        return spark.read.schema(json_spark_schema(source)).json(source.path)
    if isinstance(source, DataFrameSource):
        df: DataFrame = source.df
        return df
    if isinstance(source, SparkTableSource):
        if not spark.catalog.tableExists(source.name):
            raise InputSchemaError(input_name, f"{source!r} names no table or view of the Spark catalog")
        return spark.table(source.name)
    if isinstance(source, ArrowSource):
        return spark.createDataFrame(source.table)
    raise UnsupportedError("Spark", repr(source), "it is not a table source the Spark executor knows (Parquet, CSV, JSON, Arrow, DataFrame, catalog table)")


def json_spark_schema(source: JsonSource[Any]) -> Any:
    """The Spark schema of a JSON source's rows: its ``json_schema``, so that Spark reads
    the same columns with the same types as the in-memory executor."""
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_arrow_schema(source.json_schema())
