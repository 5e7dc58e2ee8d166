"""The logical plan: one frozen node per operator, validated when built.

Each node states its semantics and its CTI rule once, here; executors implement them
(``tempo/runtime`` is the reference) and ``explain()`` prints them. A window node's grid
and its arithmetic are a ``WindowSpec`` value (``tempo/plan/windows.py``). Nodes compare
by identity: a node used twice in a graph is one operator whose output feeds two consumers.
"""

from __future__ import annotations

import enum
import itertools
from collections.abc import Callable, Iterable, Iterator
from typing import Any, ClassVar

import attrs

from tempo.clocks import EventTime, TimeDomain, TimeNotion
from tempo.errors import QueryBuildError
from tempo.events import EventShape
from tempo.expr import nodes as x
from tempo.expr.aggregator import check_aggregator
from tempo.expr.schema import record_fields
from tempo.plan.windows import HoppingWindow, SnapshotWindow, WindowSpec, WindowTimestamp
from tempo.settings import AdvanceTimeSettings, EventOrderingSettings
from tempo.sources import Source
from tempo.ticks import format_duration


@attrs.frozen(eq=False)
class Node:
    """Base of plan nodes. ``payload_type`` is the record type of the node's output."""

    SEMANTICS: ClassVar[str] = ""
    CTI_RULE: ClassVar[str] = ""

    @property
    def payload_type(self) -> type:
        raise NotImplementedError

    def inputs(self) -> tuple[Node, ...]:
        return ()

    def subtree(self) -> Iterator[Node]:
        """This node and every node below it (a node reached twice comes twice)."""
        yield self
        for child in self.inputs():
            yield from child.subtree()

    def describe(self) -> str:
        return type(self).__name__

    def substream_key(self, keys: tuple[x.Expr | None, ...]) -> x.Expr | None:
        """The substream key of this node's output, as an expression over its payload, given
        that of each input (None: no key). An operator that keeps the key keeps per-key
        progress: each key's CTI moves on its own and its results are released by it
        (docs/semantics.md 3.10.4). The default merges keys: only the input's CTI, the
        minimum over keys, goes on."""
        return None

    def longest_lifetime(self, lifetimes: tuple[int | None, ...]) -> int | None:
        """An upper bound on the length of this node's output lifetimes, in ticks, given
        that of each input (None: any length, open ones included). Every node class states
        its rule, since a plan relying on a wrong bound loses events."""
        raise NotImplementedError(f"{type(self).__name__} states no longest_lifetime rule")

    def time_domain(self, domains: tuple[TimeDomain, ...]) -> TimeDomain:
        """The notion of time of this node's output, given its inputs': theirs, which must be
        one (docs/semantics.md 3.11: a query mixes notions only through ``as_event_time``)."""
        if any(d is not domains[0] for d in domains):
            raise QueryBuildError(_MIXED_TIME.format(what=type(self).__name__, a=domains[0].value, b=domains[1].value, inputs=""))
        return domains[0]


_MIXED_TIME = (
    "{what} brings together a stream in {a} and one in {b}{inputs}: streams meet only in one notion "
    "of time (docs/semantics.md 3.11); a stream in ingestion time meets one in event time after "
    "as_event_time(), and processing time meets no other"
)


def detached(node: Node) -> Node:
    """``node``'s plan with each input's source replaced by an empty ``ItemSource`` of its
    payload type: the plan as it travels to Spark's workers, which build operators from it
    and never read the inputs (a source may hold a Spark DataFrame, which only the driver
    has). A node reached twice stays one node."""
    from tempo.sources import ItemSource

    return rebuilt(node, lambda n: attrs.evolve(n, source=ItemSource([], n.payload_type)) if isinstance(n, SourceNode) else None)


def rebuilt(node: Node, change: Callable[[Node], Node | None]) -> Node:
    """``node``'s plan with each node ``change`` gives a replacement for (not None) replaced,
    and every node above a replaced one built again over its new inputs. A node reached
    twice stays one node."""
    done: dict[int, Node] = {}

    def rebuild(n: Node) -> Node:
        if id(n) not in done:
            replacement = change(n)
            if replacement is not None:
                done[id(n)] = replacement
            else:
                changes = {f.name: rebuild(v) for f in attrs.fields(type(n)) if isinstance(v := getattr(n, f.name), Node)}
                done[id(n)] = attrs.evolve(n, **changes) if changes else n
        return done[id(n)]

    return rebuild(node)


def check_meeting(node: Node, what: str) -> None:
    """What a node bringing streams together (a join, an anti-join, a pattern, a union) needs
    of them, checked when it is built, not when the query runs: no two different inputs of
    one name, and one notion of time (``Node.time_domain``)."""
    named: dict[str, Node] = {}
    domains: dict[int, TimeDomain | None] = {}
    sources: dict[int, list[str]] = {}

    def visit(n: Node) -> TimeDomain | None:  # each node once: a stream may be used twice
        if id(n) in domains:
            return domains[id(n)]
        below = tuple(visit(i) for i in n.inputs())
        if isinstance(n, SourceNode):
            other = named.setdefault(n.name, n)
            if other is not n:
                raise QueryBuildError(
                    f"{what} brings together two different inputs named {n.name!r}: input names must be unique "
                    "in a query (they name the input in results, metrics and errors); give one another name in Stream.create"
                )
        sources[id(n)] = sorted({name for i in n.inputs() for name in sources[id(i)]} | ({n.name} if isinstance(n, SourceNode) else set()))
        # None where it is not known yet: below a group's stream inside apply(), which
        # group_apply keys by the outer input's notion when it rewrites the plan.
        known = n is not node and (isinstance(n, SourceNode) or (bool(below) and None not in below))
        domains[id(n)] = n.time_domain(below) if known else None  # type: ignore[arg-type]
        return domains[id(n)]

    visit(node)
    sides = node.inputs()
    found = [domains[id(i)] for i in sides]
    if None not in found and any(d is not found[0] for d in found):
        names = " and ".join(f"input{'s' if len(sources[id(i)]) > 1 else ''} {', '.join(repr(n) for n in sources[id(i)])}" for i in sides)
        a, b = (d.value for d in found if d is not None)
        raise QueryBuildError(_MIXED_TIME.format(what=what, a=a, b=b, inputs=f" ({names})"))


