"""GroupApply: a sub-query run once per group key, as a rewrite of the plan.

``group_by(k).apply(query, select)`` traces ``query`` once, on a stream standing for one
group's events (``GroupInputNode``). The sub-plan it builds is then rewritten into one plan
over all groups at once, so that no executor knows GroupApply: each event of the sub-query
carries its group key in a record made here (``Keyed<R>``: the key fields, then the payload's
fields), and every operator that keeps state keys it by the group as well:

- windows, ``clip_event_duration`` and ``analytic`` take the group key before their own keys;
- a join, anti-join or ``followed_by`` between two streams of the sub-query also matches on
  the group key (null-safe: the null key is a group too);
- a stream from outside the sub-query (not built from its argument) is read whole by every
  group: a join against it pairs each group's events with all of its events (a broadcast);
- stateless operators carry the key through.

The result is the same as running ``query`` on each group's events alone and uniting the
results (docs/semantics.md 5.13), which the tests check against exactly that.
"""

from __future__ import annotations

import copyreg
import dataclasses
import re
import typing
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any, ClassVar

import attrs

from tempo.errors import QueryBuildError
from tempo.expr import nodes as x
from tempo.expr.schema import record_fields
from tempo.plan import nodes as p


@attrs.frozen(eq=False)
class GroupInputNode(p.Node):
    """The argument of a ``group_by().apply()`` sub-query while it is traced: one group's
    events. ``apply`` replaces it; a query still holding it (a stream of the sub-query used
    outside it) is refused when built."""

    SEMANTICS: ClassVar[str] = "The events of one group of the stream group_by().apply() splits."
    CTI_RULE: ClassVar[str] = "Every group sees the input's CTIs."

    record: type

    @property
    def payload_type(self) -> type:
        return self.record

    def describe(self) -> str:
        return f"the group's stream ({self.record.__qualname__}) of a group_by().apply() sub-query"

    def longest_lifetime(self, lifetimes: tuple[int | None, ...]) -> int | None:
        return None


KeySignature = tuple[tuple[type, bool], ...]
"""The type and nullability of each component of a group key."""

_MADE: dict[tuple[type, KeySignature], tuple[type, tuple[str, ...]]] = {}
_KEY_NAMES: dict[type, tuple[str, ...]] = {}  # a keyed class's key fields


class _KeyedRecordType(type):
    """The metaclass of the records ``keyed_class`` makes, so that pickle can make them
    again: a class is pickled by its module and name, and a process that unpickles a plan
    before building it (a Spark worker given the cluster engine's keyed operator) has no
    such class yet. ``copyreg`` pickles a class of this metaclass as the call that makes it."""


class _KeyedRecord(metaclass=_KeyedRecordType):
    """The base of every keyed record (no fields of its own)."""


_ARGUMENTS: dict[type, tuple[type, KeySignature]] = {}


def _keyed_again(payload_type: type, key: KeySignature) -> Any:
    return keyed_class(payload_type, key)[0]


def _reduce_keyed(cls: _KeyedRecordType) -> tuple[Any, tuple[Any, ...]]:
    return _keyed_again, _ARGUMENTS[cls]


copyreg.pickle(_KeyedRecordType, _reduce_keyed)


def keyed_class(payload_type: type, key: KeySignature) -> tuple[type, tuple[str, ...]]:
    """``(Keyed, key field names)``: the record of ``payload_type`` events carrying a group key
    of signature ``key``. The key fields come first (``key``, or ``key_0``, ``key_1``, ...,
    with ``_`` appended while a name is one of the payload's), then the payload's fields with
    their own annotations. Made once, and kept in this module's namespace under a name that
    depends only on its arguments; pickled as the call that makes it (``_KeyedRecordType``),
    so that a pickled plan or engine state finds it again in any process."""
    made = _MADE.get((payload_type, key))
    if made is not None:
        return made
    taken = {f.name for f in record_fields(payload_type)}
    names = []
    for i in range(len(key)):
        name = "key" if len(key) == 1 else f"key_{i}"
        while name in taken:
            name += "_"
        names.append(name)
    hints = typing.get_type_hints(payload_type)
    fields: list[tuple[str, Any]] = [
        (name, typing.Optional[dtype] if nullable else dtype)  # noqa: UP045 (a runtime type, not an annotation)
        for name, (dtype, nullable) in zip(names, key)
    ]
    fields += [(f.name, hints.get(f.name, object)) for f in record_fields(payload_type)]
    tag = re.sub(r"\W", "_", f"{payload_type.__module__}_{payload_type.__qualname__}")
    signature = "_".join(f"{d.__name__}{'_null' if n else ''}" for d, n in key)
    cls: Any = dataclasses.make_dataclass(f"Keyed_{tag}__by_{signature}", fields, bases=(_KeyedRecord,), frozen=True)
    cls.__module__ = __name__
    globals()[cls.__name__] = cls
    _MADE[(payload_type, key)] = (cls, tuple(names))
    _ARGUMENTS[cls] = (payload_type, key)
    _KEY_NAMES[cls] = tuple(names)
    return cls, tuple(names)


