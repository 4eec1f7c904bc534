"""An object as its author would write it: what the server added taken off, before export to a real cluster.

What goes: ``status``; the metadata the API server manages (``uid``, ``resourceVersion``, ``generation``,
``creationTimestamp``, ``managedFields``, ``ownerReferences``, ``finalizers``) and kubectl's
``last-applied-configuration`` annotation; the defaults flexq wrote in (:mod:`flexq.api.defaults`), unless
the author wrote the same value (the last applied configuration says so); a queued job's ``suspend``,
which Kueue's webhook sets on the real cluster as flexq's does; and, on a job Kueue has started, what
admission added to its pod templates (the flavors' node labels and tolerations, a ProvisioningRequest's
annotations): the templates go back to the originals its Workload keeps, as Kueue puts them back when it
suspends a job.

A default is recognised by trial, not by a second table: a field is dropped when putting defaults back
into the object without it gives the very object flexq stores. So this module follows
:func:`flexq.api.defaults.apply_defaults` as it changes.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator, Mapping
from typing import Any, Final

from flexq.api import UnknownKind, apply_defaults, by_gvk, convert

__all__ = ["LAST_APPLIED", "clean", "last_applied"]

LAST_APPLIED: Final = "kubectl.kubernetes.io/last-applied-configuration"
_SERVER_METADATA: Final = ("uid", "resourceVersion", "generation", "creationTimestamp", "managedFields",
                           "ownerReferences", "finalizers", "selfLink", "deletionTimestamp",
                           "deletionGracePeriodSeconds")
_JOB_KINDS: Final = frozenset({"RayJob", "Job"})

Path = tuple[str | int, ...]


def last_applied(obj: Mapping[str, Any]) -> dict[str, Any] | None:
    """The configuration ``kubectl apply`` (or ``flexq apply``) recorded on ``obj``, if any and readable."""
    text = ((obj.get("metadata") or {}).get("annotations") or {}).get(LAST_APPLIED)
    if not isinstance(text, str):
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def clean(obj: Mapping[str, Any], originals: Mapping[str, dict[str, Any]] | None = None) -> dict[str, Any]:
    """A copy of ``obj`` (as the server stores it, in its storage version) fit to apply to a real cluster.

    ``originals``: for a job Kueue has started, its Workload's pod set templates by pod set name.
    The input is not mutated.
    """
    out = copy.deepcopy(dict(obj))
    kind = str(out.get("kind", ""))
    out.pop("status", None)
    meta = out.setdefault("metadata", {})
    for key in _SERVER_METADATA:
        meta.pop(key, None)
    annotations = meta.get("annotations") or {}
    annotations.pop(LAST_APPLIED, None)
    if not annotations:
        meta.pop("annotations", None)
    if not meta.get("labels"):
        meta.pop("labels", None)
    written = _written(out, last_applied(obj))
    if kind in _JOB_KINDS and isinstance(out.get("spec"), dict):
        spec = out["spec"]
        if originals and spec.get("suspend") is False:
            _restore_templates(kind, spec, originals)
        if ("spec", "suspend") not in written:
            spec.pop("suspend", None)
    _strip_defaults(kind, out, written)
    return out


def _written(obj: Mapping[str, Any], applied: dict[str, Any] | None) -> set[Path]:
    """Every path the author wrote, read from the last applied configuration in the stored version."""
    if applied is None:
        return set()
    api_version = str(obj.get("apiVersion", ""))
    try:
        info = by_gvk(api_version, str(obj.get("kind", "")))
    except UnknownKind:  # a kind this server does not know has no defaults to tell apart
        return set()
    return set(_paths(convert(info, applied, api_version.rpartition("/")[2])))


def _paths(value: Any, prefix: Path = ()) -> Iterator[Path]:
    yield prefix
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _paths(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _paths(item, (*prefix, index))


def _strip_defaults(kind: str, obj: dict[str, Any], written: set[Path]) -> None:
    """Drop, deepest first, every field of ``spec`` that the defaults would put back as it is."""
    if not isinstance(obj.get("spec"), dict):
        return
    target = _defaulted(kind, obj)
    if target is None:
        return
    candidates = [p for p in _paths(obj["spec"], ("spec",)) if len(p) > 1 and isinstance(p[-1], str)]
    for path in sorted(candidates, key=len, reverse=True):
        if path in written:
            continue
        holder = _get(obj, path[:-1])
        if not isinstance(holder, dict) or path[-1] not in holder:
            continue
        value = holder.pop(path[-1])
        if _defaulted(kind, obj) != target:
            holder[path[-1]] = value


def _defaulted(kind: str, obj: Mapping[str, Any]) -> dict[str, Any] | None:
    trial = copy.deepcopy(dict(obj))
    try:
        apply_defaults(kind, trial)
    except (KeyError, TypeError, AttributeError):  # a shape the defaulter does not expect: keep every field
        return None
    return trial


def _get(obj: Any, path: Path) -> Any:
    for step in path:
        obj = obj[step]
    return obj


def _restore_templates(kind: str, spec: dict[str, Any], originals: Mapping[str, dict[str, Any]]) -> None:
    if kind == "RayJob":
        cluster = spec.get("rayClusterSpec") or {}
        slots = [("head", cluster.get("headGroupSpec"))]
        slots += [(str(g.get("groupName")), g) for g in cluster.get("workerGroupSpecs") or []]
    else:
        slots = [("main", spec)]
    for name, holder in slots:
        if isinstance(holder, dict) and name in originals:
            holder["template"] = copy.deepcopy(originals[name])