@attrs.frozen(eq=False)
class UnaryNode(Node):
    """A node over one input, whose lifetimes it keeps unless it says otherwise."""

    input: Node

    def inputs(self) -> tuple[Node, ...]:
        return (self.input,)

    def longest_lifetime(self, lifetimes: tuple[int | None, ...]) -> int | None:
        """As the input's: lifetimes are kept."""
        return lifetimes[0]


def reindex(expr: x.Expr, index: int) -> x.Expr:
    """``expr`` with every traced argument (``Input``) made argument ``index``."""
    return x.transform(expr, lambda e: attrs.evolve(e, index=index) if isinstance(e, x.Input) else e)


def node_expressions(node: Node) -> Iterator[x.Expr]:
    """Every expression of ``node`` and below: in its fields, tuples and attrs values
    (aggregates), not in its input nodes. What a compiler checks it has a rule for."""

    def walk(values: Iterable[object]) -> Iterator[x.Expr]:
        for v in values:
            if isinstance(v, x.Expr):
                yield from v.walk()
            elif isinstance(v, tuple):
                yield from walk(v)
            elif attrs.has(cls := type(v)) and not isinstance(v, Node):
                yield from walk(getattr(v, f.name) for f in attrs.fields(cls))

    return walk(getattr(node, f.name) for f in attrs.fields(type(node)))


def kept_key(projection: x.Expr, candidates: list[x.Expr]) -> x.Expr | None:
    """The field of ``projection``'s record that copies one of the ``candidates`` (a key
    over its arguments), as an expression over the record; the whole argument when the
    projection is one of the arguments itself; None when no field carries the key."""
    if isinstance(projection, x.Input):
        for c in candidates:
            if {i.index for i in c.walk() if isinstance(i, x.Input)} == {projection.index}:
                return reindex(c, 0)
        return None
    if isinstance(projection, x.Record):
        for name, value in zip(projection.names, projection.values):
            if value in candidates:
                return x.attr(x.Input(0, projection.dtype), name)
    return None


_DECLARATIONS = itertools.count()


@attrs.frozen(eq=False)
class SourceNode(Node):
    SEMANTICS: ClassVar[str] = "An input: its items in arrival order, checked against the CTI rule."
    CTI_RULE: ClassVar[str] = (
        "CTIs are generated (count or time span, minus delay), imported from another input, or "
        "given explicitly, or follow the ordering settings (largest start less the out-of-order "
        "tolerance, arrival clock less the late-arrival tolerance); the latest wins and CTIs never "
        "go backwards. Violations are dropped or adjusted by the policy."
    )

    name: str
    source: Source[Any]
    shape: EventShape
    settings: AdvanceTimeSettings | None
    over: x.Expr | None = None
    """The substream key (ASA's ``OVER``), a function of the payload: each key keeps its
    own CTI for the checks of the ordering settings."""
    declared: int = attrs.field(factory=lambda: next(_DECLARATIONS))
    """Order of declaration: ties in arrival order go to the input declared first."""
    notion: TimeNotion = EventTime()
    """Where its events' starts come from (``tempo.clocks``; ``tempo.runtime.stamping``)."""

    def __attrs_post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise QueryBuildError(f"an input needs a non-empty name, got {self.name!r}")
        if not isinstance(self.shape, EventShape):
            raise QueryBuildError(f"input {self.name!r}: shape must be an EventShape, got {self.shape!r}")
        if self.settings is not None and not isinstance(self.settings, AdvanceTimeSettings):
            raise QueryBuildError(f"input {self.name!r}: settings must be AdvanceTimeSettings, got {self.settings!r}")
        if self.settings and self.settings.import_ and self.settings.import_.stream_name == self.name:
            raise QueryBuildError(f"input {self.name!r} cannot import CTIs from itself")
        ordering = self.ordering
        if ordering is not None and self.shape is EventShape.EDGE:
            raise QueryBuildError(
                f"input {self.name!r}: ordering settings take POINT or INTERVAL inputs (the arrival-time "
                "rules have no meaning for an end edge)"
            )
        if self.over is not None and (ordering is None or ordering.late_arrival_tolerance is None):
            raise QueryBuildError(
                f"input {self.name!r}: substreams (over=) need ordering settings with a late-arrival "
                "tolerance, which bounds how far apart the substreams' CTIs may be"
            )

    @property
    def payload_type(self) -> type:
        return self.source.payload_type

    @property
    def time(self) -> TimeDomain:
        """The notion of time of its events."""
        return self.notion.domain

    @property
    def ordering(self) -> EventOrderingSettings | None:
        """The input's event-ordering settings, if it has any."""
        return self.settings.ordering if self.settings is not None else None

    def describe(self) -> str:
        s = self.settings
        parts = [f"Input {self.name!r} {self.shape.name} of {self.payload_type.__name__}"]
        if s is None:
            parts.append("explicit CTIs only")
        else:
            if s.generation:
                g = s.generation
                if g.frequency is None:
                    every = "no generated CTIs"
                else:
                    n = g.frequency if isinstance(g.frequency, int) else format_duration(g.frequency)
                    unit = " events" if isinstance(g.frequency, int) else ""
                    every = f"a CTI every {n}{unit}, delay {format_duration(g.delay)}"
                parts.append(every + (", flush at end" if g.advance_to_infinity_on_shutdown else ""))
            if s.import_:
                parts.append(f"import CTIs from {s.import_.stream_name!r}")
            if s.ordering:
                o = s.ordering
                late, early = o.late_arrival_tolerance, o.early_arrival_window
                parts.append(
                    f"ordering: out-of-order tolerance {format_duration(o.out_of_order_tolerance)}, "
                    f"late-arrival tolerance {'off' if late is None else format_duration(late)}, "
                    f"early-arrival window {'off' if early is None else format_duration(early)}"
                )
            parts.append(f"policy {s.policy.name}")
        if self.over is not None:
            parts.append(f"over {x.render(self.over)}")
        return ", ".join(parts)

    def longest_lifetime(self, lifetimes: tuple[int | None, ...]) -> int | None:
        """A point lasts one tick; intervals and edges may be of any length."""
        return 1 if self.shape is EventShape.POINT else None

    def substream_key(self, keys: tuple[x.Expr | None, ...]) -> x.Expr | None:
        """The ``over=`` key."""
        return self.over

    def time_domain(self, domains: tuple[TimeDomain, ...]) -> TimeDomain:
        return self.time


