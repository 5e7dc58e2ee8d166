"""The typed fluent API: ``Stream[T]`` and its operators.

Every method traces its lambdas once (see ``tempo.expr.trace``) and returns a new
``Stream`` over a new plan node; nothing runs until an executor is given the stream.
Lambdas are typed on the user's payload classes, so the IDE completes field names and
mypy checks them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeVar, cast, overload

from tempo.errors import QueryBuildError
from tempo.events import EventShape, InputItem
from tempo.expr import nodes as x
from tempo.expr.aggregator import Aggregator
from tempo.expr.schema import is_record_type, record_fields
from tempo.expr.trace import Traced, call_traced, check_arity, param_names, record_proxies, require_traced, trace, trace_records
from tempo.plan import nodes as p
from tempo.plan.group_apply import GroupInputNode, apply_per_group
from tempo.plan.query import Query
from tempo.plan.ranked import ranked_classes
from tempo.plan.windows import CountWindow, HoppingWindow, SessionWindow, SnapshotWindow, WindowSpec, WindowTimestamp
from tempo.clocks import EventTime, TimeNotion
from tempo.settings import AdvanceTimeGenerationSettings, AdvanceTimePolicy, AdvanceTimeSettings
from tempo.sources import Source, as_source
from tempo.ticks import LONGEST_DURATION, duration_ticks, format_duration

if TYPE_CHECKING:
    from _typeshed import DataclassInstance
    from typing import TypeAlias

    from attrs import AttrsInstance

    PayloadRecord: TypeAlias = "AttrsInstance | DataclassInstance"

T = TypeVar("T")
U = TypeVar("U")
R = TypeVar("R", bound="PayloadRecord")
"""The payload of a projection's output: an attrs class or a dataclass (checked by mypy, and
when the query is built)."""
K = TypeVar("K")
V = TypeVar("V")
N = TypeVar("N", int, float)


def _ticks(value: timedelta, what: str, positive: bool = False) -> int:
    if not isinstance(value, timedelta):
        raise QueryBuildError(f"{what} must be a timedelta, got {value!r}")
    # Longer than the whole range of time is as long as it (every shift or lifetime then
    # saturates at infinity alike), and it keeps the ticks within a long on Spark.
    ticks = max(-LONGEST_DURATION, min(LONGEST_DURATION, duration_ticks(value)))
    if positive and ticks <= 0:
        raise QueryBuildError(f"{what} must be positive, got {format_duration(value)}")
    return ticks


class Stream(Generic[T]):
    """A temporal stream of events with payloads of type ``T``."""

    __slots__ = ("node",)

    def __init__(self, node: p.Node) -> None:
        self.node = node

    # ---- inputs -------------------------------------------------------------------------
    @overload
    @staticmethod
    def create(
        name: str,
        source: Iterable[InputItem[Any]],
        shape: EventShape,
        settings: AdvanceTimeSettings | None = None,
        *,
        payload_type: type[T],
        over: Callable[[T], Any] | None = None,
        time: TimeNotion = EventTime(),
    ) -> Stream[T]: ...

    @overload
    @staticmethod
    def create(
        name: str,
        source: Source[T] | Iterable[InputItem[T]],
        shape: EventShape,
        settings: AdvanceTimeSettings | None = None,
        *,
        over: Callable[[T], Any] | None = None,
        time: TimeNotion = EventTime(),
    ) -> Stream[T]: ...

    @staticmethod
    def create(
        name: str,
        source: Source[Any] | Iterable[InputItem[Any]],
        shape: EventShape,
        settings: AdvanceTimeSettings | None = None,
        *,
        payload_type: type[Any] | None = None,
        over: Callable[[Any], Any] | None = None,
        time: TimeNotion = EventTime(),
    ) -> Stream[Any]:
        """Declare an input, as StreamInsight's ``CepStream.Create``.

        ``source`` is a ``Source`` or an iterable of input items (``Point``, ``Interval``,
        ``EdgeStart``/``EdgeEnd``, ``Cti``); a table goes in a table source
        (``tempo.sources.ArrowSource`` for a pyarrow Table or pandas DataFrame,
        ``DataFrameSource``, ``ParquetSource``, ``CsvSource``), whose columns are checked
        against the payload's fields when the query runs. ``settings`` override the source's declared
        defaults; with neither, the input advances only by its explicit ``Cti`` items and
        a CTI violation is an error. ``payload_type`` pins ``T`` when the items cannot
        (an empty list, or a list mixing events and CTIs that mypy types as ``object``).

        ``over`` splits the input into substreams by a key of the payload (ASA's
        ``TIMESTAMP BY ... OVER key``): with ordering settings each key keeps its own CTI, so
        one device's skewed clock neither drops nor delays another's events.

        ``time`` is where the events' starts come from (``tempo.clocks``): ``EventTime()``,
        the data (the default); ``IngestionTime()``, each item's arrival; ``ProcessingTime(clock)``,
        a clock's reading as the input processes the item. The last two generate the input's
        CTIs from the stamps, so they take no ``settings`` (docs/semantics.md 3.11).
        """
        if not isinstance(source, Source):
            source = as_source(name, source, payload_type)
        elif payload_type is not None and payload_type is not source.payload_type:
            raise QueryBuildError(
                f"input {name!r}: payload_type {payload_type.__qualname__} differs from the source's {source.payload_type.__qualname__}"
            )
        if not is_record_type(source.payload_type):
            raise QueryBuildError(f"input {name!r}: payload type {source.payload_type!r} must be an attrs class or a dataclass")
        record_fields(source.payload_type)  # resolve annotations now, so errors surface here
        if not isinstance(time, TimeNotion):
            raise QueryBuildError(f"input {name!r}: time= takes EventTime(), IngestionTime() or ProcessingTime(), got {time!r}")
        if not isinstance(time, EventTime):
            if settings is not None or over is not None:
                raise QueryBuildError(
                    f"input {name!r} is in {time.domain.value}: its CTIs follow its stamps, so it takes no settings "
                    "and no over= (flush it at the end with advance_to_infinity_on_shutdown=True on the time notion)"
                )
            every = getattr(time, "cti_every", timedelta(0))
            generation = AdvanceTimeGenerationSettings(
                frequency=1 if every == timedelta(0) else every,
                advance_to_infinity_on_shutdown=time.advance_to_infinity_on_shutdown,  # type: ignore[attr-defined]
            )
            settings = AdvanceTimeSettings(generation, policy=AdvanceTimePolicy.DROP)  # nothing is ever late
        effective = settings if settings is not None else source.advance_time_settings(shape)
        key = None if over is None else trace_records(over, [source.payload_type], f"the over= key of input {name!r}", "key")
        return Stream(p.SourceNode(name, source, shape, effective, key, notion=time))

    @property
    def payload_type(self) -> type[T]:
        """The payload record class of this stream's events."""
        return cast(type[T], self.node.payload_type)

    # ---- stateless ----------------------------------------------------------------------
    def where(self, predicate: Callable[[T], bool]) -> Stream[T]:
        """Keep the events whose payload satisfies ``predicate``. CTIs pass unchanged."""
        return Stream(p.WhereNode(self.node, trace_records(predicate, [self.payload_type], "the where() predicate", "predicate")))

    def select(self, projection: Callable[[T], R]) -> Stream[R]:
        """Map each payload to a new record, e.g. ``lambda e: Alert(device=e.device)``.

        The record's fields may be constants (``Tag(kind="x")``), but a field from ``is`` or
        ``in`` (a Python bool at trace time) is refused: use ``tempo.is_null`` / ``tempo.is_in``.
        """
        return Stream(p.SelectNode(self.node, trace_records(projection, [self.payload_type], "the select() projection", "record")))

    def explode(self, items: Callable[[T], Sequence[V] | None], select: Callable[[T, V], R]) -> Stream[R]:
        """One event per element of a list field, with its event's lifetime, in list order
        (Flink's ``flatMap``; SQL's ``explode``): ``lambda e: e.lines`` and
        ``lambda e, line: Out(order=e.id, sku=line)``. An empty or null list gives nothing."""
        traced = trace_records(items, [self.payload_type], "the explode() items", "value")
        element, nullable = p.list_element(traced)
        names = param_names(select)
        event = Traced(x.Input(0, self.payload_type, names[0] if names else ""))
        item = Traced(x.ExplodedItem(element, nullable))
        projection = trace(select, [event, item], "the explode() projection", "record")
        return Stream(p.ExplodeNode(self.node, traced, projection))

    def clip_event_duration(self) -> Stream[T]:
        """Each event's end clipped at the start of the next event (StreamInsight's and Trill's
        ``ClipEventDuration``): with start edges, "a value holds until the next reading".
        ``group_by(k).clip_event_duration()`` clips within each key."""
        return Stream(p.ClipNode(self.node, None))

    def shift_event_time(self, delta: timedelta) -> Stream[T]:
        """Move every lifetime, and every CTI, by ``delta``."""
        shift = _ticks(delta, "shift_event_time(delta)")
        return Stream(p.AlterLifetimeNode(self.node, shift, None, "ShiftEventTime"))

    def alter_event_lifetime(self, shift: timedelta, duration: timedelta) -> Stream[T]:
        """Move each start (and CTI) by ``shift`` and give each event the lifetime ``duration``."""
        s = _ticks(shift, "alter_event_lifetime(shift)")
        d = _ticks(duration, "alter_event_lifetime(duration)", positive=True)
        return Stream(p.AlterLifetimeNode(self.node, s, d, "AlterEventLifetime"))

    def alter_event_duration(self, duration: timedelta) -> Stream[T]:
        """Give each event the lifetime ``duration`` from its start. CTIs are unchanged."""
        d = _ticks(duration, "alter_event_duration(duration)", positive=True)
        return Stream(p.AlterLifetimeNode(self.node, 0, d, "AlterEventDuration"))

    def to_points(self) -> Stream[T]:
        """Each event as a point at its start (StreamInsight's ``ToPointEventStream``):
        ``alter_event_duration`` of one tick. CTIs are unchanged."""
        return Stream(p.AlterLifetimeNode(self.node, 0, 1, "ToPointEventStream"))

    # ---- windows ------------------------------------------------------------------------
    def tumbling(self, size: timedelta, offset: timedelta = timedelta(0)) -> WindowedStream[T]:
        """Windows ``[w, w + size)`` one after another, aligned to the epoch (plus ``offset``)."""
        return self.hopping(size, size, offset)

    def hopping(self, size: timedelta, hop: timedelta, offset: timedelta = timedelta(0)) -> WindowedStream[T]:
        """Windows ``[w, w + size)`` starting every ``hop`` at ``w = offset + k * hop``."""
        return WindowedStream(self, None, _hopping_window(size, hop, offset))

    def session(self, gap: timedelta, max_duration: timedelta | None = None) -> WindowedStream[T]:
        """Sessions of activity: a session ends ``gap`` after the last tick of its events (a
        point's is its start); with ``max_duration`` it is also cut on the epoch grid of
        ``max_duration`` (first at the first multiple at or after its start plus
        ``max_duration``). Results are points at the session's last tick by default
        (``WindowTimestamp.END``). docs/semantics.md 5.6.2."""
        return WindowedStream(self, None, _session_window(gap, max_duration))

    def count_window(self, size: int, slide: int | None = None, *, by: Literal["events", "starts"] = "events") -> WindowedStream[T]:
        """Windows of ``size`` events in order of start (ties by payload), one every ``slide``
        events (default ``size``: tumbling). Only full windows give results: points at their
        latest start by default (``WindowTimestamp.LATEST``). ``by="starts"`` counts distinct
        start times instead, a window holding every event of its ``size`` starts
        (StreamInsight's ``CountByStartTimeWindow`` is ``slide=1``)."""
        return WindowedStream(self, None, _count_window(size, slide, by))

    def snapshot(self) -> WindowedStream[T]:
        """A window between every two consecutive event endpoints (starts and ends), holding
        the events alive in it. Results have the window's lifetime by default, going out as a
        start edge once the window's events are final and ended once its end is."""
        return WindowedStream(self, None, SnapshotWindow())

    def as_event_time(self) -> Stream[T]:
        """The same events, in event time from here on (Flink's timestamp assigner): a stream
        in ingestion time may then meet streams in event time (docs/semantics.md 3.11)."""
        return Stream(p.EventTimeNode(self.node))

    # ---- in time order -------------------------------------------------------------------
    def order_by_time(self) -> Stream[T]:
        """The same events, passed on in order of start (then payload) once a CTI commits
        them (Flink's ``orderByTime``; a reorder buffer). Results never change; what it adds is
        the order in which the next operator and ``result.raw`` see them."""
        return Stream(p.AnalyticNode(self.node, None, (), x.Input(0, self.payload_type)))

    def analytic(self, fn: Callable[[T, Analytics[T]], R]) -> Stream[R]:
        """Each event, in order of start, with analytics over the events before it:
        ``lambda e, a: Out(v=e.v, prev=a.previous(lambda e: e.v), total=a.sum(lambda e: e.v))``.
        Lifetimes are kept; an event goes out once a CTI commits it."""
        analytics: Analytics[T] = Analytics(self.payload_type)
        event = record_proxies(fn, [self.payload_type])[0]
        projection = trace(fn, [event, analytics], "the analytic() projection", "record")
        return Stream(p.AnalyticNode(self.node, None, tuple(analytics._aggregates), projection))

    def group_by(self, key: Callable[[T], K]) -> GroupedStream[T, K]:
        """Group by ``key`` (a field, or a tuple of fields) for per-key windows."""
        what = "the group_by() key"
        traced = call_traced(key, record_proxies(key, [self.payload_type]), what)
        parts = traced if isinstance(traced, tuple) else (traced,)
        if not parts:
            raise QueryBuildError(f"{what} is an empty tuple: group by at least one field")
        exprs = tuple(require_traced(k, key, what, "key") for k in parts)
        for e in exprs:
            x.refuse_lists(e.dtype, f"the group_by() key {x.render(e)}")
        return GroupedStream(self, exprs, isinstance(traced, tuple))

    # ---- binary -------------------------------------------------------------------------
    def join(self, right: Stream[U], on: Callable[[T, U], bool], select: Callable[[T, U], R]) -> Stream[R]:
        """Temporal inner join: pairs whose lifetimes overlap and satisfy ``on``.

        The output lifetime is the intersection; equality conjuncts of ``on`` between a
        left and a right expression become hash keys.
        """
        types = [self.payload_type, right.payload_type]
        predicate = trace_records(on, types, "the join on= predicate", "predicate")
        return Stream(p.JoinNode(self.node, right.node, predicate, trace_records(select, types, "the join select=", "record")))

    def left_outer_join(
        self,
        right: Stream[U],
        on: Callable[[T, U], bool],
        select: Callable[[T, U], R],
        default: U | None = None,
        *,
        unmatched: Callable[[T], R] | None = None,
    ) -> Stream[R]:
        """Temporal left outer join (Trill's ``LeftOuterJoin``, ASA's ``LEFT OUTER JOIN``): the
        pairs of ``join``, and each part of a left lifetime during which no matching right
        event is alive, given either ``default`` standing for the right side
        (``select(left, default)``) or, for full control (e.g. nulls where the right side's
        fields are not optional), ``unmatched(left)``: Trill's outer selector.

        It is exactly ``join(right, on, select)`` united with ``anti_join(right, on)`` mapped
        that way, so its CTI rule is theirs: an unmatched part goes out once the output CTI (the
        lesser of both inputs') passes its start, as a start edge while a right event may still
        cut it, and nothing is ever retracted (docs/semantics.md 5.9.1).
        """
        if (default is None) == (unmatched is None):
            raise QueryBuildError(
                "left_outer_join takes either default= (a right-side record standing in where nothing "
                "matches) or unmatched= (a projection of the left event alone), not both or neither"
            )
        check_arity(select, ("left", "right"), "the left_outer_join select=")
        if unmatched is not None:
            check_arity(unmatched, ("left",), "the left_outer_join unmatched=")
        if default is not None:
            if isinstance(default, (Stream, Traced)) or not is_record_type(type(default)) or not isinstance(default, right.payload_type):
                raise QueryBuildError(
                    f"left_outer_join(default=) must be a {right.payload_type.__qualname__}, the right side's payload "
                    f"type (a constant standing for it where nothing matches), got {default!r}"
                )
            fixed = default

            def unmatched_default(left: T) -> R:
                return select(left, fixed)

            unmatched = unmatched_default
        assert unmatched is not None
        matched = self.join(right, on, select)
        alone = self.anti_join(right, on).select(unmatched)
        if alone.payload_type is not matched.payload_type:
            raise QueryBuildError(
                f"left_outer_join: unmatched= gives {alone.payload_type.__qualname__} but select= gives "
                f"{matched.payload_type.__qualname__}; both must give the same record type"
            )
        return matched.union(alone)

    def followed_by(self, then: Stream[U], on: Callable[[T, U], bool], within: timedelta, select: Callable[[T, U], R]) -> Stream[R]:
        """A temporal pattern, this stream's event A followed by an event B of ``then`` less than
        ``within`` later (Flink CEP's ``A.followedBy(B).within(d)``; ASA's ``MATCH_RECOGNIZE``
        for two steps): for each A, the first B (by start, then payload) starting after it and
        before ``A.start + within`` for which ``on(a, b)`` holds (its equalities are the keys);
        a point at B's start with payload ``select(a, b)``. Conditions on A or B alone are a
        ``where`` before. A match goes out once the CTI of both streams passes B's start, and
        is never retracted (docs/semantics.md 5.12)."""
        types = [self.payload_type, then.payload_type]
        predicate = trace_records(on, types, "the followed_by on= predicate", "predicate")
        projection = trace_records(select, types, "the followed_by select=", "record")
        ticks = _ticks(within, "followed_by(within=)", positive=True)
        return Stream(p.FollowedByNode(self.node, then.node, predicate, ticks, projection))

    def anti_join(self, right: Stream[U], on: Callable[[T, U], bool]) -> Stream[T]:
        """The parts of each left lifetime during which no matching right event is alive."""
        types = [self.payload_type, right.payload_type]
        return Stream(p.AntiJoinNode(self.node, right.node, trace_records(on, types, "the anti_join on= predicate", "predicate")))

    def union(self, other: Stream[T]) -> Stream[T]:
        """All events of both streams."""
        return Stream(p.UnionNode(self.node, other.node))

    # ---- inspection ---------------------------------------------------------------------
    def explain(self) -> str:
        """The logical plan, each node with its CTI rule."""
        return Query.build(self.node).explain()

    def __repr__(self) -> str:
        return f"Stream[{self.payload_type.__name__}]({self.node.describe()})"


