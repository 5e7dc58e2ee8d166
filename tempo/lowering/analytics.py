"""The analytic node written once over ``Dialect``. Its semantics and CTI rule are
``AnalyticNode``'s (``tempo/plan/nodes.py``); the reference is
``tempo.runtime.analytics.Analytic``."""

from __future__ import annotations

from tempo.expr import nodes as x
from tempo.expr.schema import field_names
from tempo.lowering.context import END as E
from tempo.lowering.context import START as S
from tempo.lowering.context import Lowering, R
from tempo.lowering.dialect import WindowFunction, Windowed
from tempo.lowering.rules import lowers
from tempo.plan import nodes as p
from tempo.ticks import INF


@lowers(p.AnalyticNode)
def analytic(c: Lowering[R], node: p.AnalyticNode) -> R:
    """Each group in (start, payload fields, nulls first) order: a running aggregate over the
    rows up to each row's peers (the rows equal to it in start and payload), themselves
    included; the previous value that of the last row before the peers, when it started less
    than the limit before. Only the events the final input CTI released are kept, as the
    operator passes on no other (``order_by_time`` is those rows as they are)."""
    d = c.d
    df: R = c.relation(node.input)
    cti = c.final_cti(node.input)
    if cti < INF:
        df = d.filter(df, d.col(S) < d.lit(cti))
    if not node.analytics and isinstance(node.projection, x.Input):
        return df
    names = field_names(node.input.payload_type)
    by, order = d.key_names(node), [S, *names]
    rows = d.select(df, [d.col(S), d.col(E), *[d.field(n) for n in names], *d.keys(node)])
    previous: list[Windowed] = []  # together first: Spark takes a run of them in one window
    running: list[Windowed] = []
    for i, a in enumerate(node.analytics):
        if isinstance(a, p.Aggregate):
            running.append(Windowed(f"__agg{i}", WindowFunction.RUNNING, d.running_argument(a, node.input.payload_type), a))
            continue
        # The value on the row before is null where there is none: only a limit reads its start.
        previous.append(Windowed(f"__agg{i}" if a.limit is None else f"__pv{i}", WindowFunction.BEFORE_PEERS, d.expression(a.arg)))
        if a.limit is not None:
            previous.append(Windowed(f"__ps{i}", WindowFunction.BEFORE_PEERS, d.col(S)))
    rows = d.over(d.in_order(rows, [*by, *order]), by, order, previous + running)
    limited = []
    for i, a in enumerate(node.analytics):
        if isinstance(a, p.Previous) and a.limit is not None:
            start = d.col(f"__ps{i}")
            near = ~d.is_null(start) & (d.col(S) - start < d.lit(a.limit))
            limited.append(d.when(near, d.col(f"__pv{i}"), d.lit(None)).alias(f"__agg{i}"))
    if limited:
        rows = d.with_columns(rows, limited)
    out: R = d.select(rows, [d.col(S), d.col(E), *d.projection(node)])
    return out
