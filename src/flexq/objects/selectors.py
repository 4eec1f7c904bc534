"""Label and field selectors, as ``kubectl -l`` and ``--field-selector`` write them."""

from __future__ import annotations

import re
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any, Final

from flexq.errors import FlexqError

__all__ = ["SelectorError", "field_labels", "field_selector", "label_selector", "match_label_selector_object"]

Predicate = Callable[[dict[str, Any]], bool]


class SelectorError(FlexqError, ValueError):
    """A selector that cannot be parsed."""


_SET: Final = re.compile(r"^\s*([^\s!=]+)\s+(in|notin)\s+\(([^)]*)\)\s*$")
_EQ: Final = re.compile(r"^\s*([^\s!=]+)\s*(==|=|!=)\s*([^\s]*)\s*$")
_EXISTS: Final = re.compile(r"^\s*(!?)\s*([^\s!=()]+)\s*$")


def _split(text: str) -> list[str]:
    parts, depth, cur = [], 0, ""
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    if cur.strip():
        parts.append(cur)
    return parts


@dataclass(frozen=True, slots=True)
class _Requirement:
    key: str
    op: str  # in | notin | = | != | exists | !exists
    values: frozenset[str] = frozenset()

    def matches(self, labels: dict[str, str]) -> bool:
        value = labels.get(self.key)
        if self.op in ("in", "="):
            return value in self.values
        if self.op in ("notin", "!="):
            return value not in self.values
        return (self.key in labels) == (self.op == "exists")


def _requirement(part: str) -> _Requirement:
    if m := _SET.match(part):
        return _Requirement(m.group(1), m.group(2), frozenset(v.strip() for v in m.group(3).split(",")))
    if m := _EQ.match(part):
        return _Requirement(m.group(1), "!=" if m.group(2) == "!=" else "=", frozenset({m.group(3)}))
    if m := _EXISTS.match(part):
        return _Requirement(m.group(2), "!exists" if m.group(1) else "exists")
    raise SelectorError(f"unable to parse requirement: {part.strip()!r}")


def label_selector(text: str | None) -> Predicate:
    """``app=x,tier!=y,env in (a,b),!legacy`` -> a predicate on an object's labels."""
    if not text:
        return lambda _obj: True
    requirements = [_requirement(part) for part in _split(text)]

    def predicate(obj: dict[str, Any]) -> bool:
        labels = obj.get("metadata", {}).get("labels") or {}
        return all(r.matches(labels) for r in requirements)

    return predicate


_EVERY_KIND: Final = frozenset({"metadata.name", "metadata.namespace"})
_FIELD_LABELS: Final[dict[tuple[str, str], frozenset[str]]] = {
    ("", "pods"): frozenset({"spec.nodeName", "spec.restartPolicy", "spec.schedulerName", "spec.serviceAccountName",
                             "spec.hostNetwork", "status.phase", "status.podIP", "status.nominatedNodeName"}),
    ("", "events"): frozenset({"involvedObject.kind", "involvedObject.namespace", "involvedObject.name",
                               "involvedObject.uid", "involvedObject.apiVersion", "involvedObject.resourceVersion",
                               "involvedObject.fieldPath", "reason", "reportingComponent", "source", "type"}),
    ("", "namespaces"): frozenset({"status.phase"}),
    ("", "nodes"): frozenset({"spec.unschedulable"}),
    ("", "services"): frozenset({"spec.clusterIP", "spec.type"}),
    ("batch", "jobs"): frozenset({"status.successful"}),
}
"""The field labels a kind may be selected by beyond the name and namespace, as the API server has them (a custom
resource, such as Kueue's and KubeRay's, has none)."""
_FIELD_PATHS: Final = {"source": "source.component"}
"""Field labels that name another field of the object (an event's ``source`` is its source's component)."""


def field_labels(group: str, plural: str) -> frozenset[str]:
    """The field labels the resource ``plural`` of ``group`` may be selected by."""
    return _EVERY_KIND | _FIELD_LABELS.get((group, plural), frozenset())


def _field(obj: dict[str, Any], path: str) -> str:
    node: Any = obj
    for part in _FIELD_PATHS.get(path, path).split("."):
        if not isinstance(node, dict):
            return ""
        node = node.get(part)
    if isinstance(node, bool):
        return "true" if node else "false"
    return "" if node is None else str(node)


def field_selector(text: str | None, supported: Collection[str] | None = None) -> Predicate:
    """``metadata.name=x,involvedObject.uid=y,status.phase!=z``: equality on dotted fields; :class:`SelectorError`
    for one that is not among ``supported`` (where given: :func:`field_labels`), as the API server's 400."""
    if not text:
        return lambda _obj: True
    tests: list[tuple[str, str, bool]] = []
    for part in _split(text):
        m = _EQ.match(part)
        if m is None:
            raise SelectorError(f"invalid field selector: {part.strip()!r}")
        if supported is not None and m.group(1) not in supported:
            raise SelectorError(f"field label not supported: {m.group(1)}")
        tests.append((m.group(1), m.group(3), m.group(2) == "!="))
    return lambda obj: all((_field(obj, path) == value) != negate for path, value, negate in tests)


def match_label_selector_object(selector: dict[str, Any] | None, labels: dict[str, str]) -> bool:
    """A ``metav1.LabelSelector`` object against labels. ``None`` matches nothing, ``{}`` everything."""
    if selector is None:
        return False
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for req in selector.get("matchExpressions") or []:
        key, op, values = req.get("key"), req.get("operator"), req.get("values") or []
        if op == "In" and labels.get(key) not in values:
            return False
        if op == "NotIn" and labels.get(key) in values:
            return False
        if op == "Exists" and key not in labels:
            return False
        if op == "DoesNotExist" and key in labels:
            return False
    return True
