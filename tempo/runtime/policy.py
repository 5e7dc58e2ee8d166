"""An input's time policy: its ``AdvanceTimeSettings`` decoded once, in ticks.

Every ingress (the reference one in ``tempo.runtime.ingress`` and Spark's) reads its
settings from here, so what a setting means is decided in one place.
"""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING, Any

import attrs

from tempo.settings import AdvanceTimePolicy, AdvanceTimeSettings
from tempo.ticks import duration_ticks

if TYPE_CHECKING:
    from tempo.plan.nodes import SourceNode


@attrs.frozen
class TimePolicy:
    """How one input advances application time and treats a violation, in ticks."""

    has_settings: bool
    """False: the input takes only its explicit CTIs, and a violation is an error."""
    adjust: bool
    """The ADJUST policy (else DROP)."""
    every_n: int
    """Count generation: a CTI after every N-th received event (0: none)."""
    period: int
    """Time-span generation: a CTI when an event enters a later period of this length (0: none)."""
    delay: int
    """A generated CTI is the triggering event's start less this."""
    flush: bool
    """A CTI at infinity when the input ends."""
    import_from: str | None
    """The input whose CTIs this one imports."""
    ordered: bool
    """Ordering settings (Azure Stream Analytics' arrival-time rules) apply."""
    out_of_order: int
    late: int | None
    """The late-arrival tolerance (None: off)."""
    early: int | None
    """The early-arrival window (None: off)."""
    over: Any = None
    """The substream key expression (``over=``), or None."""

    @property
    def generates(self) -> bool:
        """CTIs are generated from the input's events (by count or time span)."""
        return bool(self.every_n or self.period)

    @property
    def nothing_can_be_late(self) -> bool:
        """No CTI before the input ends from its settings: no generation, import or
        ordering (explicit CTI items are the caller's to check)."""
        return not (self.generates or self.import_from is not None or self.ordered)

    @classmethod
    def of(cls, settings: AdvanceTimeSettings | None, over: Any = None) -> TimePolicy:
        gen = settings.generation if settings is not None else None
        frequency = gen.frequency if gen is not None else None
        ordering = settings.ordering if settings is not None else None
        out_of_order, late, early = ordering.ticks() if ordering is not None else (0, None, None)
        return cls(
            has_settings=settings is not None,
            adjust=settings is not None and settings.policy is AdvanceTimePolicy.ADJUST,
            every_n=frequency if isinstance(frequency, int) else 0,
            period=duration_ticks(frequency) if isinstance(frequency, timedelta) else 0,
            delay=duration_ticks(gen.delay) if gen is not None else 0,
            flush=gen is not None and gen.advance_to_infinity_on_shutdown,
            import_from=settings.import_.stream_name if settings is not None and settings.import_ is not None else None,
            ordered=ordering is not None,
            out_of_order=out_of_order,
            late=late,
            early=early,
            over=over,
        )

    @classmethod
    def of_input(cls, node: SourceNode) -> TimePolicy:
        """The policy of an input node: its settings and substream key."""
        return cls.of(node.settings, node.over)
