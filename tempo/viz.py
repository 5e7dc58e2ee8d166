"""Timeline pictures of what a query did: each input's events and CTIs, what the policies
dropped or adjusted, and the output's events and CTIs, one lane per input and output (and,
when asked, per key).

    timeline = tempo.viz.plot(stream)                  # runs the query in memory
    timeline = tempo.viz.plot(stream, spark_result)    # the output of another executor
    timeline = result.plot(stream, by_key=True, path="run.png")

Reading a picture:

* a point is a tick ``|`` at its start; an interval a bar over ``[start, end)``; an event
  whose end never came (an edge never closed, or any lifetime reaching infinity) a bar that
  runs into the ``∞`` column and ends in an arrowhead;
* a CTI is a dark vertical line across its lane with ``^`` at the foot (a substream key's
  own CTI: dashed, in purple, on that key's lane); a CTI at infinity stands in the ``∞``
  column;
* an adjusted event is drawn where it was admitted (orange), its lifetime as received faded
  and dashed, with an arrow from the received time to the admitted one;
* a dropped event is drawn faded where it was received, with a red ``x`` at its start.

The input lanes come from replaying the query's inputs through the in-memory reference
ingress (the same code ``InMemoryExecutor`` runs), so they show exactly the CTIs each input
generated, imported or was given, and every policy decision. The output lane is the given
``Result`` (of any executor), or an in-memory run.

matplotlib is an optional extra (``pip install 'tempo-streams[plot]'``): importing tempo or
this module never imports it; only drawing does.
"""

from __future__ import annotations

import io
import os
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal

import attrs

from tempo.api.stream import Stream
from tempo.errors import TempoError, UnsupportedError
from tempo.events import Point
from tempo.result import Rejection, Result, Rule
from tempo.ticks import INF, from_ticks, is_infinite, to_ticks

if TYPE_CHECKING:
    from matplotlib.artist import Artist
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

    from tempo.runtime.ingress import Ingress, Prepared
    from tempo.plan.query import Query

__all__ = ["INSTALL_HINT", "Lane", "Mark", "PlotError", "Timeline", "plot"]

INSTALL_HINT = "pip install 'tempo-streams[plot]'"
"""How to install what drawing needs."""

DEFAULT_LIMIT = 1000
"""The most events (marks, over all lanes) one picture draws unless ``limit=`` says more."""

Status = Literal["admitted", "adjusted", "dropped"]


class PlotError(TempoError):
    """A timeline cannot be drawn: matplotlib is missing, the arguments do not fit the query,
    or there are too many events to draw readably."""


@attrs.frozen
class Mark:
    """One event as a lane draws it."""

    start: datetime
    """The admitted start (for a dropped event: the start as received)."""
    end: datetime
    """The admitted end; ``INFINITY`` (or naive ``datetime.max``) while open or never closed."""
    payload: Any
    status: Status = "admitted"
    """``admitted`` as received; ``adjusted``: admitted with another lifetime than received
    (moved by ADJUST, or left open because its end edge was dropped); ``dropped``: not
    admitted at all."""
    received_start: datetime | None = None
    """For adjusted and dropped events: the lifetime as received (an end edge that never
    came leaves ``received_end`` at infinity)."""
    received_end: datetime | None = None
    rejections: tuple[Rejection, ...] = ()
    """What the policies did to it (a start edge and its end edge may both be rejected)."""
    position: int | None = None
    """For input events: the position of the item that opened the event in its input."""
    point: bool = False
    """True for a point (a one-tick lifetime)."""

    @property
    def open(self) -> bool:
        """True when the end never came (the lifetime reaches infinity)."""
        return is_infinite(self.end)


@attrs.frozen
class Lane:
    """One horizontal lane of the picture: an input's or the output's events and CTIs (of
    one key, when split by key)."""

    title: str
    kind: Literal["input", "output", "rejected"]
    """``rejected`` is an input seen only through a ``Result`` (its rejected events)."""
    name: str | None
    """The input's name; None for the output."""
    marks: tuple[Mark, ...]
    ctis: tuple[datetime, ...]
    """The CTIs of the input or output, in order (an input's after generation, import and
    the never-go-back rule)."""
    key_ctis: tuple[datetime, ...] = ()
    """On a lane of one substream key: that key's own CTIs, ahead of ``ctis``."""
    key: Any = None
    keyed: bool = False
    """True when the lane holds one key (``key``) of a split lane."""


# ---- what to draw ---------------------------------------------------------------------------