def _hopping_window(size: timedelta, hop: timedelta, offset: timedelta) -> HoppingWindow:
    s = _ticks(size, "window size", positive=True)
    h = _ticks(hop, "window hop", positive=True)
    o = _ticks(offset, "window offset")
    return HoppingWindow(s, h, o % h)


def _session_window(gap: timedelta, max_duration: timedelta | None) -> SessionWindow:
    cap = None if max_duration is None else _ticks(max_duration, "session max_duration", positive=True)
    return SessionWindow(_ticks(gap, "session gap", positive=True), cap)


def _count_window(size: int, slide: int | None, by: str = "events") -> CountWindow:
    for what, n in (("size", size), ("slide", slide)):
        if n is not None and (not isinstance(n, int) or isinstance(n, bool)):
            raise QueryBuildError(f"count window {what} must be a number of {by} (int), got {n!r}")
    return CountWindow(size, size if slide is None else slide, by)


class Aggregates(Generic[T]):
    """Aggregates over a set of events: a window's (``Window``), or the events so far
    (``Analytics``)."""

    _NAME = "w"

    def __init__(self, payload_type: type) -> None:
        self._payload_type = payload_type
        self._aggregates: list[Any] = []  # p.Aggregate, and p.Previous for Analytics

    def _ref(self, analytic: p.Analytic) -> Any:
        if analytic in self._aggregates:  # the same aggregate twice is computed once
            index = self._aggregates.index(analytic)
        else:
            index = len(self._aggregates)
            self._aggregates.append(analytic)
        checked = ""
        if isinstance(analytic, p.Aggregate) and analytic.kind is p.AggregateKind.SUM and analytic.wide_integers:
            checked = f"{self._NAME}.{analytic.describe()}"
        return Traced(x.AggRef(index, analytic.result_type, checked))

    def _add(self, kind: str, fn: Callable[[T], Any] | None, fraction: float | None = None, accuracy: int | None = None) -> Any:
        what = f"the argument of {self._NAME}.{kind}()"
        arg = None if fn is None else trace_records(fn, [self._payload_type], what, "value")
        return self._ref(p.Aggregate(kind, arg, fraction, accuracy))

    def count(self) -> int:
        """The number of events in the window."""
        return cast(int, self._add("count", None))

    @overload
    def sum(self, value: Callable[[T], N]) -> N: ...
    @overload
    def sum(self, value: Callable[[T], N | None]) -> N | None: ...

    def sum(self, value: Callable[[T], Any]) -> Any:
        """The sum of ``value`` over the window's events (nulls skipped).

        None only when every value in the window is null, so it is typed ``N | None`` exactly
        when ``value`` may be null (windows are never empty).
        """
        return self._add("sum", value)

    @overload
    def avg(self, value: Callable[[T], float]) -> float: ...
    @overload
    def avg(self, value: Callable[[T], float | None]) -> float | None: ...

    def avg(self, value: Callable[[T], float | None]) -> float | None:
        """The mean of ``value`` over the window's events (nulls skipped).

        None only when every value in the window is null: typed ``float | None`` exactly when
        ``value`` may be null.
        """
        return cast("float | None", self._add("avg", value))

    def min(self, value: Callable[[T], V]) -> V:
        """The least ``value`` in the window (nulls skipped; None when all are null, so the
        result is nullable exactly when ``value`` is)."""
        return cast(V, self._add("min", value))

    def max(self, value: Callable[[T], V]) -> V:
        """The greatest ``value`` in the window (nulls skipped; None when all are null, so the
        result is nullable exactly when ``value`` is)."""
        return cast(V, self._add("max", value))

    def var(self, value: Callable[[T], float | None]) -> float | None:
        """The sample variance of ``value`` (n − 1 in the denominator, as SQL's ``VAR_SAMP``
        and ASA's ``VAR``; nulls skipped): None below two values."""
        return cast("float | None", self._add("var", value))

    def var_pop(self, value: Callable[[T], float | None]) -> float | None:
        """The population variance of ``value`` (n in the denominator, ASA's ``VARP``; nulls
        skipped): None without a value."""
        return cast("float | None", self._add("var_pop", value))

    def stddev(self, value: Callable[[T], float | None]) -> float | None:
        """The sample standard deviation of ``value`` (ASA's ``STDEV``): the square root of
        ``var``; None below two values."""
        return cast("float | None", self._add("stddev", value))

    def stddev_pop(self, value: Callable[[T], float | None]) -> float | None:
        """The population standard deviation of ``value`` (ASA's ``STDEVP``); None without a value."""
        return cast("float | None", self._add("stddev_pop", value))

    def count_distinct(self, value: Callable[[T], object]) -> int:
        """The number of distinct non-null values of ``value`` (0 when all are null)."""
        return cast(int, self._add("count_distinct", value))

    def first(self, value: Callable[[T], V]) -> V:
        """``value`` of the earliest event that has one: by start, ties by the payload's
        fields (docs/semantics.md 5.6.5), nulls skipped; None when all are null."""
        return cast(V, self._add("first", value))

    def last(self, value: Callable[[T], V]) -> V:
        """``value`` of the latest event that has one (the order of ``first``); None when all
        are null."""
        return cast(V, self._add("last", value))

    @overload
    def percentile(self, value: Callable[[T], float], fraction: float) -> float: ...
    @overload
    def percentile(self, value: Callable[[T], float | None], fraction: float) -> float | None: ...

    def percentile(self, value: Callable[[T], float | None], fraction: float) -> float | None:
        """The exact percentile at ``fraction`` (0 to 1) of ``value``, interpolated linearly
        between the closest ranks (SQL's ``PERCENTILE_CONT``, ASA's ``PERCENTILE_CONT``); nulls
        skipped, None when all are null. It keeps every value of the window."""
        return cast("float | None", self._add("percentile", value, fraction))

    @overload
    def median(self, value: Callable[[T], float]) -> float: ...
    @overload
    def median(self, value: Callable[[T], float | None]) -> float | None: ...

    def median(self, value: Callable[[T], float | None]) -> float | None:
        """``percentile(value, 0.5)``."""
        return cast("float | None", self._add("percentile", value, 0.5))

    @overload
    def percentile_approx(self, value: Callable[[T], N], fraction: float, accuracy: int = 10000) -> N: ...
    @overload
    def percentile_approx(self, value: Callable[[T], N | None], fraction: float, accuracy: int = 10000) -> N | None: ...

    def percentile_approx(self, value: Callable[[T], Any], fraction: float, accuracy: int = 10000) -> Any:
        """A value of the window near the percentile at ``fraction``: the smallest value with
        at least ``fraction`` of the values at or below it (ASA's ``PERCENTILE_DISC``). Exact
        in memory; on Spark (``percentile_approx``) exact while a window holds up to about
        ``accuracy`` values, and beyond within a rank error of n / ``accuracy``, in bounded
        memory. Nulls skipped; None when all are null."""
        return self._add("percentile_approx", value, fraction, accuracy)

    def uda(self, aggregator: Aggregator[Any, U], value: Callable[[T], object]) -> U | None:
        """A user-defined aggregate (``tempo.Aggregator``: zero, accumulate, merge, result over
        pyarrow batches) of ``value`` over the window's events, nulls skipped: the escape hatch
        for an aggregate tempo does not have. Vectorised on every executor (docs/semantics.md
        5.6.6); windows only, not ``analytic``."""
        what = f"the argument of {self._NAME}.uda()"
        arg = trace_records(value, [self._payload_type], what, "value")
        return cast("U | None", self._ref(p.Aggregate("uda", arg, function=aggregator)))

    def collect(self, value: Callable[[T], V | None]) -> list[V]:
        """The values of ``value`` as a list, in the events' order (by start, ties by the
        payload's fields), nulls skipped (ASA's ``Collect``); empty when all are null."""
        return cast("list[V]", self._add("collect", value))


