"""What the store stamps: uids as the API server gives them (random version-4 UUIDs, never the same twice, in a
forked child too) and seconds in RFC 3339."""

from __future__ import annotations

import os
import uuid
from datetime import UTC, datetime

from flexq.store.stamps import new_uid, rfc3339


def test_uids_are_version_4_uuids_in_canonical_form() -> None:
    for uid in (new_uid() for _ in range(2000)):
        parsed = uuid.UUID(uid)
        assert str(parsed) == uid  # lower-case hex, hyphens at 8-4-4-4-12
        assert parsed.version == 4 and parsed.variant == uuid.RFC_4122


def test_uids_differ_and_use_every_random_bit() -> None:
    uids = [uuid.UUID(new_uid()).int for _ in range(4000)]
    assert len(set(uids)) == len(uids)
    fixed = (0xF << 76) | (0x3 << 62)
    varied = 0
    for value in uids:
        varied |= value ^ uids[0]
    assert varied == ((1 << 128) - 1) & ~fixed  # each of the 122 random bits seen both ways, the fixed ones never


def test_a_forked_child_gives_other_uids_than_its_parent() -> None:
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its next uids, to the parent
        os.close(read)
        os.write(write, " ".join(new_uid() for _ in range(10)).encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read) as pipe:
        child = set(pipe.read().split())
    os.waitpid(pid, 0)
    assert len(child) == 10 and not child & {new_uid() for _ in range(10)}


def test_seconds_in_rfc3339() -> None:
    assert rfc3339(datetime(2026, 12, 2, 6, 30, 0, 900000, tzinfo=UTC)) == "2026-12-02T06:30:00Z"
