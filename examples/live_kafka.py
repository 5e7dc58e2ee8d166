"""Live alerts from a Kafka topic, against a slow reference table in Delta Lake, into Delta.

A producer writes sensor readings to the Kafka topic ``readings`` (4 partitions, each
device's readings keyed to one partition, event times up to 1.5 s behind the clock, with a
heartbeat record in every partition each half second), and every 5 s appends each device's
alert limit to the Delta table ``limits`` (a slowly changing reference table: an interval
per limit, in force for 10 s). The tempo query:

* readings: one input per partition (``kafka_stream``), merged by arrival as Azure Stream
  Analytics merges an Event Hub's partitions; ASA-style ordering settings per device
  (``over=``): each device's events may come up to 2 s out of order, and the CTI follows
  the arrival clock (the broker's log-append times);
* limits: the Delta table read as a stream (Delta's streaming source: each new version is
  new rows), whose CTI follows the same arrival clock, so the slow table does not hold the
  join's CTI back; the readings wait at most until the table's next version (5 s here) for
  the limits that arrive with it;
* alerts: each reading above its device's limit in force, released once the CTIs pass it,
  appended to the Delta table ``out`` one transaction per micro-batch, exactly once.

Run it (needs the ``spark`` extra, Java, and ``bash java/fetch`` for the broker, Spark's
Kafka connector and Delta):

    python examples/live_kafka.py --seconds 60

It starts a one-node Kafka broker (its data in the work folder), the producer and the live
query, prints each committed micro-batch, and stops after ``--seconds``. Kill it at any
moment (Ctrl-C, or kill -9) and run it again with the same ``--work`` folder: the broker
comes back with its topic, the query continues after its last committed batch, and ``out``
holds every alert exactly once (``tempo_batch``, ``tempo_row``: one row per released item).
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import threading
import time
from datetime import datetime, timedelta, timezone
from typing import Any

import attrs

from tempo import AdvanceTimeGenerationSettings, AdvanceTimePolicy, AdvanceTimeSettings, EventShape, Stream
from tempo.settings import EventOrderingSettings

DEVICES = ["boiler", "chiller", "fan", "pump", "heater", "dryer"]
PARTITIONS = 4


@attrs.frozen
class Reading:
    device: str
    celsius: float


@attrs.frozen
class Limit:
    device: str
    max_celsius: float


@attrs.frozen
class Alert:
    device: str
    celsius: float
    max_celsius: float


def ordering(out_of_order: timedelta) -> AdvanceTimeSettings:
    """ASA's ordering settings: CTIs from the arrival clock, late events adjusted."""
    return AdvanceTimeSettings(
        AdvanceTimeGenerationSettings(frequency=None, advance_to_infinity_on_shutdown=True),
        policy=AdvanceTimePolicy.ADJUST,
        ordering=EventOrderingSettings(out_of_order_tolerance=out_of_order, late_arrival_tolerance=timedelta(seconds=5)),
    )


def alerts(readings: Stream[Reading], limits: Stream[Limit]) -> Stream[Alert]:
    """The query: readings above the limit in force for their device."""
    return readings.join(limits, lambda r, m: r.device == m.device, lambda r, m: Alert(r.device, r.celsius, m.max_celsius)).where(
        lambda a: a.celsius > a.max_celsius
    )


def append_limits(path: str, limits: list[Limit], now: datetime, seq: int) -> None:
    """One Delta version of limits, each in force from a second ago for 10 s; ``written`` is
    their arrival, ``seq`` their order (growing across versions and runs)."""
    import pyarrow as pa
    from deltalake import write_deltalake

    stamp = pa.timestamp("us", tz="UTC")
    table = pa.table(
        {
            "device": pa.array([m.device for m in limits], pa.string()),
            "max_celsius": pa.array([m.max_celsius for m in limits], pa.float64()),
            "start": pa.array([now - timedelta(seconds=1)] * len(limits), stamp),
            "end": pa.array([now + timedelta(seconds=10)] * len(limits), stamp),
            "written": pa.array([now] * len(limits), stamp),
            "seq": pa.array(range(seq, seq + len(limits)), pa.int64()),
        }
    )
    write_deltalake(path, table, mode="append")


