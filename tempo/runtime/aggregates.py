"""The aggregates of the reference engine: each kind's state, its update by one value, its
merge of a partial, and its result, defined once per kind (``STATES``) and generated into one
function per query by ``Accumulator``, as Trill's ``IAggregate`` gives each aggregate's
initial state, accumulation and result. The kinds' semantics are ``AggregateKind``'s
(``tempo/plan/nodes.py``, docs/semantics.md 5.6.5). A partial (what ``merge`` folds in, for
the mergeable kinds) is a sum, min or max over several events, or for an average (total,
count of values): what the live batch engines compute per window and group
(``tempo.runtime.bulk.Partial``)."""

from __future__ import annotations

import functools
import heapq
import math
from collections.abc import Callable, Sequence
from typing import Any

import attrs

from tempo.errors import EvaluationRule
from tempo.expr import nodes as x
from tempo.expr.aggregator import aggregator_runner
from tempo.plan.nodes import Aggregate, AggregateKind
from tempo.runtime.codegen import canonical_key, define_function, evaluation_failure, fits_64_bits, payload_order, value_order

K = AggregateKind


def percentile(values: list[Any], fraction: float) -> float | None:
    """Spark's exact ``percentile``: between the closest ranks of ``fraction·(n − 1)``, linearly
    (the same float operations, so the executors agree to the bit)."""
    if not values:
        return None
    ranked = sorted(values, key=value_order(float))  # NaN after every number
    position = (len(ranked) - 1) * fraction
    lower, higher = math.floor(position), math.ceil(position)
    low = float(ranked[lower])
    if lower == higher:
        return low
    return low + (position - lower) * (float(ranked[higher]) - low)


def percentile_approx(values: list[Any], fraction: float) -> Any:
    """The smallest value with at least ``fraction`` of the values at or below it (rank
    ``ceil(fraction·n)``, at least 1): what Spark's ``percentile_approx`` gives while its
    summary is exact, and within its accuracy of that rank beyond. Values rank as doubles,
    as the summary holds them, so an integer result is that value made a double and back
    (``long_of_double``): beyond ±2**53 it loses its last bits (docs/semantics.md 5.6.5)."""
    if not values:
        return None
    ranked = sorted(values, key=value_order(float))  # NaN after every number
    value = ranked[max(1, math.ceil(fraction * len(ranked))) - 1]
    return long_of_double(float(value)) if type(value) is int else value


def long_of_double(v: float) -> int:
    """A double made a 64-bit integer as the JVM's ``toLong`` makes it: toward zero, and at
    the nearest bound beyond them (2**63 - 1 for the double 2**63)."""
    return max(x.INT_MIN, min(x.INT_MAX, int(v)))


def top_ranker(a: Aggregate) -> Callable[[list[tuple[tuple[Any, ...], Any]]], list[Any]]:
    """``top``'s result from its state (entries of the values ranked by, and the payload): the
    entries ranked by those values, each ascending or descending, nulls first ascending (the
    least value, as Spark sorts them) and last descending; equal values share a rank (SQL's
    ``RANK``: 1, 1, 3); those of rank ``limit`` or better as ``element(rank, event)`` records,
    by rank then payload."""
    parts = [value_order(e.dtype) for e in a.order]
    flips = [-1 if d else 1 for d in a.descending]
    limit, element = a.limit, a.element
    assert limit is not None and element is not None and a.arg is not None
    payload = payload_order(a.arg.dtype)

    def compare(x: tuple[tuple[Any, ...], Any], y: tuple[tuple[Any, ...], Any]) -> int:
        for part, flip, u, v in zip(parts, flips, x[0], y[0]):
            ku, kv = part(u), part(v)
            if ku != kv:
                return flip if ku > kv else -flip
        return 0

    def rank(entries: list[tuple[tuple[Any, ...], Any]]) -> list[Any]:
        ordered = sorted(entries, key=functools.cmp_to_key(compare))
        kept: list[tuple[int, Any]] = []
        place = 0
        for i, entry in enumerate(ordered):
            if i == 0 or compare(entry, ordered[i - 1]) != 0:
                place = i + 1
            if place > limit:
                break
            kept.append((place, entry[1]))
        kept.sort(key=lambda r: (r[0], payload(r[1])))
        return [element(rank=r, event=e) for r, e in kept]

    return rank


