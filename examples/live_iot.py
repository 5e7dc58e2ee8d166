"""Live IoT alerts on Spark Structured Streaming, read from Redis Streams.

A producer writes sensor readings to the Redis stream ``readings`` (a few per second per
device, with clocks a little off) and, now and then, each device's alert limit to the
stream ``limits`` (a slow reference stream: an interval per limit). The tempo query:

* readings: ASA-style ordering settings per device (``over=``): each device's events may come
  up to 2 s out of order; the input's CTI follows the arrival clock (the broker's);
* limits: intervals, taking the readings' CTIs (a CTI import), so the slow stream never holds
  the join back;
* alerts: each reading above its device's limit in force, released once the CTIs pass it.

Run it (needs the ``spark`` and ``streaming`` extras, Java, and Debian's ``redis-server``):

    python examples/live_iot.py --seconds 30

It starts a private redis-server (with its data in the work folder), the producer and the
live query, prints each committed micro-batch, and stops after ``--seconds``. Kill it at any
moment (Ctrl-C, or kill -9) and run it again with the same ``--work`` folder: the query
continues after its last committed batch, and ``out/`` holds every alert exactly once.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import time
from datetime import datetime, timedelta, timezone

import attrs

from tempo import (
    AdvanceTimeGenerationSettings,
    AdvanceTimeImportSettings,
    AdvanceTimePolicy,
    AdvanceTimeSettings,
    EventShape,
    Stream,
)
from tempo.settings import EventOrderingSettings
from tempo.sources import Source

DEVICES = ["boiler", "chiller", "fan", "pump"]


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


def alerts(readings_source: Source[Reading], limits_source: Source[Limit]) -> Stream[Alert]:
    """The query: readings above the limit in force for their device."""
    readings = Stream.create(
        "readings",
        readings_source,
        EventShape.POINT,
        AdvanceTimeSettings(
            AdvanceTimeGenerationSettings(frequency=None, advance_to_infinity_on_shutdown=True),
            policy=AdvanceTimePolicy.ADJUST,
            ordering=EventOrderingSettings(out_of_order_tolerance=timedelta(seconds=2), late_arrival_tolerance=timedelta(seconds=5)),
        ),
        over=lambda r: r.device,
    )
    limits = Stream.create(
        "limits",
        limits_source,
        EventShape.INTERVAL,
        AdvanceTimeSettings(import_=AdvanceTimeImportSettings("readings"), policy=AdvanceTimePolicy.ADJUST),
    )
    return readings.join(limits, lambda r, m: r.device == m.device, lambda r, m: Alert(r.device, r.celsius, m.max_celsius)).where(
        lambda a: a.celsius > a.max_celsius
    )


def start_redis(work: str) -> tuple[subprocess.Popen[bytes], str]:
    """A private redis-server keeping its data in ``work`` (append-only file), so that a
    restarted example finds the streams it left."""
    binary = shutil.which("redis-server")
    if binary is None:
        sys.exit("redis-server not found: install it (Debian: apt-get install redis-server) or pass --redis URL")
    port = 6390
    proc = subprocess.Popen(
        [binary, "--port", str(port), "--bind", "127.0.0.1", "--dir", work, "--appendonly", "yes", "--save", ""],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    return proc, f"redis://127.0.0.1:{port}/0"


def produce(url: str, stop: threading.Event, seed: int) -> None:
    """Readings every 50 ms (a random walk per device, event times up to 1.5 s behind the
    clock), and a new limit per device every 5 s, in force for 10 s."""
    import redis

    from tempo.spark.streaming.redis import add_event

    client = redis.Redis.from_url(url)
    rnd = random.Random(seed)
    level = {d: 60.0 for d in DEVICES}
    next_limits = 0.0
    while not stop.is_set():
        now = datetime.now(timezone.utc)
        if time.monotonic() >= next_limits:
            for device in DEVICES:
                limit = Limit(device, 60.0 + rnd.uniform(-5, 10))
                add_event(client, "limits", limit, start=now - timedelta(seconds=1), end=now + timedelta(seconds=10))
            next_limits = time.monotonic() + 5
        device = rnd.choice(DEVICES)
        level[device] += rnd.uniform(-2, 2)
        add_event(client, "readings", Reading(device, round(level[device], 2)), start=now - timedelta(seconds=rnd.uniform(0, 1.5)))
        time.sleep(0.05)


def wait_for_redis(url: str) -> None:
    import redis

    for _ in range(100):
        try:
            redis.Redis.from_url(url).ping()
            return
        except redis.ConnectionError:
            time.sleep(0.1)
    sys.exit(f"redis at {url} does not answer")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", default="live_iot_work", help="folder for the checkpoint, the output and redis' data")
    parser.add_argument("--seconds", type=float, default=30.0, help="run this long, then stop (the query can be continued)")
    parser.add_argument(
        "--min-batches",
        type=int,
        default=0,
        help="after --seconds, go on until this run has committed this many batches (at most 5 minutes more)",
    )
    parser.add_argument("--redis", default=None, help="use this Redis instead of starting one (redis://host:port/db)")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    os.makedirs(args.work, exist_ok=True)
    server = None
    url = args.redis
    if url is None:
        server, url = start_redis(os.path.abspath(args.work))
    try:
        wait_for_redis(url)
        return run(args.work, url, args.seconds, args.seed, args.min_batches)
    finally:
        if server is not None:
            server.send_signal(signal.SIGTERM)
            server.wait()


def run(work: str, url: str, seconds: float, seed: int, min_batches: int = 0) -> int:
    from tempo.spark import spark_session
    from tempo.spark.streaming import ParquetSink, StreamingExecutor, read_committed
    from tempo.spark.streaming.redis import redis_source

    print("# starting local Spark (a JVM; this takes some seconds) ...", flush=True)
    spark = spark_session()
    beat = timedelta(milliseconds=500)
    query = alerts(
        redis_source(spark, "readings", Reading, url=url, heartbeat=beat),
        redis_source(spark, "limits", Limit, end="end", url=url, heartbeat=beat),
    )
    stop = threading.Event()
    producer = threading.Thread(target=produce, args=(url, stop, seed), daemon=True)
    producer.start()
    out = os.path.join(work, "out")
    live = StreamingExecutor(spark, os.path.join(work, "checkpoint"), trigger={"processingTime": "1 second"}).start(query, ParquetSink(out))
    shown = 0

    def show_progress() -> None:
        nonlocal shown
        for p in live.progress[shown:]:
            print(p.summary())
        shown = len(live.progress)

    deadline = time.monotonic() + seconds
    # A loaded machine may take longer than --seconds for its first batch; --min-batches waits
    # for it, within a bound, so that a run always shows some committed work.
    patience = deadline + 300.0

    def go_on() -> bool:
        now = time.monotonic()
        return now < deadline or (len(live.progress) < min_batches and now < patience)

    try:
        while live.is_active and go_on():
            time.sleep(0.5)
            show_progress()
    finally:
        stop.set()
        live.stop()
    show_progress()  # the batches that committed while the query stopped
    committed = read_committed(out)
    kinds = committed.column("tempo_kind").to_pylist() if committed.num_rows else []
    alerts_so_far = sum(1 for kind in kinds if kind in ("point", "interval", "start"))
    print(
        f"# {alerts_so_far} alerts committed in {out} (batches up to {live.last_committed_batch}); run again with --work {work} to continue"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
