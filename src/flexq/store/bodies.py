"""Object bodies as SQLite keeps them: JSON text, compressed against a preset dictionary.

A stored Kubernetes object is mostly field names and values that every object of its kind repeats (an Event's
``involvedObject``, ``source``, ``reportingComponent``; a Workload's conditions). Compression alone halves such a
body; primed with a dictionary of typical objects it shrinks four to fourteen times. The store's file (objects and
change log) is then a fraction of the text's size.

A packed body is bytes: one byte naming the format, then the compressed text. Text is read as it is, so a file
written before bodies were packed reads the same. The dictionary (``bodies-1.zdict``: the guide's objects and
Kueue's performance Jobs, Workloads and Events, as the server stores them) is fixed for good; a better one comes
under a new first byte, and every format stays readable:

- ``1``: raw deflate (level 1) against the dictionary, what the store wrote first;
- ``2``: Zstandard (level 1) with the same dictionary as its raw content, what it writes now: about as small, and
  packed several times faster (a few microseconds a body, where deflate took about twenty: the controller packs
  ten bodies a Job).
"""

from __future__ import annotations

import threading
import zlib
from importlib import resources
from typing import Final

import zstandard

__all__ = ["pack", "unpack"]

_DICTIONARY: Final = resources.files(__package__).joinpath("bodies-1.zdict").read_bytes()
_DEFLATE: Final = 1
_ZSTD: Final = 2
_WBITS: Final = -15
"""Raw deflate with a 32 KiB window: the whole dictionary stays in reach."""
_ZSTD_DICTIONARY: Final = zstandard.ZstdCompressionDict(_DICTIONARY, dict_type=zstandard.DICT_TYPE_RAWCONTENT)
_ZSTD_DICTIONARY.precompute_compress(level=1)
_HEAD: Final = bytes([_ZSTD])
_MAX_BODY: Final = 1 << 31
"""The most a body may unpack to (a frame always says its size; this only bounds a damaged one)."""


class _Codecs(threading.local):
    """A compressor and a decompressor per thread (Zstandard's are not to be shared between threads)."""

    def __init__(self) -> None:
        self.compressor = zstandard.ZstdCompressor(level=1, dict_data=_ZSTD_DICTIONARY, write_checksum=False,
                                                   write_dict_id=False)
        self.decompressor = zstandard.ZstdDecompressor(dict_data=_ZSTD_DICTIONARY)


_codecs: Final = _Codecs()


def pack(text: str) -> bytes:
    """``text`` (a JSON body) as stored."""
    return _HEAD + _codecs.compressor.compress(text.encode())


def unpack(stored: str | bytes) -> str:
    """The JSON text of a stored body (packed in any format written so far, or text from before bodies were
    packed)."""
    if isinstance(stored, str):
        return stored
    head = stored[0] if stored else None
    if head == _ZSTD:
        return _codecs.decompressor.decompress(stored[1:], max_output_size=_MAX_BODY).decode()
    if head == _DEFLATE:
        unpacker = zlib.decompressobj(_WBITS, _DICTIONARY)
        return (unpacker.decompress(stored[1:]) + unpacker.flush()).decode()
    raise ValueError(f"a stored body packed with an unknown dictionary ({stored[:1]!r})")
