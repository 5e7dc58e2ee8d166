"""Window specifications: which windows exist, and which of them an event or a CTI reaches.

A ``WindowSpec`` is a plan-level value carried by ``WindowNode``. It owns the window
arithmetic (windows are numbered by an integer index ``k``), so that the reference runtime
and the Spark compiler use the same formulas: once over ints, and once over Spark Columns
next to them (Spark has no floor division on Columns; ``tests/test_windows.py`` checks the
two agree). Times are ticks.

Only data-independent grids exist today (``HoppingWindow``; tumbling is ``hop == size``).
Session, count and snapshot windows depend on the events themselves and will be further
subclasses here, each with its own arithmetic and rule text; ``WindowNode`` keeps the
aggregation, grouping and emission that all window kinds share.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

import attrs

from tempo.errors import QueryBuildError
from tempo.ticks import format_duration

if TYPE_CHECKING:
    from pyspark.sql import Column


@attrs.frozen
class WindowSpec:
    """Base of window specifications. ``SEMANTICS`` says which windows exist and which an
    event belongs to; ``CTI_RULE`` says which windows a CTI completes and where it pulls back."""

    SEMANTICS: ClassVar[str] = ""
    CTI_RULE: ClassVar[str] = ""

    def describe(self) -> str:
        raise NotImplementedError

    def longest_window(self) -> int | None:
        """An upper bound on a window's length in ticks (None: any length)."""
        raise NotImplementedError


@attrs.frozen
class HoppingWindow(WindowSpec):
    """Windows ``[offset + k*hop, offset + k*hop + size)`` for every integer ``k``; tumbling
    when ``hop == size``. ``offset`` is in ``[0, hop)`` (the API takes it modulo ``hop``)."""

    SEMANTICS: ClassVar[str] = (
        "Windows [w, w + size) with w = offset + k*hop on the epoch; an event belongs to every "
        "window its lifetime overlaps (start < w + size and end > w)."
    )
    CTI_RULE: ClassVar[str] = (
        "A CTI c completes the windows with w + size <= c; the output CTI is min(c, w*), w* the "
        "start of the earliest window with w + size > c."
    )

    size: int
    hop: int
    offset: int

    def __attrs_post_init__(self) -> None:
        if self.size <= 0:
            raise QueryBuildError(f"window size must be positive, got {format_duration(self.size)}")
        if self.hop <= 0:
            raise QueryBuildError(f"window hop must be positive, got {format_duration(self.hop)}")

    @property
    def tumbling(self) -> bool:
        return self.size == self.hop

    def describe(self) -> str:
        kind = "Tumbling" if self.tumbling else "Hopping"
        hop = "" if self.tumbling else f" hop {format_duration(self.hop)}"
        offset = f" offset {format_duration(self.offset)}" if self.offset else ""
        return f"{kind} {format_duration(self.size)}{hop}{offset}"

    def longest_window(self) -> int | None:
        return self.size

    # ---- over ints (the runtime) -------------------------------------------------------
    # A lifetime [s, e) overlaps windows first_window(s)..last_window(e) (none when first > last).
    def first_window(self, start: int) -> int:
        """The first window ending after ``start``."""
        return (start - self.size - self.offset) // self.hop + 1

    def last_window(self, end: int) -> int:
        """The last window starting before ``end``."""
        return (end - self.offset - 1) // self.hop

    def last_complete(self, cti: int) -> int:
        """The last window a CTI at ``cti`` completes (its end is at or before ``cti``)."""
        return (cti - self.size - self.offset) // self.hop

    def start_of(self, k: int) -> int:
        """The start of window ``k``; also where a CTI is pulled back to when ``k`` is the
        earliest window not yet complete."""
        return self.offset + k * self.hop

    def bounds(self, k: int) -> tuple[int, int]:
        """Window ``k`` as ``(start, end)``."""
        start = self.offset + k * self.hop
        return start, start + self.size

    # ---- over Spark Columns (the same formulas; floor() of a true division) ------------
    def first_window_column(self, start: Column) -> Column:
        from pyspark.sql import functions as F

        return F.floor((start - F.lit(self.size + self.offset)) / self.hop) + 1

    def last_window_column(self, end: Column) -> Column:
        from pyspark.sql import functions as F

        return F.floor((end - F.lit(self.offset + 1)) / self.hop)

    def start_of_column(self, k: Column) -> Column:
        from pyspark.sql import functions as F

        return F.lit(self.offset) + k * F.lit(self.hop)