def produce(bootstrap: str, topic: str, limits_path: str, stop: threading.Event, seed: int) -> None:
    """Readings every 50 ms (a random walk per device), heartbeats every 0.5 s, a new version
    of the limits every 5 s."""
    from tempo.spark.streaming.kafka import encode_record, producer, send_heartbeats

    client = producer(bootstrap, linger_ms=5)
    rnd = random.Random(seed)
    level = {d: 60.0 for d in DEVICES}
    next_limits = next_beat = 0.0
    seq = time.time_ns() // 1000 * 16  # above every earlier run's
    while not stop.is_set():
        now = datetime.now(timezone.utc)
        if time.monotonic() >= next_limits:
            append_limits(limits_path, [Limit(d, round(60.0 + rnd.uniform(-5, 10), 2)) for d in DEVICES], now, seq)
            seq += len(DEVICES)
            next_limits = time.monotonic() + 5
        if time.monotonic() >= next_beat:
            send_heartbeats(client, topic, range(PARTITIONS))
            next_beat = time.monotonic() + 0.5
        device = rnd.choice(DEVICES)
        level[device] += rnd.uniform(-2, 2)
        value = encode_record(Reading(device, round(level[device], 2)), start=now - timedelta(seconds=rnd.uniform(0, 1.5)))
        client.produce(topic, key=device, value=value)
        client.poll(0)
        time.sleep(0.05)
    client.flush()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", default="live_kafka_work", help="folder for the broker's data, the checkpoint and the Delta tables")
    parser.add_argument("--seconds", type=float, default=30.0, help="run this long, then stop (the query can be continued)")
    parser.add_argument(
        "--min-batches",
        type=int,
        default=0,
        help="after --seconds, go on until this run has committed this many batches (at most 5 minutes more)",
    )
    parser.add_argument("--bootstrap", default=None, help="use this Kafka broker instead of starting one (host:port)")
    parser.add_argument("--topic", default="readings", help="the readings' topic (created with 4 partitions if missing)")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    work = os.path.abspath(args.work)
    os.makedirs(work, exist_ok=True)
    broker = None
    bootstrap = args.bootstrap
    if bootstrap is None:
        from tempo.spark.streaming.kafka_broker import KafkaBroker, KafkaBrokerError

        print("# starting a Kafka broker (a JVM; some seconds) ...", flush=True)
        broker = KafkaBroker(os.path.join(work, "kafka"))
        try:
            broker.start()
        except KafkaBrokerError as exc:
            sys.exit(f"{exc} (bash java/fetch fetches the broker's jars)")
        bootstrap = broker.bootstrap
    try:
        return run(work, bootstrap, args.topic, args.seconds, args.seed, args.min_batches)
    finally:
        if broker is not None:
            broker.stop()


def run(work: str, bootstrap: str, topic: str, seconds: float, seed: int, min_batches: int = 0) -> int:
    from tempo.spark import spark_session
    from tempo.spark.sources import DataFrameSource
    from tempo.spark.streaming import DeltaSink, StreamingExecutor
    from tempo.spark.streaming.kafka import create_topic, kafka_stream, topic_partitions

    if not topic_partitions(bootstrap, topic):
        create_topic(bootstrap, topic, PARTITIONS)
    limits_path, out = os.path.join(work, "limits"), os.path.join(work, "out")
    if not os.path.isdir(os.path.join(limits_path, "_delta_log")):  # Delta's stream reader needs the table
        append_limits(limits_path, [Limit(d, 65.0) for d in DEVICES], datetime.now(timezone.utc), time.time_ns() // 1000 * 16)
    print("# starting local Spark with Kafka's connector and Delta (some seconds) ...", flush=True)
    spark = spark_session(connectors=True)
    readings = kafka_stream(
        spark,
        "readings",
        topic,
        Reading,
        bootstrap=bootstrap,
        start="start",
        settings=ordering(timedelta(seconds=2)),
        over=lambda r: r.device,
    )
    limits_rows = spark.readStream.format("delta").load(limits_path)
    limits = Stream.create(
        "limits",
        DataFrameSource(limits_rows, Limit, start="start", end="end", arrival="written", order="seq"),
        EventShape.INTERVAL,
        ordering(timedelta(0)),
    )
    stop = threading.Event()
    feeder = threading.Thread(target=produce, args=(bootstrap, topic, limits_path, stop, seed), daemon=True)
    feeder.start()
    executor = StreamingExecutor(spark, os.path.join(work, "checkpoint"), trigger={"processingTime": "1 second"})
    live = executor.start(alerts(readings, limits), DeltaSink(out))
    shown = 0

    def show_progress() -> None:
        nonlocal shown
        for p in live.progress[shown:]:
            print(p.summary())
        shown = len(live.progress)

    deadline = time.monotonic() + seconds
    patience = deadline + 300.0  # a loaded machine may take longer than --seconds for its first batches

    def go_on() -> bool:
        now = time.monotonic()
        return now < deadline or (len(live.progress) < min_batches and now < patience)

    try:
        while live.is_active and go_on():
            time.sleep(0.5)
            show_progress()
    finally:
        stop.set()
        feeder.join(timeout=30)
        live.stop()
    show_progress()
    kinds = _committed(out).column("tempo_kind").to_pylist()
    so_far = sum(1 for kind in kinds if kind in ("point", "interval", "start"))
    print(f"# {so_far} alerts committed in {out} (batches up to {live.last_committed_batch}); run again with --work {work} to continue")
    return 0


def _committed(path: str) -> Any:
    """The Delta output in release order (empty before the first batch wrote it)."""
    import pyarrow as pa

    if not os.path.isdir(os.path.join(path, "_delta_log")):
        return pa.table({"tempo_kind": pa.array([], pa.string())})
    from tempo.sources import delta_table

    table = delta_table(path).sort_by([("tempo_batch", "ascending"), ("tempo_row", "ascending")])
    return table.drop_columns(["tempo_batch", "tempo_row"])


if __name__ == "__main__":
    sys.exit(main())
