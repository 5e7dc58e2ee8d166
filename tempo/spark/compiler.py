"""The logical plan to native Spark DataFrames: a visitor keyed by node class.

Every relation has the payload columns of its node's record type plus the lifetime
columns ``__tempo_s`` and ``__tempo_e`` (ticks; ``INF`` for an open end). The in-memory
executor releases an operator's output once the operator's CTI passes it; since CTIs are
known up front (``CtiReplay``), each stateful operator here keeps exactly the outputs its
final CTI has released, and the query keeps the events its final output CTI has passed.
Each compile rule below states how its node's semantics (``tempo/plan/nodes.py``) become
a plan.

Below inputs with substreams, an operator keeping the key releases each key's outputs up to
that key's own final CTI (docs/semantics.md 3.10.4). A stateful operator here then keeps
what the latest of them released (``final_bound``): a key's outputs past its own CTI start
at or after it, so no released output downstream depends on them, and the query's output
keeps exactly each key's released events (``output``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from tempo.dispatch import Registry
from tempo.expr.schema import field_names
from tempo.lowering import joins
from tempo.lowering.batches import FIRST
from tempo.lowering import rules
from tempo.lowering.context import Lowering
from tempo.runtime.replay import CtiReplay
from tempo.plan import nodes as p
from tempo.plan.query import Query
from tempo.spark.columns import END as E
from tempo.spark.columns import START as S
from tempo.spark.dialect import SparkDialect
from tempo.spark.columns import EXPRESSIONS, Scope, column, record_columns
from tempo.tables import Span
from tempo.ticks import INF

_RULES: Registry[Compiler, DataFrame] = Registry("Spark", "plan node")
compiles = _RULES.rule
rules.register(_RULES)  # the nodes written once in tempo.lowering


def check_supported(query: Query) -> None:
    """Raise ``UnsupportedError`` if a node or an expression of ``query`` has no rule here:
    called before the CTI replay, which runs the plan on the reference engine and would
    otherwise name that engine rather than this executor."""
    for node in query.nodes:
        _RULES.lookup(node)
        if isinstance(node, p.WindowNode):
            rules.window_kind_rule("Spark", node)
        for e in p.node_expressions(node):
            EXPRESSIONS.lookup(e)


class Compiler(Lowering[DataFrame]):
    """One compilation: the admitted inputs, the CTI replay, and the relations built so far."""

    executor = "Spark"

    def __init__(
        self,
        spark: SparkSession,
        query: Query,
        replay: CtiReplay,
        inputs: dict[str, DataFrame],
        spans: Mapping[str, Callable[[], Span | None]] | None = None,
    ) -> None:
        """``spans``: how to take where each input the driver read lies in time (``Span``)."""
        super().__init__(SparkDialect(self), query, replay, spans)
        self.spark, self.inputs = spark, inputs

    def rule(self, node: p.Node) -> DataFrame:
        built: DataFrame = _RULES(self, node)
        return built


def _payload(node: p.Node) -> list[Column]:
    return [F.col(f"`{n}`") for n in field_names(node.payload_type)]


@compiles(p.SourceNode)
def _source(c: Compiler, node: p.SourceNode) -> DataFrame:
    return c.inputs[node.name]


@compiles(p.EventTimeNode)
def _event_time(c: Compiler, node: p.EventTimeNode) -> DataFrame:
    return c.relation(node.input)


@compiles(p.WhereNode)
def _where(c: Compiler, node: p.WhereNode) -> DataFrame:
    # A null predicate drops the row, as the in-memory executor's falsy test does.
    return c.relation(node.input).filter(column(node.predicate, Scope()))


def _passengers(df: DataFrame) -> list[Column]:
    """``FIRST``, riding along the stateless operators and unions when present (a live query's
    batch computed in bulk keeps each window's groups in first-arrival order)."""
    return [F.col(FIRST)] if FIRST in df.columns else []


@compiles(p.SelectNode)
def _select(c: Compiler, node: p.SelectNode) -> DataFrame:
    df = c.relation(node.input)
    return df.select(F.col(S), F.col(E), *_passengers(df), *record_columns(node.projection, Scope()))


@compiles(p.ExplodeNode)
def _explode(c: Compiler, node: p.ExplodeNode) -> DataFrame:
    """``posexplode`` of the list column (no rows for an empty or null list), each row keeping
    the lifetime; the projection reads the element as ``__item``."""
    df = c.relation(node.input)
    payload = [F.col(f"`{n}`") for n in field_names(node.input.payload_type)]
    rows = df.select(F.col(S), F.col(E), *payload, F.posexplode(column(node.items, Scope())).alias("__pos", "__item"))
    return rows.select(F.col(S), F.col(E), *record_columns(node.projection, Scope()))


def _shift(t: Column, d: int) -> Column:
    """Saturating: infinity stays infinity and nothing passes it."""
    return F.when(t >= INF, F.lit(INF)).otherwise(F.least(t + F.lit(d), F.lit(INF)))


@compiles(p.AlterLifetimeNode)
def _alter(c: Compiler, node: p.AlterLifetimeNode) -> DataFrame:
    df = c.relation(node.input)
    start = _shift(F.col(S), node.shift)
    end = _shift(start, node.duration) if node.duration is not None else _shift(F.col(E), node.shift)
    return df.select(start.alias(S), end.alias(E), *_passengers(df), *_payload(node)).filter(F.col(S) < INF)


@compiles(p.UnionNode)
def _union(c: Compiler, node: p.UnionNode) -> DataFrame:
    cols = [F.col(S), F.col(E), *_payload(node)]
    left, right = c.relation(node.left), c.relation(node.right)
    return left.select(*cols, *_passengers(left)).unionByName(right.select(*cols, *_passengers(right)))


def overlapping_pairs(c: Compiler, node: p.JoinNode, also: Column | None = None) -> DataFrame:
    """The join's overlapping matching pairs meeting ``also`` too, on time buckets where they
    apply (``tempo.lowering.joins.overlapping_pairs``): the live batch's join reads them."""
    return joins.overlapping_pairs(c, node, also)
