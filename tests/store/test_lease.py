"""The controllers' lease in PostgreSQL: held by one server at a time, taken over once it expires, let go at once."""

from __future__ import annotations

import time

import pytest

from tests.store.conftest import OpenStore


@pytest.fixture
def backend() -> str:
    return "postgresql"


def test_one_holder_at_a_time_and_a_takeover_once_it_expires(open_store: OpenStore, postgres_url: str) -> None:
    from flexq.store.lease import Lease

    open_store(follow=False)  # makes the schema
    a, b = Lease(postgres_url, "a", duration=1.0), Lease(postgres_url, "b", duration=1.0)
    try:
        assert a.acquire() and not b.acquire()
        time.sleep(0.5)
        assert a.acquire() and not b.acquire(), "renewed within its duration: still a's"
        time.sleep(1.1)
        assert b.acquire() and not a.acquire(), "expired: b takes it"
        held = b.read()
        assert held is not None and held.holder == "b" and held.transitions == 1 and not held.expired
        b.release()
        assert a.acquire(), "let go: taken at once"
        assert a.read() is not None and not b.acquire()
    finally:
        a.close()
        b.close()
