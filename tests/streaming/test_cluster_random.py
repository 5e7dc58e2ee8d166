"""The cluster engine over the suite's random queries (``tests/strategies.py``'s ``queries``):
each input's items written as Parquet rows (a kind column: points, intervals, edges, CTI
rows, heartbeats; an arrival column when the items carry arrivals), cut into random files,
one live query on ``engine="cluster"`` taking them file by file, then the flush. After each
file of a query of one input, the committed output must be the in-memory executor's release
for the rows so far; after the flush, the whole run's, with its rejections; both but for
the order of one window's groups among themselves (docs/semantics.md 5.7: compared as sets).
A third test draws queries whose every input is split into substreams by key (half as
many), a fourth queries of one input with their results counted per 20 s on top, kept when
the count is the next hop of a keyed node (``cluster_chain``: two keyed nodes in sequence
or more; half as many).
(Two inputs meet at the arrival frontier, where a live query holds back what the other
input may still precede: the fixed tests check those after each file.)

A query the engine refuses (``cluster_chain``: an output keeping a substream key of a type
a join key does not take) is not drawn; ``bench/cluster_share.py`` counts the shares
over a thousand draws. Each example starts a live query (about 4 s a file on two cores): the default suite
draws 2 of one input and 2 of two, ``--run-slow`` 12 of each, ``TEMPO_CLUSTER_EXAMPLES=N`` N of each.
"""

from __future__ import annotations

import os
import random
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import attrs
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from tempo import InMemoryExecutor, Stream
from tempo.events import Cti, Heartbeat, SubstreamCti
from tempo.plan.nodes import AntiJoinNode, JoinNode, Node, SourceNode, WindowNode, rebuilt
from tempo.plan.query import Query
from tempo.sources import ItemSource, ParquetSource
from tests.budget import thorough
from tests.conformance.test_tables import KIND
from tests.streaming.test_cluster import _skip_without_tws, groups_as_sets
from tests.streaming.test_live_spark import land
from tests.strategies import Builder, queries

pytestmark = pytest.mark.spark

EXAMPLES = int(os.environ.get("TEMPO_CLUSTER_EXAMPLES", "12" if thorough() else "2"))
"""Examples of each test (one input, two inputs); ``TEMPO_CLUSTER_EXAMPLES`` sets it."""
RANDOM = settings(
    max_examples=EXAMPLES,
    derandomize=True,
    database=None,
    deadline=None,
    report_multiple_bugs=False,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.function_scoped_fixture,
        HealthCheck.filter_too_much,
    ],
)
STAMP = pa.timestamp("us", tz="UTC")
ARRIVALS = datetime(2030, 1, 1, tzinfo=timezone.utc)


def _utc(t: datetime | None) -> datetime | None:
    return None if t is None else t.replace(tzinfo=timezone.utc) if t.tzinfo is None else t


def _aware(value: Any) -> Any:
    """``value`` with every naive datetime in it (an item's times, a payload's fields) made
    UTC: items read from Parquet carry UTC times, the in-memory run of an item list naive
    ones; a substream CTI's key as its repr, as the sink writes it."""
    if isinstance(value, datetime):
        return _utc(value)
    if isinstance(value, SubstreamCti):
        return SubstreamCti(repr(value.key), _utc(value.timestamp))
    if attrs.has(type(value)):
        return attrs.evolve(value, **{f.name: _aware(getattr(value, f.name)) for f in attrs.fields(type(value)) if f.init})
    return value


def _table(items: list[Any], payload_type: type) -> Any:
    """``items`` as the rows a ``ParquetSource`` of ``_source`` reads back as them."""
    fields = [f.name for f in attrs.fields(payload_type)]
    rows: dict[str, list[Any]] = {"seq": [], "kind": [], "start": [], "end": [], "arrival": [], **{f: [] for f in fields}}
    for seq, item in enumerate(items):
        rows["seq"].append(seq)
        rows["kind"].append(KIND[type(item)])
        start = item.timestamp if isinstance(item, Cti) else item.arrival if isinstance(item, Heartbeat) else item.start
        rows["start"].append(_utc(start))
        rows["end"].append(_utc(getattr(item, "end", None)))
        rows["arrival"].append(_utc(item.arrival))
        payload = getattr(item, "payload", None)
        for f in fields:
            rows[f].append(None if payload is None else getattr(payload, f))
    columns = {
        k: pa.array(v, STAMP if k in ("start", "end", "arrival") else pa.string() if k == "kind" else pa.int64()) for k, v in rows.items()
    }
    return pa.table(columns)


