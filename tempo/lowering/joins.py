"""The join rules of the DataFrame backends written once over ``Dialect``. The semantics
and CTI rule are ``JoinNode``'s (``tempo/plan/nodes.py``); the reference is
``tempo.runtime.joins.Join``. How a backend finds the overlapping pairs (on the keys, on
time buckets) is its own; what a pair becomes is this module's."""

from __future__ import annotations

from tempo.lowering.context import END as E
from tempo.lowering.context import START as S
from tempo.lowering.context import Lowering, R
from tempo.plan import nodes as p
from tempo.ticks import INF


def intersections(c: Lowering[R], node: p.JoinNode, pairs: R) -> R:
    """Each overlapping matching pair (the sides' columns prefixed ``__l_`` and ``__r_``) as
    the intersection of the two lifetimes, once the join's final CTI passed its start.

    An end is known for a side whose event closed; the output end is the earlier known end
    if the other side (still open) has a CTI at or past it, else it stays open, exactly as
    the in-memory join decides when to send the end edge."""
    d = c.d
    ls, le, rs, re = d.col(f"__l_{S}"), d.col(f"__l_{E}"), d.col(f"__r_{S}"), d.col(f"__r_{E}")
    start, known = d.greatest(ls, rs), d.least(le, re)
    cti_l, cti_r = c.final_cti(node.left), c.final_cti(node.right)
    infinity = d.lit(INF)
    determined = ((le < infinity) | (d.lit(cti_l) >= known)) & ((re < infinity) | (d.lit(cti_r) >= known))
    end = d.when(determined & (known < infinity), known, infinity)
    bound = c.final_bound(node)
    out = d.filter(pairs, start < d.lit(bound)) if bound < INF else pairs  # every start is before infinity
    lifetimes: R = d.select(out, [start.alias(S), end.alias(E), *d.projection(node, ("__l_", "__r_"))])
    return lifetimes
