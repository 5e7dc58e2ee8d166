"""An input's time rules over whole columns (numpy), stated once for every executor that
reads columns: which rows generate a CTI, the CTI in force at each row, what the policy
does to an event starting before it, and Azure Stream Analytics' ordered verdicts.

The per-item reference is ``tempo.runtime.ingress.Ingress`` (``generate``, ``verdict``,
``_process_ordered``); ``tests/test_verdicts.py`` checks every function here against it on
random inputs. The bulk batch (``runtime/bulk.py``), the vectorised ingress and the Spark
executor's scan on the driver call these; Spark's distributed scan
(``tempo.spark.ingress.scan``) states the same formulas over Spark columns, and the
differential tests hold it to them.

Columns are int64 numpy arrays of ticks in input order; ``NEG_INF`` stands for "none".
numpy is imported when a function runs: the in-memory executor does not need it.
"""

from __future__ import annotations

from typing import Any

import attrs

from tempo.result import Rule
from tempo.rules import CTI_RULE_CODES
from tempo.runtime.policy import TimePolicy
from tempo.ticks import INF, NEG_INF

__all__ = [
    "Generated",
    "GenerationState",
    "OrderedVerdicts",
    "OwnCtis",
    "adjusted",
    "generation",
    "in_force",
    "may_be_late",
    "ordered_verdicts",
    "own_ctis",
]


@attrs.frozen
class GenerationState:
    """What CTI generation carries from one batch of an input's rows to the next."""

    count: int = 0
    """Events counted before (count generation)."""
    last_period: int | None = None
    """The greatest period an event entered before (time-span generation); None before the
    input's first event, which enters its period without generating."""


@attrs.frozen
class Generated:
    """Which rows of a batch generate a CTI, and the state after the batch."""

    generates: Any
    """Per row, True when the row generates a CTI at its start less the delay."""
    candidates: Any
    """Per row, the CTI it generates (``NEG_INF`` where none)."""
    state: GenerationState


def generation(policy: TimePolicy, starts: Any, counted: Any = None, before: GenerationState = GenerationState()) -> Generated:
    """CTI generation (``Ingress.generate``) over a batch: every received event counts,
    admitted or not. Count generation: the N-th, 2N-th, ... event generates. Time-span
    generation: an event generates when it enters a later period (``start // period``)
    than every event before it; the input's first event only enters its period.
    ``counted``: which rows are events (None: every row)."""
    import numpy as np

    n = len(starts)
    is_event = np.ones(n, dtype=bool) if counted is None else counted
    if policy.every_n:
        rank = before.count + np.cumsum(is_event)
        generates = is_event & (rank % policy.every_n == 0)
        state = GenerationState(int(rank[-1]) if n else before.count, before.last_period)
    elif policy.period:
        lowest = np.iinfo(np.int64).min
        period = np.where(is_event, np.floor_divide(starts, policy.period), lowest)
        seed = before.last_period
        if seed is None and bool(is_event.any()):
            seed = int(period[int(np.argmax(is_event))])  # the first event sets the period
        if seed is None or not n:
            generates = np.zeros(n, dtype=bool)
        else:
            entered = np.maximum(np.concatenate(([seed], np.maximum.accumulate(period)[:-1])), seed)
            generates = is_event & (period > entered)
            seed = max(seed, int(period.max()))
        state = GenerationState(before.count, seed)
    else:
        generates = np.zeros(n, dtype=bool)
        state = before
    candidates = np.where(generates, starts - policy.delay, NEG_INF)
    return Generated(generates, candidates, state)


def in_force(candidates: Any, cti0: int = NEG_INF) -> tuple[Any, Any]:
    """The CTI in force at each row (before it) and after it: the running maximum of the
    CTI before the batch (``cti0``) and the CTIs of the rows before (candidates,
    ``NEG_INF`` where none: generated CTIs and explicit CTI rows alike)."""
    import numpy as np

    if not len(candidates):
        return candidates, candidates
    after = np.maximum.accumulate(np.maximum(candidates, cti0))
    return np.concatenate(([cti0], after[:-1])), after


RISK_BLOCK = 1024
"""The rows ``may_be_late`` looks at together first."""


