"""tempo: typed temporal stream processing in the StreamInsight / Trill model.

Build a query with ``Stream.create(...)`` and fluent operators over your own payload
classes; run it with ``InMemoryExecutor`` (or, with the ``spark`` extra, on Spark).
"""

from tempo.api.functions import coalesce, col, is_in, is_not_null, is_null, lit, not_, try_divide, udf, when
from tempo.api.stream import Analytics, GroupedStream, GroupedWindowedStream, Stream, Window, WindowedStream
from tempo.clocks import ArrivalClock, EventTime, IngestionTime, ProcessingTime, ScriptedClock, SystemClock, TimeDomain
from tempo.errors import (
    CompileError,
    CtiViolationError,
    EvaluationError,
    EvaluationRule,
    ImportOrderError,
    InputSchemaError,
    InputError,
    QueryBuildError,
    TempoError,
    TraceError,
    UdfError,
    UdfResultError,
    UnsupportedError,
)
from tempo.expr.aggregator import Aggregator
from tempo.events import Cti, EdgeEnd, EdgeStart, EventShape, Heartbeat, InputItem, Interval, Point, SubstreamCti
from tempo.executors import EmbeddedExecutor, Executor, get_executor, spark_available
from tempo.memory import InMemoryExecutor
from tempo.plan.windows import WindowTimestamp
from tempo.result import (
    Action,
    EventCounts,
    InputMetrics,
    OutputEvent,
    Rejection,
    Result,
    Rule,
    SubstreamMetrics,
    UnreleasedResultsWarning,
    Withheld,
)
from tempo.settings import (
    AdvanceTimeGenerationSettings,
    AdvanceTimeImportSettings,
    AdvanceTimePolicy,
    AdvanceTimeSettings,
    EventOrderingSettings,
)
from tempo.sources import ItemSource, Source
from tempo.ticks import INFINITY, TICK, is_infinite

__all__ = [
    "Action",
    "ArrivalClock",
    "EventTime",
    "IngestionTime",
    "ProcessingTime",
    "ScriptedClock",
    "SystemClock",
    "TimeDomain",
    "Aggregator",
    "Analytics",
    "AdvanceTimeGenerationSettings",
    "AdvanceTimeImportSettings",
    "AdvanceTimePolicy",
    "AdvanceTimeSettings",
    "CompileError",
    "Cti",
    "CtiViolationError",
    "EvaluationError",
    "EvaluationRule",
    "EdgeEnd",
    "EdgeStart",
    "EmbeddedExecutor",
    "EventCounts",
    "EventOrderingSettings",
    "EventShape",
    "Executor",
    "GroupedStream",
    "GroupedWindowedStream",
    "Heartbeat",
    "INFINITY",
    "ImportOrderError",
    "InputSchemaError",
    "InMemoryExecutor",
    "InputError",
    "InputItem",
    "InputMetrics",
    "Interval",
    "ItemSource",
    "OutputEvent",
    "Point",
    "QueryBuildError",
    "Rejection",
    "Result",
    "Rule",
    "Source",
    "Stream",
    "WindowTimestamp",
    "SubstreamCti",
    "SubstreamMetrics",
    "TICK",
    "TempoError",
    "TraceError",
    "UdfError",
    "UdfResultError",
    "UnreleasedResultsWarning",
    "UnsupportedError",
    "Window",
    "WindowedStream",
    "Withheld",
    "coalesce",
    "col",
    "get_executor",
    "is_in",
    "is_not_null",
    "is_null",
    "is_infinite",
    "lit",
    "not_",
    "spark_available",
    "try_divide",
    "udf",
    "when",
]
