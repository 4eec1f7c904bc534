"""Patches: JSON merge patch (RFC 7386), JSON patch (RFC 6902), strategic merge patch, three-way merge.

Strategic merge follows the API server for the lists it knows by key (containers, volumes, env,
ports, volumeMounts, ...): items are merged by their key instead of replaced, ``$patch: delete`` /
``replace`` and ``$retainKeys`` are honoured, ``$setElementOrder`` and ``$deleteFromPrimitiveList``
directives are understood. Other lists are replaced, as for JSON merge patch.
"""

from __future__ import annotations

from typing import Any, Final

from flexq.api import copy_json
from flexq.errors import FlexqError

__all__ = ["PatchError", "apply_json_patch", "create_three_way_merge_patch", "json_merge", "strategic_merge"]


class PatchError(FlexqError, ValueError):
    """A patch that cannot be applied; the message says why."""


def json_merge(target: Any, patch: Any) -> Any:
    """RFC 7386: objects merge, ``null`` deletes, anything else replaces. ``target`` is copied once, then merged
    into in place."""
    if not isinstance(patch, dict):
        return copy_json(patch)
    result = copy_json(target) if isinstance(target, dict) else {}
    _merge_into(result, patch)
    return result


def _merge_into(result: dict[str, Any], patch: dict[str, Any]) -> None:
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        elif isinstance(value, dict):
            inner = result.get(key)
            if not isinstance(inner, dict):
                inner = {}
            result[key] = inner  # a copy already: the result's own, or new
            _merge_into(inner, value)
        else:
            result[key] = copy_json(value)


# Merge keys of the lists the core API patches strategically (from k8s.io/api's patchMergeKey tags).
_MERGE_KEYS: Final[dict[str, str]] = {
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "volumes": "name",
    "env": "name",
    "volumeMounts": "mountPath",
    "volumeDevices": "devicePath",
    "ports": "containerPort",
    "imagePullSecrets": "name",
    "hostAliases": "ip",
    "conditions": "type",
    "ownerReferences": "uid",
    "topologySpreadConstraints": "topologyKey",
    "resourceClaims": "name",
}
_PRIMITIVE_MERGE: Final = frozenset({"finalizers"})


def strategic_merge(target: Any, patch: Any) -> Any:
    """Apply a strategic merge patch to ``target`` (a copy is returned)."""
    if not isinstance(patch, dict):
        return copy_json(patch)
    if patch.get("$patch") == "replace":
        return {k: copy_json(v) for k, v in patch.items() if k != "$patch"}
    if patch.get("$patch") == "delete":
        return None
    result: dict[str, Any] = copy_json(target) if isinstance(target, dict) else {}
    retain = patch.get("$retainKeys")
    for key, value in patch.items():
        if key.startswith("$setElementOrder/") or key in ("$retainKeys", "$patch"):
            continue
        if key.startswith("$deleteFromPrimitiveList/"):
            field = key.split("/", 1)[1]
            if isinstance(result.get(field), list) and isinstance(value, list):
                result[field] = [item for item in result[field] if item not in value]
            continue
        if value is None:
            result.pop(key, None)
        elif isinstance(value, list) and key in _MERGE_KEYS and isinstance(result.get(key), list):
            result[key] = _merge_list(result[key], value, _MERGE_KEYS[key])
        elif isinstance(value, list) and key in _PRIMITIVE_MERGE and isinstance(result.get(key), list):
            result[key] = result[key] + [item for item in value if item not in result[key]]
        elif isinstance(value, dict):
            merged = strategic_merge(result.get(key), value)
            if merged is None:
                result.pop(key, None)
            else:
                result[key] = merged
        else:
            result[key] = copy_json(value)
    if isinstance(retain, list):
        result = {k: v for k, v in result.items() if k in retain}
    return result


def _merge_list(current: list[Any], patch: list[Any], key: str) -> list[Any]:
    out = copy_json(current)
    if any(isinstance(item, dict) and item.get("$patch") == "replace" for item in patch):
        return [copy_json(i) for i in patch if not (isinstance(i, dict) and i.get("$patch") == "replace")]
    for item in patch:
        if not isinstance(item, dict) or key not in item:
            raise PatchError(f"strategic merge patch: list item lacks its merge key {key!r}")
        index = next((i for i, cur in enumerate(out) if isinstance(cur, dict) and cur.get(key) == item[key]), None)
        if item.get("$patch") == "delete":
            if index is not None:
                del out[index]
        elif index is None:
            out.append({k: copy_json(v) for k, v in item.items() if k != "$patch"})
        else:
            out[index] = strategic_merge(out[index], item)
    return out


