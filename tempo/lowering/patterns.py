"""The pattern rule of the DataFrame backends written once over ``Dialect``: A followed by B
within a duration. The semantics and CTI rule are ``FollowedByNode``'s
(``tempo/plan/nodes.py``); the reference is ``tempo.runtime.patterns.FollowedBy``."""

from __future__ import annotations

from tempo.expr.schema import field_names
from tempo.lowering.context import END as E
from tempo.lowering.context import START as S
from tempo.lowering.context import Lowering, R
from tempo.lowering.rules import lowers
from tempo.plan import nodes as p


@lowers(p.FollowedByNode)
def followed_by(c: Lowering[R], node: p.FollowedByNode) -> R:
    """Each left event with its first following right event: the pairs on the keys and a time
    bucket of width ``within`` (a left start's bucket is the right start's or the one before),
    the band ``a.s < b.s < a.s + within`` and the residual; per left event (a row id) the
    pair of least (b.s, b's payload fields, nulls first) kept; a point at b.s, once the final
    CTI is past it (a left event whose first match is not, has no later one that is)."""
    d, within = c.d, node.within
    ls, rs = d.col(f"__l_{S}"), d.col(f"__r_{S}")
    left = d.join_side(c.relation(node.left), "__l_", d.floor_div(d.col(S), within), extra=[d.row_id().alias("__lid")])
    own = d.floor_div(d.col(S), within)
    right = d.join_side(c.relation(node.right), "__r_", buckets=d.list_of(own, own - d.lit(1)))
    band = (ls < rs) & (rs < ls + d.lit(within)) & (rs < d.lit(c.final_bound(node)))
    pairs = d.pairs(node, left, right, on=[("__l_bucket", "__r_bucket")], condition=band)
    first = d.first_by(pairs, "__lid", [f"__r_{S}", *[f"__r_{n}" for n in field_names(node.right.payload_type)]])
    matches: R = d.select(first, [rs.alias(S), (rs + d.lit(1)).alias(E), *d.projection(node, ("__l_", "__r_"))])
    return matches