# A stand-in for a null key component when two streams of a sub-query match on the group key:
# with an is-null flag beside it, the pair of equalities is a hash key that pairs null with null.
_STAND_INS: dict[type, object] = {
    bool: False,
    int: 0,
    float: 0.0,
    str: "",
    datetime: datetime(1970, 1, 1),
    timedelta: timedelta(0),
}


class _Rewrite:
    """The sub-plan below a sub-query's result, rewritten over every group. Nodes map to
    their rewritten form (their output carrying the key), or to None when they are outside
    the sub-query (not built from its argument) and stay as they are."""

    def __init__(self, group: GroupInputNode, outer: p.Node, keys: tuple[x.Expr, ...]) -> None:
        self.signature: KeySignature = tuple((k.dtype, k.nullable) for k in keys)
        entry = p.SelectNode(outer, self.with_key(x.Input(0, outer.payload_type, "e"), keys))
        self.done: dict[int, p.Node | None] = {id(group): entry}

    def keyed(self, payload_type: type) -> tuple[type, tuple[str, ...]]:
        return keyed_class(payload_type, self.signature)

    def node(self, node: p.Node) -> p.Node | None:
        if id(node) not in self.done:
            inputs = [self.node(i) for i in node.inputs()]
            if all(i is None for i in inputs):
                self.done[id(node)] = None
            else:
                rule = _RULES.get(type(node))
                if rule is None:
                    raise QueryBuildError(f"group_by().apply() cannot run {node.describe()} per group")
                self.done[id(node)] = rule(self, node, inputs)
        return self.done[id(node)]

    # ---- expressions ------------------------------------------------------------------------
    def payload(self, expr: x.Expr, keyed: dict[int, type]) -> x.Expr:
        """``expr`` with each argument ``i`` in ``keyed`` read from its keyed record (of the
        type given) instead of its payload: a field is the keyed record's field, the payload
        itself a record rebuilt from them."""

        def swap(e: x.Expr) -> x.Expr:
            if isinstance(e, x.Input) and e.index in keyed:
                record = x.Input(e.index, keyed[e.index], e.name)
                names = tuple(f.name for f in record_fields(e.record))
                return x.Record(e.record, names, tuple(x.attr(record, n) for n in names))
            return e

        return x.transform(expr, swap)

    def key_fields(self, base: x.Expr) -> tuple[x.Expr, ...]:
        """The group key read from ``base``, a keyed record."""
        return tuple(x.attr(base, n) for n in _KEY_NAMES[base.dtype])

    def with_key(self, projection: x.Expr, key: tuple[x.Expr, ...]) -> x.Expr:
        """The keyed record of ``projection``'s record, with the group key ``key``."""
        cls, names = self.keyed(projection.dtype)
        fields = tuple(f.name for f in record_fields(projection.dtype))
        values = key + tuple(x.attr(projection, f) for f in fields)
        for i in {e.index for v in values for e in v.walk() if isinstance(e, x.Input)}:
            whole = x.Input(i, cls)
            if values == tuple(x.attr(whole, n) for n in names + fields):
                return whole  # the keyed record as it came in
        return x.Record(cls, names + fields, values)

    def key_refs(self) -> tuple[x.Expr, ...]:
        return tuple(x.KeyRef(i, d, n, "key") for i, (d, n) in enumerate(self.signature))

    def shift_keys(self, expr: x.Expr) -> x.Expr:
        """``expr`` (a window or analytic projection) with its own keys after the group key."""
        width = len(self.signature)
        return x.transform(expr, lambda e: attrs.evolve(e, index=e.index + width) if isinstance(e, x.KeyRef) else e)

    def same_key(self, left: x.Expr, right: x.Expr) -> x.Expr:
        """The two keyed records have the same group key (null equal to null)."""
        out: x.Expr | None = None
        for (dtype, nullable), a, b in zip(self.signature, self.key_fields(left), self.key_fields(right)):
            if not nullable:
                parts: list[x.Expr] = [x.Binary("==", a, b)]
            else:
                if dtype not in _STAND_INS:
                    raise QueryBuildError(
                        f"group_by().apply(): two streams of the sub-query meet on a group key of type {dtype.__name__} "
                        "that may be null; group by a key of a plain type (bool, int, float, str, datetime, timedelta), "
                        "or one that is never null"
                    )
                stand_in = x.Lit(_STAND_INS[dtype])
                parts = [x.Binary("==", x.IsNull(a), x.IsNull(b)), x.Binary("==", x.Coalesce((a, stand_in)), x.Coalesce((b, stand_in)))]
            for part in parts:
                out = part if out is None else x.Binary("&", out, part)
        assert out is not None
        return out


