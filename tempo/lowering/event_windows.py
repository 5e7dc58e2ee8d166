"""The windows cut by the events, written once over ``Dialect``: sessions, count windows and
snapshots. Each rule builds one row per window its input's final CTI completed, with its
bounds ``__ws``/``__we`` (and ``__lo``/``__hi`` where a stamp reads them), which
``tempo.lowering.windows.stamped`` stamps. The semantics and CTI rules are the specs'
(``SessionWindow``, ``CountWindow``, ``SnapshotWindow`` in ``tempo/plan/windows.py``); the
reference is ``tempo.runtime.event_windows`` (``Sessions``, ``CountWindows``, ``Snapshots``)."""

from __future__ import annotations

from tempo.expr.schema import field_names
from tempo.lowering.context import START as S
from tempo.lowering.context import Lowering, R
from tempo.lowering.dialect import Expr, WindowFunction, Windowed
from tempo.lowering.windows import ended, stamped
from tempo.lowering.rules import lowers_window
from tempo.plan import nodes as p
from tempo.plan.windows import CountWindow, SessionWindow, SnapshotWindow
from tempo.ticks import INF


@lowers_window(SessionWindow)
def session(c: Lowering[R], node: p.WindowNode) -> R:
    """Activities as gaps and islands: in start order per group, an event opens an activity
    when it starts at or after the latest last tick before it plus the gap (rows of one start
    never split: each is within the gap of the other's last tick); the activity id is the
    running count of openings. Without ``max_duration`` an activity is a session; with it,
    each piece of an activity between two cuts of its grid holding a start is one
    (``SessionWindow.piece``). The final CTI keeps the sessions ending at or before it
    (``tempo.runtime.event_windows.Sessions``)."""
    d, spec = c.d, node.spec
    assert isinstance(spec, SessionWindow)
    df = c.relation(node.input)
    cti = c.final_cti(node.input)
    end = ended(c, node, df, cti)
    infinity, gap = d.lit(INF), d.lit(spec.gap)
    keys = d.key_names(node)
    s, last, before = d.col("__s"), d.col("__last"), d.col("__before")
    rows = d.select(
        df, [d.col(S).alias("__s"), d.when(end >= infinity, infinity, end - d.lit(1)).alias("__last"), *d.keys(node), *d.values(node)]
    )
    # Over points in start order, the latest last tick before a row is the previous row's start.
    latest = WindowFunction.PREVIOUS if c.query.longest_lifetime(node.input) == 1 else WindowFunction.MAX_BEFORE
    opens = d.when(d.is_null(before) | ((before < infinity) & (s >= before + gap)), d.lit(1), d.lit(0))
    rows = d.over(
        d.in_order(rows, ["__s"]), keys, ["__s"], [Windowed("__before", latest, last), Windowed("__act", WindowFunction.SUM_SO_FAR, opens)]
    )

    def until(latest_last: Expr) -> Expr:
        return d.when(latest_last >= infinity, infinity, latest_last + gap)

    if spec.max_duration is None:  # the bounds are aggregates of the activity
        sessions: R = d.grouped(node, rows, [*keys, "__act"], [d.min(s).alias("__ws"), d.max(last).alias("__l")])
        sessions = d.with_columns(sessions, [until(d.col("__l")).alias("__we")])
    else:
        duration = spec.max_duration
        rows = d.over(rows, [*keys, "__act"], [], [Windowed("__first", WindowFunction.MIN, s), Windowed("__l", WindowFunction.MAX, last)])
        first = d.col("__first")
        cut = spec.first_cut(first, d.floor_div)
        later = s - d.floor_mod(s - cut, duration)  # the cut at or before a start past the first cut
        rows = d.with_columns(rows, [d.when(s < cut, first, later).alias("__ws")])
        rows = d.with_columns(rows, [d.least(until(d.col("__l")), d.when(s < cut, cut, d.col("__ws") + d.lit(duration))).alias("__we")])
        # Every row of a piece has its end.
        sessions = d.grouped(node, rows, [*keys, "__act", "__ws"], [d.min(d.col("__we")).alias("__we")])
    if cti < INF:
        sessions = d.filter(sessions, d.col("__we") <= d.lit(cti))
    return stamped(c, node, sessions, strict=False, done=d.col("__we"))