def may_be_late(starts: Any, latest: int, delay: int, block: int = RISK_BLOCK) -> Any:
    """Which rows may start before the CTI in force of an input whose CTIs only its own
    rows generate: those starting before the largest start before them (``latest`` before
    the first) less ``delay``, since no generated CTI is later than that. A boolean array.
    A running maximum over every row costs a few nanoseconds a row, as it cannot be
    vectorised; so blocks of ``block`` rows come first: none of a block's rows is at risk
    when its least start is at least the largest start up to its end less the delay (the
    usual case, rows in about time order), and only the other blocks take the running
    maximum (every row does when many blocks are unsure)."""
    import numpy as np

    n = len(starts)
    risk = np.zeros(n, dtype=bool)
    if not n:
        return risk
    edges = np.arange(0, n, block)
    highest = np.maximum.reduceat(starts, edges)
    lowest = np.minimum.reduceat(starts, edges)
    before = np.maximum.accumulate(np.concatenate(([latest], highest[:-1])))  # the largest start before each block
    unsure = np.flatnonzero(lowest < np.maximum(before, highest) - delay)
    if len(unsure) * 8 > len(edges):  # rows far out of order: one running maximum over all
        seen = np.maximum.accumulate(np.concatenate(([latest], starts[:-1])))
        return starts < seen - delay
    for b in unsure.tolist():
        rows = starts[edges[b] : edges[b] + block]
        seen = np.maximum.accumulate(np.concatenate(([before[b]], rows[:-1])))
        risk[edges[b] : edges[b] + block] = rows < seen - delay
    return risk


def adjusted(points: Any, ends: Any, cti: Any) -> tuple[Any, Any, Any]:
    """ADJUST over columns (``tempo.runtime.ingress.adjusted_lifetime``, row by row): which
    events starting before ``cti`` are kept, and their lifetimes. A point always moves to the
    CTI; a longer lifetime starts there if it still reaches past it; nothing moves to
    infinity. ``points``: a boolean per row, or one for all."""
    import numpy as np

    kept = (cti < INF) & (points | (ends > cti))
    return kept, cti, np.where(points, cti + 1, ends)


@attrs.frozen
class OrderedVerdicts:
    """ASA's ordering settings over a batch of an input's events (each column per row)."""

    status: Any
    """0 admitted as read, 1 adjusted, 2 dropped."""
    rule: Any
    """The last rule that applied: a code of ``tempo.rules.CTI_RULE_CODES`` (0: none)."""
    bound: Any
    """The time the event was held against under that rule."""
    start: Any
    end: Any
    """The lifetime as admitted (where kept)."""
    late: Any
    """The late-arrival rule applied first."""
    late_kept: Any
    """... and kept the event (adjusted)."""
    candidate: Any
    """Without substreams: the input's CTI the row moves ahead (its start less the
    out-of-order tolerance, a new largest start), ``NEG_INF`` where none."""
    key_candidate: Any
    """With substreams and a late tolerance: the key's CTI the row moves ahead of the
    input's (at least the arrival less the late tolerance), ``NEG_INF`` where none."""
    arrival_step: Any
    """The row's arrival is later than every arrival before it (the first row's is)."""

    def rule_at(self, row: int) -> Rule:
        """The rule that rejected row ``row`` (its status not 0)."""
        return CTI_RULE_CODES[int(self.rule[row])]


_CODE = {rule: code for code, rule in CTI_RULE_CODES.items()}


