"""W7's checksums computed a second way, in numpy over the Parquet files, without Spark or tempo.

    python bench/numpy_w7.py --n 200000          # the shared data set of N events (generated if missing)
    python bench/numpy_w7.py EVENTS.parquet REFERENCE.parquet

It follows the definition rather than either query: sort each key's readings by time; a
reading at t holds [t, min(t + 1 h, t')), t' the key's next *distinct* later time (readings
at the same time share it); then, per key, binary searches in the reference rows (sorted,
not overlapping) find the rows each piece overlaps, with no assumption about their lengths
or alignment. All arithmetic is on integers (values × 16, times in µs), so the sums are
exact whatever the order; the floats returned are the exact integers / 256 or / 16.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

HOLD_US = 3600 * 1_000_000
MS = 1_000


def _sixteenths(values: np.ndarray) -> np.ndarray:
    """Values (multiples of 1/16) as exact int64 sixteenths."""
    scaled = values * 16.0
    out = scaled.astype(np.int64)
    if not np.array_equal(out, scaled):
        raise ValueError("a value is not a multiple of 1/16: the checksums would not be exact")
    return out


def signal(key: np.ndarray, time: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The order that sorts readings by (key, time), and each sorted reading's clipped end."""
    order = np.lexsort((time, key))
    k, t = key[order], time[order]
    # groups of equal (key, time); a group's readings all end at the next group's time if that
    # group is of the same key, else after the hold
    new = np.ones(len(k), dtype=bool)
    new[1:] = (k[1:] != k[:-1]) | (t[1:] != t[:-1])
    first = np.flatnonzero(new)
    group = np.cumsum(new) - 1
    g_key, g_time = k[first], t[first]
    g_next = np.full(len(first), np.iinfo(np.int64).max, dtype=np.int64)
    same_key = g_key[1:] == g_key[:-1]
    g_next[:-1][same_key] = g_time[1:][same_key]
    end = np.minimum(t + HOLD_US, g_next[group])
    return order, end


def checksum(events: str | Path, reference: str | Path) -> dict[str, int | float]:
    """``matched``, ``sum_value_x_ref``, ``span``, ``sum_value_x_ms`` of W7 on these files."""
    ev = pq.read_table(events, columns=["key", "event_time", "value"])
    key = ev["key"].to_numpy().astype(np.int64)
    order, end = signal(key, ev["event_time"].to_numpy().astype(np.int64))
    k = key[order]
    t = ev["event_time"].to_numpy().astype(np.int64)[order]
    v16 = _sixteenths(ev["value"].to_numpy())[order]

    ref = pq.read_table(reference, columns=["key", "valid_from", "valid_to", "ref_value"])
    r_key = ref["key"].to_numpy().astype(np.int64)
    r_order = np.lexsort((ref["valid_from"].to_numpy(), r_key))
    r_key = r_key[r_order]
    vf = ref["valid_from"].to_numpy().astype(np.int64)[r_order]
    vt = ref["valid_to"].to_numpy().astype(np.int64)[r_order]
    r16 = _sixteenths(ref["ref_value"].to_numpy())[r_order]

    matched = span = by_ref = by_ms = 0  # Python ints: no overflow
    for rk in np.unique(r_key):
        r0, r1 = np.searchsorted(r_key, rk, "left"), np.searchsorted(r_key, rk, "right")
        kvf, kvt, kr16 = vf[r0:r1], vt[r0:r1], r16[r0:r1]
        if np.any(kvt <= kvf) or np.any(kvt[:-1] > kvf[1:]):
            raise ValueError(f"key {rk}: reference rows empty or overlapping")
        e0, e1 = np.searchsorted(k, rk, "left"), np.searchsorted(k, rk, "right")
        ks, ke, kv16 = t[e0:e1], end[e0:e1], v16[e0:e1]
        lo = np.searchsorted(kvt, ks, "right")  # first row ending after the piece starts
        hi = np.searchsorted(kvf, ke, "left")  # rows starting before the piece ends: [0, hi)
        count = np.maximum(hi - lo, 0)
        piece = np.repeat(np.arange(len(ks)), count)
        row = lo[piece] + (np.arange(len(piece)) - np.repeat(np.cumsum(count) - count, count))
        overlap = np.minimum(ke[piece], kvt[row]) - np.maximum(ks[piece], kvf[row])
        if np.any(overlap <= 0):
            raise AssertionError("a pair that does not overlap")
        matched += len(piece)
        span += int(overlap.sum())
        by_ref += int((kv16[piece] * kr16[row]).sum())
        by_ms += int((kv16[piece] * (overlap // MS)).sum())
    return {"matched": matched, "sum_value_x_ref": by_ref / 256, "span": span, "sum_value_x_ms": by_ms / 16}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="*", help="EVENTS.parquet REFERENCE.parquet (instead of --n)")
    ap.add_argument("--n", type=int, help="the shared data set of N events")
    args = ap.parse_args(argv)
    if args.files:
        if len(args.files) != 2 or args.n is not None:
            ap.error("give either EVENTS REFERENCE or --n")
        events, reference = args.files
    else:
        if args.n is None:
            ap.error("give either EVENTS REFERENCE or --n")
        root = Path(__file__).resolve().parents[1]
        if str(root) not in sys.path:
            sys.path.insert(0, str(root))
        from bench.run import default_data_dir, ensure_data

        data = ensure_data(args.n, default_data_dir())
        events, reference = str(data.events), str(data.reference)
    print(checksum(events, reference))
    return 0


if __name__ == "__main__":
    sys.exit(main())