class Window(Aggregates[T]):
    """The ``w`` of an aggregate lambda: aggregates over the events of one window."""

    @property
    def start(self) -> datetime:
        """The window's start: for a session, its first start (or the cut it began at); for a
        count window, its first event's start."""
        return cast(datetime, Traced(x.WindowBound("start")))

    @property
    def end(self) -> datetime:
        """The window's end (exclusive): for a session, its last tick plus the gap (or the
        cut); for a count window, its last event's start plus one tick. A snapshot's end is
        known only with ``timestamp=END`` or ``CTI``."""
        return cast(datetime, Traced(x.WindowBound("end")))


class Analytics(Aggregates[T]):
    """The ``a`` of an analytic lambda: for the current event, running aggregates over its
    group's events up to it (and its peers: events with the same start and payload), and the
    previous event's value (docs/semantics.md 5.11)."""

    _NAME = "a"

    @overload
    def previous(
        self,
        value: Callable[[T], V],
        limit: timedelta | None = None,
        *,
        offset: int = 1,
        default: None = None,
        when: Callable[[T], bool] | None = None,
    ) -> V | None: ...

    @overload
    def previous(
        self,
        value: Callable[[T], V],
        limit: timedelta | None = None,
        *,
        offset: int = 1,
        default: V | Callable[[T], V],
        when: Callable[[T], bool] | None = None,
    ) -> V: ...

    def previous(
        self,
        value: Callable[[T], V],
        limit: timedelta | None = None,
        *,
        offset: int = 1,
        default: V | Callable[[T], V] | None = None,
        when: Callable[[T], bool] | None = None,
    ) -> V | None:
        """ASA's ``LAG(value, offset, default) OVER (PARTITION BY ... LIMIT DURATION(limit)
        WHEN when)``: ``value`` of the ``offset``-th event back (1: the one just before) in
        this event's group, counted among the events before its peers for which ``when``
        holds (all of them without it), if that event started less than ``limit`` before.
        When there is no such event (too few, too far back, none meeting ``when``), the
        ``default``: a constant, or a function of this event (None without one). An event
        found whose value is null gives None, not the default (docs/semantics.md 5.11)."""
        arg = trace_records(value, [self._payload_type], "the argument of a.previous()", "value")
        ticks = None if limit is None else _ticks(limit, "previous() limit", positive=True)
        fallback = None
        if default is not None:
            if callable(default):
                fallback = trace_records(default, [self._payload_type], "a.previous(default=...)", "value")
            else:
                fallback = x.Lit(float(cast(int, default)) if arg.dtype is float and type(default) is int else default)
        condition = None if when is None else trace_records(when, [self._payload_type], "a.previous(when=...)", "predicate")
        return cast("V | None", self._ref(p.Previous(arg, ticks, offset, fallback, condition)))