@attrs.define
class _Event:
    """An input event being recorded during the replay (ticks)."""

    position: int
    kind: int
    received_start: int
    received_end: int
    payload: Any
    start: int | None = None
    end: int = INF
    rejections: list[Rejection] = attrs.Factory(list)

    def mark(self, dt: Callable[[int], datetime]) -> Mark:
        from tempo.runtime.ingress import POINT

        point = self.kind == POINT
        if self.start is None:
            return Mark(
                dt(self.received_start),
                dt(self.received_end),
                self.payload,
                "dropped",
                dt(self.received_start),
                dt(self.received_end),
                tuple(self.rejections),
                self.position,
                point,
            )
        if (self.start, self.end) == (self.received_start, self.received_end):
            return Mark(dt(self.start), dt(self.end), self.payload, "admitted", None, None, tuple(self.rejections), self.position, point)
        return Mark(
            dt(self.start),
            dt(self.end),
            self.payload,
            "adjusted",
            dt(self.received_start),
            dt(self.received_end),
            tuple(self.rejections),
            self.position,
            point,
        )


@attrs.define
class _Input:
    """What the replay saw at one input."""

    name: str
    events: list[_Event] = attrs.Factory(list)
    ctis: list[int] = attrs.Factory(list)
    key_ctis: list[tuple[Any, int]] = attrs.Factory(list)
    key_of: Callable[[Any], Any] | None = None


def _replay_inputs(query: Query) -> tuple[list[_Input], Callable[[int], datetime]]:
    """Every input's admitted and rejected events and its CTIs, by the in-memory ingress in
    the merged arrival order, exactly as ``InMemoryExecutor.run`` processes them (the
    operators are left out: only what enters the query is recorded)."""
    from tempo.runtime import engine as ex
    from tempo.runtime.build import Build
    from tempo.runtime.ingress import END, START, TimestampMode

    mode = TimestampMode()
    build = Build(mode, query)
    ingresses = ex.build_ingresses(build, query)

    def dt(t: int) -> datetime:
        return from_ticks(t, naive=mode.naive is True)

    def unreadable(what: str, e: UnsupportedError) -> PlotError:
        return PlotError(
            f"{what} cannot be read in this process ({e.reason}), so its events cannot be "
            "replayed here: draw the output alone with inputs=False"
        )

    records = [_Input(s.name, key_of=ingresses[s.name].key_of) for s in query.sources]
    processes = [_recorder(ingresses[r.name], r, build.rejected, dt, START, END) for r in records]
    try:
        streams = ex.prepared_inputs(query, mode)
    except UnsupportedError as e:
        raise unreadable(e.what, e) from e

    def lazily(items: Iterator[Prepared], name: str) -> Iterator[Prepared]:
        try:
            yield from items
        except UnsupportedError as e:
            raise unreadable(f"input {name!r}", e) from e

    ex.process_in_arrival_order([lazily(s, r.name) for s, r in zip(streams, records)], processes)
    for source in query.sources:
        ingresses[source.name].shutdown()
    return records, dt


def _recorder(
    ingress: Ingress, record: _Input, rejected: list[Any], dt: Callable[[int], datetime], start_kind: int, end_kind: int
) -> Callable[[Prepared], None]:
    """Wires ``ingress``'s outputs into ``record`` and returns the function that processes
    one prepared item while noting what the ingress did with it."""
    from tempo.runtime.engine import rejection

    by_id: dict[int, _Event] = {}
    open_edges: dict[int, list[_Event]] = {}  # received start -> start edges, in arrival order
    current: list[_Event | None] = [None]

    def insert(eid: int, start: int, end: int | None, payload: Any) -> None:
        event = current[0]
        assert event is not None
        event.start, event.end = start, INF if end is None else end
        by_id[eid] = event

    def end(eid: int, t: int) -> None:
        by_id[eid].end = t

    ingress.emit_insert, ingress.emit_end = insert, end
    ingress.emit_cti = record.ctis.append
    ingress.emit_key_cti = lambda key, t: record.key_ctis.append((key, t))

    def process(rec: Prepared) -> None:
        _, kind, start, stop, payload, position = rec[:6]
        seen = len(rejected)
        event: _Event | None = None
        if kind == end_kind:
            waiting = open_edges.get(start, [])
            event = next((e for e in waiting if e.payload == payload), None)
            if event is not None:
                waiting.remove(event)
                event.received_end = stop
        elif kind <= start_kind:  # a point, interval or start edge
            event = _Event(position, kind, start, INF if kind == start_kind else stop, payload)
            record.events.append(event)
            if kind == start_kind:
                open_edges.setdefault(start, []).append(event)
        current[0] = event
        ingress.process(rec)
        current[0] = None
        if event is not None:
            for r in rejected[seen:]:
                if r[3] is not Rule.START_EDGE_DROPPED:  # the start edge's drop says it already
                    event.rejections.append(rejection(r, dt))

    return process


def _input_lanes(records: list[_Input], dt: Callable[[int], datetime], key: _KeySpec) -> list[Lane]:
    lanes: list[Lane] = []
    for record in records:
        marks = [e.mark(dt) for e in record.events]
        ctis = tuple(dt(t) for t in record.ctis)
        key_of = key.function(record.key_of)
        if key_of is None:
            lanes.append(Lane(f"input {record.name}", "input", record.name, tuple(marks), ctis))
            continue
        groups = _group(marks, key_of, f"input {record.name!r}")
        for k, t in record.key_ctis:
            groups.setdefault(k, [])
        for k in _sorted_keys(groups):
            own = tuple(dt(t) for kk, t in record.key_ctis if kk == k)
            lanes.append(Lane(f"input {record.name} · {_key_text(k)}", "input", record.name, tuple(groups[k]), ctis, own, k, True))
    return lanes


