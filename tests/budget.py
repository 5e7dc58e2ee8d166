"""How many examples a property test draws: the default suite (the README's command, CI)
draws a share of them, ``--run-slow`` all of them.

The default suite must stay within CI's time budget (README: 25 minutes on two cores), so
the property tests that run Spark or many executors per example draw ``examples(n)``: a quarter
of ``n`` by default, ``n`` with ``--run-slow`` (``conftest.py`` sets ``TEMPO_THOROUGH``) or when
``TEMPO_THOROUGH=1`` is set by hand. The examples are derandomised, so the default suite's are
the first of the thorough run's.
"""

from __future__ import annotations

import os

THOROUGH = "TEMPO_THOROUGH"


def thorough() -> bool:
    return os.environ.get(THOROUGH) == "1"


def examples(n: int) -> int:
    """``n`` in a thorough run, else a quarter of it (at least one)."""
    return n if thorough() else max(1, n // 4)
