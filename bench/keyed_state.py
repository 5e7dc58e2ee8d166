"""What a keyed operator costs in Spark's state store: the measurements behind the form of the
cluster engine (docs/streaming.md, "Live queries on the cluster").

W5's sessions per key (gap 5 s, count and sum), live over the shared data's events, four ways
in one Spark session, each on its own landing folder and checkpoint, with RocksDB's state store:

* ``builtin``: hand-written Structured Streaming, ``groupBy(key, session_window(ts, "5 seconds"))``;
* ``rows``: ``groupBy(key).transformWithState`` with a processor in Python over rows;
* ``pandas``: ``groupBy(key).transformWithStateInPandas``, the same processor over pandas frames;
* ``nostate``: the pandas processor's calls alone (it reads its rows and keeps nothing): what
  Spark's call per key costs before any state.

The processors keep each key's open session in one value state (read once and written once
per batch) and one event-time timer at its end plus the gap: a session goes out when a later
event of its key shows the gap, or when the watermark passes its timer. Watermark: 10 s behind
the largest event time. Files of ``--rows`` events are landed one at a time, each processed
before the next; the table is seconds per micro-batch (``addBatch`` of Spark's progress) for
the files after the first, and events per second.

    python bench/keyed_state.py [--rows 100000] [--files 4] [--ways builtin,rows,pandas,nostate]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # `import bench`, and tempo from this checkout

from bench.run import default_data_dir, ensure_data  # noqa: E402

GAP_MS = 5_000
ORIGIN_MICROS = 1_704_067_200_000_000
"""The shared data's times count microseconds from 2024-01-01T00:00:00Z (WORKLOADS.md)."""
OUT = "key long, start long, end long, n long, total double"
STATE = "start long, end long, n long, total double"


