"""Issue 32's slice, measured in one run: today's two compilers, the dialect prototype on
polars and Spark, and ibis on polars and Spark, on W3 and W4 (bench/README.md).

    python bench/lowering_slice/measure.py --n 200000 --n 2000000 --repeat 3

Every approach starts from the same tempo ingress (inputs read and admitted, CTI replay,
spans); only the lowering of the plan differs. A run is timed as ``bench/run.py`` times
one: from the stream to the checksum values in the driver (on Spark the checksum is a Spark
aggregate; on polars it is taken over the collected output, as the tempo-vectorised engine
does). Spark's ``build`` is the driver time of the lowering alone (the DataFrame plan built,
which Spark analyses as it goes; before any action), and ``planned`` that plus Spark's
optimisation and physical planning (``queryExecution().executedPlan()``). Runs are
interleaved (repeat, then workload, then approach); the table gives medians and the ratio
to today's executor on the same backend.

Before timing, every approach's output rows are compared with both of today's executors'
(sorted, times as integer microseconds), on W3 and W4 as the benchmark runs them and on
variants whose final CTI is finite (CTIs every 1000 events, no flush: the window's CTI
limit, the release rule and the join's open ends all apply).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from bench import tempo_queries as q  # noqa: E402
from bench.lowering_slice import drivers  # noqa: E402

DATA = Path(os.environ.get("TEMPO_BENCH_DATA", "/tmp/tempo-bench-data"))
MINUTE = 60_000_000


def data(n: int) -> tuple[str, str]:
    d = DATA / f"n{n}"
    if not (d / "events.parquet").exists():
        import subprocess

        subprocess.run([sys.executable, str(ROOT.parent / "shared" / "bench" / "data.py"), "--n", str(n), "--out", str(DATA)], check=True)
    return str(d / "events.parquet"), str(d / "reference.parquet")


def streams(n: int, finite: bool = False) -> dict[str, Callable[[], Any]]:
    """W3 and W4 (``finite``: the events with a CTI every 1000 events, 120 s behind, and no flush)."""
    ev, ref = data(n)
    if not finite:
        return {"W3": lambda: q.w3(ev), "W4": lambda: q.w4(ev, ref)}
    from tempo import AdvanceTimeGenerationSettings, AdvanceTimePolicy, AdvanceTimeSettings, EventShape, Stream

    def settings(delay: int) -> AdvanceTimeSettings:
        return AdvanceTimeSettings(
            AdvanceTimeGenerationSettings(frequency=1000, delay=timedelta(seconds=delay)), policy=AdvanceTimePolicy.DROP
        )

    def w3() -> Any:
        s = Stream.create("events", q._events_source(ev), EventShape.POINT, settings(120))
        return (
            s.group_by(lambda e: e.key)
            .hopping(timedelta(seconds=300), timedelta(seconds=60))
            .aggregate(lambda key, w: q.Hop(key=key, total=w.sum(lambda e: e.value)))
        )

    def w4() -> Any:
        e = Stream.create("events", q._events_source(ev), EventShape.POINT, settings(120))
        # The reference flushed: with its own CTIs (one per 600 s batch) the join's would stay at
        # the first batch on the small data sets and release nothing.
        r = Stream.create("reference", q._reference_source(ref), EventShape.INTERVAL, q.FLUSHED)
        return e.join(r, on=lambda a, b: a.key == b.key, select=lambda a, b: q.Match(product=a.value * b.ref_value))

    return {"W3": w3, "W4": w4}


# ---- checksums ----------------------------------------------------------------------------


def polars_checksum(workload: str, out: Any) -> dict[str, Any]:
    import polars as pl

    if workload == "W4":
        return {"matched": out.height, "sum_value_x_ref": float(out["product"].sum())}
    window = (pl.col("tempo_start").cast(pl.Datetime("us")).dt.epoch("us") - q.ORIGIN_US) // MINUTE
    row = out.select(
        pl.len().alias("groups"),
        pl.col("total").sum().alias("sum"),
        (pl.col("total") * pl.col("key")).sum().alias("sum_x_key"),
        (pl.col("total") * window).sum().alias("sum_x_window"),
    ).row(0, named=True)
    return {k: int(v) if k == "groups" else float(v) for k, v in row.items()}


def spark_checksum(workload: str, df: Any) -> dict[str, Any]:
    from pyspark.sql import functions as F

    if workload == "W4":
        return df.agg(F.count(F.lit(1)).alias("matched"), F.sum("product").alias("sum_value_x_ref")).collect()[0].asDict()
    window = F.call_function("div", F.unix_micros("tempo_start") - F.lit(q.ORIGIN_US), F.lit(MINUTE))
    row = df.agg(
        F.count(F.lit(1)).alias("groups"),
        F.sum("total").alias("sum"),
        F.sum(F.col("total") * F.col("key")).alias("sum_x_key"),
        F.sum(F.col("total") * window).alias("sum_x_window"),
    ).collect()[0]
    return {k: int(v) if k == "groups" else float(v) for k, v in row.asDict().items()}


# ---- the approaches -----------------------------------------------------------------------


def has_ibis() -> bool:
    try:
        import ibis  # noqa: F401
    except ImportError:
        return False
    return True


POLARS = {"tempo-vectorised": drivers.tempo_polars, "dialect-polars": drivers.dialect_polars, "ibis-polars": drivers.ibis_polars}


def spark_lowerings(spark: Any) -> dict[str, Callable[[Any], Any]]:
    out: dict[str, Callable[[Any], Any]] = {"tempo-spark": drivers.tempo_spark_lower, "dialect-spark": drivers.dialect_spark_lower}
    if has_ibis():
        out["ibis-spark"] = drivers.IbisSpark(spark).lower
    return out


def approaches(spark: Any) -> list[str]:
    names = [n for n in POLARS if n != "ibis-polars" or has_ibis()]
    return names + list(spark_lowerings(spark)) if spark is not None else names


def run_once(spark: Any, lowerings: dict[str, Any], name: str, workload: str, stream: Callable[[], Any]) -> dict[str, Any]:
    """One timed run: seconds, and on Spark the plan-build and planned times, and the checksum."""
    if name in POLARS:
        t0 = time.perf_counter()
        checksum = polars_checksum(workload, POLARS[name](stream()))
        return {"s": time.perf_counter() - t0, "checksum": checksum}
    t0 = time.perf_counter()
    prepared = drivers.SparkPrepared(spark, stream())
    t1 = time.perf_counter()
    df = lowerings[name](prepared)
    t2 = time.perf_counter()
    checksum = spark_checksum(workload, df)
    t3 = time.perf_counter()
    # Planned apart, on a fresh plan, so the run's time above does not include it twice.
    fresh = lowerings[name](prepared)
    t4 = time.perf_counter()
    fresh._jdf.queryExecution().executedPlan()
    t5 = time.perf_counter()
    return {"s": t3 - t0, "ingress": t1 - t0, "build": t2 - t1, "planned": (t4 - t3) + (t5 - t4), "checksum": checksum}


def output_rows(spark: Any, lowerings: dict[str, Any], name: str, stream: Callable[[], Any]) -> Any:
    """The approach's output as a polars frame sorted by every column, times as integer µs."""
    import polars as pl

    if name in POLARS:
        out = POLARS[name](stream())
    else:
        out = pl.from_arrow(lowerings[name](drivers.SparkPrepared(spark, stream())).toArrow())
    out = out.with_columns([pl.col(c).cast(pl.Datetime("us")).dt.epoch("us") for c in ("tempo_start", "tempo_end")])
    return out.select(sorted(out.columns)).sort(sorted(out.columns))


