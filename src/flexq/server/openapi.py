"""OpenAPI v3 documents for the served kinds, generated from flexq's object model.

``/openapi/v3`` lists one document per group-version; each document has the paths kubectl inspects
(its PATCH operations carry ``x-kubernetes-group-version-kind`` and the ``fieldValidation`` parameter,
which tells kubectl to let the server validate) and the kinds' schemas under ``components.schemas``.
"""

from __future__ import annotations

import hashlib
import json
from functools import cache
from typing import Any

from flexq.api import KINDS, KindInfo
from flexq.server.discovery import group_versions

__all__ = ["gv_document", "root_document"]


def _gv_path(group: str, version: str) -> str:
    return f"api/{version}" if not group else f"apis/{group}/{version}"


def _schema_name(info: KindInfo, version: str) -> str:
    reversed_group = ".".join(reversed(info.group.split("."))) if info.group else "io.k8s.api.core"
    return f"{reversed_group}.{version}.{info.kind}"


def _clean(node: Any) -> Any:
    """JSON Schema from pydantic to OpenAPI 3.0: ``anyOf [X, null]`` -> X; extras kept as unknown fields."""
    if isinstance(node, list):
        return [_clean(n) for n in node]
    if not isinstance(node, dict):
        return node
    if "anyOf" in node:
        options = [o for o in node["anyOf"] if o != {"type": "null"}]
        rest = {k: v for k, v in node.items() if k not in ("anyOf", "default")}
        if len(options) == 1:
            return _clean({**options[0], **rest})
        node = {**rest, "anyOf": options}
    out = {k: _clean(v) for k, v in node.items() if k not in ("title", "default") or not isinstance(v, str | None)}
    out.pop("default", None)
    if out.get("additionalProperties") is True:
        out.pop("additionalProperties")
        out["x-kubernetes-preserve-unknown-fields"] = True
    return out


@cache
def _schemas(group: str, version: str) -> dict[str, Any]:
    schemas: dict[str, Any] = {}
    for info in KINDS:
        if info.group != group or version not in info.versions:
            continue
        raw = info.model.model_json_schema(ref_template="#/components/schemas/{model}")
        for name, definition in raw.pop("$defs", {}).items():
            schemas[name] = _clean(definition)
        top = _clean(raw)
        top["x-kubernetes-group-version-kind"] = [{"group": info.group, "version": version, "kind": info.kind}]
        top["description"] = f"{info.kind} ({info.api_version(version)})"
        schemas[_schema_name(info, version)] = top
    return schemas


def _parameters(*names: str) -> list[dict[str, Any]]:
    return [{"name": n, "in": "query", "schema": {"type": "string"}, "uniqueItems": True} for n in names]


def _op(info: KindInfo, version: str, action: str, params: list[dict[str, Any]], body: bool) -> dict[str, Any]:
    ref = {"$ref": f"#/components/schemas/{_schema_name(info, version)}"}
    op: dict[str, Any] = {
        "operationId": f"{action}{info.kind}",
        "parameters": params,
        "responses": {"200": {"description": "OK", "content": {"application/json": {"schema": ref}}}},
        "x-kubernetes-action": action,
        "x-kubernetes-group-version-kind": {"group": info.group, "version": version, "kind": info.kind},
    }
    if body:
        op["requestBody"] = {"content": {"application/json": {"schema": ref}}}
    return op


@cache
def gv_document(group: str, version: str) -> dict[str, Any] | None:
    if version not in group_versions().get(group, []):
        return None
    write = _parameters("dryRun", "fieldManager", "fieldValidation")
    paths: dict[str, Any] = {}
    for info in KINDS:
        if info.group != group or version not in info.versions:
            continue
        base = "/" + _gv_path(group, version) + ("/namespaces/{namespace}" if info.namespaced else "")
        collection = f"{base}/{info.plural}"
        item = collection + "/{name}"
        paths[collection] = {
            "get": _op(info, version, "list", _parameters("labelSelector", "fieldSelector", "watch"), False),
            "post": _op(info, version, "post", write, True),
        }
        paths[item] = {
            "get": _op(info, version, "get", [], False),
            "put": _op(info, version, "put", write, True),
            "patch": _op(info, version, "patch", [*write, *_parameters("force")], True),
            "delete": _op(info, version, "delete", _parameters("dryRun"), False),
        }
        if info.status_subresource:
            paths[item + "/status"] = {
                "get": _op(info, version, "get", [], False),
                "put": _op(info, version, "put", write, True),
                "patch": _op(info, version, "patch", [*write, *_parameters("force")], True),
            }
    return {
        "openapi": "3.0.0",
        "info": {"title": "flexq", "version": version},
        "paths": paths,
        "components": {"schemas": _schemas(group, version)},
    }


@cache
def root_document() -> dict[str, Any]:
    paths: dict[str, Any] = {}
    for group, versions in group_versions().items():
        for version in versions:
            doc = gv_document(group, version)
            digest = hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:32].upper()
            path = _gv_path(group, version)
            paths[path] = {"serverRelativeURL": f"/openapi/v3/{path}?hash={digest}"}
    return {"paths": paths}