def _source(folder: Path, node: SourceNode, arrivals: bool) -> ParquetSource[Any]:
    extra = {"arrival": "arrival"} if arrivals else {}
    return ParquetSource(str(folder), node.payload_type, start="start", end="end", kind="kind", order="seq", dense_order_from=0, **extra)


@attrs.frozen
class Files:
    """A random query's inputs written as Parquet files (``_as_files``)."""

    query: Stream[Any]
    """The query reading each input from its files: the same items, in the same order."""
    items: dict[str, list[Any]]
    """Each input's items as written (with the arrivals ``_as_files`` gives)."""
    writes: list[list[tuple[Path, Any]]]
    """The files to write, by index: (folder, table) of each input."""
    through: list[dict[str, int]]
    """After file ``i``, how many of each input's items are written."""


def _as_files(query: Stream[Any], root: Path, files: int, rnd: random.Random) -> Files:
    """``query``'s inputs as Parquet files under ``root``: file 0 holds each input's first
    row (for its schema), then ``files`` random cuts."""
    writes: list[list[tuple[Path, Any]]] = [[] for _ in range(files + 1)]
    through: list[dict[str, int]] = [{} for _ in range(files + 1)]
    sources = sorted(Query.build(query.node).sources, key=lambda n: n.declared)
    given = {n.name: list(n.source.items()) for n in sources if isinstance(n.source, ItemSource)}
    if len(sources) > 1 and not any(getattr(i, "arrival", None) for items in given.values() for i in items):
        # In memory, inputs without arrivals come one after the other, in order of declaration;
        # a live query merges its inputs by arrival: these arrivals give it that order.
        at = 0
        for n in sources:
            given[n.name] = [attrs.evolve(i, arrival=ARRIVALS + timedelta(microseconds=at + k)) for k, i in enumerate(given[n.name])]
            at += len(given[n.name])

    def swap(node: Any) -> Any:
        if not isinstance(node, SourceNode):
            return None
        items = given[node.name]
        table = _table(items, node.payload_type)
        folder = root / node.name
        cuts = sorted({0, min(1, len(items)), len(items), *(rnd.randrange(1, len(items)) for _ in range(files - 1) if len(items) > 1)})
        cuts += [len(items)] * (files + 2 - len(cuts))
        for index, (low, high) in enumerate(zip(cuts, cuts[1:])):
            writes[index].append((folder, table.slice(low, high - low)))
            through[index][node.name] = high
        arrivals = any(getattr(i, "arrival", None) is not None for i in items)
        return attrs.evolve(node, source=_source(folder, node, arrivals))

    return Files(Stream(rebuilt(query.node, swap)), given, writes, through)


def _over_items(query: Stream[Any], items: dict[str, list[Any]], counts: dict[str, int] | None = None) -> Stream[Any]:
    """``query`` over ``items`` (the first ``counts`` of each input's, if given)."""

    def put(node: Any) -> Any:
        if not isinstance(node, SourceNode):
            return None
        taken = items[node.name] if counts is None else items[node.name][: counts[node.name]]
        return attrs.evolve(node, source=ItemSource(taken, node.payload_type))

    return Stream(rebuilt(query.node, put))


def _land(index: int, parts: list[tuple[Path, Any]]) -> None:
    for folder, part in parts:
        land(folder, index, lambda tmp, part=part: pq.write_table(part, tmp))


@RANDOM
@given(query=queries(min_events=1, inputs=1))
def test_the_cluster_engine_gives_the_in_memory_result_of_random_queries_of_one_input(
    spark_session: Any, tmp_path_factory: Any, query: tuple[str, Builder]
) -> None:
    _agree(spark_session, tmp_path_factory, query)


@RANDOM
@given(query=queries(min_events=1, inputs=2))
def test_the_cluster_engine_gives_the_in_memory_result_of_random_queries_of_two_inputs(
    spark_session: Any, tmp_path_factory: Any, query: tuple[str, Builder]
) -> None:
    _agree(spark_session, tmp_path_factory, query)