def apply_json_patch(target: Any, operations: Any) -> Any:
    """RFC 6902 operations (add, remove, replace, move, copy, test) on a copy of ``target``."""
    if not isinstance(operations, list):
        raise PatchError("a JSON patch is a list of operations")
    doc = copy_json(target)
    for n, op in enumerate(operations):
        if not isinstance(op, dict) or "op" not in op or "path" not in op:
            raise PatchError(f"operation {n}: needs 'op' and 'path'")
        kind = op["op"]
        if kind in ("add", "replace", "test") and "value" not in op:
            raise PatchError(f"operation {n}: '{kind}' needs 'value'")
        if kind == "test":
            if _get(doc, op["path"], n) != op["value"]:
                raise PatchError(f"operation {n}: test failed at {op['path']}")
            continue
        if kind in ("move", "copy"):
            value = copy_json(_get(doc, op.get("from", ""), n))
            if kind == "move":
                doc = _set(doc, op["from"], None, "remove", n)
            doc = _set(doc, op["path"], value, "add", n)
        elif kind in ("add", "replace", "remove"):
            doc = _set(doc, op["path"], copy_json(op.get("value")), kind, n)
        else:
            raise PatchError(f"operation {n}: unknown op {kind!r}")
    return doc


def _tokens(path: str, n: int) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise PatchError(f"operation {n}: path {path!r} must start with '/'")
    return [t.replace("~1", "/").replace("~0", "~") for t in path[1:].split("/")]


def _get(doc: Any, path: str, n: int) -> Any:
    node = doc
    for token in _tokens(path, n):
        try:
            node = node[int(token)] if isinstance(node, list) else node[token]
        except (KeyError, IndexError, ValueError, TypeError):
            raise PatchError(f"operation {n}: path {path!r} does not exist") from None
    return node


def _set(doc: Any, path: str, value: Any, kind: str, n: int) -> Any:
    tokens = _tokens(path, n)
    if not tokens:
        return value
    parent = _get(doc, "/" + "/".join(t.replace("~", "~0").replace("/", "~1") for t in tokens[:-1]), n) \
        if len(tokens) > 1 else doc
    last = tokens[-1]
    if isinstance(parent, list):
        if last == "-" and kind == "add":
            parent.append(value)
            return doc
        try:
            index = int(last)
        except ValueError:
            raise PatchError(f"operation {n}: {last!r} is not a list index") from None
        if not 0 <= index <= len(parent) - (0 if kind == "add" else 1):
            raise PatchError(f"operation {n}: index {index} out of range")
        if kind == "add":
            parent.insert(index, value)
        elif kind == "replace":
            parent[index] = value
        else:
            del parent[index]
    elif isinstance(parent, dict):
        if kind in ("replace", "remove") and last not in parent:
            raise PatchError(f"operation {n}: path {path!r} does not exist")
        if kind == "remove":
            del parent[last]
        else:
            parent[last] = value
    else:
        raise PatchError(f"operation {n}: path {path!r} does not exist")
    return doc


def _diff(current: Any, modified: Any, *, deletions: bool, changes: bool) -> dict[str, Any]:
    patch: dict[str, Any] = {}
    cur = current if isinstance(current, dict) else {}
    for key, value in modified.items():
        if key not in cur:
            if changes:
                patch[key] = copy_json(value)
        elif isinstance(value, dict) and isinstance(cur[key], dict):
            sub = _diff(cur[key], value, deletions=deletions, changes=changes)
            if sub:
                patch[key] = sub
        elif value != cur[key] and changes:
            patch[key] = copy_json(value)
    if deletions:
        for key in cur:
            if key not in modified:
                patch[key] = None
    return patch


def create_three_way_merge_patch(
    original: dict[str, Any] | None, modified: dict[str, Any], current: dict[str, Any]
) -> dict[str, Any]:
    """kubectl's three-way JSON merge: set what ``modified`` changes against ``current``, delete what
    was in ``original`` (the last applied configuration) and is no longer in ``modified``."""
    patch = _diff(current, modified, deletions=False, changes=True)
    if original:
        _combine(patch, _diff(original, modified, deletions=True, changes=False))
    return patch


def _combine(patch: dict[str, Any], removals: dict[str, Any]) -> None:
    for key, value in removals.items():
        if key not in patch:
            patch[key] = value
        elif isinstance(value, dict) and isinstance(patch[key], dict):
            _combine(patch[key], value)