@lowers_window(CountWindow)
def count_window(c: Lowering[R], node: p.WindowNode) -> R:
    """Ranks by (start, payload fields, nulls first) among the events its final CTI
    committed (``by="starts"``: the distinct starts, a dense rank): they are all known, and
    rank before any other; window k holds ranks [k*slide, k*slide + size), kept when full. Its bounds are its first start and just after
    its last, which the first CTI after it completes (``tempo.runtime.event_windows.CountWindows``)."""
    d, spec = c.d, node.spec
    assert isinstance(spec, CountWindow)
    df = c.relation(node.input)
    cti = c.final_cti(node.input)
    if cti < INF:
        df = d.filter(df, d.col(S) < d.lit(cti))
    payload = [(f"__o{i}", n) for i, n in enumerate(field_names(node.input.payload_type))]
    keys = d.key_names(node)
    rows = d.select(df, [d.col(S).alias("__s"), *d.keys(node), *d.values(node), *[d.field(n).alias(o) for o, n in payload]])
    order = ["__s", *[o for o, _ in payload]]
    rows = d.in_order(rows, order)
    if spec.by_starts:  # a start's rank: how many distinct starts come before it (a dense rank)
        rows = d.over(rows, keys, order, [Windowed("__p", WindowFunction.PREVIOUS, d.col("__s"))])
        first = d.when(d.is_null(d.col("__p")) | (d.col("__p") != d.col("__s")), d.lit(1), d.lit(0))
        rows = d.over(rows, keys, order, [Windowed("__c", WindowFunction.SUM_SO_FAR, first)])
        rows = d.with_columns(rows, [(d.col("__c") - d.lit(1)).alias("__r")])
    else:
        rows = d.over(rows, keys, order, [Windowed("__r", WindowFunction.ROW_NUMBER)])
    size, slide = spec.size, spec.slide
    rank, kept = d.col("__r"), ["__s", "__r", *keys, *d.value_names(node)]
    if slide == size:  # tumbling: each rank is in one window
        windows = d.select(rows, [d.floor_div(rank, slide).alias("__k"), *kept])
    else:
        lo = d.greatest(d.lit(0), d.floor_div(rank - d.lit(size), slide) + d.lit(1))
        hi = d.floor_div(rank, slide)
        windows = d.explode_range(d.filter(rows, lo <= hi), "__k", lo, hi, kept)
    starts = d.col("__s")
    # Full: its ranks run from its first to its last (ranks are dense, so all between are there).
    bounds = [d.min(rank).alias("__rlo"), d.max(rank).alias("__rhi"), d.min(starts).alias("__ws"), d.max(starts).alias("__hi")]
    full_span = d.col("__rhi") - d.col("__rlo") == d.lit(size - 1)
    whole = d.filter(d.grouped(node, windows, [*keys, "__k"], bounds), full_span & (d.col("__rlo") == d.col("__k") * d.lit(slide)))
    full: R = d.with_columns(whole, [(d.col("__hi") + d.lit(1)).alias("__we")])
    return stamped(c, node, full, strict=True, done=d.col("__hi"))


@lowers_window(SnapshotWindow)
def snapshot(c: Lowering[R], node: p.WindowNode) -> R:
    """Per group, the distinct endpoints (starts and finite ends) each with the next one give
    the windows ``[p, q)``; the events alive at ``p`` join them. A window is kept once the
    final CTI is past ``p``; its end counts once the CTI is past ``q`` (else it is open, as the
    reference's start edge not yet ended: ``tempo.runtime.event_windows.Snapshots``)."""
    d = c.d
    df = c.relation(node.input)
    cti = c.final_cti(node.input)
    end = ended(c, node, df, cti)
    keys = d.key_names(node)
    infinity, point, q = d.lit(INF), d.col("__p"), d.col("__q")
    events = d.select(df, [d.col(S).alias("__s"), end.alias("__e"), *d.keys(node), *d.values(node)])
    starts = d.select(events, [*keys, d.col("__s").alias("__p")])
    ends = d.select(d.filter(events, d.col("__e") < infinity), [*keys, d.col("__e").alias("__p")])
    points = d.in_order(d.distinct(d.union(starts, ends)), ["__p"])
    points = d.over(points, keys, ["__p"], [Windowed("__q", WindowFunction.NEXT, point)])
    if cti < INF:
        points = d.filter(points, point < d.lit(cti))
    alive = d.join_on_keys(points, events, keys, (d.col("__s") <= point) & (d.col("__e") > point))
    grouped = d.grouped(node, alive, [*keys, "__p", "__q"], [])
    final_end = ~d.is_null(q) & (q < d.lit(cti))  # an end at the CTI may come after it
    if node.ends_known:
        grouped = d.filter(grouped, final_end)
    bounded: R = d.with_columns(
        grouped, [point.alias("__ws"), d.when(final_end, q, infinity).alias("__we"), point.alias("__hi"), point.alias("__lo")]
    )
    return stamped(c, node, bounded, strict=True, done=d.col("__we"))