def _output_lanes(result: Result[Any], key_of: Callable[[Any], Any] | None) -> list[Lane]:
    marks = [Mark(e.start, e.end, e.payload, point=_ticks(e.end) == _ticks(e.start) + 1) for e in result.events]
    ctis = tuple(result.ctis)
    if key_of is None:
        return [Lane("output", "output", None, tuple(marks), ctis)]
    groups = _group(marks, key_of, "the output")
    for k in result.substream_ctis:
        groups.setdefault(k, [])
    return [
        Lane(f"output · {_key_text(k)}", "output", None, tuple(groups[k]), ctis, tuple(result.substream_ctis.get(k, ())), k, True)
        for k in _sorted_keys(groups)
    ]


def _rejection_lanes(result: Result[Any], names: Sequence[str], key_of: Callable[[Any], Any] | None) -> list[Lane]:
    """Inputs seen only through a ``Result``: their rejected events (no CTIs)."""
    by_input: dict[str, list[Mark]] = {}
    for j in result.rejected:
        if j.rule is Rule.START_EDGE_DROPPED:  # its start edge is on record, dropped
            continue
        item, admitted = j.item, j.admitted_as
        start: datetime = item.start
        point = isinstance(item, Point)
        naive = start.tzinfo is None
        end = getattr(item, "end", None)  # intervals and end edges
        if end is None:
            end = from_ticks(_ticks(start) + 1 if point else INF, naive=naive)  # a point, or an open start edge
        if j.rule is Rule.END_BEFORE_CTI:  # the edge ends at the CTI, or stays open
            closed = admitted.end if admitted is not None else from_ticks(INF, naive=naive)
            mark = Mark(start, closed, item.payload, "adjusted", start, end, (j,), j.position)
        elif admitted is None:
            mark = Mark(start, end, item.payload, "dropped", start, end, (j,), j.position, point)
        else:
            moved: datetime = admitted.start
            new_end = from_ticks(_ticks(moved) + 1, naive=naive) if point else end
            mark = Mark(moved, new_end, item.payload, "adjusted", start, end, (j,), j.position, point)
        by_input.setdefault(j.input, []).append(mark)
    lanes: list[Lane] = []
    for name in names:
        marks = by_input.get(name, [])
        if not marks:
            continue
        if key_of is None:
            lanes.append(Lane(f"input {name}\n(rejected only)", "rejected", name, tuple(marks), ()))
            continue
        groups = _group(marks, key_of, f"input {name!r}")
        lanes.extend(
            Lane(f"input {name} · {_key_text(k)}\n(rejected only)", "rejected", name, tuple(groups[k]), (), (), k, True)
            for k in _sorted_keys(groups)
        )
    return lanes


@attrs.frozen
class _KeySpec:
    """How lanes are split: not at all, by each lane's substream key, or by a function."""

    mode: Literal["none", "substream", "function"]
    fn: Callable[[Any], Any] | None = None

    def function(self, substream_key: Callable[[Any], Any] | None) -> Callable[[Any], Any] | None:
        if self.mode == "none":
            return None
        if self.mode == "substream":
            return substream_key
        return self.fn


def _group(marks: list[Mark], key_of: Callable[[Any], Any], what: str) -> dict[Any, list[Mark]]:
    groups: dict[Any, list[Mark]] = {}
    for m in marks:
        try:
            k = key_of(m.payload)
            groups.setdefault(k, []).append(m)
        except Exception as e:  # the user's function, on any payload of the lane
            raise PlotError(
                f"by_key could not take the key of {what}'s payload {m.payload!r}: {type(e).__name__}: {e} "
                "(the function must accept the payloads of every lane, e.g. lambda p: getattr(p, 'device', None))"
            ) from e
    return groups


def _sorted_keys(groups: dict[Any, Any]) -> list[Any]:
    try:
        return sorted(groups, key=lambda k: (k is None, k))
    except TypeError:
        return sorted(groups, key=repr)


def _key_text(key: Any) -> str:
    return f"key {key!r}" if not isinstance(key, str) else key


def _ticks(t: datetime) -> int:
    return to_ticks(t)


# ---- the picture ---------------------------------------------------------------------------


