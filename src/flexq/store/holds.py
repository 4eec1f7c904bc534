"""Readers the change log waits for before it compacts.

The log keeps the newest ``history`` changes, as etcd compacts its own. A reader that falls further behind (a
controller starved by a burst of writes: fifty thousand Jobs created in a minute) gets :class:`Gone` and reads
everything afresh, which under load takes longer than the burst did, so it falls behind again. A reader of this
process that *holds* the log (names the last change it has read) is waited for instead: compaction keeps the changes
after it, up to ``HOLD_LIMIT`` times the history, past which it goes ahead (the reader then reads afresh, as before).
A hold lives in its process only: a server sharing the store with others is waited for by its own compactions.
"""

from __future__ import annotations

from typing import Final

__all__ = ["HOLD_LIMIT", "Holds"]

HOLD_LIMIT: Final = 4
"""How many times its history the log may keep for a reader that holds it."""


class Holds:
    """The last change each holding reader has read."""

    def __init__(self) -> None:
        self._at: dict[str, int] = {}

    def hold(self, reader: str, rv: int | None) -> None:
        """``reader`` has read every change up to ``rv`` (None: it lets go)."""
        if rv is None:
            self._at.pop(reader, None)
        else:
            self._at[reader] = rv

    def cutoff(self, done: int, newest: int, keep: int) -> int:
        """The resourceVersion to compact up to: the newest ``keep`` changes stay, and those after the furthest
        behind reader, within the limit; never below ``done`` (compacted already)."""
        cutoff = newest - keep
        held = min(self._at.values(), default=None)
        if held is not None:
            cutoff = max(min(cutoff, held), newest - keep * HOLD_LIMIT)
        return max(done, cutoff)