class WindowedStream(Generic[T]):
    """A stream cut into windows, waiting for ``aggregate``."""

    def __init__(self, stream: Stream[T], keys: tuple[x.Expr, ...] | None, spec: WindowSpec) -> None:
        self._stream, self._keys, self._spec = stream, keys, spec

    def aggregate(self, fn: Callable[[Window[T]], R], timestamp: WindowTimestamp | None = None) -> Stream[R]:
        """One output record per non-empty window, e.g. ``lambda w: Stats(n=w.count())``;
        ``timestamp`` chooses its lifetime (the window kind's default when None)."""
        window: Window[T] = Window(self._stream.payload_type)
        projection = trace(fn, [window], "the aggregate() projection", "record")
        return _window_stream(self._stream, self._keys, self._spec, window, projection, timestamp)

    def top_k(
        self,
        k: int,
        by: Callable[[T], Any],
        select: Callable[[T, int], R],
        descending: bool | Sequence[bool] = False,
        timestamp: WindowTimestamp | None = None,
    ) -> Stream[R]:
        """StreamInsight's TopK: the events of each window ranked by ``by`` (a value, or a tuple
        of values most significant first), ``descending`` per value; those ranked ``k`` or
        better, each as ``select(event, rank)`` with the window's result lifetime
        (``timestamp``). Events with equal ``by`` values share a rank (SQL's ``RANK``), so a
        tie at the last place keeps more than ``k``. Nulls rank as the least value
        (docs/semantics.md 5.6.7)."""
        return _top_k(self._stream, self._keys, self._spec, k, by, select, descending, timestamp)


