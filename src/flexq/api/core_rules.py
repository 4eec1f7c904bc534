"""The API server's own rules for names, paths and sizes that a schema cannot say, with its messages.

- a ConfigMap's keys (``IsConfigMapKey``): at most 253 characters of ``[-._a-zA-Z0-9]``, not ``.`` or ``..``,
  not starting with ``..``; a key in both ``data`` and ``binaryData`` is refused; the values together hold at
  most 1 MiB (``ValidateConfigMap``);
- ``metadata.annotations``: keys and values together at most 256 KiB, on every kind (``ValidateAnnotations``);
- a pod spec's volume paths: a mount's ``subPath`` and ``subPathExpr`` stay below the volume's root (relative, no
  ``..`` element: ``validateLocalDescendingPath``); the ``path`` of a configMap, secret, downwardAPI or projected
  volume's item likewise, and may not start with ``..`` (``validateKeyToPath``, ``ValidateLocalNonReservedPath``);
  a mount's ``mountPath`` is required and unique in its container (the API server checks nothing else of it: a
  container's runtime resolves it under the container's root).

They matter more here than in a cluster: flexq writes a mounted ConfigMap's keys as files under a job's own
directory, so a key that climbs out (``../../x``) must never be stored. Each function returns every problem it
finds as :class:`FieldError`\\ s, worded as the API server words them (``data[a/b]: Invalid value: "a/b": ...``).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any, Final

from flexq.api.object_errors import FieldError

__all__ = [
    "MAX_ANNOTATIONS_BYTES",
    "MAX_CONFIG_DATA_BYTES",
    "MAX_CONFIG_KEY_LENGTH",
    "annotation_errors",
    "config_key_errors",
    "config_map_errors",
    "go_quote",
    "pod_spec_errors",
]

MAX_CONFIG_KEY_LENGTH: Final = 253
"""The longest ConfigMap key (a DNS subdomain's length, as ``IsConfigMapKey`` takes it)."""
MAX_CONFIG_DATA_BYTES: Final = 1024 * 1024
"""The most bytes a ConfigMap's values hold together (``corev1.MaxSecretSize``)."""
MAX_ANNOTATIONS_BYTES: Final = 256 * 1024
"""The most bytes an object's annotations hold, keys and values together (``TotalAnnotationSizeLimitB``)."""

_CONFIG_KEY: Final = re.compile(r"[-._a-zA-Z0-9]+")
_CONFIG_KEY_MESSAGE: Final = ("a valid config key must consist of alphanumeric characters, '-', '_' or '.' "
                              "(e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is "
                              f"'{_CONFIG_KEY.pattern}')")
_GO_ESCAPES: Final = {"\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\v": "\\v",
                      "\\": "\\\\", '"': '\\"'}


def go_quote(text: str) -> str:
    """``text`` quoted as Go's ``%q`` quotes it, as the API server and kubectl show a value: ``"a\\x00b"``."""
    out: list[str] = []
    for char in text:
        code = ord(char)
        if char in _GO_ESCAPES:
            out.append(_GO_ESCAPES[char])
        elif char.isprintable():
            out.append(char)
        elif code < 0x80:
            out.append(f"\\x{code:02x}")
        else:
            out.append(f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}")
    return '"' + "".join(out) + '"'


def _size(text: str) -> int:
    """The bytes of ``text`` (what Go's ``len`` counts)."""
    return len(text.encode("utf-8", "surrogatepass"))


def config_key_errors(key: str) -> list[str]:
    """Why ``key`` is not a valid ConfigMap (or Secret) key, as ``IsConfigMapKey`` says it; empty if it is."""
    errors: list[str] = []
    if _size(key) > MAX_CONFIG_KEY_LENGTH:
        errors.append(f"must be no more than {MAX_CONFIG_KEY_LENGTH} characters")
    if not _CONFIG_KEY.fullmatch(key):
        errors.append(_CONFIG_KEY_MESSAGE)
    if key in (".", ".."):
        errors.append(f"must not be '{key}'")
    elif key.startswith(".."):
        errors.append("must not start with '..'")
    return errors


def _binary_size(value: str) -> int:
    """The bytes a base64 value decodes to: the API server stores ``binaryData`` decoded and counts those."""
    body = value.strip()
    return len(body) * 3 // 4 - body[-2:].count("=")


def config_map_errors(obj: Mapping[str, Any]) -> list[FieldError]:
    """A ConfigMap's keys, keys present in both ``data`` and ``binaryData``, and its size (``ValidateConfigMap``)."""
    data: Mapping[str, str] = obj.get("data") or {}
    binary: Mapping[str, str] = obj.get("binaryData") or {}
    errors: list[FieldError] = []
    for key in data:
        errors += [FieldError(f"data[{key}]", f"Invalid value: {go_quote(key)}: {e}") for e in config_key_errors(key)]
        if key in binary:
            errors.append(FieldError(f"data[{key}]",
                                     f"Invalid value: {go_quote(key)}: duplicate of key present in binaryData"))
    for key in binary:
        errors += [FieldError(f"binaryData[{key}]", f"Invalid value: {go_quote(key)}: {e}")
                   for e in config_key_errors(key)]
    total = sum(_size(v) for v in data.values()) + sum(_binary_size(v) for v in binary.values())
    if total > MAX_CONFIG_DATA_BYTES:
        # The API server's path for the whole object is the empty one, which it writes "[]".
        errors.append(FieldError("[]", f"Too long: must have at most {MAX_CONFIG_DATA_BYTES} bytes"))
    return errors


def annotation_errors(metadata: Mapping[str, Any]) -> list[FieldError]:
    """``metadata.annotations`` over their size limit (``ValidateAnnotationsSize``)."""
    annotations: Mapping[str, str] = metadata.get("annotations") or {}
    if sum(_size(k) + _size(v) for k, v in annotations.items()) <= MAX_ANNOTATIONS_BYTES:
        return []
    return [FieldError("metadata.annotations", f"Too long: must have at most {MAX_ANNOTATIONS_BYTES} bytes")]


# --- pod specs -----------------------------------------------------------------------------------------------------


def pod_spec_errors(spec: Mapping[str, Any], path: str) -> list[FieldError]:
    """The volume paths of the pod spec at ``path`` (``spec.template.spec``), already checked against its schema:
    its volumes' items and its containers' mounts."""
    errors: list[FieldError] = []
    for i, volume in enumerate(spec.get("volumes") or []):
        errors += _volume(volume, f"{path}.volumes[{i}]")
    for group in ("initContainers", "containers"):
        for c, container in enumerate(spec.get(group) or []):
            errors += _mounts(container.get("volumeMounts") or [], f"{path}.{group}[{c}].volumeMounts")
    return errors


def _mounts(mounts: list[dict[str, Any]], path: str) -> list[FieldError]:
    """``ValidateVolumeMounts``: what is required, a mount path once only, sub-paths below the volume's root."""
    errors: list[FieldError] = []
    seen: set[str] = set()
    for m, mount in enumerate(mounts):
        mpath = f"{path}[{m}]"
        if _text(mount, "name", mpath, errors) == "":
            errors.append(FieldError(f"{mpath}.name", "Required value"))
        mount_path = _text(mount, "mountPath", mpath, errors)
        if mount_path == "":
            errors.append(FieldError(f"{mpath}.mountPath", "Required value"))
        elif mount_path in seen:
            errors.append(FieldError(f"{mpath}.mountPath", f"Invalid value: {go_quote(mount_path)}: must be unique"))
        elif mount_path is not None:
            seen.add(mount_path)
        sub_path = _text(mount, "subPath", mpath, errors)
        if sub_path:
            errors += _descending(sub_path, f"{mpath}.subPath")
        expression = _text(mount, "subPathExpr", mpath, errors)
        if expression:
            if sub_path:
                errors.append(FieldError(f"{mpath}.subPathExpr", f"Invalid value: {go_quote(expression)}: "
                                                                   "subPathExpr and subPath are mutually exclusive"))
            errors += _descending(expression, f"{mpath}.subPathExpr")
    return errors


def _volume(volume: Mapping[str, Any], path: str) -> list[FieldError]:
    """The item paths of a configMap, secret, downwardAPI or projected volume."""
    errors = _file_items(volume, path)
    projected = _object(volume, "projected", path, errors)
    for s, source in _entries(projected.get("sources"), f"{path}.projected.sources", errors):
        spath = f"{path}.projected.sources[{s}]"
        errors += _file_items(source, spath)
        for kind in ("serviceAccountToken", "clusterTrustBundle"):
            if source.get(kind) is not None:
                errors += _file_path(_object(source, kind, spath, errors), f"{spath}.{kind}")
    return errors


def _file_items(node: Mapping[str, Any], path: str) -> list[FieldError]:
    """The items of ``node``'s configMap, secret and downwardAPI (a volume, or a projected volume's source)."""
    errors: list[FieldError] = []
    for kind in ("configMap", "secret"):
        for ipath, item in _items(node, kind, path, errors):
            errors += _key_to_path(item, ipath)
    for ipath, item in _items(node, "downwardAPI", path, errors):
        errors += _file_path(item, ipath)
    return errors


def _key_to_path(item: Mapping[str, Any], path: str) -> list[FieldError]:
    """``validateKeyToPath``: a key, and a path that stays below the volume's root."""
    errors: list[FieldError] = []
    if _text(item, "key", path, errors) == "":
        errors.append(FieldError(f"{path}.key", "Required value"))
    return errors + _file_path(item, path)


def _file_path(item: Mapping[str, Any], path: str) -> list[FieldError]:
    """A file's ``path`` in a volume: required, relative, no ``..`` element, not starting with ``..``."""
    errors: list[FieldError] = []
    target = _text(item, "path", path, errors)
    if not target:
        return errors + ([FieldError(f"{path}.path", "Required value")] if target == "" else [])
    errors += _descending(target, f"{path}.path")
    # Not where the ".." element was already told.
    if target.startswith("..") and not target.startswith("../"):
        errors.append(FieldError(f"{path}.path", f"Invalid value: {go_quote(target)}: must not start with '..'"))
    return errors


def _descending(target: str, path: str) -> list[FieldError]:
    """``validateLocalDescendingPath``: relative, and no ``..`` element (one error says it for ``../../..``)."""
    errors: list[FieldError] = []
    if target.startswith("/"):
        errors.append(FieldError(path, f"Invalid value: {go_quote(target)}: must be a relative path"))
    if ".." in target.split("/"):
        errors.append(FieldError(path, f"Invalid value: {go_quote(target)}: must not contain '..'"))
    return errors


# The schemas leave volumes and mounts as free objects: what these rules read is checked for its type here.


def _text(node: Mapping[str, Any], key: str, path: str, errors: list[FieldError]) -> str | None:
    """The string at ``key`` ("" where absent), or None where it is something else (the error is told)."""
    value = node.get(key)
    if value is None or isinstance(value, str):
        return value or ""
    errors.append(FieldError(f"{path}.{key}", f"Invalid value: {_kind(value)}: must be a string"))
    return None


def _object(node: Mapping[str, Any], key: str, path: str, errors: list[FieldError]) -> Mapping[str, Any]:
    value = node.get(key)
    if value is None or isinstance(value, dict):
        return value or {}
    errors.append(FieldError(f"{path}.{key}", f"Invalid value: {_kind(value)}: must be an object"))
    return {}


def _entries(value: Any, path: str, errors: list[FieldError]) -> Iterator[tuple[int, Mapping[str, Any]]]:
    """The objects of the list ``value`` at ``path``, with their indexes; an error for anything else."""
    if value is None:
        return
    if not isinstance(value, list):
        errors.append(FieldError(path, f"Invalid value: {_kind(value)}: must be a list"))
        return
    for i, entry in enumerate(value):
        if isinstance(entry, dict):
            yield i, entry
        else:
            errors.append(FieldError(f"{path}[{i}]", f"Invalid value: {_kind(entry)}: must be an object"))


def _items(node: Mapping[str, Any], source: str, path: str,
           errors: list[FieldError]) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """The ``items`` of the volume source ``source`` of ``node``, each with its path."""
    items = _object(node, source, path, errors).get("items")
    for i, item in _entries(items, f"{path}.{source}.items", errors):
        yield f"{path}.{source}.items[{i}]", item


def _kind(value: Any) -> str:
    if isinstance(value, str):
        return go_quote(value)
    if isinstance(value, dict):
        return "object"
    if isinstance(value, list):
        return "list"
    return "null" if value is None else repr(value)
