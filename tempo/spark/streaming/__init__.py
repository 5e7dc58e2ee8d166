"""Live queries on Spark Structured Streaming: a started query over unbounded inputs,
releasing each micro-batch's results to a sink exactly once (docs/streaming.md)."""

from tempo.spark.streaming.checkpoint import CheckpointInUseError, CheckpointMismatchError
from tempo.spark.streaming.executor import BatchProgress, LiveQuery, StreamingExecutor, read_progress
from tempo.runtime.live import StateError
from tempo.spark.streaming.sinks import CallbackSink, DeltaSink, NoCommittedOutputError, ParquetSink, Sink, read_committed, released_items
from tempo.spark.streaming.kafka import KafkaSink, KafkaSinkError, read_kafka_output

__all__ = [
    "BatchProgress",
    "CallbackSink",
    "DeltaSink",
    "KafkaSink",
    "KafkaSinkError",
    "CheckpointInUseError",
    "CheckpointMismatchError",
    "LiveQuery",
    "NoCommittedOutputError",
    "ParquetSink",
    "Sink",
    "StateError",
    "StreamingExecutor",
    "read_committed",
    "read_kafka_output",
    "read_progress",
    "released_items",
]