@settings(RANDOM, max_examples=max(1, EXAMPLES // 2))  # two inputs half the time: a start costs twice the others'
@given(query=queries(min_events=1, keyed=True))
def test_the_cluster_engine_gives_the_in_memory_result_of_random_queries_over_substreams(
    spark_session: Any, tmp_path_factory: Any, query: tuple[str, Builder]
) -> None:
    """Every input split into substreams by key: an output that keeps the key is released by
    each key's own CTIs too, on the executors (a release keyed by the key)."""
    _agree(spark_session, tmp_path_factory, query)


@settings(RANDOM, max_examples=max(1, EXAMPLES // 2))
@given(query=queries(min_events=1, keyed=True))
def test_the_cluster_engine_gives_the_in_memory_result_of_random_queries_with_a_window_keeping_the_substream_key(
    spark_session: Any,
    tmp_path_factory: Any,
    query: tuple[str, Builder],
) -> None:
    """Queries over substreams whose first keyed node is a window keeping the substream key
    (about one draw in eleven): keyed by that key on the executors, each key's own CTIs
    reaching it at their places (``tempo.runtime.keyed.by_substream``)."""
    _agree(spark_session, tmp_path_factory, query, first_by_substream=WindowNode)


@settings(RANDOM, max_examples=max(1, EXAMPLES // 2))
@given(query=queries(min_events=1, keyed=True))
def test_the_cluster_engine_gives_the_in_memory_result_of_random_queries_with_a_join_keeping_the_substream_key(
    spark_session: Any,
    tmp_path_factory: Any,
    query: tuple[str, Builder],
) -> None:
    """Queries over substreams whose first keyed node is a join equating both inputs' keys
    and copying one (about one draw in seven): keyed by that key on the executors, each
    key's output CTI, which the driver works out from the inputs' key CTIs, reaching it at
    its place (``tempo.runtime.keyed.by_substream``)."""
    _agree(spark_session, tmp_path_factory, query, first_by_substream=JoinNode)


@pytest.mark.parametrize("binary", ["left_outer_join", "apply_broadcast"])
@settings(RANDOM, max_examples=max(1, EXAMPLES // 2))
@given(data=st.data())
def test_the_cluster_engine_gives_the_in_memory_result_of_random_joins_with_their_anti_joins(
    spark_session: Any,
    tmp_path_factory: Any,
    binary: str,
    data: st.DataObject,
) -> None:
    """Random left outer joins (``left_outer_join``: a join and an anti-join of the same
    inputs, their results meeting at a union) and groups of ``apply`` each joined with the
    other input and united with their anti-join on another predicate, with a count per 20 s
    on top half the time: the join and the anti-join in one keyed operator on the executors
    (``BulkShape.partner``), the count their next hop."""
    desc, build = query = data.draw(queries(min_events=1, binary=binary))

    def counted(flush: bool | None) -> Stream[Any]:
        return build(flush).tumbling(timedelta(seconds=20)).aggregate(lambda w: Tally(w.count()))

    on_top = len(desc) % 2 == 1
    _agree(
        spark_session,
        tmp_path_factory,
        (f"{desc}, counted per 20 s", counted) if on_top else query,
        hops=2 if on_top else 1,
        partnered=True,
        all_keyed=True,
    )


@settings(RANDOM, max_examples=max(1, EXAMPLES // 2))
@given(data=st.data())
def test_the_cluster_engine_gives_the_in_memory_result_of_random_windows_joined_with_an_input_going_around_them(
    spark_session: Any,
    tmp_path_factory: Any,
    data: st.DataObject,
) -> None:
    """Random counts per key and 10 s joined with the other input (``window_then_join``),
    counted per 20 s on top half the time: the window keyed on the executors, the join its
    next hop, what reaches the join from the other input recorded by the time query at its
    place among the window's CTI rows and given to the join's feed there by the window's
    work query (``_around_chain``), all state on the executors."""
    desc, build = query = data.draw(queries(min_events=1, binary="window_then_join"))

    def counted(flush: bool | None) -> Stream[Any]:
        return build(flush).tumbling(timedelta(seconds=20)).aggregate(lambda w: Tally(w.count()))

    on_top = len(desc) % 2 == 1
    _agree(
        spark_session,
        tmp_path_factory,
        (f"{desc}, counted per 20 s", counted) if on_top else query,
        hops=3 if on_top else 2,
        all_keyed=True,
    )


@attrs.frozen
class Tally:
    n: int


@settings(RANDOM, max_examples=max(1, EXAMPLES // 2))
@given(query=queries(min_events=1, inputs=1))
def test_the_cluster_engine_gives_the_in_memory_result_of_random_queries_with_a_window_on_top(
    spark_session: Any,
    tmp_path_factory: Any,
    query: tuple[str, Builder],
) -> None:
    """Each query's results counted in tumbling 20 s windows (one key): where the query's
    last keyed node reads into it through stateless operators, the count is that node's next
    hop, staged by its work query (docs/streaming.md, "Keyed nodes in sequence")."""
    desc, build = query

    def counted(flush: bool | None) -> Stream[Any]:
        return build(flush).tumbling(timedelta(seconds=20)).aggregate(lambda w: Tally(w.count()))

    _agree(spark_session, tmp_path_factory, (f"{desc}, counted per 20 s", counted), hops=2)


def _agree(
    spark_session: Any,
    tmp_path_factory: Any,
    query: tuple[str, Builder],
    hops: int = 1,
    first_by_substream: type[Node] | None = None,
    partnered: bool = False,
    all_keyed: bool = False,
) -> None:
    """The cluster engine's run of ``query`` cut into random files against the in-memory
    executor's, when the engine takes it with ``hops`` keyed nodes in sequence or more (and,
    ``first_by_substream``, the first a node of that kind keyed by its substream key;
    ``partnered``, the first a join with its partner); ``all_keyed``: every join, anti-join
    and window runs keyed on the executors, none on the driver."""
    from tempo.runtime.keyed import by_substream
    from tempo.spark.streaming import ParquetSink, StreamingExecutor, read_committed, released_items
    from tempo.spark.streaming.cluster import chain_nodes, cluster_chain, cluster_query

    _skip_without_tws()
    desc, build = query
    stream = build(True)
    try:
        reference = InMemoryExecutor().run(stream)
    except Exception:
        return  # a bad input: the fixed tests cover how each engine reports it
    run = cluster_query(Query.build(stream.node))
    chain = cluster_chain(run)
    assume(not isinstance(chain, str) and len(chain) >= hops)
    assert not isinstance(chain, str)
    assume(first_by_substream is None or (isinstance(chain[0].window, first_by_substream) and by_substream(run, chain[0].window)))
    if partnered:  # (a join keeping a substream key has none: ``_partner``)
        assume(chain[0].partner is not None)
    if all_keyed:
        keyed = {id(n) for n in chain_nodes(chain)}
        assert all(id(n) in keyed for n in run.nodes if isinstance(n, (JoinNode, AntiJoinNode, WindowNode))), "state left on the driver"
    # A live query takes several inputs with arrival times on all of them or on none.
    arrivals = {any(getattr(i, "arrival", None) for i in n.source.items()) for n in Query.build(stream.node).sources}
    assume(len(arrivals) == 1)
    root = Path(tmp_path_factory.mktemp("random"))
    rnd = random.Random(desc)
    files = _as_files(stream, root / "in", 2, rnd)
    whole = InMemoryExecutor().run(_over_items(stream, files.items))
    assert [_aware(i) for i in whole.raw] == [_aware(i) for i in reference.raw], "the arrivals given change the in-memory result"
    _land(0, files.writes[0])
    live = StreamingExecutor(spark_session, str(root / "ck"), engine="cluster").start(files.query, ParquetSink(str(root / "out")))
    try:
        for index, parts in enumerate(files.writes):
            if index:
                _land(index, parts)
            live.process_all_available()
            if len(files.items) == 1:  # with one input, the release of the rows so far (several wait at the arrival frontier)
                so_far = InMemoryExecutor().run(_over_items(build(False), files.items, files.through[index]))
                committed = released_items(read_committed(str(root / "out")).drop_columns(["tempo_batch"]), stream.payload_type)
                assert groups_as_sets(committed) == groups_as_sets([_aware(i) for i in so_far.raw]), f"after file {index}: {desc}"
        live.flush()
    finally:
        live.stop()
    got = released_items(read_committed(str(root / "out")).drop_columns(["tempo_batch"]), stream.payload_type)
    assert groups_as_sets(got) == groups_as_sets([_aware(i) for i in whole.raw]), desc
    rejected = read_committed(str(root / "out"), rejections=True).drop_columns(["tempo_batch"])
    assert rejected.equals(whole.rejections_table()), desc
