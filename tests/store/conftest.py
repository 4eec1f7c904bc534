"""The store's tests run on each back end: SQLite, and PostgreSQL where a server can run (else skipped, with why)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from flexq.store import BaseStore, Store

OpenStore = Callable[..., BaseStore]
"""``open_store(path=None, **options)``: the back end's store. On SQLite, ``path`` is the file (memory if None); on
PostgreSQL every store a test opens is on the test's one database, so a second one is the first reopened."""


@pytest.fixture(params=["sqlite", "postgresql"])
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def postgres_or_path(backend: str, request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """What ``--store`` names for the test's store: the PostgreSQL URL, or the SQLite file."""
    return str(request.getfixturevalue("postgres_url")) if backend == "postgresql" else str(tmp_path / "flexq.db")


@pytest.fixture
def open_store(backend: str, request: pytest.FixtureRequest) -> Iterator[OpenStore]:
    opened: list[BaseStore] = []
    url = request.getfixturevalue("postgres_url") if backend == "postgresql" else ""

    def make(path: Path | None = None, **options: Any) -> BaseStore:
        if backend == "postgresql":
            from flexq.store.postgres import PostgresStore

            store: BaseStore = PostgresStore(url, **options)
        else:
            store = Store(path if path is not None else ":memory:", **options)
        opened.append(store)
        return store

    try:
        yield make
    finally:
        for store in opened:
            store.close()