class Timeline:
    """A drawn timeline: ``figure`` is the matplotlib ``Figure``; ``lanes`` what it shows.

    In Jupyter the object displays itself as the picture (``_repr_png_``, ``_repr_svg_``);
    ``save(path)`` writes a PNG or SVG file. ``artists`` gives, per lane (in the order of
    ``lanes``), the matplotlib artists drawn for it by role: ``"events"`` (one per mark, in
    the order of ``Lane.marks``: a ``Line2D`` tick for a point, a ``Rectangle`` bar
    otherwise), ``"ctis"`` and ``"key_ctis"`` (one vertical ``Line2D`` per CTI, in order),
    ``"received"`` (the faded lifetimes as received), ``"moves"`` (the arrows of adjusted
    events), ``"dropped"`` (the red ``x`` marks), ``"heads"`` (the arrowheads of open
    lifetimes) and ``"labels"``.
    """

    def __init__(self, figure: Figure, lanes: list[Lane], artists: list[dict[str, list[Artist]]]) -> None:
        self.figure = figure
        self.lanes = lanes
        self.artists = artists

    def save(self, path: str | os.PathLike[str], dpi: float = 100) -> None:
        """Write the picture to ``path``, a ``.png`` or ``.svg`` file."""
        suffix = os.path.splitext(os.fspath(path))[1].lower()
        if suffix not in (".png", ".svg"):
            raise PlotError(f"cannot write {os.fspath(path)!r}: a timeline is saved as .png or .svg")
        self.figure.savefig(path, format=suffix[1:], dpi=dpi)

    def _repr_png_(self) -> bytes:
        buffer = io.BytesIO()
        self.figure.savefig(buffer, format="png", dpi=100)
        return buffer.getvalue()

    def _repr_svg_(self) -> str:
        buffer = io.StringIO()
        self.figure.savefig(buffer, format="svg")
        return buffer.getvalue()

    def __repr__(self) -> str:
        return f"Timeline({len(self.lanes)} lanes: {', '.join(repr(lane.title.replace(chr(10), ' ')) for lane in self.lanes)})"


def plot(
    query: Stream[Any] | Result[Any],
    result: Result[Any] | None = None,
    *,
    by_key: bool | Callable[[Any], object] = False,
    label: Callable[[Any], object] | None = None,
    inputs: bool = True,
    time_range: tuple[datetime, datetime] | None = None,
    limit: int = DEFAULT_LIMIT,
    title: str | None = None,
    width: float = 11.0,
    path: str | os.PathLike[str] | None = None,
) -> Timeline:
    """Draw what a query did, as a timeline with one lane per input and one for the output.

    ``query`` is the query's output ``Stream``: its inputs are replayed through the in-memory
    ingress (their events, what the policies dropped or adjusted, their CTIs), and the output
    lane is ``result`` when given (a ``Result`` of this query from any executor), else an
    in-memory run. ``query`` may also be a ``Result`` alone: then the picture has the output
    and, per input, only the rejected events (a ``Result`` does not hold the input events or
    CTIs).

    ``by_key``: ``True`` gives one lane per substream key (``over=``) of each input that has
    one, and per key of the output when it keeps the key (with each key's own CTIs); a
    function of the payload (e.g. ``lambda p: p.device``, a group key) splits every lane by
    its value. ``label``: a function of the payload whose text is written next to each
    event. ``inputs=False`` draws the output (and the rejections of a given ``result``)
    without replaying the inputs. ``time_range=(start, end)`` draws only what overlaps
    ``[start, end)``. A picture of more than ``limit`` events is refused (``PlotError``):
    narrow it with ``time_range`` or raise ``limit``. ``path``: also save to this ``.png`` or
    ``.svg`` file.

    Needs matplotlib (``pip install 'tempo-streams[plot]'``); raises ``PlotError`` without it.
    """
    _require_matplotlib()
    if not isinstance(limit, int) or limit < 1:
        raise PlotError(f"limit must be a positive number of events, got {limit!r}")
    if time_range is not None and not (
        isinstance(time_range, tuple)
        and len(time_range) == 2
        and all(isinstance(t, datetime) for t in time_range)
        and _ticks(time_range[0]) < _ticks(time_range[1])
    ):
        raise PlotError(f"time_range must be a (start, end) pair of datetimes with start before end, got {time_range!r}")
    if by_key is not True and by_key is not False and not callable(by_key):
        raise PlotError(f"by_key must be True, False or a function of the payload, got {by_key!r}")
    key = _KeySpec("substream") if by_key is True else _KeySpec("none") if by_key is False else _KeySpec("function", by_key)

    lanes: list[Lane]
    if isinstance(query, Result):
        if result is not None:
            raise PlotError("plot(result) takes one Result; to draw the inputs too, pass the query first: plot(stream, result)")
        lanes = _result_lanes(query, None, key)
    elif isinstance(query, Stream):
        lanes = _stream_lanes(query, result, key, inputs)
    else:
        raise PlotError(f"plot takes the query's output Stream (and its Result) or a Result, got {type(query).__name__}")

    if time_range is not None:
        lanes = [_within(lane, _ticks(time_range[0]), _ticks(time_range[1])) for lane in lanes]
    count = sum(len(lane.marks) for lane in lanes)
    if count > limit:
        busiest = max(lanes, key=lambda lane: len(lane.marks))
        raise PlotError(
            f"{count} events to draw (lane {busiest.title.splitlines()[0]!r} alone has {len(busiest.marks)}), more "
            f"than limit={limit}: a timeline that dense cannot be read. Draw a stretch of it with "
            "time_range=(start, end), or raise limit="
        )
    labels = _labels(lanes, label)
    timeline = _draw(lanes, labels, time_range, title, width, note=_note(query, inputs))
    if path is not None:
        timeline.save(path)
    return timeline


