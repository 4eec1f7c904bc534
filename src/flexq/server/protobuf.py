"""Kubernetes' protobuf wire format, read side, for the core kinds kubectl sends as protobuf.

kubectl sends built-in kinds (``kubectl create configmap``, ``create namespace``, delete options) as
``application/vnd.kubernetes.protobuf``: the magic ``k8s\\0`` and a ``runtime.Unknown`` envelope
holding the object's message. Responses stay JSON (kubectl accepts both). Only the messages below
are understood; any other is refused with 415, which kubectl reports.
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, Final

from flexq.errors import FlexqError

__all__ = ["ProtobufError", "decode_delete_options", "decode_object"]

MAGIC: Final = b"k8s\x00"


class ProtobufError(FlexqError, ValueError):
    """Bytes that are not a message flexq can read."""


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(data):
            raise ProtobufError("truncated varint")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise ProtobufError("varint too long")


def _fields(data: bytes) -> list[tuple[int, int | bytes]]:
    """(field number, value): varints as int, length-delimited as bytes; fixed-width skipped."""
    out: list[tuple[int, int | bytes]] = []
    pos = 0
    while pos < len(data):
        tag, pos = _varint(data, pos)
        number, wire = tag >> 3, tag & 7
        if wire == 0:
            value, pos = _varint(data, pos)
            out.append((number, value))
        elif wire == 2:
            length, pos = _varint(data, pos)
            if pos + length > len(data):
                raise ProtobufError("truncated field")
            out.append((number, data[pos:pos + length]))
            pos += length
        elif wire == 1:
            pos += 8
        elif wire == 5:
            pos += 4
        else:
            raise ProtobufError(f"unsupported wire type {wire}")
    return out


def _str(value: int | bytes) -> str:
    if not isinstance(value, bytes):
        raise ProtobufError("expected a string")
    return value.decode("utf-8")


def _map(entries: list[bytes], *, binary: bool = False) -> dict[str, str]:
    out: dict[str, str] = {}
    for entry in entries:
        key, value = "", b""
        for number, v in _fields(entry):
            if number == 1:
                key = _str(v)
            elif number == 2 and isinstance(v, bytes):
                value = v
        out[key] = base64.b64encode(value).decode() if binary else value.decode("utf-8")
    return out


def _time(data: bytes) -> str:
    seconds = 0
    for number, v in _fields(data):
        if number == 1 and isinstance(v, int):
            seconds = v
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _group(fields: list[tuple[int, int | bytes]]) -> dict[int, list[int | bytes]]:
    grouped: dict[int, list[int | bytes]] = {}
    for number, value in fields:
        grouped.setdefault(number, []).append(value)
    return grouped


def _bytes_list(values: list[int | bytes]) -> list[bytes]:
    return [v for v in values if isinstance(v, bytes)]


def _object_meta(data: bytes) -> dict[str, Any]:
    f = _group(_fields(data))
    meta: dict[str, Any] = {}
    for number, name in ((1, "name"), (2, "generateName"), (3, "namespace"), (5, "uid"), (6, "resourceVersion")):
        if number in f and _str(f[number][-1]):
            meta[name] = _str(f[number][-1])
    if 7 in f and isinstance(f[7][-1], int) and f[7][-1]:
        meta["generation"] = f[7][-1]
    if 8 in f and isinstance(f[8][-1], bytes) and f[8][-1]:
        meta["creationTimestamp"] = _time(f[8][-1])
    if 11 in f:
        meta["labels"] = _map(_bytes_list(f[11]))
    if 12 in f:
        meta["annotations"] = _map(_bytes_list(f[12]))
    if 14 in f:
        meta["finalizers"] = [_str(v) for v in f[14]]
    return meta


def _config_map(f: dict[int, list[int | bytes]]) -> dict[str, Any]:
    obj: dict[str, Any] = {}
    if 2 in f:
        obj["data"] = _map(_bytes_list(f[2]))
    if 3 in f:
        obj["binaryData"] = _map(_bytes_list(f[3]), binary=True)
    if 4 in f:
        obj["immutable"] = bool(f[4][-1])
    return obj


def _namespace(f: dict[int, list[int | bytes]]) -> dict[str, Any]:
    obj: dict[str, Any] = {}
    if 2 in f and isinstance(f[2][-1], bytes):
        spec = _group(_fields(f[2][-1]))
        obj["spec"] = {"finalizers": [_str(v) for v in spec.get(1, [])]} if 1 in spec else {}
    return obj


_RESOURCE_ATTRIBUTES: Final = ("namespace", "verb", "group", "version", "resource", "subresource", "name")
_NON_RESOURCE_ATTRIBUTES: Final = ("path", "verb")


def _strings(data: int | bytes, names: tuple[str, ...]) -> dict[str, str]:
    """A message of string fields numbered 1.. in the order of ``names``."""
    if not isinstance(data, bytes):
        raise ProtobufError("expected a message")
    f = _group(_fields(data))
    return {name: _str(f[i + 1][-1]) for i, name in enumerate(names) if i + 1 in f}


def _access_review(f: dict[int, list[int | bytes]]) -> dict[str, Any]:
    """``kubectl auth can-i``'s SelfSubjectAccessReview: spec.resourceAttributes or nonResourceAttributes."""
    spec: dict[str, Any] = {}
    if 2 in f and isinstance(f[2][-1], bytes):
        g = _group(_fields(f[2][-1]))
        if 1 in g:
            spec["resourceAttributes"] = _strings(g[1][-1], _RESOURCE_ATTRIBUTES)
        if 2 in g:
            spec["nonResourceAttributes"] = _strings(g[2][-1], _NON_RESOURCE_ATTRIBUTES)
    return {"spec": spec}


