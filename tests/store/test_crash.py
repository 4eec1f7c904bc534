"""A writer killed with SIGKILL in the middle of its transactions leaves a whole store, on each back end: every
transaction is there entirely or not at all, resourceVersions have no gaps, objects match the change log."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from flexq.store import Key
from tests.store.conftest import OpenStore

WRITER = """
import sys
from flexq.store import Key
from flexq.store.url import open_store
store = open_store(sys.argv[1], None)
print("ready", flush=True)
i = 0
while True:
    with store.transaction():
        for part in ("a", "b", "c"):
            store.create(Key("", "configmaps", "default", f"{i}-{part}"), {"metadata": {}})
    with store.batch():
        for j in range(5):
            with store.transaction():
                store.create(Key("", "configmaps", "batch", f"{i}-{j}"), {"metadata": {}})
    i += 1
"""


def test_a_killed_writer_leaves_whole_transactions(open_store: OpenStore, backend: str, postgres_or_path: str,
                                                    tmp_path: Path) -> None:
    writer = subprocess.Popen([sys.executable, "-c", WRITER, postgres_or_path], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, cwd=tmp_path)
    try:
        assert writer.stdout is not None and writer.stdout.readline().strip() == b"ready", writer.stderr
        time.sleep(0.5)
    finally:
        writer.kill()
        writer.wait(timeout=10)
        for stream in (writer.stdout, writer.stderr):
            if stream is not None:
                stream.close()
    store = open_store(Path(postgres_or_path) if backend == "sqlite" else None)
    changes = store.changes(0, limit=1_000_000)
    assert len(changes) > 8, "the writer wrote for a while"
    assert [c.rv for c in changes] == list(range(1, store.current_rv() + 1))
    names = {c.key.name for c in changes}
    rounds = {name.split("-")[0] for name in names}
    for i in rounds:
        whole = {f"{i}-{p}" for p in "abc"} <= names
        assert whole or not any(f"{i}-{p}" in names for p in "abc"), f"transaction {i} is whole or absent"
    listed = {o["metadata"]["name"] for ns in ("default", "batch") for o in store.list_objects("", "configmaps", ns)[0]}
    assert listed == names
    store.create(Key("", "configmaps", "default", "after"), {"metadata": {}})  # and the store takes writes again
    assert store.current_rv() == changes[-1].rv + 1