class GroupedStream(Generic[T, K]):
    """A stream grouped by a key, waiting for a window."""

    def __init__(self, stream: Stream[T], keys: tuple[x.Expr, ...], is_tuple: bool) -> None:
        self._stream, self._keys, self._is_tuple = stream, keys, is_tuple

    def tumbling(self, size: timedelta, offset: timedelta = timedelta(0)) -> GroupedWindowedStream[T, K]:
        """Per-key tumbling windows."""
        return self.hopping(size, size, offset)

    def hopping(self, size: timedelta, hop: timedelta, offset: timedelta = timedelta(0)) -> GroupedWindowedStream[T, K]:
        """Per-key hopping windows."""
        return GroupedWindowedStream(self, _hopping_window(size, hop, offset))

    def session(self, gap: timedelta, max_duration: timedelta | None = None) -> GroupedWindowedStream[T, K]:
        """Per-key sessions (``Stream.session``)."""
        return GroupedWindowedStream(self, _session_window(gap, max_duration))

    def count_window(
        self, size: int, slide: int | None = None, *, by: Literal["events", "starts"] = "events"
    ) -> GroupedWindowedStream[T, K]:
        """Per-key count windows (``Stream.count_window``)."""
        return GroupedWindowedStream(self, _count_window(size, slide, by))

    def snapshot(self) -> GroupedWindowedStream[T, K]:
        """Per-key snapshot windows (``Stream.snapshot``)."""
        return GroupedWindowedStream(self, SnapshotWindow())

    def clip_event_duration(self) -> Stream[T]:
        """Each event's end clipped at the start of the next event of its key
        (``Stream.clip_event_duration``)."""
        return Stream(p.ClipNode(self._stream.node, self._keys))

    def analytic(self, fn: Callable[[K, T, Analytics[T]], R]) -> Stream[R]:
        """Per key, each event in order of start with analytics over the key's events before
        it: ``lambda key, e, a: Out(key=key, prev=a.previous(lambda e: e.v, timedelta(minutes=5)))``
        (``Stream.analytic``)."""
        payload_type = self._stream.payload_type
        names = param_names(fn)
        key = self._key_proxies(names[0] if names else "key")
        analytics: Analytics[T] = Analytics(payload_type)
        event = Traced(x.Input(0, payload_type, names[1] if len(names) > 1 else ""))
        projection = trace(fn, [key, event, analytics], "the analytic() projection", "record")
        return Stream(p.AnalyticNode(self._stream.node, self._keys, tuple(analytics._aggregates), projection))

    def apply(self, query: Callable[[Stream[T]], Stream[U]], select: Callable[[K, U], R]) -> Stream[R]:
        """Run ``query`` on each group's events alone (StreamInsight's and Trill's
        ``GroupApply``): ``lambda s: s.tumbling(timedelta(minutes=1)).aggregate(...)`` is given
        one group's stream and may use every operator, windows and joins between its own
        streams included; a stream from outside it (not built from ``s``) is joined whole by
        every group. Each result goes out as ``select(key, result)``, e.g.
        ``lambda key, r: Out(device=key, n=r.n)`` (or ``r`` itself). The results are those of
        running ``query`` on every group apart and uniting them; every group sees the input's
        CTIs (docs/semantics.md 5.13)."""
        payload_type = self._stream.payload_type
        group = GroupInputNode(payload_type)
        result = call_traced(query, [Stream(group)], "the apply() sub-query")
        if not isinstance(result, Stream):
            raise QueryBuildError(f"the apply() sub-query must return a Stream (built from its argument), got {result!r}")
        per_group, key_names = apply_per_group(self._stream.node, self._keys, group, result.node)
        record = x.Input(0, per_group.payload_type, "r")
        keys = [Traced(x.attr(record, n)) for n in key_names]
        fields = tuple(f.name for f in record_fields(result.payload_type))
        value = Traced(x.Record(result.payload_type, fields, tuple(x.attr(record, f) for f in fields)))
        projection = trace(select, [tuple(keys) if self._is_tuple else keys[0], value], "the apply() select=", "record")
        return Stream(p.SelectNode(per_group, projection))

    def _key_proxies(self, spelled: str) -> Any:
        proxies = [
            Traced(x.KeyRef(i, k.dtype, k.nullable, f"{spelled}[{i}]" if self._is_tuple else spelled)) for i, k in enumerate(self._keys)
        ]
        return tuple(proxies) if self._is_tuple else proxies[0]


