"""The change log waits for a reader that holds it, within a limit: compaction keeps what the reader has yet to
read, and past ``HOLD_LIMIT`` times the history goes ahead (the reader then gets Gone, as any reader behind)."""

from __future__ import annotations

import pytest

from flexq.store import Gone, Key, Store
from flexq.store.holds import HOLD_LIMIT, Holds

# (holds, compacted already, newest, keep) → the cutoff
CASES: dict[str, tuple[dict[str, int], int, int, int, int]] = {
    "no reader: the newest keep stay": ({}, 0, 1000, 200, 800),
    "a reader behind: kept from it": ({"a": 500}, 0, 1000, 200, 500),
    "a reader ahead of the window: the window decides": ({"a": 990}, 0, 1000, 200, 800),
    "the furthest behind of two": ({"a": 700, "b": 300}, 0, 1000, 200, 300),
    "too far behind: the limit": ({"a": 10}, 0, 1000, 200, 1000 - 200 * HOLD_LIMIT),
    "never below what is compacted": ({"a": 300}, 400, 1000, 200, 400),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_cutoff(case: str) -> None:
    holds_at, done, newest, keep, expected = CASES[case]
    holds = Holds()
    for reader, rv in holds_at.items():
        holds.hold(reader, rv)
    assert holds.cutoff(done, newest, keep) == expected


def _held_behind(behind: int) -> tuple[Store, int]:
    """A store whose reader ``controller`` holds the log ``behind`` changes behind its newest; and where it holds."""
    store = Store()
    for i in range(5 + behind):
        if i == 5:
            store.hold("controller", store.current_rv())
        store.create(Key("", "configmaps", "default", f"c{i}"), {"metadata": {}})
    return store, store.current_rv() - behind


def test_a_held_reader_reads_on_after_compaction_and_one_let_go_does_not() -> None:
    store, reader = _held_behind(100)  # within the limit: 100 <= 30 * HOLD_LIMIT
    try:
        store.compact(30)
        assert len(store.changes(reader, limit=1000)) == 100, "what the reader has yet to read was kept"
        store.hold("controller", None)
        store.compact(30)
        with pytest.raises(Gone):
            store.changes(reader)
    finally:
        store.close()


def test_a_reader_past_the_limit_is_not_waited_for() -> None:
    store, reader = _held_behind(10 * HOLD_LIMIT + 20)
    try:
        store.compact(10)
        with pytest.raises(Gone):
            store.changes(reader)
        assert len(store.changes(store.current_rv() - 10 * HOLD_LIMIT)) == 10 * HOLD_LIMIT
    finally:
        store.close()