def _require_record(projection: x.Expr, what: str) -> None:
    if not isinstance(projection, (x.Record, x.Input)):
        raise QueryBuildError(f"{what} must return a payload record (attrs class or dataclass), got {x.render(projection)}")


def _require_bool(expr: x.Expr, what: str) -> None:
    if expr.dtype not in (bool, object):
        raise QueryBuildError(f"{what} must be a condition (bool), got {expr.dtype.__name__}: {x.render(expr)}")


@attrs.frozen(eq=False)
class WhereNode(UnaryNode):
    SEMANTICS: ClassVar[str] = "Keeps the events whose payload satisfies the predicate (null counts as false)."
    CTI_RULE: ClassVar[str] = "CTIs pass unchanged; lifetimes are unchanged."

    predicate: x.Expr

    def __attrs_post_init__(self) -> None:
        _require_bool(self.predicate, "the where() predicate")

    @property
    def payload_type(self) -> type:
        return self.input.payload_type

    def describe(self) -> str:
        return f"Where {x.render(self.predicate)}"

    def substream_key(self, keys: tuple[x.Expr | None, ...]) -> x.Expr | None:
        """Keeps the key: each key's CTI passes unchanged."""
        return keys[0]


@attrs.frozen(eq=False)
class EventTimeNode(UnaryNode):
    SEMANTICS: ClassVar[str] = "The same events, in event time from here on (Flink's timestamp assigner)."
    CTI_RULE: ClassVar[str] = "CTIs pass unchanged; lifetimes are unchanged."

    @property
    def payload_type(self) -> type:
        return self.input.payload_type

    def describe(self) -> str:
        return "AsEventTime"

    def substream_key(self, keys: tuple[x.Expr | None, ...]) -> x.Expr | None:
        return keys[0]

    def time_domain(self, domains: tuple[TimeDomain, ...]) -> TimeDomain:
        """Event time, from ingestion or event time; processing time stays what it is."""
        if domains[0] is TimeDomain.PROCESSING:
            raise QueryBuildError("as_event_time(): a stream in processing time cannot become event time")
        return TimeDomain.EVENT


@attrs.frozen(eq=False)
class SelectNode(UnaryNode):
    SEMANTICS: ClassVar[str] = "Maps each payload to a new record."
    CTI_RULE: ClassVar[str] = "CTIs pass unchanged; lifetimes are unchanged."

    projection: x.Expr

    def __attrs_post_init__(self) -> None:
        _require_record(self.projection, "select()")

    @property
    def payload_type(self) -> type:
        return self.projection.dtype

    def describe(self) -> str:
        return f"Select {x.render(self.projection)}"

    def substream_key(self, keys: tuple[x.Expr | None, ...]) -> x.Expr | None:
        """Keeps the key when a field of the new record copies it."""
        return None if keys[0] is None else kept_key(self.projection, [keys[0]])


def list_element(items: x.Expr) -> tuple[type, bool]:
    """The element type of a list field (``e.items``), and whether elements may be null."""
    if isinstance(items, x.Attr) and items.dtype in (list, tuple):
        for f in record_fields(items.base.dtype):
            if f.name == items.name and f.element is not None:
                return f.element, f.element_nullable
    raise QueryBuildError(f"explode() takes a list field of the payload (annotated list[X] or tuple[X, ...]), got {x.render(items)}")


@attrs.frozen(eq=False)
class ExplodeNode(UnaryNode):
    SEMANTICS: ClassVar[str] = (
        "One event per element of the list `items` (in list order; none for an empty or null list), "
        "each with its input event's lifetime and the projection of the event and the element."
    )
    CTI_RULE: ClassVar[str] = "CTIs pass unchanged; lifetimes are unchanged."

    items: x.Expr
    projection: x.Expr

    def __attrs_post_init__(self) -> None:
        list_element(self.items)
        _require_record(self.projection, "explode()")

    @property
    def payload_type(self) -> type:
        return self.projection.dtype

    def describe(self) -> str:
        return f"Explode {x.render(self.items)} -> {x.render(self.projection)}"