class GroupedWindowedStream(Generic[T, K]):
    """Per-key windows, waiting for ``aggregate``."""

    def __init__(self, grouped: GroupedStream[T, K], spec: WindowSpec) -> None:
        self._grouped, self._spec = grouped, spec

    def aggregate(self, fn: Callable[[K, Window[T]], R], timestamp: WindowTimestamp | None = None) -> Stream[R]:
        """One output record per key and non-empty window: ``lambda key, w: Stats(key=key, ...)``;
        ``timestamp`` chooses its lifetime (the window kind's default when None)."""
        g = self._grouped
        names = param_names(fn)
        key = g._key_proxies(names[0] if names else "key")
        window: Window[T] = Window(g._stream.payload_type)
        projection = trace(fn, [key, window], "the aggregate() projection", "record")
        return _window_stream(g._stream, g._keys, self._spec, window, projection, timestamp)

    def top_k(
        self,
        k: int,
        by: Callable[[T], Any],
        select: Callable[[T, int], R],
        descending: bool | Sequence[bool] = False,
        timestamp: WindowTimestamp | None = None,
    ) -> Stream[R]:
        """Per key, the events of each window ranked ``k`` or better (``WindowedStream.top_k``)."""
        g = self._grouped
        return _top_k(g._stream, g._keys, self._spec, k, by, select, descending, timestamp)


