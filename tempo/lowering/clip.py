"""The clip rule of the DataFrame backends written once over ``Dialect``: each end clipped at
the next later start of its group. The semantics and CTI rule are ``ClipNode``'s
(``tempo/plan/nodes.py``); the reference is ``tempo.runtime.clip.Clip``."""

from __future__ import annotations

from tempo.lowering.context import END as E
from tempo.lowering.context import START as S
from tempo.lowering.context import Lowering, R
from tempo.lowering.dialect import WindowFunction, Windowed
from tempo.lowering.joins import payload
from tempo.lowering.rules import lowers
from tempo.plan import nodes as p
from tempo.ticks import INF


@lowers(p.ClipNode)
def clip(c: Lowering[R], node: p.ClipNode) -> R:
    """The next later start of the group, over every event (one that arrives after the final
    CTI starts after it and clips nothing released): the next start in start order, which
    within a run of equal starts is that start but for the run's last row; so the least
    next start later than the start over the run. (A range frame to the group's end would do
    it in one window, but Spark recomputes such a frame for every row: quadratic in a group's
    events.) The clipped end counts once the final CTI is past it, else the result stays
    open, as the in-memory start edge not yet ended. Only the events the final CTI passed go
    out."""
    d = c.d
    cti = c.final_cti(node.input)
    keys, by = d.keys(node), d.key_names(node)
    rows = d.in_order(d.with_columns(c.relation(node.input), keys) if keys else c.relation(node.input), [S])
    rows = d.over(rows, by, [S], [Windowed("__following", WindowFunction.NEXT, d.col(S))])
    following = d.col("__following")
    rows = d.with_columns(rows, [d.when(following > d.col(S), following, d.lit(None)).alias("__next")])
    rows = d.over(rows, [*by, S], [], [Windowed("__later", WindowFunction.MIN, d.col("__next"))])
    clipped = d.least(d.col(E), d.coalesce(d.col("__later"), d.lit(INF)))
    end = d.when(clipped < d.lit(cti), clipped, d.lit(INF)) if cti < INF else clipped
    out: R = d.select(rows, [d.col(S), end.alias(E), *d.carried(rows), *payload(c, node)])
    return out if cti >= INF else d.filter(out, d.col(S) < d.lit(cti))
