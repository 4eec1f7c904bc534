"""Object bodies as SQLite keeps them: JSON text, deflated against a preset dictionary.

A stored Kubernetes object is mostly field names and values that every object of its kind repeats (an Event's
``involvedObject``, ``source``, ``reportingComponent``; a Workload's conditions). Deflate alone halves such a
body; primed with a dictionary of typical objects it shrinks four to fourteen times, for about 15 µs to pack
and 3 µs to unpack. The store's file (objects and change log) is then a fraction of the text's size.

A packed body is bytes: one byte naming the dictionary, then raw deflate. Text is read as it is, so a file
written before bodies were packed reads the same. The dictionary (``bodies-1.zdict``: the guide's objects and
Kueue's performance Jobs, Workloads and Events, as the server stores them) is fixed for good; a better one
comes as ``bodies-2.zdict`` under a new first byte, and both stay readable.
"""

from __future__ import annotations

import zlib
from importlib import resources
from typing import Final

__all__ = ["pack", "unpack"]

_VERSION: Final = 1
_DICTIONARIES: Final = {_VERSION: resources.files(__package__).joinpath("bodies-1.zdict").read_bytes()}
_WBITS: Final = -15
"""Raw deflate with a 32 KiB window: the whole dictionary stays in reach."""
_PRIMED: Final = zlib.compressobj(1, zlib.DEFLATED, _WBITS, 8, zlib.Z_DEFAULT_STRATEGY, _DICTIONARIES[_VERSION])
"""A compressor that has read the dictionary: each body is packed by a copy of it (priming one costs more)."""
_HEAD: Final = bytes([_VERSION])


def pack(text: str) -> bytes:
    """``text`` (a JSON body) as stored."""
    packer = _PRIMED.copy()
    return _HEAD + packer.compress(text.encode()) + packer.flush()


def unpack(stored: str | bytes) -> str:
    """The JSON text of a stored body (packed, or text from before bodies were packed)."""
    if isinstance(stored, str):
        return stored
    dictionary = _DICTIONARIES.get(stored[0]) if stored else None
    if dictionary is None:
        raise ValueError(f"a stored body packed with an unknown dictionary ({stored[:1]!r})")
    unpacker = zlib.decompressobj(_WBITS, dictionary)
    return (unpacker.decompress(stored[1:]) + unpacker.flush()).decode()