def _collected(entries: list[tuple[Any, Any]]) -> list[Any]:
    return [v for _, v in sorted(entries, key=lambda entry: entry[0])]


def _finisher(item: Aggregate | AggregateKind | str, kind: AggregateKind) -> Callable[[list[Any]], Any] | None:
    """For the kinds that keep every value of a window (a list) and compute their result from
    them at the end: that computation; None for the others."""
    if not isinstance(item, Aggregate):
        return None
    if kind is AggregateKind.COLLECT:
        return _collected
    if kind in (AggregateKind.PERCENTILE, AggregateKind.PERCENTILE_APPROX):
        assert item.fraction is not None
        return functools.partial(percentile if kind is AggregateKind.PERCENTILE else percentile_approx, fraction=item.fraction)
    if kind is AggregateKind.TOP:
        return top_ranker(item)
    if kind is AggregateKind.UDA:
        assert item.arg is not None
        return aggregator_runner(item.function, item.arg.dtype, type(item.function).__qualname__, local=True)
    return None


def _distinct(v: Any) -> Any:
    """One NaN for every NaN (a set tells NaN objects apart), as Spark groups them."""
    return canonical_key(v) if v != v else v


@attrs.frozen
class StateCode:
    """One aggregate's share of a window and group's state, as generated source: the initial
    values of its slots, the lines that add a non-null value ``v`` (run under ``if v is not
    None``), the lines that fold in a partial ``part`` over several events (the mergeable
    kinds only), and the expression of its result; ``env``: the names that source reads."""

    initial: tuple[str, ...]
    add: tuple[str, ...]
    result: str
    merge: tuple[str, ...] = ()
    env: dict[str, Any] = attrs.field(factory=dict)


StateRule = Callable[[Aggregate | AggregateKind | str, AggregateKind, int, str, str], StateCode]
"""A kind's state: from the aggregate (or its bare kind), the kind, its first slot, the name of
its value and of its partial."""


def _average(item: Any, kind: AggregateKind, s: int, v: str, part: str) -> StateCode:
    """(total, count of values); an integer total made a float before dividing, as Spark and
    polars divide. Its partial is the same pair."""
    return StateCode(
        ("0", "0"),
        (f"state[{s}] += {v}", f"state[{s + 1}] += 1"),
        f"(float(state[{s}]) / state[{s + 1}] if state[{s + 1}] else None)",
        (f"total, count = {part}", "if count:", f"    state[{s}] += total", f"    state[{s + 1}] += count"),
    )


def _variance(item: Any, kind: AggregateKind, s: int, v: str, part: str) -> StateCode:
    """(n, mean, the sum of squared deviations), by Welford's update as Spark's."""
    n, mean, m2 = s, s + 1, s + 2
    sample = kind in (K.VAR, K.STDDEV)
    var = f"state[{m2}] / (state[{n}] - 1.0)" if sample else f"state[{m2}] / state[{n}]"
    if kind in (K.STDDEV, K.STDDEV_POP):
        var = f"_sqrt({var})"
    return StateCode(
        ("0.0", "0.0", "0.0"),
        (
            f"n = state[{n}] + 1.0",
            f"delta = float({v}) - state[{mean}]",
            "share = delta / n",
            f"state[{mean}] += share",
            f"state[{m2}] += delta * (delta - share)",
            f"state[{n}] = n",
        ),
        f"({var} if state[{n}] > {'1.0' if sample else '0.0'} else None)",
        env={"_sqrt": math.sqrt},
    )


def _count_distinct(item: Any, kind: AggregateKind, s: int, v: str, part: str) -> StateCode:
    return StateCode(("set()",), (f"state[{s}].add(_distinct({v}))",), f"len(state[{s}])", env={"_distinct": _distinct})


