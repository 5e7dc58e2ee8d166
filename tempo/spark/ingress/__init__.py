"""Ingress on Spark: input rows to admitted events, with the CTIs of ``tempo.runtime.ingress``.

The rules are those of the in-memory ingress; this package computes them in bulk, moving
as little data as the settings allow:

1. Each input becomes rows ``(kind, start, end, arrival, order, file order, payload...)``.
2. **Nothing can be late** when an input generates no CTIs before its end, imports none
   and holds no CTI rows: every row is admitted as read, and no job runs before the query.
3. Otherwise the rows are cut into **blocks** of about ``BLOCK_ROWS`` by the range of the
   order column, and one job takes per-block figures (rows, counted events, latest start,
   ...). Running aggregates over input order are then a window partitioned by block plus a
   prefix over the blocks before, taken on the driver: no input is funnelled through one
   partition.
4. One **scan** job runs that window over the narrow rows (no payload) and collects only
   the few rows that matter: CTI candidates (every N-th counted event, period changes,
   CTI rows), rows that break a rule, and rows **at risk**: those starting before the
   largest candidate that could precede them. A row not at risk is admitted as read, so
   the policy's work is confined to the rows collected. A table the driver can read, with
   CTIs generated from its own rows only, may instead be scanned there with numpy
   (``local_scan``): the same rows collected, without steps 3 and 4's jobs.
5. On the driver, ``CtiReplay`` applies the never-go-back rule, imports and the flush
   exactly as the in-memory executor does; with its steps, each at-risk row gets the CTI
   in force when it arrived and the policy's verdict. The verdicts go back as a small
   broadcast table joined to the rows; end edges are paired with their start edges by rank.

The package, by concern: ``rows`` (the rows' columns and codes, ``InputFrame``), ``read``
(step 1), ``blocks`` (step 3), ``scan`` (step 4), ``local_scan`` (steps 3 and 4 on the driver), ``ctis`` and ``verdicts`` (step 5),
``admit`` (the admitted events, end edges paired) and ``metrics`` (metrics, rejections).
"""

from __future__ import annotations

from tempo.spark.ingress.admit import Admitted, admit
from tempo.spark.ingress.ctis import replay
from tempo.spark.ingress.metrics import finish, validate
from tempo.spark.ingress.local_scan import LOCAL_SCAN_ROWS
from tempo.spark.ingress.read import LOCAL_ITEMS, input_frame, local_events
from tempo.spark.ingress.rows import InputFrame

BLOCK_ROWS = 1 << 14
"""Rows per block of input order, about: the unit of running aggregates. Read by
``blocks`` at each cut, so that tests can shrink it here."""

__all__ = [
    "BLOCK_ROWS",
    "LOCAL_ITEMS",
    "LOCAL_SCAN_ROWS",
    "Admitted",
    "InputFrame",
    "admit",
    "finish",
    "input_frame",
    "local_events",
    "replay",
    "validate",
]
