"""The store when the database refuses writes: a full disk, a lock held by another process.

Each test ends with SQLite's ``PRAGMA integrity_check`` on the file, from a connection of its own."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from flexq.store import Change, Key, NotFound, Store, StoreUnavailable
from tests.support.stores import fill, noise


def _key(name: str) -> Key:
    return Key("", "configmaps", "default", name)


def _intact(path: Path) -> None:
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA integrity_check").fetchall() == [("ok",)]


def test_a_full_database_refuses_the_write_whole_and_keeps_serving_reads(tmp_path: Path) -> None:
    path = tmp_path / "flexq.db"
    store = Store(path)
    seen: list[Change] = []
    store.subscribe(seen.extend)
    store.create(_key("before"), {"data": {"a": "1"}})
    store._db.execute("PRAGMA max_page_count=40")  # a disk with little room left
    made = fill(store, "cm")
    rv = store.current_rv()
    with pytest.raises(NotFound):
        store.get(_key(f"cm-{made}"))
    assert len(store.list_objects("", "configmaps")[0]) == made + 1
    assert [c.key.name for c in seen][-1] == f"cm-{made - 1}", "a refused write is never announced"
    store._db.execute("PRAGMA max_page_count=1073741823")  # space freed
    store.create(_key("after"), {"data": {}})
    assert store.current_rv() == rv + 1 and seen[-1].key.name == "after" and seen[-2].key.name == f"cm-{made - 1}"
    assert [c.rv for c in store.changes(0, 100_000)] == list(range(1, rv + 2))
    store.close()
    _intact(path)


def test_a_full_database_inside_a_batch_undoes_it_and_says_so(tmp_path: Path) -> None:
    """SQLite rolls the whole open transaction back on a full database: a batch's earlier transactions go too, so
    the batch says so when it ends (its owner reads its state back); each transaction stays whole or not at all."""
    path = tmp_path / "flexq.db"
    store = Store(path)
    seen: list[Change] = []
    store.subscribe(seen.extend)
    store._db.execute("PRAGMA max_page_count=40")
    refused = 0
    with pytest.raises(StoreUnavailable, match="undid this batch's earlier writes"), store.batch():
        for i in range(40):
            try:
                with store.transaction():
                    store.create(_key(f"a-{i}"), {"data": {"x": noise(f"a-{i}")}})
                    store.create(_key(f"b-{i}"), {"data": {"x": noise(f"b-{i}")}})
            except StoreUnavailable:
                refused += 1
    names = {o["metadata"]["name"] for o in store.list_objects("", "configmaps")[0]}
    assert refused
    assert all((f"a-{i}" in names) == (f"b-{i}" in names) for i in range(40)), "each whole or not at all"
    assert {c.key.name for c in seen} == names, "what was announced is what is stored"
    store.close()
    _intact(path)


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 1 MiB tmpfs (root only): a disk that really fills up, the write-ahead log included."""
    mount = tmp_path / "disk"
    mount.mkdir()
    made = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mount)], capture_output=True,
                          check=False)
    if made.returncode != 0:
        pytest.skip("cannot mount a tmpfs here (not root): the max_page_count tests cover a full database")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def test_a_full_disk_refuses_the_commit_and_writes_resume_once_space_is_freed(small_disk: Path) -> None:
    path = small_disk / "flexq.db"
    store = Store(path)
    (small_disk / "filler").write_bytes(b"\0" * 600_000)
    made = fill(store, "cm")
    assert made > 0
    rv = store.current_rv()
    assert store.get(_key("cm-0"))["data"]["x"].startswith("y")
    (small_disk / "filler").unlink()
    store.create(_key("after"), {"data": {}})
    assert store.current_rv() == rv + 1
    store.close()
    _intact(path)
    again = Store(path)
    assert {o["metadata"]["name"] for o in again.list_objects("", "configmaps")[0]} == \
        {f"cm-{i}" for i in range(made)} | {"after"}
    again.close()


_HOLDER = """
import sqlite3, sys, time
db = sqlite3.connect(sys.argv[1], isolation_level=None)
db.execute("BEGIN EXCLUSIVE")
db.execute("INSERT INTO counters VALUES ('held', 1)")
print("locked", flush=True)
sys.stdin.read()  # until the test closes it
db.execute("ROLLBACK")
"""