def _require_matplotlib() -> None:
    try:
        import matplotlib  # noqa: F401
        import matplotlib.figure  # noqa: F401
    except ImportError as e:
        raise PlotError(f"drawing a timeline needs matplotlib, an optional extra of tempo: {INSTALL_HINT}") from e


def _stream_lanes(stream: Stream[Any], result: Result[Any] | None, key: _KeySpec, inputs: bool) -> list[Lane]:
    from tempo.runtime.engine import run_query
    from tempo.runtime.codegen import compile_expression
    from tempo.plan.query import Query

    query = Query.build(stream.node)
    names = [s.name for s in query.sources]
    if result is not None:
        if not isinstance(result, Result):
            raise PlotError(f"plot(stream, result): result must be a Result, got {type(result).__name__}")
        if set(result.metrics) != set(names):
            raise PlotError(f"this result is not a run of this query: its inputs are {sorted(result.metrics)}, the query's {sorted(names)}")
    output_key = query.substream_key(query.root)
    output_key_of = key.function(None if output_key is None else compile_expression(output_key, 1))
    if key.mode == "substream" and output_key is None and all(s.over is None for s in query.sources):
        raise PlotError(
            "by_key=True draws one lane per substream key, the key an input is given with over= in "
            "Stream.create (docs/semantics.md 3.10), and no input of this query has one; to split lanes "
            "by a field, pass a function of the payload instead, e.g. by_key=lambda p: p.device"
        )
    if not inputs:
        output = result if result is not None else run_query(query)
        return _rejection_lanes(output, names, key.fn if key.mode == "function" else None) + _output_lanes(output, output_key_of)
    records, dt = _replay_inputs(query)
    output = result if result is not None else run_query(query)
    return _input_lanes(records, dt, key) + _output_lanes(output, output_key_of)


def _result_lanes(result: Result[Any], names: Sequence[str] | None, key: _KeySpec) -> list[Lane]:
    if key.mode == "substream":
        raise PlotError(
            "by_key=True draws one lane per substream key, the key an input is given with over= in "
            "Stream.create (docs/semantics.md 3.10), which only the query knows, not a Result: pass the query "
            "too, result.plot(stream, by_key=True) when its inputs use over=, or split lanes by a field with "
            "a function of the payload, by_key=lambda p: p.device"
        )
    return _rejection_lanes(result, list(names or result.metrics), key.fn) + _output_lanes(result, key.fn)


def _note(query: Stream[Any] | Result[Any], inputs: bool) -> str | None:
    if isinstance(query, Result) or not inputs:
        return "Inputs: only their rejected events (a Result holds no input events or CTIs); plot(stream, result) draws them."
    return None


def _within(lane: Lane, lo: int, hi: int) -> Lane:
    def overlaps(m: Mark) -> bool:
        first = min(_ticks(m.start), _ticks(m.received_start) if m.received_start is not None else INF)
        last = max(_ticks(m.end), _ticks(m.received_end) if m.received_end is not None else 0)
        return first < hi and last > lo

    def inside(ts: tuple[datetime, ...]) -> tuple[datetime, ...]:
        return tuple(t for t in ts if lo <= _ticks(t) <= hi or _ticks(t) >= INF)

    return attrs.evolve(lane, marks=tuple(m for m in lane.marks if overlaps(m)), ctis=inside(lane.ctis), key_ctis=inside(lane.key_ctis))


def _labels(lanes: list[Lane], label: Callable[[Any], object] | None) -> list[list[str]]:
    if label is None:
        return [["" for _ in lane.marks] for lane in lanes]
    out: list[list[str]] = []
    for lane in lanes:
        texts: list[str] = []
        for m in lane.marks:
            try:
                texts.append(str(label(m.payload)))
            except Exception as e:  # the user's function
                raise PlotError(
                    f"label could not label the payload {m.payload!r} of lane {lane.title.splitlines()[0]!r}: {type(e).__name__}: {e}"
                ) from e
        out.append(texts)
    return out


# ---- drawing --------------------------------------------------------------------------------

_INPUT, _OUTPUT, _ADJUSTED, _DROPPED, _FADED = "#4c72b0", "#3f8f52", "#dd7c2f", "#c8313b", "#9a9a9a"
_CTI, _KEY_CTI = "#262626", "#7b4fb3"
_FONT = 7.5  # event labels, points
_ROW = 0.26  # inches per row of events
_PAD_ROWS = 0.9  # rows of space at the top and bottom of each lane