def _kept_values(finish: Callable[[list[Any]], Any]) -> StateRule:
    """The kinds that keep every value and compute their result from them at the end."""

    def state(item: Any, kind: AggregateKind, s: int, v: str, part: str) -> StateCode:
        return StateCode(("[]",), (f"state[{s}].append({v})",), f"_finish{s}(state[{s}])", env={f"_finish{s}": finish})

    return state


def _sum(item: Any, kind: AggregateKind, s: int, v: str, part: str) -> StateCode:
    """Integers add exactly; only the window's sum must fit in 64 bits."""
    env: dict[str, Any] = {}
    result = f"state[{s}]"
    if isinstance(item, Aggregate) and item.arg is not None and item.arg.dtype in (int, bool):
        env = {f"_fits{s}": fits_64_bits, f"_fail{s}": evaluation_failure(f"w.{item.describe()}", EvaluationRule.INTEGER_OVERFLOW)}
        result = f"_fits{s}(state[{s}], _fail{s})"
    return StateCode(
        ("None",),
        (f"c = state[{s}]", f"state[{s}] = {v} if c is None else c + {v}"),
        result,
        (f"v = {part}", "if v is not None:", f"    c = state[{s}]", f"    state[{s}] = v if c is None else c + v"),
        env,
    )


def _first_or_last(item: Any, kind: AggregateKind, s: int, v: str, part: str) -> StateCode:
    """The value of the least (first) or greatest (last) place; ``v`` is (place, value)."""
    less = "<" if kind is K.FIRST else ">"
    return StateCode(
        ("None",),
        (f"c = state[{s}]", f"if c is None or {v}[0] {less} c[0]:", f"    state[{s}] = {v}"),
        f"(None if state[{s}] is None else state[{s}][1])",
    )


def _extreme(item: Any, kind: AggregateKind, s: int, v: str, part: str) -> StateCode:
    """The least (min) or greatest (max) value. NaN is greater than every number (as Spark
    orders doubles): the max once met, the min only when nothing else is (comparisons with
    NaN are all false)."""
    less = "<" if kind is K.MIN else ">"
    floats = isinstance(item, Aggregate) and item.arg is not None and item.arg.dtype in (float, object)

    def nan_wins(value: str) -> str:
        if not floats:
            return ""
        return f" or {value} != {value}" if kind is K.MAX else " or c != c"

    return StateCode(
        ("None",),
        (f"c = state[{s}]", f"if c is None or {v} {less} c{nan_wins(v)}:", f"    state[{s}] = {v}"),
        f"state[{s}]",
        (
            f"v = {part}",
            "if v is not None:",
            f"    c = state[{s}]",
            f"    if c is None or v {less} c{nan_wins('v')}:",
            f"        state[{s}] = v",
        ),
    )


STATES: dict[AggregateKind, StateRule] = {
    K.AVG: _average,
    K.VAR: _variance,
    K.VAR_POP: _variance,
    K.STDDEV: _variance,
    K.STDDEV_POP: _variance,
    K.COUNT_DISTINCT: _count_distinct,
    K.SUM: _sum,
    K.FIRST: _first_or_last,
    K.LAST: _first_or_last,
    K.MIN: _extreme,
    K.MAX: _extreme,
}
"""Each kind with an argument: its state (``count`` is the state's slot 0). The kinds that keep
their values (collect, the percentiles, top, a user-defined aggregate) are ``_finisher``'s."""


def state_code(item: Aggregate | AggregateKind | str, kind: AggregateKind, s: int, v: str, part: str) -> StateCode:
    """``item``'s state from slot ``s`` on."""
    finish = _finisher(item, kind)
    if finish is not None:
        return _kept_values(finish)(item, kind, s, v, part)
    # A bare kind (no ``Aggregate``) is the min or max of a window's starts (its stamp's bounds).
    rule: StateRule = STATES.get(kind, _extreme)
    return rule(item, kind, s, v, part)


