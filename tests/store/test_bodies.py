"""Bodies packed on disk: read back as written, smaller, and files from before packing still read."""

from __future__ import annotations

import hashlib
import json
import sqlite3
import zlib
from concurrent.futures import ThreadPoolExecutor
from importlib import resources
from pathlib import Path
from typing import Any

import pytest

from flexq.store import Key, Store
from flexq.store.bodies import pack, unpack
from flexq.store.codec import dumps

_DATA = Path(__file__).parent.parent / "data" / "bodies"
_EVENT: dict[str, Any] = json.loads((_DATA / "event.json").read_text())
"""An Event as the server stores it (Kueue's large-scale config through the API)."""


def test_the_dictionary_never_changes() -> None:
    """Files on disk are packed with it: a change would make them unreadable (a new one takes a new number)."""
    data = resources.files("flexq.store").joinpath("bodies-1.zdict").read_bytes()
    assert hashlib.sha256(data).hexdigest() == "75874114f1a9176f559dbda912aba614dafa389f3a23efd7533be40214c22d67"


@pytest.mark.parametrize("text", [dumps(_EVENT), "{}", '{"data":{"x":"ümlaut ✓"}}', "", '{"n":' + "1" * 5000 + "}"])
def test_a_packed_body_unpacks_to_its_text(text: str) -> None:
    packed = pack(text)
    assert isinstance(packed, bytes) and packed[0] == 2
    assert unpack(packed) == text
    assert unpack(text) == text, "text from before bodies were packed reads as it is"
    assert unpack(_deflated(text)) == text, "a body packed in the first format (deflate) reads as it was"


def _deflated(text: str) -> bytes:
    """``text`` as the store packed bodies first: format 1, raw deflate against the same dictionary."""
    dictionary = resources.files("flexq.store").joinpath("bodies-1.zdict").read_bytes()
    packer = zlib.compressobj(1, zlib.DEFLATED, -15, 8, zlib.Z_DEFAULT_STRATEGY, dictionary)
    return b"\x01" + packer.compress(text.encode()) + packer.flush()


def test_bodies_pack_in_parallel_threads() -> None:
    texts = [dumps({**_EVENT, "metadata": {**_EVENT["metadata"], "name": f"e-{i}"}}) for i in range(400)]
    with ThreadPoolExecutor(8) as pool:
        packed = list(pool.map(pack, texts))
        assert list(pool.map(unpack, packed)) == texts


@pytest.mark.parametrize("kind", ["event", "workload", "rayjob"])
def test_what_the_server_stores_packs_to_under_a_third_of_its_text(kind: str) -> None:
    """Compression alone makes about half of these: the dictionary does the rest."""
    text = dumps(json.loads((_DATA / f"{kind}.json").read_text()))
    assert len(pack(text)) * 3 < len(text), (len(pack(text)), len(text))


def test_a_body_of_an_unknown_dictionary_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="unknown dictionary"):
        unpack(b"\x07" + pack("{}")[1:])


_OLD_SCHEMA = """
CREATE TABLE objects (grp TEXT NOT NULL, resource TEXT NOT NULL, namespace TEXT NOT NULL, name TEXT NOT NULL,
    rv INTEGER NOT NULL, body TEXT NOT NULL, PRIMARY KEY (grp, resource, namespace, name));
CREATE TABLE changes (rv INTEGER PRIMARY KEY, type TEXT NOT NULL, grp TEXT NOT NULL, resource TEXT NOT NULL,
    namespace TEXT NOT NULL, name TEXT NOT NULL, body TEXT NOT NULL);
CREATE TABLE counters (name TEXT PRIMARY KEY, value INTEGER NOT NULL);
"""


def test_a_file_written_before_bodies_were_packed_reads_and_takes_new_writes(tmp_path: Path) -> None:
    path = tmp_path / "flexq.db"
    old = {**_EVENT, "metadata": {**_EVENT["metadata"], "name": "old", "namespace": "default", "resourceVersion": "1"}}
    with sqlite3.connect(path) as db:
        db.executescript(_OLD_SCHEMA)
        db.execute("INSERT INTO objects VALUES ('', 'events', 'default', 'old', 1, ?)", (dumps(old),))
        db.execute("INSERT INTO changes VALUES (1, 'ADDED', '', 'events', 'default', 'old', ?)", (dumps(old),))
        db.execute("INSERT INTO counters VALUES ('rv', 1)")
    db.close()
    store = Store(path)
    try:
        assert store.get(Key("", "events", "default", "old")) == old
        store.create(Key("", "events", "default", "new"), {**_EVENT, "metadata": {"name": "new"}})
        assert [o["metadata"]["name"] for o in store.list_objects("", "events")[0]] == ["new", "old"]
        assert [(c.rv, c.obj["metadata"]["name"]) for c in store.changes(0)] == [(1, "old"), (2, "new")]
        assert [o["metadata"]["name"] for o in store.find("", "events", "$.reason", _EVENT["reason"])] == \
            ["new", "old"]
    finally:
        store.close()
    with sqlite3.connect(path) as db:
        kinds = dict(db.execute("SELECT name, typeof(body) FROM objects").fetchall())
    db.close()
    assert kinds == {"old": "text", "new": "blob"}


def test_a_new_file_holds_packed_bodies_keyed_without_a_rowid(tmp_path: Path) -> None:
    path = tmp_path / "flexq.db"
    store = Store(path)
    store.create(Key("", "events", "default", "e"), {**_EVENT, "metadata": {"name": "e"}})
    store.close()
    with sqlite3.connect(path) as db:
        body, size = db.execute("SELECT body, length(body) FROM objects").fetchone()
        schema = db.execute("SELECT sql FROM sqlite_schema WHERE name='objects'").fetchone()[0]
        logged = db.execute("SELECT typeof(body) FROM changes").fetchone()[0]
    db.close()
    assert isinstance(body, bytes) and size * 3 < len(dumps(_EVENT)) and logged == "blob"
    assert schema.rstrip().endswith("WITHOUT ROWID")
