"""The batch benchmark's one-table run (``bench/run.py --isolate``) on a tiny data set of the
shared generator, without Spark: every (workload, engine) in a process of its own, its peak
memory in the table and the JSON, the checksums agreeing; the peers (polars, DuckDB) when the
interpreter has them; and the memory measurement of a process tree."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
RUN = ROOT / "bench" / "run.py"
N = 20_000
MB = 2**20


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder holding the shared generator's data set of 20,000 events."""
    from bench.run import shared_data_script

    script = shared_data_script()
    if not script.is_file():
        pytest.skip(f"no shared data generator at {script}")
    out = tmp_path_factory.mktemp("bench-data")
    subprocess.run([sys.executable, str(script), "--n", str(N), "--out", str(out)], check=True, capture_output=True)
    return out


def run_isolated(
    data_dir: Path, tmp_path: Path, engines: str, workloads: str, *extra: str
) -> tuple[dict[str, dict[str, str]], dict[str, Any]]:
    """``run.py --isolate``: the table's rows (column -> cell) by "workload engine", and the JSON."""
    out = tmp_path / "out.json"
    proc = subprocess.run(
        [
            sys.executable,
            str(RUN),
            "--n",
            str(N),
            "--data-dir",
            str(data_dir),
            "--isolate",
            "--engines",
            engines,
            "--workloads",
            workloads,
            "--out",
            str(out),
            *extra,
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.split("\n\n")[1].splitlines()  # the table: after the runs' progress
    spans, at = [], 0  # the columns, from the line of dashes under the head
    for dashes in lines[1].split("  "):
        spans.append((at, at + len(dashes)))
        at += len(dashes) + 2
    head = [lines[0][a:b].strip() for a, b in spans]
    table = [dict(zip(head, (line[a:b].strip() for a, b in spans))) for line in lines[2:]]
    return {f"{r['workload']} {r['engine']}": r for r in table}, json.loads(out.read_text())


def test_isolated_engines_report_their_peak_memory_and_agree(data_dir: Path, tmp_path: Path) -> None:
    rows, result = run_isolated(data_dir, tmp_path, "tempo-memory,tempo-vectorised", "W2")
    assert set(rows) == {"W2 tempo-memory", "W2 tempo-vectorised"}
    for row in rows.values():
        assert 0 < float(row["peak MB"].replace(",", "")) < 4096
        assert row["checksum"] == "no ref, agree"
    assert result["isolate"] is True
    (memory, vectorised) = sorted(result["rows"], key=lambda r: r["engine"])
    assert memory["checksum"] == vectorised["checksum"] and memory["checksum"]["count"] == N
    for r in result["rows"]:
        assert r["peak_rss_bytes"] > 10 * MB  # an interpreter, tempo, pyarrow at least
        assert len(r["runs"]) == 1


def test_polars_peer_agrees_and_does_not_run_w5(data_dir: Path, tmp_path: Path) -> None:
    pytest.importorskip("numpy")
    pytest.importorskip("polars")
    rows, result = run_isolated(data_dir, tmp_path, "tempo-vectorised,polars", "W2,W5")
    assert rows["W2 polars"]["checksum"] == "no ref, agree"
    assert float(rows["W2 polars"]["peak MB"].replace(",", "")) > 0
    assert rows["W2 tempo-vectorised"]["vs best peer"].endswith("x")
    assert rows["W5 polars"]["checksum"] == "n/a" and rows["W5 polars"]["peak MB"] == "-"
    by = {(r["workload"], r["engine"]): r for r in result["rows"]}
    assert by["W2", "polars"]["checksum"] == by["W2", "tempo-vectorised"]["checksum"]
    assert by["W2", "polars"]["peak_rss_bytes"] > 10 * MB
    assert by["W2", "tempo-vectorised"]["ratio_to_best_peer"] > 0
    assert by["W5", "polars"]["status"] == "n/a" and by["W5", "polars"]["peak_rss_bytes"] is None


def test_a_peer_that_cannot_be_imported_is_not_available_and_not_a_failure(data_dir: Path, tmp_path: Path) -> None:
    rows, result = run_isolated(data_dir, tmp_path, "tempo-vectorised,duckdb", "W1", "--peers-python", str(tmp_path / "no-python"))
    assert rows["W1 duckdb"]["checksum"] == "not available"
    assert {r["engine"]: r["status"] for r in result["rows"]}["duckdb"] == "not available"


def test_peer_checksums_take_our_field_names() -> None:
    from bench.checksums import FIELDS
    from bench.child import PEER_WORKLOADS, from_peer

    got = from_peer("W2", {"groups": 3, "count": 7, "sum": 1.5, "sum_x_key": 2.5, "sum_x_win": -4.0})
    assert got == {"groups": 3, "count": 7, "sum": 1.5, "sum_x_key": 2.5, "sum_x_window": -4.0}
    assert all(
        tuple(
            from_peer(
                w, {k: 1 for k in ("kept", "dropped", "groups", "count", "sum", "sum_x_key", "sum_x_win", "matched", "sum_value_x_ref")}
            )
        )
        == FIELDS[w]
        for w in PEER_WORKLOADS
    )


def test_peak_memory_sums_the_process_tree() -> None:
    """A child holding 100 MB while its own child holds 150 MB: the peak is their sum, which
    neither process's ru_maxrss shows."""
    from bench.run import run_measured

    grandchild = "import time; b = b'x' * (150 * 2**20); print('ready', flush=True); time.sleep(1.0)"
    child = (
        "import subprocess, sys; b = b'x' * (100 * 2**20); "
        f"p = subprocess.Popen([sys.executable, '-c', {grandchild!r}], stdout=subprocess.PIPE); "
        "p.stdout.readline(); p.wait()"
    )
    run = run_measured([sys.executable, "-c", child])
    assert run.returncode == 0, run.stderr
    assert run.peak_rss_bytes >= 250 * MB


def test_imported_ctis_give_the_flushed_join_s_checksum(data_dir: Path, tmp_path: Path) -> None:
    """``--ctis import`` (the events with their arrival column, W4's reference importing
    their CTIs) releases the same join as the flush alone, on both embedded engines."""
    _, flushed = run_isolated(data_dir, tmp_path, "tempo-memory,tempo-vectorised", "W4")
    _, imported = run_isolated(data_dir, tmp_path, "tempo-memory,tempo-vectorised", "W4", "--ctis", "import")
    checksums = [r["checksum"] for r in flushed["rows"] + imported["rows"]]
    assert len(checksums) == 4 and all(c == checksums[0] for c in checksums) and checksums[0]["matched"] > 0
