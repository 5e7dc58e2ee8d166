"""The analytic node written once over ``Dialect``. Its semantics and CTI rule are
``AnalyticNode``'s (``tempo/plan/nodes.py``); the reference is
``tempo.runtime.analytics.Analytic``."""

from __future__ import annotations

from tempo.expr import nodes as x
from tempo.expr.schema import field_names
from tempo.lowering.context import END as E
from tempo.lowering.context import START as S
from tempo.lowering.context import Lowering, R
from tempo.lowering.dialect import Dialect, WindowFunction, Windowed
from tempo.lowering.rules import lowers
from tempo.plan import nodes as p
from tempo.ticks import INF


@lowers(p.AnalyticNode)
def analytic(c: Lowering[R], node: p.AnalyticNode) -> R:
    """Each group in (start, payload fields, nulls first) order: a running aggregate over the
    rows up to each row's peers (the rows equal to it in start and payload), themselves
    included; a plain previous value that of the last row before the peers, when it started
    less than the limit before (``offsets_back`` for the others). Only the events the final
    input CTI released are kept, as the operator passes on no other (``order_by_time`` is
    those rows as they are)."""
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
        if not a.is_plain:
            continue
        # The value on the row before is null where there is none: only a limit reads its start.
        previous.append(Windowed(f"__agg{i}" if a.limit is None else f"__pv{i}", WindowFunction.BEFORE_PEERS, d.expression(a.arg)))
        if a.limit is not None:
            previous.append(Windowed(f"__ps{i}", WindowFunction.BEFORE_PEERS, d.col(S)))
    rows = d.over(d.in_order(rows, [*by, *order]), by, order, previous + running)
    general = [(i, a) for i, a in enumerate(node.analytics) if isinstance(a, p.Previous) and not a.is_plain]
    if general:
        columns = [S, E, *names, *by, *(w.name for w in previous + running)]
        rows = offsets_back(d, rows, columns, by, order, general)
    limited = []
    for i, a in enumerate(node.analytics):
        if isinstance(a, p.Previous) and a.is_plain and a.limit is not None:
            start = d.col(f"__ps{i}")
            near = ~d.is_null(start) & (d.col(S) - start < d.lit(a.limit))
            limited.append(d.when(near, d.col(f"__pv{i}"), d.lit(None)).alias(f"__agg{i}"))
    if limited:
        rows = d.with_columns(rows, limited)
    out: R = d.select(rows, [d.col(S), d.col(E), *d.projection(node)])
    return out


def offsets_back(d: Dialect, rows: R, columns: list[str], by: list[str], order: list[str], previous: list[tuple[int, p.Previous]]) -> R:
    """The previous values with an offset, a condition or a default (``__agg<i>``), by
    numbering the events that count: per group in order, an event's number among them is
    how many count up to it (a running sum), so the events before a row's peers number
    ``n``, the count at the last row before them (which the peers' order cannot change), and
    the ``offset``-th back is the one numbered ``n - offset + 1``: a join of the rows on the
    group key and that number to the counting events, each numbered once. Peers count one
    by one and are equal, so whichever of them holds a number, its value is the same. A row
    with ``n < offset`` has no such event (the default); the join's rows come back in no
    order, which only the final projection reads."""
    base = rows
    for i, a in previous:
        counts = d.lit(True) if a.when is None else d.coalesce(d.expression(a.when), d.lit(False))
        base = d.with_columns(base, [counts.alias(f"__pw{i}")])
        base = d.over(base, by, order, [Windowed(f"__pc{i}", WindowFunction.SUM_SO_FAR, d.when(d.col(f"__pw{i}"), d.lit(1), d.lit(0)))])
        base = d.over(base, by, order, [Windowed(f"__pb{i}", WindowFunction.BEFORE_PEERS, d.col(f"__pc{i}"))])
        target = d.coalesce(d.col(f"__pb{i}"), d.lit(0)) - d.lit(a.offset - 1)
        base = d.with_columns(base, [target.alias(f"__pt{i}")])
    kept = [*columns, *(f"__pt{i}" for i, _ in previous)]
    out: R = d.select(base, kept)
    for i, a in previous:
        found = d.select(
            d.filter(base, d.col(f"__pw{i}")),
            [
                *[d.col(k) for k in by],
                d.col(f"__pc{i}").alias(f"__pt{i}"),
                d.expression(a.arg).alias(f"__cv{i}"),
                d.col(S).alias(f"__cs{i}"),
            ],
        )
        ahead = d.filter(out, d.col(f"__pt{i}") >= d.lit(1))
        matched = d.join_on_keys(ahead, found, [*by, f"__pt{i}"], d.lit(True))
        out = d.union(d.select(matched, [*kept, f"__cv{i}", f"__cs{i}"]), d.filter(out, d.col(f"__pt{i}") < d.lit(1)))
        start = d.col(f"__cs{i}")
        near = ~d.is_null(start) if a.limit is None else ~d.is_null(start) & (d.col(S) - start < d.lit(a.limit))
        default = d.lit(None) if a.default is None else d.expression(a.default)
        out = d.with_columns(out, [d.when(near, d.col(f"__cv{i}"), default).alias(f"__agg{i}")])
        kept += [f"__agg{i}"]
        out = d.select(out, kept)
    return out