def ordered_verdicts(policy: TimePolicy, starts: Any, ends: Any, arrivals: Any, keys: Any = None, point: bool = False) -> OrderedVerdicts:
    """``Ingress._process_ordered`` over a batch of events with arrival times, for an input
    whose CTIs are its ordering settings' alone (no CTI rows), from the input's first row.
    Each verdict depends on one running figure over input order: the largest start that
    passed both arrival checks before the row (with substreams, the key's: ``keys`` holds
    each row's substream as an integer code). The early, late and out-of-order checks and the
    ADJUST arithmetic are then columns. Nothing is late before the clock: an event passing the
    late check starts at or after the arrival less the tolerance, and one adjusted sits
    there."""
    import numpy as np

    n = len(starts)
    early = starts > arrivals + policy.early if policy.early is not None else np.zeros(n, dtype=bool)
    late_bound = arrivals - policy.late if policy.late is not None else np.full(n, NEG_INF, dtype=np.int64)
    late = ~early & (starts < late_bound) if policy.late is not None else np.zeros(n, dtype=bool)
    passed = np.where(early | late, NEG_INF, starts)  # the starts that may raise time
    before = _running_max_before(passed, keys)
    cti = before - policy.out_of_order
    late_kept = policy.adjust & (point | (ends > late_bound))
    late_start = np.where(late, late_bound, starts)
    alive = ~early & ~(late & ~late_kept)
    out_of_order = alive & (late_start < cti)
    out_kept = policy.adjust & (cti < INF) & (point | (ends > cti))
    start = np.where(out_of_order, cti, late_start)
    dropped = early | (late & ~late_kept) | (out_of_order & ~out_kept)
    status = np.where(dropped, 2, np.where(late | out_of_order, 1, 0))
    rule = np.where(
        early,
        _CODE[Rule.EARLY_ARRIVAL],
        np.where(out_of_order, _CODE[Rule.START_BEFORE_CTI], np.where(late, _CODE[Rule.LATE_ARRIVAL], 0)),
    )
    bound = np.where(early, arrivals + (policy.early or 0), np.where(out_of_order, cti, late_bound))
    rises = (passed > NEG_INF) & (passed > before)
    if keys is None:
        candidate = np.where(rises, passed - policy.out_of_order, NEG_INF)
        key_candidate = np.full(n, NEG_INF, dtype=np.int64)
    else:
        candidate = np.full(n, NEG_INF, dtype=np.int64)
        ahead = rises & (passed - policy.out_of_order > late_bound) if policy.late is not None else np.zeros(n, dtype=bool)
        key_candidate = np.where(ahead, passed - policy.out_of_order, NEG_INF)
    arrival_step = np.ones(n, dtype=bool)
    if n > 1:
        arrival_step[1:] = arrivals[1:] > np.maximum.accumulate(arrivals)[:-1]
    end = np.where(point, start + 1, ends)
    return OrderedVerdicts(status, rule, bound, start, end, late, late_kept, candidate, key_candidate, arrival_step)


def _running_max_before(values: Any, keys: Any) -> Any:
    """Per row, the largest of ``values`` over the rows before it (of its key, when ``keys``
    gives integer codes), ``NEG_INF`` when none. Per key: the rows sorted by key (stably,
    so each key's rows keep their order), each value replaced by its rank among all values
    and offset by its key's number times the number of ranks, so that one running maximum
    over the sorted rows never carries one key's figure into the next."""
    import numpy as np

    n = len(values)
    if not n:
        return values.copy()
    if keys is None:
        return np.concatenate(([NEG_INF], np.maximum.accumulate(values)[:-1]))
    order = np.argsort(keys, kind="stable")
    sorted_keys = keys[order]
    distinct, ranks = np.unique(values[order], return_inverse=True)
    first = np.concatenate(([True], sorted_keys[1:] != sorted_keys[:-1]))
    group = np.cumsum(first) - 1
    span = len(distinct)
    running = np.maximum.accumulate(ranks + group * span) - group * span
    before = np.empty(n, dtype=np.int64)
    before[1:] = distinct[running[:-1]]
    before[first] = NEG_INF
    out = np.empty(n, dtype=np.int64)
    out[order] = before
    return out


@attrs.frozen
class OwnCtis:
    """The CTIs an input's own rows generate, from its first row, every row an event."""

    positions: Any
    values: Any
    """The rows that generate a CTI, and the CTI each generates."""
    late: Any
    late_cti: Any
    """The rows starting before the CTI in force, and that CTI."""


def own_ctis(policy: TimePolicy, starts: Any) -> OwnCtis:
    """``generation`` and ``in_force`` for a whole input whose every row is an event and
    whose CTIs only its rows generate. Count generation takes no column per row: the CTI in
    force in the k-th run of N rows is the largest of the first k candidates (the starts of
    rows N-1, 2N-1, ... less the delay), and the rows are compared with it N at a time."""
    import numpy as np

    if not policy.every_n:
        generated = generation(policy, starts)
        before, _ = in_force(generated.candidates)
        late = np.flatnonzero(starts < before)
        positions = np.flatnonzero(generated.generates)
        return OwnCtis(positions, generated.candidates[positions], late, before[late])
    every_n, n = policy.every_n, len(starts)
    positions = np.arange(every_n - 1, n, every_n, dtype=np.int64)
    values = starts[every_n - 1 :: every_n] - policy.delay
    run_cti = np.maximum.accumulate(np.concatenate(([NEG_INF], values)))  # [k]: rows kN .. kN+N-1
    runs = n // every_n
    late = np.flatnonzero(starts[: runs * every_n].reshape(runs, every_n) < run_cti[:runs, None])
    late = np.concatenate((late, runs * every_n + np.flatnonzero(starts[runs * every_n :] < run_cti[runs])))
    return OwnCtis(positions, values, late, run_cti[late // every_n])
