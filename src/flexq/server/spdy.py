"""SPDY/3.1 framing, as much as the port-forward protocol of kubectl uses.

kubectl (1.30+) opens a WebSocket with the subprotocol ``SPDY/3.1+portforward.k8s.io`` and speaks SPDY/3.1 through
it: binary messages carry a byte stream of SPDY frames, split anywhere. Two kinds of frame:

- control frames: ``1 | version (15 bits) | type (16) | flags (8) | length (24) | payload``;
- data frames: ``0 | stream id (31 bits) | flags (8) | length (24) | data``.

Header blocks (of SYN_STREAM, SYN_REPLY and HEADERS) are zlib streams, one per direction for the whole connection,
primed with SPDY/3's fixed dictionary and flushed (sync flush) after each block; inside, a count of pairs, then each
name and value with a 32-bit length before it (several values of one name are separated by NUL).
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass, field
from typing import Final

from flexq.errors import FlexqError

__all__ = [
    "DICTIONARY",
    "FLAG_FIN",
    "Data",
    "Decoder",
    "Encoder",
    "GoAway",
    "Ignored",
    "Ping",
    "ProtocolError",
    "RstStream",
    "SynReply",
    "SynStream",
]

VERSION: Final = 3
FLAG_FIN: Final = 0x01
MAX_LENGTH: Final = (1 << 24) - 1

SYN_STREAM: Final = 1
SYN_REPLY: Final = 2
RST_STREAM: Final = 3
SETTINGS: Final = 4
PING: Final = 6
GOAWAY: Final = 7
HEADERS: Final = 8
WINDOW_UPDATE: Final = 9

_WORDS: Final = (  # length-prefixed in the dictionary; "_" stands for a space
    "options head post put delete trace accept accept-charset accept-encoding accept-language accept-ranges age "
    "allow authorization cache-control connection content-base content-encoding content-language content-length "
    "content-location content-md5 content-range content-type date etag expect expires from host if-match "
    "if-modified-since if-none-match if-range if-unmodified-since last-modified location max-forwards pragma "
    "proxy-authenticate proxy-authorization range referer retry-after server te trailer transfer-encoding upgrade "
    "user-agent vary via warning www-authenticate method get status 200_OK version HTTP/1.1 url public set-cookie "
    "keep-alive origin"
)
_TAIL: Final = (
    "100101201202205206300302303304305306307402405406407408409410411412413414415416417502504505"
    "203 Non-Authoritative Information204 No Content301 Moved Permanently400 Bad Request401 Unauthorized"
    "403 Forbidden404 Not Found500 Internal Server Error501 Not Implemented503 Service Unavailable"
    "Jan Feb Mar Apr May Jun Jul Aug Sept Oct Nov Dec 00:00:00 Mon, Tue, Wed, Thu, Fri, Sat, Sun, GMT"
    "chunked,text/html,image/png,image/jpg,image/gif,application/xml,application/xhtml+xml,text/plain,"
    "text/javascript,publicprivatemax-age=gzip,deflate,sdchcharset=utf-8charset=iso-8859-1,utf-,*,enq=0."
)
DICTIONARY: Final = (b"".join(struct.pack(">I", len(w)) + w.replace("_", " ").encode() for w in _WORDS.split())
                     + _TAIL.encode())
"""SPDY/3's header compression dictionary (section 2.6.10.1 of the draft), 1,423 bytes."""


class ProtocolError(FlexqError, ValueError):
    """The peer sent something that is not SPDY/3.1."""


@dataclass(frozen=True, slots=True)
class Data:
    stream_id: int
    data: bytes
    fin: bool


@dataclass(frozen=True, slots=True)
class SynStream:
    stream_id: int
    headers: dict[str, str]
    fin: bool


@dataclass(frozen=True, slots=True)
class SynReply:
    stream_id: int
    headers: dict[str, str]


@dataclass(frozen=True, slots=True)
class RstStream:
    stream_id: int
    status: int


@dataclass(frozen=True, slots=True)
class Ping:
    id: int


@dataclass(frozen=True, slots=True)
class GoAway:
    last_stream_id: int
    status: int


@dataclass(frozen=True, slots=True)
class Ignored:
    """A frame that needs no answer here (SETTINGS, WINDOW_UPDATE, HEADERS, unknown types)."""

    type: int


Frame = Data | SynStream | SynReply | RstStream | Ping | GoAway | Ignored


