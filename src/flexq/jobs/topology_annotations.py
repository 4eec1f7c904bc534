"""A pod set's topology request: Kueue's ``kueue.x-k8s.io/podset-*-topology`` annotations on a job's pod template,
and the ``topologyRequest`` of the Workload's pod set that Kueue makes of them."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any, Final

from flexq.errors import FlexqError
from flexq.scheduler import TopologyRequest

__all__ = ["CONSTRAINTS", "GROUP", "PREFERRED", "REQUIRED", "SLICE_REQUIRED", "SLICE_SIZE", "UNCONSTRAINED",
           "TopologyRequestError", "check_groups", "request_annotations", "request_from_object", "request_object",
           "topology_request"]

REQUIRED: Final = "kueue.x-k8s.io/podset-required-topology"
PREFERRED: Final = "kueue.x-k8s.io/podset-preferred-topology"
UNCONSTRAINED: Final = "kueue.x-k8s.io/podset-unconstrained-topology"
SLICE_REQUIRED: Final = "kueue.x-k8s.io/podset-slice-required-topology"
SLICE_SIZE: Final = "kueue.x-k8s.io/podset-slice-size"
GROUP: Final = "kueue.x-k8s.io/podset-group-name"
CONSTRAINTS: Final = "kueue.x-k8s.io/podset-slice-required-topology-constraints"
"""Kueue's multi-layer slices (``TASMultiLayerTopology``, beta and on in v0.19): a JSON array of up to three
``{"topology": LEVEL, "size": PODS}``, outermost first, in place of ``podset-slice-required-topology`` and
``podset-slice-size``."""
_LABEL: Final = re.compile(r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
                           r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")
"""Kueue's ``PodSetGroupName``: two pod sets that name the same group are placed together (a leader and its
workers)."""


class TopologyRequestError(FlexqError, ValueError):
    """A pod template's topology annotations that Kueue's webhook refuses: ``where`` the template is (``pod set
    head``), the ``field`` of it at fault (``metadata.annotations[...]``) and what is wrong (``detail``)."""

    def __init__(self, where: str, field: str, detail: str) -> None:
        super().__init__(f"{where}: {field}: {detail}")
        self.where, self.field, self.detail = where, field, detail


def _key(annotation: str) -> str:
    return f"metadata.annotations[{annotation}]"


def topology_request(annotations: Mapping[str, Any], where: str = "template") -> TopologyRequest | None:
    """The request a pod template's annotations make (None: none). Raises :class:`TopologyRequestError` for what
    Kueue's webhook refuses: both a required and a preferred level, a slice level without a whole positive
    ``podset-slice-size``, or a slice size without a slice level; a ``podset-group-name`` that is a number, or
    beside a slice request, or without a required or preferred level."""
    required, preferred = annotations.get(REQUIRED), annotations.get(PREFERRED)
    unconstrained = str(annotations.get(UNCONSTRAINED, "")).lower() == "true"
    slice_level, slice_size = annotations.get(SLICE_REQUIRED), annotations.get(SLICE_SIZE)
    if required and preferred:
        raise TopologyRequestError(where, "metadata.annotations", f"{REQUIRED} and {PREFERRED} may not both be set")
    if slice_size is not None and not slice_level:
        raise TopologyRequestError(where, _key(SLICE_SIZE), f"requires {SLICE_REQUIRED}")
    size = 1
    if slice_level:
        try:
            size = int(str(slice_size))
        except ValueError:
            size = 0
        if size < 1:
            raise TopologyRequestError(where, _key(SLICE_SIZE), f"a whole number of pods above 0 is required with "
                                                                f"{SLICE_REQUIRED} (got {slice_size!r})")
    group = _group(annotations, where)
    layers = _layers(annotations, where) if CONSTRAINTS in annotations else ()
    if layers:
        slice_level, size = layers[0]
    if not (required or preferred or unconstrained or slice_level):
        return None
    level = str(required or preferred or "")
    return TopologyRequest(level, bool(required), unconstrained and not level, str(slice_level or ""), size, group,
                           layers)


def _layers(annotations: Mapping[str, Any], where: str) -> tuple[tuple[str, int], ...]:
    """The slice layers ``podset-slice-required-topology-constraints`` asks, refused as Kueue's webhook refuses
    them (``validateSliceRequiredTopologyConstraintsAnnotation``)."""
    field = _key(CONSTRAINTS)
    for other in (SLICE_REQUIRED, SLICE_SIZE):
        if other in annotations:
            raise TopologyRequestError(where, field, f"may not be set when '{other}' is specified")
    if GROUP in annotations:
        raise TopologyRequestError(where, _key(GROUP), f"may not be set when '{CONSTRAINTS}' is specified")
    raw = annotations[CONSTRAINTS]
    try:
        entries = json.loads(str(raw))
    except json.JSONDecodeError as e:
        raise TopologyRequestError(where, field, f"must be a valid JSON array: {e}") from None
    if not isinstance(entries, list) or not 1 <= len(entries) <= 3:
        raise TopologyRequestError(where, field, "must have between 1 and 3 topology constraint layers")
    out: list[tuple[str, int]] = []
    for i, entry in enumerate(entries):
        level = entry.get("topology") if isinstance(entry, dict) else None
        size = entry.get("size") if isinstance(entry, dict) else None
        if not isinstance(level, str) or not _LABEL.match(level):
            raise TopologyRequestError(where, f"{field}[{i}].topology", f"must be a label name (got {level!r})")
        if not isinstance(size, int) or isinstance(size, bool) or size < 1:
            raise TopologyRequestError(where, f"{field}[{i}].size", "must be greater than or equal to 1")
        if any(level == seen for seen, _ in out):
            raise TopologyRequestError(where, f"{field}[{i}].topology", f"Duplicate value: {level!r}")
        if out and out[-1][1] % size:
            raise TopologyRequestError(where, f"{field}[{i}].size", f"must evenly divide the parent layer size "
                                                                    f"{out[-1][1]}")
        out.append((level, size))
    return tuple(out)


def _group(annotations: Mapping[str, Any], where: str) -> str:
    """The pod set group a template names, refused as Kueue's webhook refuses it: a number, or beside a slice
    request, or without a required or preferred level."""
    if GROUP not in annotations:
        return ""
    group = str(annotations[GROUP])
    if group.isascii() and group.isdigit():
        raise TopologyRequestError(where, _key(GROUP), f"must not be a number (got {group!r})")
    for other in (SLICE_SIZE, SLICE_REQUIRED):
        if other in annotations:
            raise TopologyRequestError(where, _key(GROUP), f"may not be set when '{other}' is specified")
    if not (annotations.get(REQUIRED) or annotations.get(PREFERRED)):
        raise TopologyRequestError(where, _key(GROUP), f"may not be set when neither '{PREFERRED}' nor "
                                                       f"'{REQUIRED}' is specified")
    return group


def check_groups(podsets: Sequence[tuple[str, int, TopologyRequest | None]]) -> None:
    """Kueue's ``ValidatePodSetGroupingTopology`` over a job's pod sets (name, pods, request): each group has
    exactly two pod sets, one of them of a single pod, and both ask the same required or preferred level. Raises
    :class:`TopologyRequestError` naming the first pod set at fault (``where``: ``pod set <name>``)."""
    groups: dict[str, list[tuple[str, int, TopologyRequest]]] = {}
    for name, count, request in podsets:
        if request is not None and request.group:
            groups.setdefault(request.group, []).append((name, count, request))
    for group, members in groups.items():
        where = f"pod set {members[0][0]}"
        if len(members) != 2:
            raise TopologyRequestError(where, _key(GROUP), f"can only define groups of exactly 2 pod sets, got: "
                                                           f"{len(members)} pod set(s) in group {group!r}")
        (_, one, a), (second, two, b) = members
        if one != 1 and two != 1:
            raise TopologyRequestError(where, _key(GROUP), f"can only define groups where at least one pod set has "
                                                           f"only 1 replica, got: {one} replica(s) and {two} "
                                                           f"replica(s) in group {group!r}")
        if (a.level, a.required) != (b.level, b.required):
            raise TopologyRequestError(where, "metadata.annotations", f"must specify '{REQUIRED}' or '{PREFERRED}' "
                                                                      f"topology consistent with pod set {second} "
                                                                      f"in group {group!r}")


def request_annotations(request: TopologyRequest) -> dict[str, str]:
    """The pod template annotations that make ``request`` (the inverse of :func:`topology_request`)."""
    out: dict[str, str] = {}
    if request.level:
        out[REQUIRED if request.required else PREFERRED] = request.level
    if request.unconstrained:
        out[UNCONSTRAINED] = "true"
    if request.layers:
        out[CONSTRAINTS] = json.dumps([{"topology": level, "size": size} for level, size in request.layers])
    elif request.slice_level:
        out[SLICE_REQUIRED] = request.slice_level
        out[SLICE_SIZE] = str(request.slice_size)
    if request.group:
        out[GROUP] = request.group
    return out


def request_object(request: TopologyRequest) -> dict[str, Any]:
    """The Workload pod set's ``topologyRequest``, as Kueue writes it."""
    out: dict[str, Any] = {}
    if request.level:
        out["required" if request.required else "preferred"] = request.level
    if request.unconstrained:
        out["unconstrained"] = True
    if request.layers:
        out["podsetSliceRequiredTopologyConstraints"] = [{"topology": level, "size": size}
                                                         for level, size in request.layers]
    elif request.slice_level:
        out["podSetSliceRequiredTopology"] = request.slice_level
        out["podSetSliceSize"] = request.slice_size
    if request.group:
        out["podSetGroupName"] = request.group
    return out


def request_from_object(raw: Any) -> TopologyRequest | None:
    """A Workload pod set's ``topologyRequest`` read back (None: absent or empty)."""
    if not isinstance(raw, Mapping):
        return None
    required, preferred = raw.get("required"), raw.get("preferred")
    slice_level = raw.get("podSetSliceRequiredTopology")
    size = raw.get("podSetSliceSize")
    layers = tuple((str(c.get("topology", "")), int(c.get("size", 1)))
                   for c in raw.get("podsetSliceRequiredTopologyConstraints") or [] if isinstance(c, Mapping))
    if layers:
        slice_level, size = layers[0]
    if not (required or preferred or raw.get("unconstrained") or slice_level):
        return None
    group = raw.get("podSetGroupName") if required or preferred else None
    return TopologyRequest(str(required or preferred or ""), bool(required), bool(raw.get("unconstrained")),
                           str(slice_level or ""), size if isinstance(size, int) and size > 0 else 1,
                           group if isinstance(group, str) else "", layers)