def _rules_review(f: dict[int, list[int | bytes]]) -> dict[str, Any]:
    """``kubectl auth can-i --list``'s SelfSubjectRulesReview: spec.namespace."""
    return {"spec": _strings(f[2][-1], ("namespace",)) if 2 in f else {}}


_DECODERS: Final[dict[tuple[str, str], Callable[[dict[int, list[int | bytes]]], dict[str, Any]]]] = {
    ("v1", "ConfigMap"): _config_map,
    ("v1", "Namespace"): _namespace,
    ("authorization.k8s.io/v1", "SelfSubjectAccessReview"): _access_review,
    ("authorization.k8s.io/v1", "SelfSubjectRulesReview"): _rules_review,
    ("authentication.k8s.io/v1", "SelfSubjectReview"): lambda _f: {},
}


def _envelope(body: bytes) -> tuple[str, str, bytes]:
    if not body.startswith(MAGIC):
        raise ProtobufError("missing the k8s protobuf magic prefix")
    f = _group(_fields(body[len(MAGIC):]))
    api_version = kind = ""
    if 1 in f and isinstance(f[1][-1], bytes):
        tm = _group(_fields(f[1][-1]))
        api_version = _str(tm[1][-1]) if 1 in tm else ""
        kind = _str(tm[2][-1]) if 2 in tm else ""
    raw = f[2][-1] if 2 in f and isinstance(f[2][-1], bytes) else b""
    return api_version, kind, raw


def decode_object(body: bytes) -> dict[str, Any]:
    """A protobuf-encoded object to its JSON form; :class:`ProtobufError` if not understood."""
    api_version, kind, raw = _envelope(body)
    decoder = _DECODERS.get((api_version, kind))
    if decoder is None:
        raise ProtobufError(f"{kind or 'this kind'} ({api_version}) is not accepted as protobuf; send JSON")
    f = _group(_fields(raw))
    obj: dict[str, Any] = {"apiVersion": api_version, "kind": kind}
    obj["metadata"] = _object_meta(f[1][-1]) if 1 in f and isinstance(f[1][-1], bytes) else {}
    obj.update(decoder(f))
    return obj


def decode_delete_options(body: bytes) -> dict[str, Any]:
    """``DeleteOptions`` (preconditions, propagationPolicy, dryRun) from protobuf."""
    _api_version, _kind, raw = _envelope(body)
    f = _group(_fields(raw))
    options: dict[str, Any] = {}
    if 2 in f and isinstance(f[2][-1], bytes):
        pre = _group(_fields(f[2][-1]))
        options["preconditions"] = {
            **({"uid": _str(pre[1][-1])} if 1 in pre else {}),
            **({"resourceVersion": _str(pre[2][-1])} if 2 in pre else {}),
        }
    if 4 in f:
        options["propagationPolicy"] = _str(f[4][-1])
    if 5 in f:
        options["dryRun"] = [_str(v) for v in f[5]]
    return options