@attrs.frozen(eq=False)
class ClipNode(UnaryNode):
    SEMANTICS: ClassVar[str] = (
        "Each event's end is clipped at the start of the next event of its group (the earliest later "
        "start; events with the same start do not clip each other): [s, min(e, next start)); payloads "
        "are unchanged."
    )
    CTI_RULE: ClassVar[str] = (
        "An event goes out at the first CTI past its start, as a start edge unless its clipped end is "
        "already before the CTI; the end edge follows at the first CTI past the clipped end (an event "
        "starting at a CTI may arrive after it). CTIs pass unchanged."
    )

    keys: tuple[x.Expr, ...] | None

    @property
    def payload_type(self) -> type:
        return self.input.payload_type

    def describe(self) -> str:
        keys = "" if self.keys is None else " by " + ", ".join(x.render(k) for k in self.keys)
        return f"ClipEventDuration{keys}"


@attrs.frozen(eq=False)
class AlterLifetimeNode(UnaryNode):
    SEMANTICS: ClassVar[str] = (
        "Moves each start by `shift`; with `duration`, each end becomes start + duration "
        "(an open edge gets its end at once), otherwise the end moves by `shift` too."
    )
    CTI_RULE: ClassVar[str] = "Each CTI moves by `shift` (a duration change leaves CTIs alone)."

    shift: int
    duration: int | None
    label: str

    def __attrs_post_init__(self) -> None:
        if self.duration is not None and self.duration <= 0:
            raise QueryBuildError(f"{self.label}: the duration must be positive, got {format_duration(self.duration)}")

    @property
    def payload_type(self) -> type:
        return self.input.payload_type

    def longest_lifetime(self, lifetimes: tuple[int | None, ...]) -> int | None:
        """The new duration, if any; a shift alone keeps every length."""
        return self.duration if self.duration is not None else lifetimes[0]

    def describe(self) -> str:
        d = "" if self.duration is None else f", duration {format_duration(self.duration)}"
        return f"{self.label}: shift {format_duration(self.shift)}{d}"

    def substream_key(self, keys: tuple[x.Expr | None, ...]) -> x.Expr | None:
        """Keeps the key: each key's CTI moves by `shift`."""
        return keys[0]


class AggregateKind(str, enum.Enum):
    """The aggregates of a window: the one table the plan and every executor consult.

    Every kind but ``count`` takes an argument and skips its nulls: None when the window has
    no non-null value (``count`` counts events, ``count_distinct`` counts distinct non-null
    values, so neither is ever null). The semantics of each are in docs/semantics.md 5.6.5.
    """

    COUNT = "count"
    SUM = "sum"
    AVG = "avg"
    MIN = "min"
    MAX = "max"
    VAR = "var"
    """Sample variance (n − 1 in the denominator; None below two values), as SQL's ``VAR_SAMP``."""
    VAR_POP = "var_pop"
    STDDEV = "stddev"
    STDDEV_POP = "stddev_pop"
    COUNT_DISTINCT = "count_distinct"
    FIRST = "first"
    """The value of the event first in (start, payload) order among those with a value."""
    LAST = "last"
    PERCENTILE = "percentile"
    """Exact, interpolating linearly between the closest ranks (SQL's ``PERCENTILE_CONT``)."""
    PERCENTILE_APPROX = "percentile_approx"
    """A value of the window's: the smallest with at least a ``fraction`` of the values at or below
    it; exact in memory, within ``1/accuracy`` of that rank on Spark."""
    COLLECT = "collect"
    """The values as a list in (start, payload) order."""
    UDA = "uda"
    """A user-defined aggregate (``tempo.Aggregator``), run over batches of values."""
    TOP = "top"
    """The events ranked ``limit`` or better by ``order`` (ties share a rank), as ranked
    records: what ``top_k`` explodes (docs/semantics.md 5.6.7)."""

    def __str__(self) -> str:  # the name users write: w.count(), agg0=count(...)
        return self.value

    @property
    def takes_argument(self) -> bool:
        return self is not AggregateKind.COUNT

    @property
    def needs_numbers(self) -> bool:
        return self in _NUMERIC_KINDS

    @property
    def ordered(self) -> bool:
        """Whether the result depends on the events' order (start, then payload), which the
        executors then supply with each value."""
        return self in (AggregateKind.FIRST, AggregateKind.LAST, AggregateKind.COLLECT)

    @property
    def mergeable(self) -> bool:
        """Whether partial results over parts of a window combine into the whole's with a fixed
        size of state (what the live executor's bulk path merges)."""
        return self in (AggregateKind.COUNT, AggregateKind.SUM, AggregateKind.AVG, AggregateKind.MIN, AggregateKind.MAX)

    def result_type(self, arg: type | None) -> type:
        """The result's type given the argument's: counts are ints; averages, variances,
        deviations and exact percentiles floats; a sum of bools is an int; a collection is a
        list; the others keep the argument's type."""
        if self in (AggregateKind.COUNT, AggregateKind.COUNT_DISTINCT):
            return int
        if self in _FLOAT_KINDS:
            return float
        if self in (AggregateKind.COLLECT, AggregateKind.TOP):
            return list
        assert arg is not None and self is not AggregateKind.UDA  # its result type is its aggregator's
        return int if self is AggregateKind.SUM and arg is bool else arg


_FLOAT_KINDS = frozenset(
    {
        AggregateKind.AVG,
        AggregateKind.VAR,
        AggregateKind.VAR_POP,
        AggregateKind.STDDEV,
        AggregateKind.STDDEV_POP,
        AggregateKind.PERCENTILE,
    }
)
_NUMERIC_KINDS = _FLOAT_KINDS | {AggregateKind.SUM, AggregateKind.PERCENTILE_APPROX}
_STATISTICS = _NUMERIC_KINDS - {AggregateKind.SUM, AggregateKind.AVG}
"""The kinds that take ints and floats but not bools (a bool's variance or median means little)."""