@attrs.define
class _Geometry:
    """Where things go along x (matplotlib date numbers)."""

    lo: float
    hi: float
    inf: float
    right: float
    char: float  # the width of one label character

    def x(self, t: datetime | int) -> float:
        ticks = t if isinstance(t, int) else _ticks(t)
        if ticks >= INF:
            return self.inf
        return _num(ticks)


def _dates() -> Any:
    """``matplotlib.dates`` (untyped)."""
    import matplotlib.dates

    return matplotlib.dates


def _num(ticks: int) -> float:
    """A finite time in ticks as a matplotlib date number."""
    return float(_dates().date2num(from_ticks(ticks, naive=True)))


def _geometry(lanes: list[Lane], time_range: tuple[datetime, datetime] | None, axes_width: float) -> _Geometry:
    num = _num
    finite: list[int] = []
    for lane in lanes:
        for m in lane.marks:
            for t in (m.start, m.end, m.received_start, m.received_end):
                if t is not None and _ticks(t) < INF:
                    finite.append(_ticks(t))
        finite.extend(_ticks(t) for t in lane.ctis + lane.key_ctis if _ticks(t) < INF)
    if time_range is not None:
        lo, hi = num(_ticks(time_range[0])), num(_ticks(time_range[1]))
        pad = 0.0
    elif finite:
        lo, hi = num(min(finite)), num(max(finite))
        if hi - lo < 1e-9:
            lo, hi = lo - 1 / 1440, hi + 1 / 1440  # one minute either side of a single instant
        pad = (hi - lo) * 0.03
    else:
        lo, hi, pad = 0.0, 1.0, 0.0
    span = hi - lo
    inf = hi + pad + span * 0.07
    right = inf + span * 0.035
    left = lo - pad
    char = (right - left) * (_FONT * 0.58 / 72) / axes_width
    return _Geometry(left, hi + pad, inf, right, char)


@attrs.frozen
class _Placed:
    mark: Mark
    text: str
    row: int


def _pack(lane: Lane, texts: list[str], g: _Geometry) -> tuple[list[_Placed], int]:
    """Rows for the marks of one lane, so that no two marks or labels overlap."""
    order = sorted(range(len(lane.marks)), key=lambda i: (_ticks(lane.marks[i].start), i))
    rows: list[float] = []  # right end of what each row holds
    placed: dict[int, _Placed] = {}
    for i in order:
        m, text = lane.marks[i], texts[i]
        left, right = _extent(m, text, g)
        row = next((r for r, end in enumerate(rows) if end + g.char * 0.8 <= left), len(rows))
        if row == len(rows):
            rows.append(right)
        else:
            rows[row] = right
        placed[i] = _Placed(m, text, row)
    return [placed[i] for i in range(len(lane.marks))], max(len(rows), 1)


def _extent(m: Mark, text: str, g: _Geometry) -> tuple[float, float]:
    x0, x1 = g.x(m.start), g.x(m.end)
    left, right = x0, max(x1, x0 + g.char * 0.7)
    if m.received_start is not None:
        left = min(left, g.x(m.received_start) - g.char * 0.7)
        right = max(right, g.x(m.received_start) + g.char * 0.7)
        if m.received_end is not None:
            right = max(right, g.x(m.received_end))
    if text:
        right = max(right, _label_x(m, text, g) + g.char * len(text))
    return left - g.char * 0.5, right


def _label_x(m: Mark, text: str, g: _Geometry) -> float:
    x0, x1 = g.x(m.start), g.x(m.end)
    if m.point or m.status == "dropped":
        return x0 + g.char * 0.9
    if x1 - x0 > g.char * (len(text) + 1.2):
        return x0 + g.char * 0.5  # inside the bar
    if m.open:  # nothing can follow infinity: right of the start, over the bar
        return x0 + g.char * 0.5
    return x1 + g.char * 0.6