def fidelity(spark: Any, lowerings: dict[str, Any], n: int) -> list[dict[str, Any]]:
    rows = []
    for finite in (False, True):
        for workload, stream in streams(n, finite).items():
            names = approaches(spark)
            outputs = {}
            for name in names:
                try:
                    outputs[name] = output_rows(spark, lowerings, name, stream)
                except Exception as e:  # an approach that cannot express it: reported, not fatal
                    outputs[name] = f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"
            refs = [r for r in ("tempo-vectorised", "tempo-spark") if r in outputs and not isinstance(outputs[r], str)]
            for name in names:
                o = outputs[name]
                same = {r: (not isinstance(o, str)) and o.equals(outputs[r]) for r in refs}
                rows.append(
                    {
                        "n": n,
                        "query": workload + (" finite CTI" if finite else ""),
                        "approach": name,
                        "rows": None if isinstance(o, str) else o.height,
                        "same_as": same,
                        "error": o if isinstance(o, str) else None,
                    }
                )
                print(json.dumps(rows[-1]), flush=True)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, action="append", help="events (repeatable; default 200000 and 2000000)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--no-spark", action="store_true")
    ap.add_argument("--no-fidelity", action="store_true")
    ap.add_argument("--fidelity-n", type=int, default=200_000)
    ap.add_argument("--out", default=str(Path(__file__).with_name("results.json")))
    args = ap.parse_args()
    ns = args.n or [200_000, 2_000_000]
    spark = None
    if not args.no_spark:
        from bench.run import make_spark

        spark = make_spark("local[2]", 4, "6g", Path(data(ns[0])[0]))
    lowerings = spark_lowerings(spark) if spark is not None else {}
    names = approaches(spark)
    versions = {m: __import__(m).__version__ for m in ("polars", "pyspark", "ibis") if m != "ibis" or has_ibis()}
    print(json.dumps({"python": sys.executable, "versions": versions, "load": os.getloadavg()}), flush=True)
    checks = [] if args.no_fidelity else fidelity(spark, lowerings, args.fidelity_n)
    for name in names:  # one untimed run each: imports, JIT, the JVM's code paths
        for workload, stream in streams(ns[0]).items():
            run_once(spark, lowerings, name, workload, stream)
    runs: dict[tuple[int, str, str], list[dict[str, Any]]] = {}
    for n in ns:
        for _ in range(args.repeat):
            for workload, stream in streams(n).items():
                for name in names:
                    r = run_once(spark, lowerings, name, workload, stream)
                    runs.setdefault((n, workload, name), []).append(r)
                    print(json.dumps({"n": n, "workload": workload, "approach": name} | r), flush=True)
    table = []
    for (n, workload, name), rs in runs.items():
        base = "tempo-vectorised" if name in POLARS else "tempo-spark"
        med = {k: statistics.median(r[k] for r in rs) for k in ("s", "build", "planned") if k in rs[0]}
        base_s = statistics.median(r["s"] for r in runs[(n, workload, base)])
        sums = {json.dumps(r["checksum"], sort_keys=True) for r in runs[(n, workload, name)]}
        base_sums = {json.dumps(r["checksum"], sort_keys=True) for r in runs[(n, workload, base)]}
        table.append(
            {"n": n, "workload": workload, "approach": name, **med, "ratio": med["s"] / base_s, "checksum_same": sums == base_sums}
        )
    print()
    print(f"{'n':>9} {'wl':3} {'approach':17} {'s':>7} {'ratio':>6} {'build s':>8} {'planned s':>9} checksum")
    for t in table:
        build = f"{t['build']:.3f}" if "build" in t else "-"
        planned = f"{t['planned']:.3f}" if "planned" in t else "-"
        print(
            f"{t['n']:>9} {t['workload']:3} {t['approach']:17} {t['s']:7.3f} {t['ratio']:6.2f} {build:>8} {planned:>9} {t['checksum_same']}"
        )
    Path(args.out).write_text(
        json.dumps(
            {"versions": versions, "load": os.getloadavg(), "fidelity": checks, "table": table, "runs": [[*k, v] for k, v in runs.items()]},
            indent=1,
            default=str,
        )
    )


if __name__ == "__main__":
    main()
