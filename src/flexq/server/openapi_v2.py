"""The OpenAPI v2 (Swagger 2.0) document at ``/openapi/v2``, made from the same schemas as the v3 documents.

kubectl reads it when the v3 documents do not describe a kind: to validate a manifest of a kind the server does
not serve, it downloads ``/openapi/v2`` (as gnostic's protobuf, see :mod:`flexq.server.openapi_pb`), finds no
schema for it and leaves the answer to the API: ``no matches for kind "Topology" ... ensure CRDs are installed
first``. Without the document, every such manifest was refused with ``failed to download openapi``. Older
clients also read it for what the v3 documents say: each PATCH operation names its kind
(``x-kubernetes-group-version-kind``) and takes ``fieldValidation``, so they leave validation to the server.

All group-versions share one ``definitions`` namespace here: a kind's schema keeps its v3 name
(``io.x-k8s.kueue.v1beta2.ClusterQueue``), a part of it takes the kind's prefix (``io.x-k8s.kueue.v1beta2.PodSet``).
"""

from __future__ import annotations

from functools import cache
from typing import Any

from flexq.server.discovery import group_versions
from flexq.server.openapi import gv_document

__all__ = ["v2_document"]

_REF = "#/components/schemas/"
# Keywords OpenAPI v3 has and Swagger 2.0 has not; a schema that needs them is left open (any value).
_V3_ONLY = ("anyOf", "oneOf", "not", "nullable", "const", "exclusiveMinimum", "exclusiveMaximum")


def _prefix(group: str, version: str) -> str:
    reversed_group = ".".join(reversed(group.split("."))) if group else "io.k8s.api.core"
    return f"{reversed_group}.{version}"


def _names(schemas: dict[str, Any], group: str, version: str) -> dict[str, str]:
    prefix = _prefix(group, version)
    return {name: name if "." in name else f"{prefix}.{name}" for name in schemas}


def _convert(node: Any, names: dict[str, str]) -> Any:
    if isinstance(node, list):
        return [_convert(n, names) for n in node]
    if not isinstance(node, dict):
        return node
    if "$ref" in node:
        ref = node["$ref"]
        target = names.get(ref.removeprefix(_REF), ref.removeprefix(_REF))
        out: dict[str, Any] = {"$ref": f"#/definitions/{target}"}
        if isinstance(node.get("description"), str):
            out["description"] = node["description"]
        return out
    out = {}
    for key, value in node.items():
        if key in _V3_ONLY:
            continue
        if key == "properties" and isinstance(value, dict):
            out[key] = {name: _convert(sub, names) for name, sub in value.items()}
        elif key in ("items", "additionalProperties") and isinstance(value, dict):
            out[key] = _convert(value, names)
        elif key == "allOf" and isinstance(value, list):
            out[key] = [_convert(sub, names) for sub in value]
        else:
            out[key] = value
    return out


def _parameter(name: str) -> dict[str, Any]:
    return {"name": name, "in": "query", "type": "string", "uniqueItems": True}


def _operation(op: dict[str, Any], names: dict[str, str]) -> dict[str, Any]:
    """A v3 operation as Swagger 2.0 writes it: query parameters typed inline, the body a ``body`` parameter."""
    params: list[dict[str, Any]] = [_parameter(p["name"]) for p in op.get("parameters", [])]
    schema = op["responses"]["200"]["content"]["application/json"]["schema"]
    if "requestBody" in op:
        params.insert(0, {"name": "body", "in": "body", "required": True, "schema": _convert(schema, names)})
    return {
        "operationId": op["operationId"],
        "consumes": ["application/json", "application/yaml"] if "requestBody" in op else [],
        "produces": ["application/json", "application/yaml"],
        "parameters": params,
        "responses": {"200": {"description": "OK", "schema": _convert(schema, names)}},
        "x-kubernetes-action": op["x-kubernetes-action"],
        "x-kubernetes-group-version-kind": op["x-kubernetes-group-version-kind"],
    }


@cache
def v2_document() -> dict[str, Any]:
    """Every served group-version's paths and schemas in one Swagger 2.0 document."""
    paths: dict[str, Any] = {}
    definitions: dict[str, Any] = {}
    for group, versions in group_versions().items():
        for version in versions:
            doc = gv_document(group, version)
            if doc is None:
                continue
            schemas = doc["components"]["schemas"]
            names = _names(schemas, group, version)
            for name, schema in schemas.items():
                definitions[names[name]] = _convert(schema, names)
            for path, item in doc["paths"].items():
                paths[path] = {verb: _operation(op, names) for verb, op in item.items()}
    return {
        "swagger": "2.0",
        "info": {"title": "flexq", "version": "v2"},
        "paths": paths,
        "definitions": definitions,
    }