def _aggregate_kind(name: str) -> AggregateKind:
    try:
        return AggregateKind(name)
    except ValueError:
        raise QueryBuildError(f"unknown aggregate {name!r}") from None


@attrs.frozen
class Aggregate:
    """One aggregate of a window: ``kind`` over ``arg`` (``count`` counts events);
    ``fraction`` and ``accuracy`` for the percentiles."""

    kind: AggregateKind = attrs.field(converter=_aggregate_kind)
    arg: x.Expr | None
    fraction: float | None = None
    accuracy: int | None = None
    function: Any = None
    """For ``uda``: the aggregator (``tempo.expr.aggregator.Aggregator``)."""
    limit: int | None = None
    """For ``top``: the worst rank kept."""
    order: tuple[x.Expr, ...] = ()
    """For ``top``: what the events are ranked by, most significant first."""
    descending: tuple[bool, ...] = ()
    """For ``top``: per ``order`` expression, whether larger values rank first."""
    element: type | None = None
    """For ``top``: the ranked record class (``rank``, ``event``)."""

    def __attrs_post_init__(self) -> None:
        if self.kind is AggregateKind.TOP:
            if isinstance(self.limit, bool) or not isinstance(self.limit, int) or self.limit <= 0:
                raise QueryBuildError(f"top_k(k): k must be a positive int, got {self.limit!r}")
            if not self.order or len(self.order) != len(self.descending):
                raise QueryBuildError("top_k: by= gives the values to rank by, and descending= one bool for each")
            for e in self.order:
                x.refuse_lists(e.dtype, "a top_k(by=) value")
        elif self.limit is not None or self.order or self.element is not None:
            raise QueryBuildError(f"{self.kind}() takes no ranking")
        if (self.kind is AggregateKind.UDA) != (self.function is not None):
            raise QueryBuildError("an aggregator goes with uda() alone")
        if self.kind is AggregateKind.UDA:
            assert self.arg is not None
            check_aggregator(self.function, self.arg.dtype)
        percentile = self.kind in (AggregateKind.PERCENTILE, AggregateKind.PERCENTILE_APPROX)
        if percentile:
            f = self.fraction
            if isinstance(f, bool) or not isinstance(f, (int, float)) or not 0 <= f <= 1:
                raise QueryBuildError(f"{self.kind}(): the fraction must be a number from 0 to 1, got {f!r}")
        elif self.fraction is not None:
            raise QueryBuildError(f"{self.kind}() takes no fraction")
        if self.kind is AggregateKind.PERCENTILE_APPROX:
            a = self.accuracy
            if isinstance(a, bool) or not isinstance(a, int) or a <= 0:
                raise QueryBuildError(f"percentile_approx(): accuracy must be a positive int, got {a!r}")
        elif self.accuracy is not None:
            raise QueryBuildError(f"{self.kind}() takes no accuracy")
        if not self.kind.takes_argument:
            return
        assert self.arg is not None
        t = self.arg.dtype
        x.refuse_lists(t, f"the argument of {self.kind}()")
        numbers = (int, float, object) if self.kind in _STATISTICS else (int, float, bool, object)
        if self.kind.needs_numbers and t not in numbers:
            raise QueryBuildError(f"{self.kind} needs numbers, got {t.__name__}: {x.render(self.arg)}")

    @property
    def wide_integers(self) -> bool:
        """A sum or average of integers: added exactly (wider than 64 bits) by every executor,
        the sum's value then required to fit 64 bits (docs/semantics.md 7.4), the average
        the exact total made a float and divided by the count."""
        return self.kind in (AggregateKind.SUM, AggregateKind.AVG) and self.arg is not None and self.arg.dtype in (int, bool)

    @property
    def result_type(self) -> type:
        if self.kind is AggregateKind.UDA:
            returns: type = self.function.returns
            return returns
        return self.kind.result_type(None if self.arg is None else self.arg.dtype)

    def describe(self) -> str:
        """As the plan shows it: ``sum(e.v)``, ``percentile(e.v, 0.9)``, ``uda(Spread, e.v)``."""
        if self.function is not None:
            return f"uda({type(self.function).__qualname__}, {x.render(self.arg) if self.arg is not None else ''})"
        if self.kind is AggregateKind.TOP:
            by = ", ".join(x.render(e) + (" desc" if d else "") for e, d in zip(self.order, self.descending))
            return f"top({self.limit} by {by})"
        params = [] if self.fraction is None else [repr(self.fraction)]
        if self.accuracy is not None:
            params.append(f"accuracy={self.accuracy}")
        arg = [] if self.arg is None else [x.render(self.arg)]
        return f"{self.kind}({', '.join(arg + params)})"


