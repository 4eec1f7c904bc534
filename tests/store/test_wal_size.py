"""The write-ahead log shrinks back after a transaction larger than it keeps: a step that wrote thousands of
workloads at once no longer holds that much of the disk until the server stops."""

from __future__ import annotations

import secrets
from pathlib import Path

from flexq.store import Key, Store
from flexq.store.sqlite import WAL_KEEP


def _wal(path: Path) -> int:
    wal = path.with_name(path.name + "-wal")
    return wal.stat().st_size if wal.exists() else 0


def test_the_log_shrinks_back_after_a_large_transaction(tmp_path: Path) -> None:
    path = tmp_path / "flexq.db"
    store = Store(path)
    try:
        noise = secrets.token_hex(64 * 1024)  # does not pack smaller: 128 KiB a body
        with store.transaction():
            for i in range(int(WAL_KEEP * 1.5) // len(noise)):
                store.create(Key("", "configmaps", "default", f"big-{i}"), {"metadata": {}, "data": {
                    "x": noise[i:] + noise[:i]}})
        grown = _wal(path)
        assert grown > WAL_KEEP  # the transaction is in the log whole while it is written
        # Committing it checkpointed the log; the next write starts it over, cut back to what it keeps.
        store.create(Key("", "configmaps", "default", "small"), {"metadata": {}})
        assert _wal(path) <= WAL_KEEP
        assert store.get(Key("", "configmaps", "default", "big-3"))["data"]["x"].startswith(noise[3:10])
    finally:
        store.close()
