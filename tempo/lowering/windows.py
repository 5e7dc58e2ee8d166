"""The window rules of the DataFrame backends, written once over ``Dialect``: hopping and
tumbling windows (each event in the windows its lifetime overlaps that its final input CTI
completed, or by panes), the end of open lifetimes at the CTI at infinity, and the result
stamps. The semantics and CTI rule are ``WindowNode``'s (``tempo/plan/nodes.py``); the
reference is ``tempo.runtime.windows.Window`` and ``stamp``."""

from __future__ import annotations

import functools
import math
from typing import Any

from tempo.lowering import physical
from tempo.lowering.context import END as E
from tempo.lowering.context import START as S
from tempo.lowering.context import Lowering, R
from tempo.lowering.dialect import Dialect, Expr, PaneMerge, Relation
from tempo.lowering.rules import lowers, lowers_window, window_kind_rule
from tempo.plan import nodes as p
from tempo.plan.nodes import AggregateKind as K
from tempo.plan.windows import HoppingWindow, WindowTimestamp
from tempo.ticks import INF, NEG_INF


def ended(c: Lowering[Any], node: p.WindowNode, df: Relation, cti: int) -> Expr:
    """The end column, with open lifetimes ended on the CTI at infinity just after the latest
    finite time the operator knows of: its latest event time, or just before its last finite
    CTI (an event open at that CTI is alive just before it); for the kinds cut by the events,
    the CTI itself (``tempo.runtime.event_windows``: a window ending at that CTI would be
    stamped before it)."""
    d = c.d
    end = d.col(E)
    if cti < INF or c.query.longest_lifetime(node.input) is not None:
        return end
    finite = [t for t in c.replay.ctis_of(node.input) if t < INF]
    last_cti = (finite[-1] - (1 if isinstance(node.spec, HoppingWindow) else 0)) if finite else None
    latest_start, latest_end = d.scalars(df, [d.max(d.col(S)), d.max(d.when(end < d.lit(INF), end, d.lit(None)))])
    horizon = max(v for v in (latest_start, latest_end, last_cti, NEG_INF) if v is not None)
    return d.when(end >= d.lit(INF), d.lit(horizon + 1), end)


@lowers(p.WindowNode)
def window(c: Lowering[R], node: p.WindowNode) -> R:
    """The released results of a window node: its kind's rule (``window_kind_rule``), or no rows
    when its input forwards no CTI."""
    rule = window_kind_rule(c.executor, node)
    if c.final_bound(node.input) <= NEG_INF:
        c.plan(node, "no results (its input forwards no CTI)")
        empty: R = c.d.no_rows(c.relation(node.input), node.payload_type)
        return empty
    built: R = rule(c, node)
    return built


@lowers_window(HoppingWindow)
def hopping(c: Lowering[R], node: p.WindowNode) -> R:
    """Each event joins the windows its lifetime overlaps that its final input CTI completed.

    Windows are numbered by the spec; an event ``[s, e)`` overlaps windows ``k_lo..k_hi``. A
    finite final CTI completes windows up to ``last_complete``; on the CTI at infinity every
    window is complete. How each event finds its windows is ``tempo.lowering.physical``'s
    ``window_plan``: the one window it reaches, by panes (``by_panes``), or every window it
    overlaps, exploded.
    """
    d, spec = c.d, node.spec
    assert isinstance(spec, HoppingWindow)
    df = c.relation(node.input)
    cti = c.final_bound(node.input)
    size, hop = spec.size, spec.hop
    end = ended(c, node, df, cti)
    k_hi = spec.last_window(end if cti >= INF else d.least(end, d.lit(INF)), d.floor_div)
    if cti < INF:
        k_hi = d.least(k_hi, d.lit(spec.last_complete(cti)))
    k_lo = spec.first_window(d.col(S), d.floor_div)
    keys, by = d.keys(node), d.key_names(node)
    longest = c.query.longest_lifetime(node.input)
    starts = [d.col(S).alias("__s")] if node.timestamp in (WindowTimestamp.LATEST, WindowTimestamp.EARLIEST) else []
    merges = functools.cache(lambda: pane_merges(d, node))  # built only if the plan asks
    plan = physical.window_plan(c.query, node, lambda: merges() is not None)
    c.plan(node, physical.describe_window_plan(plan, node))
    if plan is physical.WindowPlan.PANES:
        panes = merges()
        assert panes is not None
        grouped = by_panes(c, node, df, cti, keys, starts, panes)
    else:
        if plan is physical.WindowPlan.ONE_WINDOW:
            exploded = d.select(df, [k_lo.alias("__k"), *keys, *d.values(node), *starts])
            if cti < INF:
                exploded = d.filter(exploded, d.col("__k") <= d.lit(spec.last_complete(cti)))
        else:
            spans = d.select(df, [k_lo.alias("__klo"), k_hi.alias("__khi"), *keys, *d.values(node), *starts])
            if not (cti >= INF and longest is not None and size >= hop):  # else every event is in some window
                spans = d.filter(spans, d.col("__klo") <= d.col("__khi"))
            exploded = d.explode_range(
                spans, "__k", d.col("__klo"), d.col("__khi"), [*by, *d.value_names(node), *(["__s"] if starts else [])]
            )
        extra = [d.min(d.col("__s")).alias("__lo"), d.max(d.col("__s")).alias("__hi")] if starts else []
        # Group keys before the window index: Spark's hash aggregate is sensitive to key order,
        # and this one is the faster (measured in bench/README.md, "Latest figures", W3 on Spark).
        grouped = d.grouped(node, exploded, [*by, "__k"], extra)
    ws = spec.start_of(d.col("__k"))
    bounded: R = d.with_columns(grouped, [ws.alias("__ws"), (ws + d.lit(size)).alias("__we")])
    return stamped(c, node, bounded, strict=False, done=d.col("__we"))