class Accumulator:
    """The aggregates of a window operator, as generated code over flat state lists.

    The state of one window and group is a list: slot 0 counts events, then each aggregate
    with an argument its slots (``state_code``). ``add(acc, heap, key, values, k_lo, k_hi)``
    adds one event to its group's state in windows ``k_lo..k_hi`` of ``acc`` (window index ->
    group -> state), creating what is missing and pushing new window indexes onto ``heap``;
    ``values`` are the event's values of the aggregates other than count, in order
    (``compile_aggregate_values``). ``results(state)`` gives one value per aggregate.
    Generating them once per query spares each event and window a loop over the kinds and a
    call per aggregate.
    """

    def __init__(self, aggregates: Sequence[Aggregate | AggregateKind | str]) -> None:
        initial = ["0"]
        update: list[str] = []
        merged: list[str] = []  # the same per aggregate, for ``merge``
        results: list[str] = []
        env: dict[str, Any] = {"_heappush": heapq.heappush}
        argument = 0  # index into ``values``
        mergeable = True
        for item in aggregates:
            kind = item.kind if isinstance(item, Aggregate) else AggregateKind(item)
            if not kind.takes_argument:
                results.append("state[0]")
                continue
            mergeable = mergeable and kind.mergeable
            code = state_code(item, kind, len(initial), f"v{argument}", f"parts[{argument}]")
            argument += 1
            initial += code.initial
            update += [f"        if v{argument - 1} is not None:", *("            " + line for line in code.add)]
            merged += ["    " + line for line in code.merge]
            results.append(code.result)
            env.update(code.env)
        # Window k's state of the group, created (and k pushed onto the heap) when missing.
        state_of = [
            "windows = acc.get(k)",
            "if windows is None:",
            "    windows = acc[k] = {}",
            "    _heappush(heap, k)",
            "state = windows.get(key)",
            "if state is None:",
            f"    state = windows[key] = [{', '.join(initial)}]",
        ]
        add = [
            "def _f(acc, heap, key, values, k_lo, k_hi):",
            *(f"    v{i} = values[{i}]" for i in range(argument)),
            "    for k in range(k_lo, k_hi + 1):",
            *("        " + line for line in state_of),
            "        state[0] += 1",
            *update,
        ]
        if not mergeable:  # the bulk path (the only caller) refuses such windows
            merged = ["    raise AssertionError('these aggregates have no merge')"]
        merge = ["def _f(acc, heap, key, k, n, parts):", *("    " + line for line in state_of), "    state[0] += n", *merged]
        self.merge: Callable[[dict[int, dict[Any, list[Any]]], list[int], Any, int, int, tuple[Any, ...]], None]
        self.merge = define_function("\n".join(merge) + "\n", env)
        """Adds a group's partial aggregates over several events (``n`` of them) to window
        ``k``: per aggregate with an argument, its sum, min or max over them (None without
        a value), or for an average (total, count of values). Only for the mergeable kinds."""
        self.add: Callable[[dict[int, dict[Any, list[Any]]], list[int], Any, tuple[Any, ...], int, int], None]
        self.add = define_function("\n".join(add) + "\n", env)
        self.results: Callable[[list[Any]], list[Any]]
        self.results = define_function(f"def _f(state):\n    return [{', '.join(results)}]\n", env)

    def fold_partial(self, state: list[Any] | None, n: int, parts: tuple[Any, ...]) -> list[Any]:
        """``merge``'s partial aggregates of ``n`` events added to a single state (None: a new
        one), as ``fold`` adds one event's values."""
        acc: dict[int, dict[Any, list[Any]]] = {} if state is None else {0: {(): state}}
        self.merge(acc, [], (), 0, n, parts)
        return acc[0][()]

    def fold(self, state: list[Any] | None, values: tuple[Any, ...]) -> list[Any]:
        """One event's ``values`` added to a single state (None: a new one), for operators
        that keep one state per window or group rather than ``add``'s window index."""
        acc: dict[int, dict[Any, list[Any]]] = {} if state is None else {0: {(): state}}
        self.add(acc, [], (), values, 0, 0)
        return acc[0][()]