def _draw(
    lanes: list[Lane],
    labels: list[list[str]],
    time_range: tuple[datetime, datetime] | None,
    title: str | None,
    width: float,
    note: str | None,
) -> Timeline:
    from matplotlib.figure import Figure

    title_chars = max((len(line) for lane in lanes for line in lane.title.splitlines() + [_summary(lane)]), default=6)
    left_in = 0.25 + title_chars * 0.068
    right_in = 0.25
    axes_width = max(width - left_in - right_in, 2.0)
    g = _geometry(lanes, time_range, axes_width)

    packed = [_pack(lane, texts, g) for lane, texts in zip(lanes, labels)]
    heights = [rows + 2 * _PAD_ROWS for _, rows in packed]
    total_rows = sum(heights) if heights else 1.0
    top_in = 0.45 + (0.3 if title else 0.0)
    bottom_in = 0.65 + (0.25 if note else 0.0)
    height = top_in + bottom_in + total_rows * _ROW
    fig = Figure(figsize=(width, height), dpi=100)
    ax = fig.add_axes((left_in / width, bottom_in / height, axes_width / width, total_rows * _ROW / height))
    ax.set_xlim(g.lo, g.right)
    ax.set_ylim(total_rows, 0)  # first lane on top

    artists: list[dict[str, list[Artist]]] = []
    y = 0.0
    centers: list[float] = []
    for index, (lane, (placed, rows), h) in enumerate(zip(lanes, packed, heights)):
        if index % 2:
            ax.axhspan(y, y + h, color="#f3f3f3", zorder=0, linewidth=0)
        if index:
            ax.axhline(y, color="#c8c8c8", linewidth=0.8, zorder=1)
        artists.append(_draw_lane(ax, lane, placed, y, h, g))
        centers.append(y + h / 2)
        y += h

    ax.set_yticks(centers)
    ax.set_yticklabels([lane.title + "\n" + _summary(lane) for lane in lanes], fontsize=8.5)
    ax.tick_params(axis="y", length=0)
    for tick, lane in zip(ax.get_yticklabels(), lanes):
        tick.set_color(_OUTPUT if lane.kind == "output" else "#1f3b66" if lane.kind == "input" else "#666666")
    _time_axis(ax, g)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    ax.axvspan(g.hi, g.right, color="#fafafa", zorder=0, linewidth=0)
    ax.axvline(g.hi + (g.inf - g.hi) * 0.45, color="#bbbbbb", linewidth=0.8, linestyle=(0, (1, 2)), zorder=1)

    handles = _legend(lanes)
    if handles:
        fig.legend(
            handles=handles,
            loc="upper center",
            ncol=min(len(handles), 5),
            frameon=False,
            fontsize=8,
            bbox_to_anchor=(0.5, 1 - (0.3 if title else 0.04) / height),
            handlelength=2.2,
            columnspacing=1.4,
        )
    if title:
        fig.suptitle(title, y=1 - 0.06 / height, va="top", fontsize=11, fontweight="bold")
    if note:
        fig.text(0.01, 0.12 / height, note, fontsize=7.5, color="#555555", va="bottom")
    return Timeline(fig, lanes, artists)


def _summary(lane: Lane) -> str:
    """The counts under a lane's title."""
    if lane.kind == "output":
        return f"{len(lane.marks)} events, {len(lane.ctis)} CTIs"
    adjusted = sum(m.status == "adjusted" for m in lane.marks)
    dropped = sum(m.status == "dropped" for m in lane.marks)
    if lane.kind == "rejected":
        return f"{adjusted} adjusted, {dropped} dropped"
    parts = [f"{len(lane.marks)} events"] + [f"{n} {what}" for n, what in ((adjusted, "adjusted"), (dropped, "dropped")) if n]
    return ", ".join(parts) + f", {len(lane.ctis)} CTIs"


def _time_axis(ax: Axes, g: _Geometry) -> None:
    from matplotlib.ticker import FixedFormatter, FixedLocator

    dates = _dates()
    locator = dates.AutoDateLocator(minticks=4, maxticks=11)
    values = [float(v) for v in locator.tick_values(dates.num2date(g.lo), dates.num2date(g.hi)) if g.lo <= v <= g.hi]
    formatter = dates.ConciseDateFormatter(locator, show_offset=True)
    texts = [str(t) for t in formatter.format_ticks(values)] if values else []
    offset = str(formatter.get_offset())
    ax.xaxis.set_major_locator(FixedLocator([*values, g.inf]))
    ax.xaxis.set_major_formatter(FixedFormatter([*texts, "∞"]))
    ax.tick_params(axis="x", labelsize=8.5)
    ax.grid(axis="x", color="#e4e4e4", linewidth=0.6, zorder=0)
    ax.set_axisbelow(True)
    ax.set_xlabel("application time (UTC)" + (f", {offset}" if offset else ""), fontsize=8.5, color="#444444")


