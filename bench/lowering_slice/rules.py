"""The slice's rules, written once over ``dialect.Dialect``: hopping windows per key with their
result stamps, the release rule, and the join on time buckets with its lifetime
intersection. They are today's formulas of ``tempo.spark.windows`` / ``tempo.spark.compiler``
and ``tempo.vectorised.compiler`` (the two copies), read from the same plan nodes, CTI
replay and input spans.

Outside the slice (``NotImplementedError``): other nodes and window kinds, the ``CTI``
result stamp (an as-of join on the CTIs: one more primitive), expressions beyond field
references, literals and binary operators, and the join cases neither executor buckets the
same way (both sides bounded, or an unbounded side without a cut: Spark's ``LONG_BUCKET``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from tempo.expr import nodes as x
from tempo.expr.schema import field_names
from tempo.plan import nodes as p
from tempo.plan.query import Query
from tempo.plan.windows import HoppingWindow, WindowTimestamp
from tempo.result import END_COLUMN, START_COLUMN
from tempo.runtime.replay import CtiReplay
from tempo.tables import Span, cut_buckets
from tempo.ticks import INF, NEG_INF

from bench.lowering_slice.dialect import Dialect

S, E = "__tempo_s", "__tempo_e"
K = p.AggregateKind
_KINDS = {K.SUM: "sum", K.MIN: "min", K.MAX: "max", K.AVG: "avg", K.COUNT: "count"}
_OPS: dict[str, Callable[[Any, Any], Any]] = {
    "+": lambda a, b: a + b,
    "-": lambda a, b: a - b,
    "*": lambda a, b: a * b,
    "/": lambda a, b: a / b,
    "==": lambda a, b: a == b,
    "!=": lambda a, b: a != b,
    "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b,
    "&": lambda a, b: a & b,
    "|": lambda a, b: a | b,
}


class Lowering:
    """One compilation of a plan over a dialect: the admitted inputs (tempo's ingress), the
    CTI replay, the inputs' spans, and the relations built so far."""

    def __init__(
        self, d: Dialect[Any, Any], query: Query, replay: CtiReplay, inputs: dict[str, Any], spans: dict[str, Callable[[], Span | None]]
    ) -> None:
        self.d, self.query, self.replay, self.inputs, self.spans = d, query, replay, inputs, spans
        self.built: dict[int, Any] = {}

    # ---- what the rules read of the replay and the plan ----
    def final_cti(self, node: p.Node) -> int:
        ctis = self.replay.ctis_of(node)
        return ctis[-1] if ctis else NEG_INF

    def final_bound(self, node: p.Node) -> int:
        return max(self.final_cti(node), *self.replay.key_ctis_of(node).values(), NEG_INF)

    def span(self, node: p.Node) -> Span | None:
        source = self.query.lifetimes_of(node)
        taken = None if source is None else self.spans.get(source.name)
        if source is None or taken is None or (span := taken()) is None:
            return None
        return span.admitting(self.replay.latest_finite_cti(source.name))

    def relation(self, node: p.Node) -> Any:
        if id(node) not in self.built:
            if isinstance(node, p.SourceNode):
                rel = self.inputs[node.name]
            elif isinstance(node, p.WindowNode) and isinstance(node.spec, HoppingWindow):
                rel = hopping(self, node)
            elif isinstance(node, p.JoinNode):
                rel = join(self, node)
            else:
                raise NotImplementedError(f"{type(node).__name__} is outside the slice")
            self.built[id(node)] = rel
        return self.built[id(node)]

    def output(self) -> Any:
        """The released events (the release rule), projected as ``to_polars``/``to_dataframe`` give them."""
        d, root = self.d, self.query.root
        out = self.relation(root)
        bound = released(self)
        if bound is not None:
            out = d.filter(out, d.col(S) < bound)
        cols = {START_COLUMN: d.timestamp_us(d.col(S)), END_COLUMN: d.timestamp_us(d.col(E))}
        return d.select(out, cols | {n: d.col(n) for n in field_names(root.payload_type)})


def expr(c: Lowering, e: x.Expr, prefixes: tuple[str, ...] = ("",)) -> Any:
    """A tempo expression of the slice as a column expression of the dialect."""
    d = c.d
    if isinstance(e, x.Attr) and isinstance(e.base, x.Input):
        return d.col(f"{prefixes[e.base.index]}{e.name}")
    if isinstance(e, x.KeyRef):
        return d.col(f"__key{e.index}")
    if isinstance(e, x.AggRef):
        return d.col(f"__agg{e.index}")
    if isinstance(e, x.Lit) and isinstance(e.value, (int, float, bool)):
        return d.lit(e.value)
    if isinstance(e, x.Binary) and e.op in _OPS:
        return _OPS[e.op](expr(c, e.left, prefixes), expr(c, e.right, prefixes))
    raise NotImplementedError(f"the expression {x.render(e)} is outside the slice")


def record(c: Lowering, projection: x.Expr, prefixes: tuple[str, ...] = ("",)) -> dict[str, Any]:
    if not isinstance(projection, x.Record):
        raise NotImplementedError("a projection that is not a record is outside the slice")
    return {n: expr(c, v, prefixes) for n, v in zip(projection.names, projection.values)}


# ---- (b) the release rule ----------------------------------------------------------------


def released(c: Lowering) -> Any | None:
    """The bound an output row's start must be before: the final output CTI, or its key's own
    final CTI where that is later; None when the final CTI is at infinity (it releases all)."""
    d, root = c.d, c.query.root
    cti = c.final_cti(root)
    if cti >= INF:
        return None
    key = c.query.substream_key(root)
    ahead = {k: t for k, t in c.replay.key_ctis_of(root).items() if t > cti}
    bound = d.lit(cti)
    if key is not None and ahead:
        if None in ahead:
            raise NotImplementedError("a null substream key is outside the slice")
        key_col = expr(c, key)
        for k, t in ahead.items():
            bound = d.when(key_col == d.lit(k), d.lit(t), bound)
    return bound


# ---- (a) hopping windows and their result stamps -----------------------------------------


def hopping(c: Lowering, node: p.WindowNode) -> Any:
    """Each event in the windows its lifetime overlaps that its final input CTI completed;
    overlapping windows over points whose aggregates merge by panes."""
    d, spec = c.d, node.spec
    assert isinstance(spec, HoppingWindow)
    size, hop, off = spec.size, spec.hop, spec.offset
    df = c.relation(node.input)
    cti = c.final_bound(node.input)
    longest = c.query.longest_lifetime(node.input)
    end = ended(c, node, df, cti, longest)

    def first_window(s: Any) -> Any:  # the first window ending after s
        return d.floor_div(s - d.lit(size + off), hop) + d.lit(1)

    def last_window(e: Any) -> Any:  # the last window starting before e
        return d.floor_div(e - d.lit(off + 1), hop)

    def last_of(k_hi: Any) -> Any:  # only the windows the CTI completed
        return k_hi if cti >= INF else d.least(k_hi, d.lit(spec.last_complete(cti)))

    keys = {f"__key{i}": expr(c, k) for i, k in enumerate(node.keys or ())}
    values = {f"__v{i}": expr(c, a.arg) for i, a in enumerate(node.aggregates) if a.arg is not None}
    if any(a.kind not in _KINDS for a in node.aggregates) or not node.aggregates:
        raise NotImplementedError("aggregates other than sum, min, max, avg, count are outside the slice")
    starts = {"__s": d.col(S)} if node.timestamp in (WindowTimestamp.LATEST, WindowTimestamp.EARLIEST) else {}
    by = list(keys)
    bounds = {"__lo": d.aggregate("min", d.col("__s")), "__hi": d.aggregate("max", d.col("__s"))} if starts else {}
    if longest == 1 and size > hop:  # points by panes of gcd(size, hop): aggregated per pane, merged per window
        width = math.gcd(size, hop)
        rows = d.select(df, {"__p": d.floor_div(d.col(S) - d.lit(off), width)} | keys | values | starts)
        per_pane, merged = {}, {}
        for i, a in enumerate(node.aggregates):
            part = d.col(f"__pa{i}_0")
            if a.kind is K.COUNT:
                per_pane[f"__pa{i}_0"], merged[f"__agg{i}"] = d.aggregate("count", None), d.aggregate("sum", part)
            elif a.kind is K.AVG:  # a sum and a count, divided once merged
                per_pane[f"__pa{i}_0"], per_pane[f"__pa{i}_1"] = d.aggregate("sum", d.col(f"__v{i}")), d.aggregate("count", None)
                n = d.aggregate("sum", d.col(f"__pa{i}_1"))
                merged[f"__agg{i}"] = d.aggregate("sum", part) / n
            else:
                kind = _KINDS[a.kind]
                per_pane[f"__pa{i}_0"], merged[f"__agg{i}"] = d.aggregate(kind, d.col(f"__v{i}")), d.aggregate(kind, part)
        panes = d.group_by(rows, [*by, "__p"], per_pane | bounds)
        first = d.lit(off) + d.col("__p") * d.lit(width)  # the pane's first tick
        k_lo, k_hi = first_window(first), last_of(last_window(first + d.lit(1)))
        if cti < INF:  # some panes are in no completed window
            panes = d.filter(panes, k_lo <= k_hi)
        windows = d.explode_range(panes, "__k", k_lo, k_hi, [*by, *per_pane, *(["__lo", "__hi"] if starts else [])])
        merged_bounds = {"__lo": d.aggregate("min", d.col("__lo")), "__hi": d.aggregate("max", d.col("__hi"))} if starts else {}
        grouped = d.group_by(windows, [*by, "__k"], merged | merged_bounds)
    else:
        aggs = {
            f"__agg{i}": d.aggregate(_KINDS[a.kind], d.col(f"__v{i}") if a.arg is not None else None) for i, a in enumerate(node.aggregates)
        }
        k_lo = first_window(d.col(S))
        if longest is not None and size >= hop and spec.most_windows_past_first(longest) == 0:  # one window per event
            rows = d.select(df, {"__k": k_lo} | keys | values | starts)
            if cti < INF:
                rows = d.filter(rows, d.col("__k") <= d.lit(spec.last_complete(cti)))
        else:
            k_hi = last_of(last_window(end if cti >= INF else d.least(end, d.lit(INF))))
            spans = d.select(df, {"__klo": k_lo, "__khi": k_hi} | keys | values | starts)
            if not (cti >= INF and longest is not None and size >= hop):  # else every event is in some window
                spans = d.filter(spans, d.col("__klo") <= d.col("__khi"))
            rows = d.explode_range(spans, "__k", d.col("__klo"), d.col("__khi"), [*by, *values, *starts])
        grouped = d.group_by(rows, [*by, "__k"], aggs | bounds)
    ws = d.lit(off) + d.col("__k") * d.lit(hop)
    return results(c, node, d.with_columns(grouped, {"__ws": ws, "__we": ws + d.lit(size)}))


def ended(c: Lowering, node: p.WindowNode, df: Any, cti: int, longest: int | None) -> Any:
    """The end column, open lifetimes ended on the CTI at infinity just after the latest finite
    time the window knows of (its latest event time, or just before its last finite CTI)."""
    d = c.d
    if cti < INF or longest is not None:
        return d.col(E)
    finite = [t for t in c.replay.ctis_of(node.input) if t < INF]
    last_cti = finite[-1] - 1 if finite else None
    stats = d.scalars(
        df, {"s": d.aggregate("max", d.col(S)), "e": d.aggregate("max", d.when(d.col(E) < d.lit(INF), d.col(E), d.lit(None)))}
    )
    horizon = max(v for v in (stats["s"], stats["e"], last_cti, NEG_INF) if v is not None)
    return d.when(d.col(E) >= d.lit(INF), d.lit(horizon + 1), d.col(E))


def results(c: Lowering, node: p.WindowNode, rows: Any) -> Any:
    """Each window row (``__ws``, ``__we``) stamped as ``node.timestamp`` says, its payload projected."""
    d, ts = c.d, node.timestamp
    ws, we = d.col("__ws"), d.col("__we")
    if ts is WindowTimestamp.LIFETIME:
        at, until = ws, we
    else:
        if ts is WindowTimestamp.START:
            at = ws
        elif ts is WindowTimestamp.END:
            at = we - d.lit(1)
        elif ts is WindowTimestamp.LATEST:
            at = d.greatest(ws, d.col("__hi"))
        elif ts is WindowTimestamp.EARLIEST:
            at = d.greatest(ws, d.col("__lo"))
        else:
            raise NotImplementedError("the CTI result stamp (an as-of join on the CTIs) is outside the slice")
        until = at + d.lit(1)
    return d.select(rows, {S: at, E: until} | record(c, node.projection))


# ---- (c) the join on time buckets --------------------------------------------------------


def prefixed(c: Lowering, node: p.Node, prefix: str) -> Any:
    d = c.d
    rel = c.relation(node)
    return d.select(rel, {f"{prefix}{n}": d.col(n) for n in d.columns(rel)})


def join(c: Lowering, node: p.JoinNode) -> Any:
    """Overlapping matching pairs, on time buckets as well as the keys when one side is points
    and the other's lifetimes can be cut to the points' span; the output lasts the
    intersection, its end known once both sides' ends or CTIs fix it."""
    d = c.d
    ls, le, rs, re = (d.col(f"__{side}_{t}") for side in "lr" for t in (S, E))
    lk: list[tuple[str, Any]] = [(f"__lk{i}", expr(c, a, ("__l_", "__r_"))) for i, (a, _) in enumerate(node.keys)]
    rk: list[tuple[str, Any]] = [(f"__rk{i}", expr(c, b, ("__l_", "__r_"))) for i, (_, b) in enumerate(node.keys)]
    if any(a.dtype is not b.dtype for a, b in node.keys):
        raise NotImplementedError("join keys of two types are outside the slice")
    sides = {
        "__l_": d.with_columns(prefixed(c, node.left, "__l_"), dict(lk)),
        "__r_": d.with_columns(prefixed(c, node.right, "__r_"), dict(rk)),
    }
    on = [(a, b) for (a, _), (b, _) in zip(lk, rk)]
    overlap = (ls < re) & (rs < le)
    bounds = c.query.longest_lifetime(node.left), c.query.longest_lifetime(node.right)
    planned = None
    if 1 in bounds and None in bounds:
        points, other = ("__l_", "__r_") if bounds[0] == 1 else ("__r_", "__l_")
        point_span, other_span = (c.span(node.left), c.span(node.right)) if points == "__l_" else (c.span(node.right), c.span(node.left))
        planned = cut_buckets(point_span, other_span, 1) if point_span and other_span else None
    if planned is not None:
        width, first, last = planned
        sides[points] = d.with_columns(sides[points], {f"{points}bucket": d.floor_div(d.col(f"{points}{S}"), width)})
        s, e = d.col(f"{other}{S}"), d.col(f"{other}{E}")
        cut = d.filter(sides[other], (s < d.lit(last)) & (e > d.lit(first)))  # wholly outside the cut: in no bucket
        lo, hi = d.floor_div(d.greatest(s, d.lit(first)), width), d.floor_div(d.least(e, d.lit(last)) - d.lit(1), width)
        sides[other] = d.explode_range(cut, f"{other}bucket", lo, hi, d.columns(cut))
        on = [("__l_bucket", "__r_bucket"), *on]
    elif bounds != (None, None) and not (None in bounds and node.keys):
        raise NotImplementedError("this join's bucketing (both sides bounded, or Spark's LONG_BUCKET) is outside the slice")
    residual = overlap if node.residual is None else overlap & expr(c, node.residual, ("__l_", "__r_"))
    pairs = d.join(sides["__l_"], sides["__r_"], on, residual)
    start, known = d.greatest(ls, rs), d.least(le, re)
    cti_l, cti_r = c.final_cti(node.left), c.final_cti(node.right)
    determined = ((le < d.lit(INF)) | (d.lit(cti_l) >= known)) & ((re < d.lit(INF)) | (d.lit(cti_r) >= known))
    end = d.when(determined & (known < d.lit(INF)), known, d.lit(INF))
    bound = c.final_bound(node)
    if bound < INF:  # every start is before infinity
        pairs = d.filter(pairs, start < d.lit(bound))
    return d.select(pairs, {S: start, E: end} | record(c, node.projection, ("__l_", "__r_")))
