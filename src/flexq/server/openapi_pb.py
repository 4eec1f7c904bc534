"""A Swagger 2.0 document in gnostic's protobuf (``openapi.v2.Document``), the form kubectl asks ``/openapi/v2`` for.

kubectl sends ``Accept: application/com.github.proto-openapi.spec.v2@v1.0+protobuf`` and decodes the answer as that
message, whatever its Content-Type says. The fields written are those the document of
:mod:`flexq.server.openapi_v2` uses; their numbers are gnostic's ``openapiv2/OpenAPIv2.proto``. Vendor extensions
and other free values travel as gnostic does, as YAML text (JSON is YAML) in an ``Any``.
"""

from __future__ import annotations

import json
import struct
from typing import Any, Final

__all__ = ["OPENAPI_V2_PROTOBUF", "OPENAPI_V2_PROTOBUF_TYPE", "encode_document"]

OPENAPI_V2_PROTOBUF: Final = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"
# What the API server answers it with: Go's media-type parser refuses the '@' of the name asked for.
OPENAPI_V2_PROTOBUF_TYPE: Final = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"


def _varint(value: int) -> bytes:
    value &= (1 << 64) - 1  # negative int64s as protobuf writes them: ten bytes of two's complement
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _message(number: int, body: bytes) -> bytes:
    return _varint(number << 3 | 2) + _varint(len(body)) + body


def _string(number: int, text: str) -> bytes:
    return _message(number, text.encode("utf-8"))


def _int(number: int, value: int) -> bytes:
    return _varint(number << 3) + _varint(value)


def _double(number: int, value: float) -> bytes:
    return _varint(number << 3 | 1) + struct.pack("<d", float(value))


def _any(value: Any) -> bytes:
    return _string(2, json.dumps(value, separators=(",", ":")))


def _extensions(number: int, node: dict[str, Any]) -> bytes:
    return b"".join(_message(number, _string(1, k) + _message(2, _any(v))) for k, v in node.items()
                    if k.startswith("x-"))


_SCHEMA_STRINGS: Final = (("$ref", 1), ("format", 2), ("title", 3), ("description", 4), ("pattern", 13))
_SCHEMA_INTS: Final = (("maxLength", 11), ("minLength", 12), ("maxItems", 14), ("minItems", 15),
                       ("maxProperties", 17), ("minProperties", 18))
_SCHEMA_NUMBERS: Final = (("multipleOf", 6), ("maximum", 7), ("minimum", 9))


def _schema(node: dict[str, Any]) -> bytes:
    out = bytearray()
    for key, number in _SCHEMA_STRINGS:
        if isinstance(node.get(key), str):
            out += _string(number, node[key])
    if "default" in node:
        out += _message(5, _any(node["default"]))
    for key, number in _SCHEMA_NUMBERS:
        if isinstance(node.get(key), int | float) and not isinstance(node[key], bool):
            out += _double(number, node[key])
    for key, number in _SCHEMA_INTS:
        if isinstance(node.get(key), int) and not isinstance(node[key], bool):
            out += _int(number, node[key])
    if node.get("uniqueItems") is True:
        out += _int(16, 1)
    for name in node.get("required", []):
        out += _string(19, name)
    for value in node.get("enum", []):
        out += _message(20, _any(value))
    extra = node.get("additionalProperties")
    if isinstance(extra, dict):
        out += _message(21, _message(1, _schema(extra)))
    elif isinstance(extra, bool):
        out += _message(21, _int(2, int(extra)))
    kinds = node.get("type")
    if kinds is not None:
        out += _message(22, b"".join(_string(1, t) for t in ([kinds] if isinstance(kinds, str) else kinds)))
    if isinstance(node.get("items"), dict):
        out += _message(23, _message(1, _schema(node["items"])))
    for sub in node.get("allOf", []):
        out += _message(24, _schema(sub))
    if isinstance(node.get("properties"), dict):
        out += _message(25, b"".join(_message(1, _string(1, k) + _message(2, _schema(v)))
                                     for k, v in node["properties"].items()))
    if node.get("readOnly") is True:
        out += _int(27, 1)
    out += _extensions(31, node)
    return bytes(out)


def _parameter(param: dict[str, Any]) -> bytes:
    """A ``ParametersItem``: a body parameter, or a query parameter (the only other kind the document has)."""
    if param["in"] == "body":
        body = (_string(2, param["name"]) + _string(3, "body") + (_int(4, 1) if param.get("required") else b"")
                + _message(5, _schema(param["schema"])))
        return _message(1, _message(1, body))
    query = _string(2, param["in"]) + _string(4, param["name"]) + _string(6, param.get("type", "string"))
    if param.get("uniqueItems") is True:
        query += _int(20, 1)
    return _message(1, _message(2, _message(3, query)))


def _operation(op: dict[str, Any]) -> bytes:
    out = bytearray(_string(5, op["operationId"]))
    for mime in op.get("produces", []):
        out += _string(6, mime)
    for mime in op.get("consumes", []):
        out += _string(7, mime)
    for param in op.get("parameters", []):
        out += _message(8, _parameter(param))
    codes = b""
    for code, response in op.get("responses", {}).items():
        body = _string(1, response.get("description", ""))
        if "schema" in response:
            body += _message(2, _message(1, _schema(response["schema"])))
        codes += _message(1, _string(1, code) + _message(2, _message(1, body)))
    out += _message(9, codes)
    out += _extensions(13, op)
    return bytes(out)


_VERBS: Final = {"get": 2, "put": 3, "post": 4, "delete": 5, "options": 6, "head": 7, "patch": 8}


def encode_document(doc: dict[str, Any]) -> bytes:
    """``doc`` (a Swagger 2.0 document as JSON) as an ``openapi.v2.Document`` message."""
    info = doc.get("info", {})
    paths = b""
    for path, item in doc.get("paths", {}).items():
        body = b"".join(_message(_VERBS[verb], _operation(op)) for verb, op in item.items() if verb in _VERBS)
        paths += _message(2, _string(1, path) + _message(2, body))
    definitions = b"".join(_message(1, _string(1, name) + _message(2, _schema(schema)))
                           for name, schema in doc.get("definitions", {}).items())
    head = _string(1, info.get("title", "")) + _string(2, info.get("version", ""))
    return (_string(1, doc["swagger"]) + _message(2, head) + _message(8, paths) + _message(9, definitions)
            + _extensions(16, doc))