def _draw_lane(ax: Axes, lane: Lane, placed: list[_Placed], y0: float, height: float, g: _Geometry) -> dict[str, list[Artist]]:
    from matplotlib.patches import Rectangle

    out: dict[str, list[Artist]] = {k: [] for k in ("events", "ctis", "key_ctis", "received", "moves", "dropped", "heads", "labels")}
    color = _OUTPUT if lane.kind == "output" else _INPUT
    bar = 0.56  # bar height, in rows

    def row_y(p: _Placed) -> float:
        return y0 + _PAD_ROWS + p.row + 0.5

    def draw_lifetime(m: Mark, y: float, start: datetime, end: datetime, fill: str, faded: bool) -> Artist:
        x0, x1 = g.x(start), g.x(end)
        if m.point:
            (line,) = ax.plot(
                [x0],
                [y],
                marker="|",
                markersize=12,
                markeredgewidth=1.3 if faded else 2.4,
                color=_FADED if faded else fill,
                alpha=0.8 if faded else 1.0,
                linestyle="none",
                zorder=4,
            )
            return line
        w = max(x1 - x0, g.char * 0.4)
        if is_infinite(end):
            w -= g.char * 0.6
        patch = Rectangle(
            (x0, y - bar / 2),
            w,
            bar,
            zorder=3 if faded else 4,
            facecolor="none" if faded else fill,
            alpha=1.0 if faded else (0.55 if is_infinite(end) else 0.85),
            edgecolor=_FADED if faded else fill,
            linewidth=1.0,
            linestyle="--" if faded else "-",
        )
        ax.add_patch(patch)
        if is_infinite(end):
            (head,) = ax.plot(
                [g.inf - g.char * 0.6], [y], marker=">", markersize=6, color=_FADED if faded else fill, linestyle="none", zorder=4
            )
            out["heads"].append(head)
        return patch

    for p in placed:
        m, y = p.mark, row_y(p)
        if m.status == "dropped":
            assert m.received_start is not None and m.received_end is not None
            out["received"].append(draw_lifetime(m, y, m.received_start, m.received_end, color, faded=True))
            out["events"].append(out["received"][-1])
            (x,) = ax.plot(
                [g.x(m.received_start)], [y], marker="x", markersize=7, markeredgewidth=2, color=_DROPPED, linestyle="none", zorder=6
            )
            out["dropped"].append(x)
        elif m.status == "adjusted":
            assert m.received_start is not None and m.received_end is not None
            out["received"].append(draw_lifetime(m, y, m.received_start, m.received_end, color, faded=True))
            out["events"].append(draw_lifetime(m, y, m.start, m.end, _ADJUSTED, faded=False))
            for a, b in ((m.received_start, m.start), (m.received_end, m.end)):
                if _ticks(a) != _ticks(b) and not (m.point and a is m.received_end):
                    arrow = ax.annotate(
                        "",
                        xy=(g.x(b), y),
                        xytext=(g.x(a), y),
                        zorder=5,
                        arrowprops={"arrowstyle": "->", "color": _ADJUSTED, "linewidth": 1.2, "shrinkA": 0, "shrinkB": 2},
                    )
                    out["moves"].append(arrow)
            if m.open and not is_infinite(m.received_end):  # its end edge was dropped: it stays open
                (x,) = ax.plot(
                    [g.x(m.received_end)], [y], marker="x", markersize=6, markeredgewidth=1.6, color=_DROPPED, linestyle="none", zorder=6
                )
                out["dropped"].append(x)
        else:
            out["events"].append(draw_lifetime(m, y, m.start, m.end, color, faded=False))
        if p.text:
            out["labels"].append(
                ax.text(_label_x(m, p.text, g), y, p.text, fontsize=_FONT, va="center", ha="left", color="#222222", zorder=7, clip_on=True)
            )

    top, bottom = y0 + 0.25, y0 + height - 0.25
    for t in lane.ctis:
        out["ctis"].append(_cti_line(ax, g.x(t), top, bottom, _CTI, "-"))
    for t in lane.key_ctis:
        out["key_ctis"].append(_cti_line(ax, g.x(t), top, bottom, _KEY_CTI, "--"))
    return out


def _cti_line(ax: Axes, x: float, top: float, bottom: float, color: str, style: str) -> Artist:
    (line,) = ax.plot([x, x], [top, bottom], color=color, linewidth=1.0, linestyle=style, zorder=2, alpha=0.45)
    ax.plot(
        [x], [bottom], marker="^", markersize=6, color=color, linestyle="none", zorder=2, markerfacecolor=color if style == "-" else "white"
    )
    return line


def _legend(lanes: list[Lane]) -> list[Artist]:
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    marks = [m for lane in lanes for m in lane.marks]
    handles: list[Artist] = []

    def line(**kw: Any) -> Line2D:
        return Line2D([], [], linestyle="none", **kw)

    if any(m.point for m in marks):
        handles.append(line(marker="|", markersize=10, markeredgewidth=2.4, color="#555555", label="point"))
    if any(not m.point and not m.open for m in marks):
        handles.append(Patch(facecolor="#888888", alpha=0.85, label="interval [start, end)"))
    if any(m.open for m in marks):
        handles.append(Patch(facecolor="#888888", alpha=0.5, label="open lifetime (to ∞)"))
    if any(lane.ctis for lane in lanes):
        handles.append(Line2D([], [], color=_CTI, marker="^", markevery=[1], linewidth=1.1, label="CTI"))
    if any(lane.key_ctis for lane in lanes):
        handles.append(
            Line2D(
                [],
                [],
                color=_KEY_CTI,
                marker="^",
                markerfacecolor="white",
                markevery=[1],
                linestyle="--",
                linewidth=1.1,
                label="key's own CTI",
            )
        )
    if any(m.status == "adjusted" for m in marks):
        handles.append(
            Line2D([], [], color=_ADJUSTED, marker=">", markevery=[1], linewidth=1.2, label="adjusted: received (faded) \u2192 admitted")
        )
    if any(m.status == "dropped" for m in marks):
        handles.append(line(marker="x", markersize=7, markeredgewidth=2, color=_DROPPED, label="dropped (faded: as received)"))
    return handles