def _top_k(
    stream: Stream[Any],
    keys: tuple[x.Expr, ...] | None,
    spec: WindowSpec,
    k: int,
    by: Callable[[Any], Any],
    select: Callable[[Any, int], Any],
    descending: bool | Sequence[bool],
    timestamp: WindowTimestamp | None,
) -> Stream[Any]:
    """A window aggregate ranking each window's events into a list of ``Ranked`` records
    (``AggregateKind.TOP``), exploded into one event per ranked event."""
    payload_type = stream.payload_type
    names = param_names(by)
    event = Traced(x.Input(0, payload_type, names[0] if names else "e"))
    ranked_by = call_traced(by, [event], "the top_k by=")
    values = ranked_by if isinstance(ranked_by, tuple) else (ranked_by,)
    order = tuple(require_traced(v, by, "the top_k by=", "value") for v in values)
    flags = (descending,) * len(order) if isinstance(descending, bool) else tuple(descending)
    if not all(isinstance(f, bool) for f in flags):
        raise QueryBuildError(f"top_k(descending=) takes a bool, or one per by= value, got {descending!r}")
    ranked, top = ranked_classes(payload_type)
    aggregate = p.Aggregate("top", x.Input(0, payload_type, "e"), limit=k, order=order, descending=flags, element=ranked)
    projection = x.Record(top, ("ranked",), (x.AggRef(0, list),))
    stamp = spec.DEFAULT_TIMESTAMP if timestamp is None else timestamp
    windows = p.WindowNode(stream.node, keys, spec, (aggregate,), projection, stamp)
    item = x.ExplodedItem(ranked, False)
    projected = trace(select, [Traced(x.attr(item, "event")), Traced(x.attr(item, "rank"))], "the top_k select=", "any")
    if not isinstance(projected, x.Record) and is_record_type(projected.dtype):  # the event itself: its fields
        fields = tuple(f.name for f in record_fields(projected.dtype))
        projected = x.Record(projected.dtype, fields, tuple(x.attr(projected, f) for f in fields))
    if not isinstance(projected, x.Record):
        raise QueryBuildError(
            f"top_k(select=) must return a payload record (the event, or one built from it and its rank), got {x.render(projected)}"
        )
    return Stream(p.ExplodeNode(windows, x.attr(x.Input(0, top, "w"), "ranked"), projected))


def _window_stream(
    stream: Stream[Any],
    keys: tuple[x.Expr, ...] | None,
    spec: WindowSpec,
    window: Window[Any],
    projection: x.Expr,
    timestamp: WindowTimestamp | None,
) -> Stream[Any]:
    stamp = spec.DEFAULT_TIMESTAMP if timestamp is None else timestamp
    node = p.WindowNode(stream.node, keys, spec, tuple(window._aggregates), projection, stamp)
    return Stream(node)