@attrs.frozen(eq=False)
class WindowNode(UnaryNode):
    SEMANTICS: ClassVar[str] = (
        "Windows as `spec` defines them (its SEMANTICS); an event belongs to every window its "
        "lifetime overlaps; each non-empty window (per group) gives one event whose "
        "lifetime is the window and whose payload is the projection of the aggregates. Empty "
        "windows give nothing. On the CTI at infinity, open lifetimes count only up to the "
        "latest finite time seen by the operator (an event time, or just before its last finite CTI)."
    )
    # Holds for every window kind; the spec's CTI_RULE gives its formulas.
    CTI_RULE: ClassVar[str] = (
        "A window is emitted once the input CTI completes it; the output CTI is the input CTI, "
        "pulled back to the earliest result a window not yet complete may still give."
    )

    keys: tuple[x.Expr, ...] | None
    spec: WindowSpec
    aggregates: tuple[Aggregate, ...]
    projection: x.Expr
    timestamp: WindowTimestamp
    """The result's lifetime (the API gives ``spec.DEFAULT_TIMESTAMP`` when none is named)."""

    def __attrs_post_init__(self) -> None:
        if not isinstance(self.projection, x.Record):
            raise QueryBuildError(
                "aggregate() must return a payload record (attrs class or dataclass) built from "
                f"aggregates, keys and window bounds, got {x.render(self.projection)}"
            )
        if not isinstance(self.timestamp, WindowTimestamp):
            raise QueryBuildError(f"timestamp= takes a WindowTimestamp, got {self.timestamp!r}")
        if self.timestamp not in self.spec.TIMESTAMPS:
            allowed = ", ".join(sorted(t.name for t in self.spec.TIMESTAMPS))
            raise QueryBuildError(
                f"{self.spec.describe()} windows take timestamp= {allowed}, not {self.timestamp.name}: {self.spec.TIMESTAMPS_WHY}"
            )
        if isinstance(self.spec, SnapshotWindow) and not self.ends_known:
            if any(isinstance(e, x.WindowBound) and e.which == "end" for e in self.projection.walk()):
                raise QueryBuildError(
                    f"a snapshot window's end is not known yet when its result goes out with timestamp="
                    f"{self.timestamp.name} (a later event may still cut it); read the result's end, "
                    "or use timestamp=END or CTI"
                )

    @property
    def ends_known(self) -> bool:
        """Whether a result goes out only once its window's end is final (always, but for a
        snapshot window stamped at its start)."""
        return not isinstance(self.spec, SnapshotWindow) or self.timestamp in (WindowTimestamp.END, WindowTimestamp.CTI)

    @property
    def payload_type(self) -> type:
        return self.projection.dtype

    def longest_lifetime(self, lifetimes: tuple[int | None, ...]) -> int | None:
        """A point for the point timestamps; else each output lifetime is a window."""
        return 1 if self.timestamp.is_point else self.spec.longest_window()

    def describe(self) -> str:
        keys = "" if self.keys is None else " by " + ", ".join(x.render(k) for k in self.keys)
        aggs = ", ".join(f"agg{i}={a.describe()}" for i, a in enumerate(self.aggregates))
        stamp = "" if self.timestamp is self.spec.DEFAULT_TIMESTAMP else f" timestamp {self.timestamp.name}"
        return f"{self.spec.describe()}{keys}{stamp}: {aggs} -> {x.render(self.projection)}"

    def substream_key(self, keys: tuple[x.Expr | None, ...]) -> x.Expr | None:
        """Keeps the key when the substream key is one of the group keys and the aggregate
        record has a field with it: each key's windows close, and its CTI is pulled back, on
        that key's own CTI. Hopping windows only, and not stamped at the releasing CTI (which
        is the input's); the other kinds merge keys."""
        if not isinstance(self.spec, HoppingWindow) or self.timestamp is WindowTimestamp.CTI:
            return None
        i = self.group_index(keys[0])
        if i is None or not isinstance(self.projection, x.Record):
            return None
        for name, value in zip(self.projection.names, self.projection.values):
            if isinstance(value, x.KeyRef) and value.index == i:
                return x.attr(x.Input(0, self.projection.dtype), name)
        return None

    def group_index(self, key: x.Expr | None) -> int | None:
        """The position of the substream ``key`` among the group keys, if it is one."""
        if key is None or self.keys is None or key not in self.keys:
            return None
        return self.keys.index(key)


@attrs.frozen
class Previous:
    """ASA's ``LAG(arg, offset, default) OVER (LIMIT DURATION(limit) WHEN when)``: ``arg`` of
    the ``offset``-th event back before the event's peers, among the group's events for
    which ``when`` holds (every event without it), when it started less than ``limit`` ticks
    before (None: no limit); ``default`` (an expression of the current event, or null)
    when there is no such event. An event found whose ``arg`` is null gives null."""

    arg: x.Expr
    limit: int | None
    offset: int = 1
    default: x.Expr | None = None
    when: x.Expr | None = None

    def __attrs_post_init__(self) -> None:
        if self.limit is not None and self.limit <= 0:
            raise QueryBuildError(f"previous(): the limit must be positive, got {format_duration(self.limit)}")
        if isinstance(self.offset, bool) or not isinstance(self.offset, int) or self.offset < 1:
            raise QueryBuildError(f"previous(): offset= counts events back, an int of at least 1, got {self.offset!r}")
        if self.when is not None:
            _require_bool(self.when, "previous(when=...)")
        if self.default is not None and not _fits(self.default.dtype, self.arg.dtype):
            raise QueryBuildError(
                f"previous(): default= must be of the value's type ({self.arg.dtype.__name__}), "
                f"got {self.default.dtype.__name__}: {x.render(self.default)}"
            )

    @property
    def result_type(self) -> type:
        return self.arg.dtype

    @property
    def is_plain(self) -> bool:
        """The event just before, whichever it is, with no default: one step back in order."""
        return self.offset == 1 and self.default is None and self.when is None

    def describe(self) -> str:
        parts = [x.render(self.arg)]
        if self.offset != 1:
            parts.append(f"offset {self.offset}")
        if self.default is not None:
            parts.append(f"default {x.render(self.default)}")
        limit = "" if self.limit is None else f" within {format_duration(self.limit)}"
        when = "" if self.when is None else f" when {x.render(self.when)}"
        return f"previous({', '.join(parts)}){limit}{when}"


