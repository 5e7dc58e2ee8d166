"""The reference checksums of WORKLOADS.md (../shared/bench/WORKLOADS.md) and of this project's
W5-W7, and how to compare them.

Every value in the data is a multiple of 1/16, so every sum is exact in float64 whatever the
order of summation: results are compared with ``==``, never with a tolerance.
"""

from __future__ import annotations

from typing import Union

Number = Union[int, float]
Checksum = dict[str, Number]
"""One workload's result, e.g. ``{"kept": 1998033, "dropped": 1967}`` for W1."""

WORKLOADS = ("W1", "W2", "W3", "W4", "W5", "W6", "W7")

FIELDS: dict[str, tuple[str, ...]] = {
    "W1": ("kept", "dropped"),
    "W2": ("groups", "count", "sum", "sum_x_key", "sum_x_window"),
    "W3": ("groups", "sum", "sum_x_key", "sum_x_window"),
    "W4": ("matched", "sum_value_x_ref"),
    "W5": ("sessions", "count", "sum", "sum_x_key", "sum_x_start", "span"),
    "W6": ("windows", "count", "sum", "sum_x_key", "sum_x_start", "span"),
    "W7": ("matched", "sum_value_x_ref", "span", "sum_value_x_ms"),
}
"""The checksum fields of each workload. ``sum_x_key`` is Σ sum·key over the groups and
``sum_x_window`` is Σ sum·(window_start / 60 s), window_start in µs since 2024-01-01.

W5 (sessions) and W6 (count windows) are this project's, not WORKLOADS.md's: ``sum_x_start``
is Σ sum·floor(start / 1 s), start (the session's first event, the count window's first
start) in µs since 2024-01-01; ``span`` is Σ (end − start) in µs, an integer, with end the
window's exclusive end (a session's last event + the 5 s gap; a count window's last start
+ 1 µs). At N = 10M, Σ sum·start stays below 2**53 / 16, so it is exact too.

W7 (the signal joined with the reference) is this project's too: ``matched`` is the number of
join outputs (pairs of a signal piece and a reference row whose lifetimes overlap),
``sum_value_x_ref`` Σ value·ref_value over them, ``span`` Σ (end − start) of their lifetimes
(the overlaps) in µs, an integer, and ``sum_value_x_ms`` Σ value·floor((end − start) / 1 ms),
the signal's time-weighted sum to the millisecond, which ties each value to its own lifetime
(at N = 10M it stays far below 2**53 / 16, so it is exact)."""

INTS = frozenset({"kept", "dropped", "groups", "count", "matched", "sessions", "windows", "span"})

MEASURED: dict[str, dict[int, Checksum]] = {
    "W5": {
        2_000_000: {
            "sessions": 14_553,
            "count": 2_000_000,
            "sum": 999834642.375,
            "sum_x_key": 499293088104.8125,
            "sum_x_start": 866519788061.1875,
            "span": 1_990_398_003_949,
        },
        10_000_000: {
            "sessions": 68_473,
            "count": 10_000_000,
            "sum": 5000591661.1875,
            "sum_x_key": 2497492091198.625,
            "sum_x_start": 24297822419900.125,
            "span": 9_936_604_680_953,
        },
    },
    "W6": {
        2_000_000: {
            "windows": 19_508,
            "count": 1_950_800,
            "sum": 975280217.75,
            "sum_x_key": 486909907504.4375,
            "sum_x_start": 902155575795.0625,
            "span": 1_933_445_212_143,
        },
        10_000_000: {
            "windows": 99_506,
            "count": 9_950_600,
            "sum": 4976010354.9375,
            "sum_x_key": 2485217586761.5,
            "sum_x_start": 24507486209525.8125,
            "span": 9_853_455_675_930,
        },
    },
    "W7": {
        2_000_000: {
            "matched": 2_002_951,
            "sum_value_x_ref": 50922024380.69921875,
            "span": 5_598_140_128_690,
            "sum_value_x_ms": 2712320779983.375,
        },
        10_000_000: {
            "matched": 10_015_938,
            "sum_value_x_ref": 251924341154.03515625,
            "span": 13_598_144_352_338,
            "sum_value_x_ms": 6804032538501.1875,
        },
    },
}
"""W5-W7 have no published checksums: W5's and W6's were measured here (2026-11-24), the same
from the hand-written PySpark queries, tempo on Spark, tempo in memory (2M) and a separate
numpy computation over the sorted events. W5's count, sum and Σ sum·key are W2's, as they
must be (every event is in exactly one session). W7's are those of the numpy computation
``bench/numpy_w7.py`` (2026-11-24, in integer arithmetic), which the three engines matched
exactly at N = 200,000 and on the data of tests/test_bench_clip_join.py; the engines were not
run at 2M and 10M then (the values written with more digits than Python prints are exact:
multiples of 1/256 and 1/16)."""

REFERENCE: dict[int, dict[str, Checksum]] = {
    2_000_000: {
        "W1": {"kept": 1_998_033, "dropped": 1_967},
        "W2": {
            "groups": 34_287,
            "count": 2_000_000,
            "sum": 999834642.375,
            "sum_x_key": 499293088104.8125,
            "sum_x_window": 16158979067.75,
        },
        "W3": {
            "groups": 38_303,
            "sum": 4999173211.875,
            "sum_x_key": 2496465440524.0625,
            "sum_x_window": 70796548915.0,
        },
        "W4": {"matched": 1_999_670, "sum_value_x_ref": 50839816460.140625},
        **{w: c[2_000_000] for w, c in MEASURED.items()},
    },
    10_000_000: {
        "W1": {"kept": 9_989_980, "dropped": 10_020},
        "W2": {
            "groups": 167_287,
            "count": 10_000_000,
            "sum": 5000591661.1875,
            "sum_x_key": 2497492091198.625,
            "sum_x_window": 414192657479.125,
        },
        "W3": {
            "groups": 171_303,
            "sum": 25002958305.9375,
            "sum_x_key": 12487460455993.125,
            "sum_x_window": 2020957370783.75,
        },
        # WORKLOADS.md prints 251519069070.35938; the exact value (a multiple of 1/256) is the
        # float that string parses to.
        "W4": {"matched": 9_999_670, "sum_value_x_ref": 251519069070.359375},
        **{w: c[10_000_000] for w, c in MEASURED.items()},
    },
}


def reference(n: int, workload: str) -> Checksum | None:
    """The published checksum of ``workload`` on the data set of ``n`` events, if there is one."""
    return REFERENCE.get(n, {}).get(workload)


def normalize(workload: str, values: Checksum) -> Checksum:
    """Keep the workload's fields, as ints for counts and floats for sums (exact comparison)."""
    out: Checksum = {}
    for name in FIELDS[workload]:
        v = values[name]
        out[name] = int(v) if name in INTS else float(v)
    return out


def differences(expected: Checksum, got: Checksum) -> list[str]:
    """The fields that differ, as ``name: got != expected``; empty when they all match exactly."""
    return [f"{k}: {got.get(k)!r} != {v!r}" for k, v in expected.items() if got.get(k) != v]