@dataclass
class Decoder:
    """Frames from a byte stream fed in pieces of any size."""

    _buffer: bytearray = field(default_factory=bytearray)
    _inflate: zlib._Decompress = field(default_factory=lambda: zlib.decompressobj(zdict=DICTIONARY))

    def feed(self, chunk: bytes) -> list[Frame]:
        self._buffer += chunk
        frames: list[Frame] = []
        while len(self._buffer) >= 8:
            word, flags_length = struct.unpack_from(">II", self._buffer)
            length = flags_length & MAX_LENGTH
            if len(self._buffer) < 8 + length:
                break
            payload = bytes(self._buffer[8:8 + length])
            del self._buffer[:8 + length]
            flags = flags_length >> 24
            if word & 0x80000000:
                frames.append(self._control((word >> 16) & 0x7FFF, word & 0xFFFF, flags, payload))
            else:
                frames.append(Data(word & 0x7FFFFFFF, payload, bool(flags & FLAG_FIN)))
        return frames

    def _control(self, version: int, kind: int, flags: int, payload: bytes) -> Frame:
        if version != VERSION:
            raise ProtocolError(f"SPDY version {version} is not supported (only {VERSION})")
        if kind == SYN_STREAM:
            _need(payload, 10, "SYN_STREAM")
            stream_id = struct.unpack_from(">I", payload)[0] & 0x7FFFFFFF
            return SynStream(stream_id, self._headers(payload[10:]), bool(flags & FLAG_FIN))
        if kind in (SYN_REPLY, HEADERS):
            _need(payload, 4, "SYN_REPLY/HEADERS")
            headers = self._headers(payload[4:])  # read even if unused: it keeps the shared zlib stream in step
            if kind == SYN_REPLY:
                return SynReply(struct.unpack_from(">I", payload)[0] & 0x7FFFFFFF, headers)
            return Ignored(kind)
        if kind == RST_STREAM:
            _need(payload, 8, "RST_STREAM")
            stream_id, status = struct.unpack_from(">II", payload)
            return RstStream(stream_id & 0x7FFFFFFF, status)
        if kind == PING:
            _need(payload, 4, "PING")
            return Ping(struct.unpack_from(">I", payload)[0])
        if kind == GOAWAY:
            _need(payload, 8, "GOAWAY")
            last, status = struct.unpack_from(">II", payload)
            return GoAway(last & 0x7FFFFFFF, status)
        return Ignored(kind)

    def _headers(self, block: bytes) -> dict[str, str]:
        try:
            raw = self._inflate.decompress(block)
        except zlib.error as exc:
            raise ProtocolError(f"a header block could not be decompressed: {exc}") from None
        headers: dict[str, str] = {}
        try:
            (count,), at = struct.unpack_from(">I", raw), 4
            for _ in range(count):
                (size,) = struct.unpack_from(">I", raw, at)
                name = raw[at + 4:at + 4 + size].decode()
                at += 4 + size
                (size,) = struct.unpack_from(">I", raw, at)
                value = raw[at + 4:at + 4 + size].decode()
                at += 4 + size
                headers[name.lower()] = value.split("\0")[0]
        except (struct.error, UnicodeDecodeError) as exc:
            raise ProtocolError(f"a header block is malformed: {exc}") from None
        return headers


def _need(payload: bytes, size: int, what: str) -> None:
    if len(payload) < size:
        raise ProtocolError(f"a {what} frame of {len(payload)} bytes is too short")


@dataclass
class Encoder:
    """Frames to send; header blocks share one compression stream, so encode them in the order they are sent."""

    _deflate: zlib._Compress = field(default_factory=lambda: zlib.compressobj(
        9, zlib.DEFLATED, 15, 8, zlib.Z_DEFAULT_STRATEGY, zdict=DICTIONARY))

    def data(self, stream_id: int, data: bytes = b"", fin: bool = False) -> bytes:
        if len(data) > MAX_LENGTH:
            raise ValueError(f"a data frame holds at most {MAX_LENGTH} bytes")
        return struct.pack(">II", stream_id & 0x7FFFFFFF, (FLAG_FIN if fin else 0) << 24 | len(data)) + data

    def syn_reply(self, stream_id: int, headers: dict[str, str] | None = None) -> bytes:
        return self._control(SYN_REPLY, 0, struct.pack(">I", stream_id & 0x7FFFFFFF) + self._headers(headers or {}))

    def syn_stream(self, stream_id: int, headers: dict[str, str], fin: bool = False) -> bytes:
        body = struct.pack(">IIH", stream_id & 0x7FFFFFFF, 0, 0) + self._headers(headers)
        return self._control(SYN_STREAM, FLAG_FIN if fin else 0, body)

    def rst_stream(self, stream_id: int, status: int) -> bytes:
        return self._control(RST_STREAM, 0, struct.pack(">II", stream_id & 0x7FFFFFFF, status))

    def ping(self, ping_id: int) -> bytes:
        return self._control(PING, 0, struct.pack(">I", ping_id))

    def goaway(self, last_stream_id: int, status: int = 0) -> bytes:
        return self._control(GOAWAY, 0, struct.pack(">II", last_stream_id & 0x7FFFFFFF, status))

    def _headers(self, headers: dict[str, str]) -> bytes:
        raw = bytearray(struct.pack(">I", len(headers)))
        for name, value in headers.items():
            for text in (name.lower(), value):
                encoded = text.encode()
                raw += struct.pack(">I", len(encoded)) + encoded
        return self._deflate.compress(bytes(raw)) + self._deflate.flush(zlib.Z_SYNC_FLUSH)

    @staticmethod
    def _control(kind: int, flags: int, payload: bytes) -> bytes:
        return struct.pack(">HHI", 0x8000 | VERSION, kind, flags << 24 | len(payload)) + payload