def _fits(given: type, wanted: type) -> bool:
    """Whether a value of type ``given`` may stand for one of ``wanted`` (``object``: a null,
    or a value of a type not known when traced)."""
    return given is object or wanted is object or given is wanted


Analytic = Aggregate | Previous
"""What an analytic projection may read beside the event: a running aggregate over the
group's events up to and including it, or the previous event's value."""


@attrs.frozen(eq=False)
class AnalyticNode(UnaryNode):
    SEMANTICS: ClassVar[str] = (
        "Per group, events in order of (start, payload); events equal in both are peers. Each event "
        "keeps its lifetime and gets the projection of itself, its group key and its analytics: "
        "running aggregates over the group's events up to it and its peers, and previous values: "
        "that of the offset-th event (of those meeting the condition) before its peers, if it "
        "started less than the limit before, else the default."
    )
    CTI_RULE: ClassVar[str] = (
        "An event goes out, in order, once the input CTI passes its start (every event before it "
        "in order is known then); CTIs pass unchanged."
    )

    keys: tuple[x.Expr, ...] | None
    analytics: tuple[Analytic, ...]
    projection: x.Expr

    def __attrs_post_init__(self) -> None:
        _require_record(self.projection, "analytic()")
        if any(isinstance(a, Aggregate) and a.kind is AggregateKind.UDA for a in self.analytics):
            raise QueryBuildError(
                "analytic() takes no uda(): a user-defined aggregate runs over a window's values in batches, "
                "not once per event; use it in a window (e.g. a snapshot window)"
            )

    @property
    def payload_type(self) -> type:
        return self.projection.dtype

    def describe(self) -> str:
        if not self.analytics and isinstance(self.projection, x.Input):
            return "OrderByTime"
        keys = "" if self.keys is None else " by " + ", ".join(x.render(k) for k in self.keys)
        parts = []
        for i, a in enumerate(self.analytics):
            if isinstance(a, Previous):
                parts.append(f"agg{i}={a.describe()}")
            else:
                parts.append(f"agg{i}=running {a.describe()}")
        return f"Analytic{keys}: {', '.join(parts) or 'none'} -> {x.render(self.projection)}"


@attrs.frozen(eq=False)
class ReleaseNode(UnaryNode):
    """Not built by the API: the cluster engine puts it on top of a query that has no
    stateful node of its own (``tempo.spark.streaming.cluster.cluster_query``), so that what
    the query's output holds, the events waiting for a CTI past their start, is kept by key
    on Spark's executors. It changes nothing the output releases. When the output keeps a
    substream key, ``keyed_by`` is that key (an expression of the input's payload): the
    release then goes by each key's own CTIs too, as the output's does."""

    keyed_by: x.Expr | None = None

    SEMANTICS: ClassVar[str] = (
        "Passes every event on unchanged, ids included, in the order the query's output releases them: by start, then arrival."
    )
    CTI_RULE: ClassVar[str] = (
        "An event goes out once the input CTI passes its start, or, with keyed_by, once its "
        "substream key's own CTI does, whichever comes first (the release rule, docs/semantics.md "
        "6); the end of an event gone out open passes as it arrives; CTIs and substream CTIs pass unchanged."
    )

    @property
    def payload_type(self) -> type:
        return self.input.payload_type

    def describe(self) -> str:
        return "Release" if self.keyed_by is None else f"Release by substream key {x.render(self.keyed_by)}"

    def substream_key(self, keys: tuple[x.Expr | None, ...]) -> x.Expr | None:
        """Keeps the key, as the output would."""
        return keys[0]


def keyed_release(node: Node) -> bool:
    """Whether ``node`` is a release by substream key (``ReleaseNode.keyed_by``)."""
    return isinstance(node, ReleaseNode) and node.keyed_by is not None


def split_conjuncts(e: x.Expr) -> list[x.Expr]:
    if isinstance(e, x.Binary) and e.op == "&":
        return split_conjuncts(e.left) + split_conjuncts(e.right)
    return [e]


def _sides(e: x.Expr) -> set[int]:
    return {i.index for i in e.walk() if isinstance(i, x.Input)}


def split_join_predicate(pred: x.Expr) -> tuple[tuple[tuple[x.Expr, x.Expr], ...], x.Expr | None]:
    """Equality conjuncts between a left-only and a right-only expression become join keys."""
    keys: list[tuple[x.Expr, x.Expr]] = []
    rest: list[x.Expr] = []
    for c in split_conjuncts(pred):
        if isinstance(c, x.Binary) and c.op == "==":
            ls, rs = _sides(c.left), _sides(c.right)
            if ls == {0} and rs == {1}:
                keys.append((c.left, c.right))
                continue
            if ls == {1} and rs == {0}:
                keys.append((c.right, c.left))
                continue
        if isinstance(c, x.Lit) and c.value is True:
            continue
        rest.append(c)
    residual: x.Expr | None = None
    for c in rest:
        residual = c if residual is None else x.Binary("&", residual, c)
    return tuple(keys), residual


@attrs.frozen(eq=False)
class MatchingNode(Node):
    """A node matching the events of two inputs by a predicate: its equalities between a left
    and a right expression are the ``keys`` (hashed), the rest the ``residual``."""

    left: Node
    right: Node
    predicate: x.Expr
    keys: tuple[tuple[x.Expr, x.Expr], ...] = attrs.field(init=False)
    residual: x.Expr | None = attrs.field(init=False)

    def _split(self, what: str) -> None:
        check_meeting(self, what.split()[1])
        _require_bool(self.predicate, what)
        keys, residual = split_join_predicate(self.predicate)
        object.__setattr__(self, "keys", keys)
        object.__setattr__(self, "residual", residual)

    def inputs(self) -> tuple[Node, ...]:
        return (self.left, self.right)

    def describe_match(self) -> str:
        keys = ", ".join(f"{x.render(a)} == {x.render(b)}" for a, b in self.keys) or "none"
        return f"keys [{keys}] residual {'none' if self.residual is None else x.render(self.residual)}"


