"""Filling a store until its disk refuses."""

from __future__ import annotations

import random

from flexq.store import Key, Store, StoreUnavailable


def noise(seed: str, size: int = 4000) -> str:
    """``size`` characters that do not compress (the store packs bodies): fills a disk as fast as they say."""
    return "y" + random.Random(seed).randbytes(size // 2).hex()[1:]


def fill(store: Store, prefix: str, size: int = 4000) -> int:
    """Create ConfigMaps in ``default`` until the store refuses (its disk full); return how many were made."""
    for i in range(10_000):
        try:
            name = f"{prefix}-{i}"
            store.create(Key("", "configmaps", "default", name), {"data": {"x": noise(name, size)}})
        except StoreUnavailable as exc:
            assert exc.reason == "DiskFull" and "database or disk is full" in str(exc)
            assert "nothing of this write was kept" in str(exc)
            return i
    raise AssertionError("the store never filled up")
