"""``kubectl auth can-i``, ``kubectl auth can-i --list`` and ``kubectl auth whoami``: SelfSubjectAccessReview,
SelfSubjectRulesReview and SelfSubjectReview."""

from __future__ import annotations

from typing import Any

from flexq.api import Document, UnknownKind, by_gvk
from flexq.auth import Attributes, Identity, authorize, forbidden_message, rules_in
from flexq.objects import BadRequest

__all__ = ["refusal", "review"]


def _text(spec: dict[str, Any], key: str) -> str:
    value = spec.get(key, "")
    if not isinstance(value, str):
        raise BadRequest(f"spec.resourceAttributes.{key}: must be a string")
    return value


def _access(who: Identity, body: dict[str, Any]) -> dict[str, Any]:
    spec = body.get("spec")
    if not isinstance(spec, dict):
        raise BadRequest("spec: Required value")
    resource = spec.get("resourceAttributes")
    plain = spec.get("nonResourceAttributes")
    if isinstance(resource, dict):
        attrs = Attributes(_text(resource, "verb") or "get", _text(resource, "group"), _text(resource, "resource"),
                           _text(resource, "subresource"), _text(resource, "namespace") or None,
                           _text(resource, "name"))
        if not attrs.resource:
            raise BadRequest("spec.resourceAttributes.resource: Required value")
    elif isinstance(plain, dict):
        attrs = Attributes(str(plain.get("verb") or "get"), path=str(plain.get("path") or "/"))
    else:
        raise BadRequest("spec: exactly one of resourceAttributes and nonResourceAttributes is required")
    allowed = authorize(who, attrs)
    status: dict[str, Any] = {"allowed": allowed}
    if allowed:
        status["reason"] = f'allowed by the {who.role.value} role of "{who.user}"'
    return {"kind": "SelfSubjectAccessReview", "apiVersion": "authorization.k8s.io/v1",
            "metadata": {"creationTimestamp": None}, "spec": spec, "status": status}


def _rules(who: Identity, body: dict[str, Any]) -> dict[str, Any]:
    spec = body.get("spec")
    if not isinstance(spec, dict):
        raise BadRequest("spec: Required value")
    namespace = spec.get("namespace")
    if not isinstance(namespace, str) or not namespace:
        raise BadRequest("spec.namespace: Required value: no namespace on request")
    held = rules_in(who, namespace)
    if held is None:
        resource_rules = [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}]
        plain_rules = [{"verbs": ["*"], "nonResourceURLs": ["*"]}]
    else:
        rules, paths = held
        # A developer reads one Namespace object: their own.
        resource_rules = [{"verbs": sorted(r.verbs), "apiGroups": [r.group], "resources": sorted(r.resources),
                           **({"resourceNames": [namespace]} if r.resources == {"namespaces"} else {})}
                          for r in rules]
        plain_rules = [{"verbs": ["get"], "nonResourceURLs": list(paths)}]
    return {"kind": "SelfSubjectRulesReview", "apiVersion": "authorization.k8s.io/v1",
            "metadata": {"creationTimestamp": None}, "spec": spec,
            "status": {"resourceRules": resource_rules, "nonResourceRules": plain_rules, "incomplete": False}}


def review(who: Identity, group: str, version: str, plural: str, body: Any) -> dict[str, Any]:
    """The answered review object for a POST to ``/apis/<group>/<version>/<plural>``."""
    if not isinstance(body, dict):
        raise BadRequest("the body must be a JSON object")
    if plural == "selfsubjectaccessreviews":
        return _access(who, body)
    if plural == "selfsubjectrulesreviews":
        return _rules(who, body)
    return {"kind": "SelfSubjectReview", "apiVersion": f"{group}/{version}", "metadata": {"creationTimestamp": None},
            "status": {"userInfo": {"username": who.user, "groups": who.groups,
                                    **({"extra": {"namespace": [who.namespace]}} if who.namespace else {})}}}


def refusal(who: Identity, docs: list[Document], namespace: str) -> str | None:
    """Kubernetes' 403 message for the first document ``who`` may not create (apply, or ask a forecast for), or
    None."""
    for doc in docs:
        api_version, kind = doc.obj.get("apiVersion"), doc.obj.get("kind")
        if not isinstance(api_version, str) or not isinstance(kind, str):
            continue
        try:
            info = by_gvk(api_version, kind)
        except UnknownKind:
            continue  # the apply itself reports it, with the line
        meta = doc.obj.get("metadata")
        name = meta.get("name") if isinstance(meta, dict) else None
        ns = meta.get("namespace") if isinstance(meta, dict) else None
        attrs = Attributes("create", info.group, info.plural, "",
                           (ns if isinstance(ns, str) and ns else namespace) if info.namespaced else None,
                           name if isinstance(name, str) else "")
        if not authorize(who, attrs):
            return forbidden_message(who, attrs)
    return None