@attrs.frozen(eq=False)
class JoinNode(MatchingNode):
    SEMANTICS: ClassVar[str] = (
        "Temporal inner join: a left and a right event match when the predicate holds and their "
        "lifetimes overlap; the output lifetime is the intersection, the payload the projection."
    )
    CTI_RULE: ClassVar[str] = "The output CTI is the minimum of both inputs' CTIs."

    projection: x.Expr

    def __attrs_post_init__(self) -> None:
        self._split("the join predicate")
        if not isinstance(self.projection, (x.Record, x.Input)):
            raise QueryBuildError(f"join select must return a payload record, got {x.render(self.projection)}")

    @property
    def payload_type(self) -> type:
        return self.projection.dtype

    def longest_lifetime(self, lifetimes: tuple[int | None, ...]) -> int | None:
        """An overlap is no longer than either side."""
        known = [b for b in lifetimes if b is not None]
        return min(known) if known else None

    def describe(self) -> str:
        return f"Join {self.describe_match()} -> {x.render(self.projection)}"

    def key_index(self, keys: tuple[x.Expr | None, ...]) -> int | None:
        """Which equality key pairs the two inputs' substream keys, if one does."""
        left, right = keys
        if left is None or right is None:
            return None
        pair = (left, reindex(right, 1))
        return self.keys.index(pair) if pair in self.keys else None

    def substream_key(self, keys: tuple[x.Expr | None, ...]) -> x.Expr | None:
        """Keeps the key when the join equates the two inputs' substream keys and the output
        record copies it: each key's output CTI is the minimum of that key's CTIs."""
        i = self.key_index(keys)
        if i is None:
            return None
        return kept_key(self.projection, list(self.keys[i]))


@attrs.frozen(eq=False)
class FollowedByNode(MatchingNode):
    SEMANTICS: ClassVar[str] = (
        "A temporal pattern, A followed by B within a duration (Flink CEP's `followedBy` with "
        "`within`): for each left event a, the first right event b by (start, payload) with "
        "a.start < b.start < a.start + within and the predicate holding; one point at b's start, "
        "its payload the projection of (a, b). Left events without such a b give nothing."
    )
    CTI_RULE: ClassVar[str] = (
        "The output CTI is the minimum of both inputs' CTIs; a match goes out once it passes b's "
        "start (every earlier right event, and every left event before b, is known then)."
    )

    within: int
    projection: x.Expr

    def __attrs_post_init__(self) -> None:
        self._split("the followed_by on= predicate")
        _require_record(self.projection, "followed_by()")
        if self.within <= 0:
            raise QueryBuildError(f"followed_by(within=) must be positive, got {format_duration(self.within)}")

    @property
    def payload_type(self) -> type:
        return self.projection.dtype

    def longest_lifetime(self, lifetimes: tuple[int | None, ...]) -> int | None:
        """Every match is a point."""
        return 1

    def describe(self) -> str:
        return f"FollowedBy within {format_duration(self.within)} {self.describe_match()} -> {x.render(self.projection)}"


@attrs.frozen(eq=False)
class AntiJoinNode(MatchingNode):
    SEMANTICS: ClassVar[str] = (
        "Left anti semi join: the parts of each left lifetime during which no right event "
        "matching the predicate is alive; a left event may give several fragments."
    )
    CTI_RULE: ClassVar[str] = (
        "The output CTI is the minimum of both inputs' CTIs; a fragment goes out once it passes the "
        "fragment's start, and its end once the right input's CTI (or the output CTI) reaches it."
    )

    def __attrs_post_init__(self) -> None:
        self._split("the anti_join predicate")

    @property
    def payload_type(self) -> type:
        return self.left.payload_type

    def longest_lifetime(self, lifetimes: tuple[int | None, ...]) -> int | None:
        """Unbounded: an uncovered stretch of a left event may stay open."""
        return None

    def describe(self) -> str:
        return f"AntiJoin {self.describe_match()}"


@attrs.frozen(eq=False)
class UnionNode(Node):
    SEMANTICS: ClassVar[str] = "All events of both inputs, unchanged."
    CTI_RULE: ClassVar[str] = "The output CTI is the minimum of both inputs' CTIs."

    left: Node
    right: Node

    def __attrs_post_init__(self) -> None:
        check_meeting(self, "union")
        if self.left.payload_type is not self.right.payload_type:
            raise QueryBuildError(
                f"union needs the same payload type on both sides, got "
                f"{self.left.payload_type.__qualname__} and {self.right.payload_type.__qualname__}"
            )

    @property
    def payload_type(self) -> type:
        return self.left.payload_type

    def inputs(self) -> tuple[Node, ...]:
        return (self.left, self.right)

    def longest_lifetime(self, lifetimes: tuple[int | None, ...]) -> int | None:
        """The longer of both inputs'."""
        known = [b for b in lifetimes if b is not None]
        return max(known) if len(known) == len(lifetimes) else None

    def describe(self) -> str:
        return "Union"

    def substream_key(self, keys: tuple[x.Expr | None, ...]) -> x.Expr | None:
        """Keeps the key when both inputs have the same one: each key's output CTI is the
        minimum of that key's CTIs."""
        return keys[0] if keys[0] is not None and keys[0] == keys[1] else None