def _side_types(inputs: list[p.Node | None]) -> dict[int, type]:
    """The keyed record type of each input from inside the sub-query, by argument index."""
    return {i: inp.payload_type for i, inp in enumerate(inputs) if inp is not None}


def _sides(node: p.Node, inputs: list[p.Node | None]) -> tuple[p.Node, ...]:
    """Each input as rewritten, or as it is when it comes from outside the sub-query."""
    return tuple(new if new is not None else old for new, old in zip(inputs, node.inputs()))


def _unary_kept(rw: _Rewrite, node: p.UnaryNode, inputs: list[p.Node | None]) -> p.Node:
    """Where payloads are untouched (lifetimes, notion of time): the same node on the keyed input."""
    assert inputs[0] is not None
    kept: p.Node = attrs.evolve(node, input=inputs[0])
    return kept


def _where(rw: _Rewrite, node: p.WhereNode, inputs: list[p.Node | None]) -> p.Node:
    assert inputs[0] is not None
    return p.WhereNode(inputs[0], rw.payload(node.predicate, {0: inputs[0].payload_type}))


def _select(rw: _Rewrite, node: p.SelectNode, inputs: list[p.Node | None]) -> p.Node:
    assert inputs[0] is not None
    event = x.Input(0, inputs[0].payload_type)
    projection = rw.payload(node.projection, {0: event.record})
    return p.SelectNode(inputs[0], rw.with_key(projection, rw.key_fields(event)))


def _explode(rw: _Rewrite, node: p.ExplodeNode, inputs: list[p.Node | None]) -> p.Node:
    assert inputs[0] is not None
    event = x.Input(0, inputs[0].payload_type)
    keyed = {0: event.record}
    projection = rw.with_key(rw.payload(node.projection, keyed), rw.key_fields(event))
    return p.ExplodeNode(inputs[0], rw.payload(node.items, keyed), projection)


def _clip(rw: _Rewrite, node: p.ClipNode, inputs: list[p.Node | None]) -> p.Node:
    assert inputs[0] is not None
    event = x.Input(0, inputs[0].payload_type)
    own = tuple(rw.payload(k, {0: event.record}) for k in node.keys or ())
    return p.ClipNode(inputs[0], rw.key_fields(event) + own)


def _aggregate(rw: _Rewrite, a: p.Analytic, keyed: dict[int, type]) -> p.Analytic:
    if isinstance(a, p.Previous):
        return attrs.evolve(
            a,
            arg=rw.payload(a.arg, keyed),
            default=None if a.default is None else rw.payload(a.default, keyed),
            when=None if a.when is None else rw.payload(a.when, keyed),
        )
    return attrs.evolve(a, arg=None if a.arg is None else rw.payload(a.arg, keyed), order=tuple(rw.payload(o, keyed) for o in a.order))


def _keyed_by_group(
    rw: _Rewrite, node: p.WindowNode | p.AnalyticNode, inputs: list[p.Node | None]
) -> tuple[p.Node, x.Input, tuple[x.Expr, ...], tuple[Any, ...]]:
    """A window's or analytic's keyed input, its event, its keys (the group's, then its own)
    and its aggregates, read from the keyed record."""
    assert inputs[0] is not None
    event = x.Input(0, inputs[0].payload_type)
    keyed = {0: event.record}
    keys = rw.key_fields(event) + tuple(rw.payload(k, keyed) for k in node.keys or ())
    aggregates = node.aggregates if isinstance(node, p.WindowNode) else node.analytics
    return inputs[0], event, keys, tuple(_aggregate(rw, a, keyed) for a in aggregates)


def _window(rw: _Rewrite, node: p.WindowNode, inputs: list[p.Node | None]) -> p.Node:
    keyed_input, _, keys, aggregates = _keyed_by_group(rw, node, inputs)
    projection = rw.with_key(rw.shift_keys(node.projection), rw.key_refs())
    return p.WindowNode(keyed_input, keys, node.spec, aggregates, projection, node.timestamp)