def test_a_lock_held_by_another_process_refuses_writes_after_the_wait_and_reads_go_on(tmp_path: Path) -> None:
    path = tmp_path / "flexq.db"
    store = Store(path, busy=1.0)
    store.create(_key("before"), {"data": {"a": "1"}})
    holder = subprocess.Popen([sys.executable, "-c", _HOLDER, str(path)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True, env={**os.environ})
    assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
    reads: list[float] = []

    def read() -> None:
        deadline = time.monotonic() + 1.5
        while time.monotonic() < deadline:
            began = time.monotonic()
            assert store.get(_key("before"))["data"] == {"a": "1"}
            reads.append(time.monotonic() - began)
            time.sleep(0.01)

    reader = threading.Thread(target=read)
    began = time.monotonic()
    reader.start()
    with pytest.raises(StoreUnavailable) as refused:
        store.create(_key("during"), {"data": {}})
    waited = time.monotonic() - began
    reader.join()
    assert refused.value.reason == "Locked" and "database is locked" in str(refused.value)
    assert 1.0 <= waited < 3.0
    assert len(reads) > 20 and max(reads) < 0.5, "readers were served while the write waited"
    assert holder.stdin is not None
    holder.stdin.close()
    holder.wait(timeout=10)
    holder.stdout.close()
    store.create(_key("after"), {"data": {}})
    with pytest.raises(NotFound):
        store.get(_key("during"))
    store.close()
    _intact(path)


# --- room kept for deletes ---------------------------------------------------------------------------------------


def _free(folder: Path) -> int:
    st = os.statvfs(folder)
    return st.f_bavail * st.f_frsize


def _fill(store: Store) -> int:
    """Create ConfigMaps until the store refuses for a full disk (it may be SQLite, or the store's own check that
    the disk has no more than the reserve left); how many were made."""
    for made in range(10_000):
        try:
            store.create(_key(f"cm-{made}"), {"data": {"x": noise(f"cm-{made}")}})
        except StoreUnavailable as exc:
            assert exc.reason == "DiskFull", exc
            return made
    raise AssertionError("the disk never filled up")


def test_a_full_disk_still_takes_deletes_and_refuses_the_rest_until_there_is_room(small_disk: Path) -> None:
    """The reserve beside the database goes back to the disk as it fills: deletes commit (space cannot otherwise
    be freed through the store), the other writes are refused up front, as etcd past its quota; once the disk has
    room, the reserve is made again and every write is taken."""
    path = small_disk / "flexq.db"
    store = Store(path, reserve=1 << 20)  # a sixteenth of the 1 MiB disk: 64 KiB
    reserve = small_disk / "flexq.db-reserve"
    assert reserve.stat().st_size == 65536 and store.refusing() is None
    (small_disk / "filler").write_bytes(b"\0" * 600_000)
    made = _fill(store)
    assert made > 3
    assert not reserve.exists(), "given back to the disk"
    why = store.refusing()
    assert why is not None and "only deletes are taken" in why
    deleted = [store.delete(_key(f"cm-{i}"))["metadata"]["name"] for i in range(3)]
    assert deleted == ["cm-0", "cm-1", "cm-2"]
    with pytest.raises(StoreUnavailable, match="only deletes are taken") as later:
        store.create(_key("small"), {"data": {}})
    assert later.value.reason == "DiskFull"
    with pytest.raises(StoreUnavailable, match="only deletes are taken"):
        store.update(_key("cm-3"), {"data": {}})
    rv = store.current_rv()
    (small_disk / "filler").unlink()
    assert _free(small_disk) >= 2 * 65536
    store.create(_key("after"), {"data": {}})
    assert store.refusing() is None and reserve.stat().st_size == 65536, "the reserve is kept again"
    assert store.current_rv() == rv + 1
    store.close()
    _intact(path)


def test_a_store_opened_on_a_full_disk_takes_deletes_only(small_disk: Path) -> None:
    """A restart on a full disk: the reserve, given back before, is not made again until there is room."""
    path = small_disk / "flexq.db"
    store = Store(path, reserve=1 << 20)
    for i in range(3):
        store.create(_key(f"cm-{i}"), {"data": {"x": noise(f"cm-{i}")}})
    store.close()
    (small_disk / "flexq.db-reserve").unlink()  # given back when the disk filled
    (small_disk / "filler").write_bytes(b"\0" * (_free(small_disk) - 100_000))
    again = Store(path, reserve=1 << 20)
    assert again.refusing() is not None and again.low_space() is not None
    with pytest.raises(StoreUnavailable, match="only deletes are taken"):
        again.create(_key("new"), {"data": {}})
    again.delete(_key("cm-0"))
    assert [o["metadata"]["name"] for o in again.list_objects("", "configmaps")[0]] == ["cm-1", "cm-2"]
    (small_disk / "filler").unlink()
    assert again.refusing() is None
    again.close()
    _intact(path)


def test_a_store_without_a_reserve_keeps_none(tmp_path: Path) -> None:
    store = Store(tmp_path / "flexq.db")
    store.create(_key("a"), {"data": {}})
    assert store.refusing() is None and not (tmp_path / "flexq.db-reserve").exists()
    store.close()
    memory = Store(":memory:", reserve=1 << 20)
    assert memory.refusing() is None and memory.low_space() is None
    memory.close()
