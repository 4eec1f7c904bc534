"""The server's garbage-collection policy: set while it runs, undone after, and a full collection on its timer."""

from __future__ import annotations

import gc
import time
import weakref

from flexq.server.heap import HeapPolicy


class _Node:
    def __init__(self) -> None:
        self.other: _Node | None = None


def _old_cycle() -> weakref.ref[_Node]:
    """A cycle that young collections saw alive (moved to the oldest generation), then dropped."""
    a, b = _Node(), _Node()
    a.other, b.other = b, a
    gc.collect(1)
    gc.collect(1)
    return weakref.ref(a)


def test_thresholds_and_freeze_hold_while_entered_and_are_undone_after() -> None:
    before = gc.get_threshold()
    with HeapPolicy(every=3600, thresholds=(40_000, 30, 90)):
        assert gc.get_threshold() == (40_000, 30, 90)
        assert gc.get_freeze_count() > 0
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0


def test_the_timer_frees_a_cycle_the_young_collections_would_not_reach() -> None:
    with HeapPolicy(every=0.05, thresholds=(10_000_000, 100, 100)) as policy:
        ref = _old_cycle()
        gc.collect(1)
        deadline = time.monotonic() + 10
        while ref() is not None and time.monotonic() < deadline:
            time.sleep(0.01)
        assert ref() is None
        assert policy.sweeps >= 1


def test_without_the_timer_the_cycle_stays() -> None:
    """The check above could fail: with the timer far off, the same cycle is still there."""
    with HeapPolicy(every=3600, thresholds=(10_000_000, 100, 100)) as policy:
        ref = _old_cycle()
        gc.collect(1)
        time.sleep(0.3)
        assert ref() is not None
        assert policy.sweeps == 0
        gc.collect()
        assert ref() is None