def _analytic(rw: _Rewrite, node: p.AnalyticNode, inputs: list[p.Node | None]) -> p.Node:
    keyed_input, event, keys, analytics = _keyed_by_group(rw, node, inputs)
    projection = rw.with_key(rw.shift_keys(rw.payload(node.projection, {0: event.record})), rw.key_fields(event))
    return p.AnalyticNode(keyed_input, keys, analytics, projection)


def _matching(rw: _Rewrite, node: p.MatchingNode, inputs: list[p.Node | None]) -> tuple[p.Node, p.Node, x.Expr, x.Expr | None]:
    """The inputs, the predicate (with the group key when both sides are in the sub-query)
    and, for a node with a projection, the keyed projection: its group key read from the
    side inside the sub-query."""
    keyed = _side_types(inputs)
    predicate = rw.payload(node.predicate, keyed)
    sides = {i: x.Input(i, t) for i, t in keyed.items()}
    if len(sides) == 2:
        predicate = x.Binary("&", predicate, rw.same_key(sides[0], sides[1]))
    projection: x.Expr | None = getattr(node, "projection", None)
    if projection is not None:
        projection = rw.with_key(rw.payload(projection, keyed), rw.key_fields(sides[min(sides)]))
    left, right = _sides(node, inputs)
    return left, right, predicate, projection


def _refused(operator: str, outcome: str, instead: str) -> QueryBuildError:
    """An operator meeting a stream from outside the sub-query in a way that needs every key."""
    return QueryBuildError(f"group_by().apply(): {operator} would {outcome}, which needs every key the query may see; {instead}")


def _join(rw: _Rewrite, node: p.JoinNode, inputs: list[p.Node | None]) -> p.Node:
    left, right, predicate, projection = _matching(rw, node, inputs)
    assert projection is not None
    return p.JoinNode(left, right, predicate, projection)


def _followed_by(rw: _Rewrite, node: p.FollowedByNode, inputs: list[p.Node | None]) -> p.Node:
    if inputs[0] is None:
        raise _refused(
            "followed_by() from a stream outside the sub-query to one inside it",
            "look for the first B in every group",
            "start the pattern from the group's own stream, or join the outside stream in first",
        )
    left, right, predicate, projection = _matching(rw, node, inputs)
    assert projection is not None
    return p.FollowedByNode(left, right, predicate, node.within, projection)


def _anti_join(rw: _Rewrite, node: p.AntiJoinNode, inputs: list[p.Node | None]) -> p.Node:
    if inputs[0] is None:
        raise _refused(
            "anti_join() of a stream outside the sub-query against one inside it",
            "give the outside events once per group",
            "anti-join the group's own stream against the outside one instead",
        )
    left, right, predicate, _ = _matching(rw, node, inputs)
    return p.AntiJoinNode(left, right, predicate)


def _union(rw: _Rewrite, node: p.UnionNode, inputs: list[p.Node | None]) -> p.Node:
    if inputs[0] is None or inputs[1] is None:
        raise _refused(
            "union() of a stream from outside the sub-query with one inside it",
            "copy the outside events into every group",
            "union them after apply(), or join the outside stream in",
        )
    return p.UnionNode(inputs[0], inputs[1])


_RULES: dict[type, Callable[[_Rewrite, Any, list[p.Node | None]], p.Node]] = {
    p.WhereNode: _where,
    p.EventTimeNode: _unary_kept,
    p.AlterLifetimeNode: _unary_kept,
    p.SelectNode: _select,
    p.ExplodeNode: _explode,
    p.ClipNode: _clip,
    p.WindowNode: _window,
    p.AnalyticNode: _analytic,
    p.JoinNode: _join,
    p.FollowedByNode: _followed_by,
    p.AntiJoinNode: _anti_join,
    p.UnionNode: _union,
}
"""How each node class is run per group: the one table to extend with a new operator."""


def apply_per_group(outer: p.Node, keys: tuple[x.Expr, ...], group: GroupInputNode, result: p.Node) -> tuple[p.Node, tuple[str, ...]]:
    """The plan of ``result`` (a sub-query built on ``group``) run per group of ``outer`` by
    ``keys``: its output is ``result``'s payload in a keyed record, with the key field names."""
    rewritten = _Rewrite(group, outer, keys).node(result)
    if rewritten is None:
        raise QueryBuildError(
            "group_by().apply(): the sub-query's result is not built from the stream it is given (the "
            "group's events); return a stream built from its argument"
        )
    return rewritten, keyed_class(result.payload_type, tuple((k.dtype, k.nullable) for k in keys))[1]