def pane_merges(d: Dialect, node: p.WindowNode) -> list[PaneMerge] | None:
    """Each aggregate as pane columns (``__pa<i>_<j>``) and the window's value merged from
    them: a count is summed; an average is kept as a sum and a count of its values, divided
    once merged (null without a value); a sum, min or max (Spark: also first and last, by
    their order) is itself again over its panes' values (``Dialect.itself_over_panes``). The
    live batches' partials (``tempo.lowering.batches``) are these pane columns too, and the
    reference engine merges the same parts (``tempo.runtime.aggregates``). None when an
    aggregate does not merge so (a distinct count, a percentile, a variance, ``top``, a
    user-defined aggregate), or without aggregates (a window read for its keys and bounds)."""
    if not node.aggregates:
        return None
    merges: list[PaneMerge] = []
    for i, a in enumerate(node.aggregates):
        v, first, second = d.col(f"__v{i}"), f"__pa{i}_0", f"__pa{i}_1"
        if a.kind is K.COUNT:
            merges.append(({first: d.count()}, d.sum(d.col(first))))
        elif a.kind is K.AVG:
            total, count = d.sum(d.col(first)), d.sum(d.col(second))
            mean = d.when(count > d.lit(0), d.as_double(total) / count, d.lit(None))
            merges.append(({first: d.sum(v), second: d.count_of(v)}, mean))
        elif (itself := d.itself_over_panes(a)) is not None:
            of_rows, of_panes = itself
            merges.append(({first: of_rows(v)}, of_panes(d.col(first))))
        else:
            return None
    return merges


def by_panes(
    c: Lowering[Any], node: p.WindowNode, df: Relation, cti: int, keys: list[Expr], starts: list[Expr], merges: list[PaneMerge]
) -> Relation:
    """Overlapping windows over points by panes: the points are aggregated per pane of width
    ``gcd(size, hop)`` on the window grid first, then each pane's results go to the windows
    holding it, which merge them. A window is a whole number of panes, so a point's windows
    are its pane's, and the points are read into one group each rather than into
    ``size / hop`` windows each."""
    d, spec = c.d, node.spec
    assert isinstance(spec, HoppingWindow)
    width = math.gcd(spec.size, spec.hop)
    by = d.key_names(node)
    rows = d.select(df, [d.floor_div(d.col(S) - d.lit(spec.offset), width).alias("__p"), *keys, *d.values(node), *starts])
    bounds = [d.min(d.col("__s")).alias("__lo"), d.max(d.col("__s")).alias("__hi")] if starts else []
    panes = d.group_by(rows, [*by, "__p"], [col.alias(name) for columns, _ in merges for name, col in columns.items()] + bounds)
    first = d.col("__p") * d.lit(width) + d.lit(spec.offset)  # the pane's first tick
    k_lo, k_hi = spec.first_window(first, d.floor_div), spec.last_window(first + d.lit(1), d.floor_div)
    if cti < INF:  # only the windows the CTI completed; some panes are in none of them
        k_hi = d.least(k_hi, d.lit(spec.last_complete(cti)))
        panes = d.filter(panes, k_lo <= k_hi)
    names = [name for columns, _ in merges for name in columns]
    windows = d.explode_range(panes, "__k", k_lo, k_hi, [*by, *names, *(["__lo", "__hi"] if starts else [])])
    merged_bounds = [d.min(d.col("__lo")).alias("__lo"), d.max(d.col("__hi")).alias("__hi")] if starts else []
    return d.group_by(windows, [*by, "__k"], [m.alias(f"__agg{i}") for i, (_, m) in enumerate(merges)] + merged_bounds)


def stamped(c: Lowering[R], node: p.WindowNode, rows: R, strict: bool, done: Expr) -> R:
    """Each window row (its bounds ``__ws`` and ``__we``) stamped as ``node.timestamp`` says
    (``WindowTimestamp.point_at``, the formula the runtime stamps by), with its payload
    projected, in one select. ``done``: the time at which the window is complete, for the
    completing CTI of the ``CTI`` stamp (the first CTI at or after it; after it, when
    ``strict``)."""
    d = c.d
    ws, we = d.col("__ws"), d.col("__we")
    ts = node.timestamp
    if ts is WindowTimestamp.LIFETIME:
        at, until = ws, we
    else:
        bound = d.col("__hi") if ts is WindowTimestamp.LATEST else d.col("__lo") if ts is WindowTimestamp.EARLIEST else None
        closing, last_finite = None, NEG_INF
        if ts is WindowTimestamp.CTI:
            rows = d.completing_cti(node, rows, done, strict)
            closing = d.col("__cti")
            last_finite = max((t for t in c.replay.ctis_of(node.input) if t < INF), default=NEG_INF)
        at = ts.point_at(
            ws,
            we,
            bound,
            closing,
            last_finite,
            greatest=lambda a, b: d.greatest(a, b if not isinstance(b, int) else d.lit(b)),
            when=d.when,
        )
        until = at + d.lit(1)
    out: R = d.select(rows, [at.alias(S), until.alias(E), *d.projection(node)])
    return out