def _processors() -> dict[str, Any]:
    import numpy as np
    import pandas as pd
    from pyspark.sql import Row
    from pyspark.sql.streaming import StatefulProcessor, StatefulProcessorHandle

    def sessions(
        ts: Any, values: Any, open_session: tuple[int, int, int, float] | None
    ) -> tuple[list[tuple[int, int, int, float]], tuple[int, int, int, float]]:
        """The key's sessions a batch completes, and its open one, from its events in time order."""
        done: list[tuple[int, int, int, float]] = []
        start, end, n, total = open_session if open_session is not None else (int(ts[0]), int(ts[0]), 0, 0.0)
        for t, v in zip(ts.tolist(), values.tolist()):
            if t > end + GAP_MS:
                done.append((start, end, n, total))
                start, end, n, total = t, t, 0, 0.0
            end = max(end, t)
            n += 1
            total += v
        return done, (start, end, n, total)

    class Keyed(StatefulProcessor):
        def init(self, handle: StatefulProcessorHandle) -> None:
            self.handle = handle
            self.open = handle.getValueState("open", STATE)

        def _batch(self, key: Any, ts: Any, values: Any) -> list[tuple[int, int, int, float]]:
            order = np.argsort(ts, kind="stable")
            before = self.open.get() if self.open.exists() else None
            done, now = sessions(ts[order], values[order], before)
            self.open.update(now)
            if before is None or before[1] != now[1]:
                if before is not None:
                    self.handle.deleteTimer(before[1] + GAP_MS)
                self.handle.registerTimer(now[1] + GAP_MS)
            return done

        def _expired(self) -> tuple[int, int, int, float]:
            last = self.open.get()
            self.open.clear()
            return tuple(last)  # type: ignore[return-value]

        def close(self) -> None:
            pass

    class InPandas(Keyed):
        def handleInputRows(self, key: Any, rows: Iterator[Any], timerValues: Any) -> Iterator[Any]:
            frame = pd.concat(list(rows))
            ts = frame["ts"].values.astype("datetime64[ms]").astype(np.int64)
            done = self._batch(key, ts, frame["value"].values)
            if done:
                yield pd.DataFrame([(key[0], *d) for d in done], columns=["key", "start", "end", "n", "total"])

        def handleExpiredTimer(self, key: Any, timerValues: Any, expiredTimerInfo: Any) -> Iterator[Any]:
            yield pd.DataFrame([(key[0], *self._expired())], columns=["key", "start", "end", "n", "total"])

    class OverRows(Keyed):
        def handleInputRows(self, key: Any, rows: Iterator[Any], timerValues: Any) -> Iterator[Any]:
            got = [(int(r.ts.timestamp() * 1000), r.value) for r in rows]
            done = self._batch(key, np.array([t for t, _ in got]), np.array([v for _, v in got]))
            for d in done:
                yield Row(key=key[0], start=d[0], end=d[1], n=d[2], total=d[3])

        def handleExpiredTimer(self, key: Any, timerValues: Any, expiredTimerInfo: Any) -> Iterator[Any]:
            s, e, n, total = self._expired()
            yield Row(key=key[0], start=s, end=e, n=n, total=total)

    class NoState(StatefulProcessor):
        def init(self, handle: StatefulProcessorHandle) -> None:
            pass

        def handleInputRows(self, key: Any, rows: Iterator[Any], timerValues: Any) -> Iterator[Any]:
            for frame in rows:
                len(frame)
            return iter([])

        def close(self) -> None:
            pass

    return {"pandas": InPandas, "rows": OverRows, "nostate": NoState}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=100_000, help="events per file (and micro-batch)")
    parser.add_argument("--files", type=int, default=4)
    parser.add_argument("--ways", default="builtin,rows,pandas,nostate")
    parser.add_argument("--n", type=int, default=2_000_000, help="the shared data set to read the events from")
    parser.add_argument("--data-dir", default=str(default_data_dir()))
    parser.add_argument("--shuffle-partitions", default="2")
    args = parser.parse_args()

    import pyarrow.parquet as pq
    from pyspark.sql import functions as F

    from tempo.spark import spark_session

    table = pq.read_table(ensure_data(args.n, Path(args.data_dir)).events).select(["key", "event_time", "value"])
    work = tempfile.mkdtemp(prefix="keyed-state-")
    files = []
    for i in range(args.files):
        path = os.path.join(work, f"staged-{i}.parquet")
        pq.write_table(table.slice(i * args.rows, args.rows), path)
        files.append(path)
    spark = spark_session(
        spark_sql_shuffle_partitions=args.shuffle_partitions,
        spark_sql_streaming_stateStore_providerClass="org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider",
    )
    processors = _processors()
    schema = spark.read.parquet(files[0]).schema
    report = {}
    for way in args.ways.split(","):
        landing = os.path.join(work, f"landing-{way}")
        os.makedirs(landing)
        events = (
            spark.readStream.schema(schema)
            .option("maxFileAge", "3650d")
            .parquet(landing)
            .withColumn("ts", F.timestamp_micros(F.col("event_time") + F.lit(ORIGIN_MICROS)))
            .withWatermark("ts", "10 seconds")
        )
        if way == "builtin":
            out = events.groupBy("key", F.session_window("ts", "5 seconds")).agg(F.count("*").alias("n"), F.sum("value").alias("total"))
        elif way == "rows":
            out = events.groupBy("key").transformWithState(processors[way](), OUT, "Append", "EventTime")
        else:
            out = events.groupBy("key").transformWithStateInPandas(processors[way](), OUT, "Append", "EventTime")
        query = out.writeStream.format("noop").outputMode("append").option("checkpointLocation", os.path.join(work, f"ck-{way}")).start()
        began = time.perf_counter()
        for i, path in enumerate(files):
            tmp = os.path.join(landing, f".part-{i:05d}.tmp")
            shutil.copy(path, tmp)
            os.rename(tmp, os.path.join(landing, f"part-{i:05d}.parquet"))
            query.processAllAvailable()
        seconds = time.perf_counter() - began
        batches = [p["durationMs"].get("addBatch", 0) / 1000 for p in query.recentProgress if p["numInputRows"] > 0]
        query.stop()
        report[way] = {
            "events_per_s": round(args.rows * args.files / seconds),
            "batch_s_after_first": [round(b, 2) for b in batches[1:]],
            "median_batch_s": round(statistics.median(batches[1:] or batches), 2),
        }
        print(json.dumps({"way": way, "rows": args.rows, **report[way]}), flush=True)
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
