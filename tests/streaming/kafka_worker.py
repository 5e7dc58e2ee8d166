"""A live query over a Kafka topic into a Delta table, in a process of its own, for the kill
tests (tests/streaming/test_kafka.py): the counts of ``test_kafka._counts`` over
``kafka_stream``, a few records per micro-batch (``--per-trigger``, Spark's
``maxOffsetsPerTrigger`` over the topic, which it shares out by each partition's backlog:
the default 11 reads 4, 3 and 2 of the 5, 4 and 3 records of the tests' partitions, so two
batches read and a third flushes), into
``DeltaSink(output)`` (or, with ``--sink kafka:<topic>``, a ``KafkaSink`` keyed by device)
on ``checkpoint``; ``TEMPO_CRASH_AT`` kills it at a phase of a batch
(tempo.spark.streaming.executor; ``kafka:<batch>`` inside the KafkaSink's transaction).

    python -m tests.streaming.kafka_worker BOOTSTRAP TOPIC CHECKPOINT OUTPUT [--flush] [--sink kafka:TOPIC] [--per-trigger N]
"""

from __future__ import annotations

import argparse
import sys


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("bootstrap")
    parser.add_argument("topic")
    parser.add_argument("checkpoint")
    parser.add_argument("output")
    parser.add_argument("--flush", action="store_true", help="end the inputs at the end")
    parser.add_argument("--sink", default="delta", help="delta (into OUTPUT), or kafka:<topic>")
    parser.add_argument("--per-trigger", default="11", help="maxOffsetsPerTrigger (default 11)")
    args = parser.parse_args()

    import tempo.spark
    from tempo.spark.streaming import CheckpointMismatchError, DeltaSink, KafkaSink, Sink, StreamingExecutor
    from tests.streaming.test_kafka import _counts, _readings

    spark = tempo.spark.spark_session(spark_sql_shuffle_partitions="1", spark_driver_memory="1g", connectors=True)
    stream = _readings(spark, args.bootstrap, args.topic, options={"maxOffsetsPerTrigger": args.per_trigger})
    sink: Sink = DeltaSink(args.output)
    if args.sink.startswith("kafka:"):
        sink = KafkaSink(args.bootstrap, args.sink[len("kafka:") :], key="device")
    try:
        live = StreamingExecutor(spark, args.checkpoint).start(_counts(stream), sink)
    except CheckpointMismatchError as refused:
        print(refused, flush=True)
        spark.stop()
        sys.exit(3)
    try:
        live.process_all_available()
        if args.flush:
            live.flush()
    finally:
        live.stop()
        spark.stop()


if __name__ == "__main__":
    main()
