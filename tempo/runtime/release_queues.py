"""Waiting for release: entries kept in order of start until a CTI passes it.

The stateful operators and the query's output (``tempo.runtime.egress``) hold what they may
not emit yet here, so that what a CTI releases goes out in order of start, then of arrival.
"""

from __future__ import annotations

import heapq
import itertools
from collections import deque
from collections.abc import Callable, Iterator
from typing import Any


class ByStart:
    """Entries ``(start, seq, a, b)`` released in order of start, then of arrival, up to a time.

    Entries arriving in order of start join a first-in-first-out run, which costs nothing to
    keep in order. The others are set aside until the next release and sorted then: merged
    into the run if there are many (a burst, such as a whole input joined at once), else
    pushed onto a heap. Releasing merges the run and the heap. An entry holds up to two
    items itself, so that waiting costs one object.
    """

    __slots__ = ("run", "aside", "late", "seq")

    def __init__(self) -> None:
        self.run: deque[tuple[int, int, Any, Any]] = deque()  # in order
        self.aside: list[tuple[int, int, Any, Any]] = []  # out of order, since the last release
        self.late: list[tuple[int, int, Any, Any]] = []  # a heap
        self.seq = itertools.count()

    def push(self, start: int, a: Any, b: Any = None, rank: Any = None) -> None:
        """Let ``(a, b)`` wait for a release past ``start``; ``rank`` orders the entries of one
        start in its place (all or none of them ranked): by default, their order of arrival."""
        entry = (start, next(self.seq) if rank is None else rank, a, b)
        if not self.run or self.run[-1][0] <= start:
            self.run.append(entry)
        else:
            self.aside.append(entry)

    def entries(self) -> list[tuple[int, int, Any, Any]]:
        """Every entry, in release order, none removed."""
        return sorted(itertools.chain(self.run, self.aside, self.late))

    def first_start(self) -> int | None:
        """The earliest start waiting, or None."""
        starts = [entry[0] for entry in self.aside]
        if self.run:
            starts.append(self.run[0][0])
        if self.late:
            starts.append(self.late[0][0])
        return min(starts) if starts else None

    def __len__(self) -> int:
        return len(self.run) + len(self.aside) + len(self.late)

    def pop_before(self, t: int) -> Iterator[tuple[int, int, Any, Any]]:
        """The entries starting before ``t``, in order, each removed as it is yielded."""
        if self.aside:
            # Merging costs about as much as pushing onto the heap once the run is at most
            # eight times as long as what joins it (bench/README.md, "Latest figures", tempo-memory).
            if 8 * len(self.aside) >= len(self.run):
                self.run = deque(sorted(itertools.chain(self.run, self.aside)))
            else:
                for entry in self.aside:
                    heapq.heappush(self.late, entry)
            self.aside = []
        run, late = self.run, self.late
        while True:
            if run and run[0][0] < t and not (late and late[0] < run[0]):
                yield run.popleft()
            elif late and late[0][0] < t:
                yield heapq.heappop(late)
            else:
                return


class KeyedByStart:
    """A ``ByStart`` whose entries also wait per substream key, so that one key's entries
    can be released on that key's CTI: ``pop_key_before``. Each entry is in both orders
    and goes out once, from whichever releases it first."""

    __slots__ = ("all", "by_key", "key_of")

    def __init__(self, key_of: Callable[[Any, Any], Any]) -> None:
        self.all = ByStart()
        self.by_key: dict[Any, ByStart] = {}
        self.key_of = key_of  # (a, b) -> substream key

    def __getstate__(self) -> tuple[ByStart, dict[Any, ByStart]]:
        return self.all, self.by_key  # ``key_of`` is compiled: the restored owner sets it again

    def __setstate__(self, state: tuple[ByStart, dict[Any, ByStart]]) -> None:
        self.all, self.by_key = state

    def push(self, start: int, a: Any, b: Any = None, rank: Any = None) -> None:
        cell = [a, b, False]  # the entry, and whether it went out
        self.all.push(start, cell, None, rank)
        key = self.key_of(a, b)
        waiting = self.by_key.get(key)
        if waiting is None:
            waiting = self.by_key[key] = ByStart()
        waiting.push(start, cell, None, rank)

    def pop_before(self, t: int) -> Iterator[tuple[int, int, Any, Any]]:
        return _first_out(self.all.pop_before(t))

    def pop_key_before(self, key: Any, t: int) -> Iterator[tuple[int, int, Any, Any]]:
        waiting = self.by_key.get(key)
        if waiting is None:
            return
        yield from _first_out(waiting.pop_before(t))
        if not waiting.run and not waiting.late and not waiting.aside:
            del self.by_key[key]

    def first_start(self) -> int | None:
        """The earliest start of an entry not out yet, or None (one a key's CTI released
        stays in ``all`` until the CTI passes it)."""
        return min((entry[0] for entry in itertools.chain(self.all.run, self.all.aside, self.all.late) if not entry[2][2]), default=None)


def _first_out(entries: Iterator[tuple[int, int, Any, Any]]) -> Iterator[tuple[int, int, Any, Any]]:
    """The ``KeyedByStart`` entries among ``entries`` not out yet, each marked as out."""
    for start, seq, cell, _ in entries:
        if not cell[2]:
            cell[2] = True
            yield start, seq, cell[0], cell[1]


# ---------------------------------------------------------------------------------------
