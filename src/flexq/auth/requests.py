"""A request's authorization attributes from its method, path and query, as the API server derives them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from flexq.auth.rbac import Attributes

__all__ = ["SELF_AUTHORIZED", "ResourcePath", "request_attributes", "resource_path"]

SELF_AUTHORIZED: Final = frozenset({"/flexq/v1/apply", "/flexq/v1/forecast", "/flexq/v1/simulate"})
"""Paths whose handler authorizes each object it is given (one request, many kinds and namespaces)."""

_VERBS: Final = {"POST": "create", "PUT": "update", "PATCH": "patch"}


@dataclass(frozen=True, slots=True)
class ResourcePath:
    """What a Kubernetes API path names below ``/api/v1`` or ``/apis/GROUP/VERSION``:
    ``[namespaces/NAMESPACE/]RESOURCE[/NAME[/SUBRESOURCE]]`` (``""`` for a part it does not name)."""

    namespace: str | None
    resource: str
    name: str
    subresource: str
    depth: int
    """Segments from the resource on: more than 3 is no resource's path."""


def resource_path(group: str, rest: list[str]) -> ResourcePath:
    """Parse ``rest``, the (non-empty) segments after the group version. ``/api/v1/namespaces/NAME/status`` and
    ``.../finalize`` are the Namespace's own subresources, not a namespace's objects."""
    namespace: str | None = None
    if rest[0] == "namespaces" and len(rest) >= 3 and not (group == "" and rest[2] in ("status", "finalize")):
        namespace, rest = rest[1], rest[2:]
    return ResourcePath(namespace, rest[0], rest[1] if len(rest) > 1 else "", rest[2] if len(rest) > 2 else "",
                        len(rest))


def _verb(method: str, named: bool, query: Mapping[str, str]) -> str:
    if method in ("GET", "HEAD"):
        if named:
            return "get"
        return "watch" if query.get("watch") in ("1", "true", "True") else "list"
    if method == "DELETE":
        return "delete" if named else "deletecollection"
    return _VERBS.get(method, method.lower())


def _kube(method: str, group: str, rest: list[str], query: Mapping[str, str], path: str) -> Attributes:
    if not rest:
        return Attributes("get" if method in ("GET", "HEAD") else method.lower(), path=path)
    if rest[0] == "watch":  # the old /watch/ paths
        rest, query = rest[1:], {**query, "watch": "true"}
        if not rest:
            return Attributes("get" if method in ("GET", "HEAD") else method.lower(), path=path)
    where = resource_path(group, rest)
    if where.subresource in ("log", "portforward", "proxy") and method in ("GET", "HEAD"):
        verb = "get"
    else:
        verb = _verb(method, bool(where.name), query)
    return Attributes(verb, group, where.resource, where.subresource, where.namespace, where.name, path)


def _gke(method: str, parts: list[str], query: Mapping[str, str], path: str) -> Attributes:
    """``/v1/projects/P[/locations|zones/L/(clusters|operations)/...]`` and the project/service reads gcloud makes."""
    group = "container.googleapis.com"
    if len(parts) <= 3 or parts[3] == "services":
        return Attributes(_verb(method, True, query), group, "projects", "", None, parts[2] if len(parts) > 2 else "",
                          path)
    rest = parts[5:]
    if not rest:
        return Attributes(_verb(method, False, query), group, "clusters", "", None, "", path)
    if rest[0] == "operations":
        return Attributes(_verb(method, len(rest) > 1, query), group, "operations", "", None,
                          rest[1] if len(rest) > 1 else "", path)
    cluster = rest[1].partition(":")[0] if len(rest) > 1 else ""
    if len(rest) <= 2:
        action = len(rest) > 1 and ":" in rest[1]
        return Attributes("update" if action and method == "POST" else _verb(method, bool(cluster), query),
                          group, "clusters", "", None, cluster, path)
    pool = rest[3] if len(rest) > 3 else ""
    pool_name, _, pool_action = pool.partition(":")
    verb = "update" if pool_action and method == "POST" else _verb(method, bool(pool), query)
    return Attributes(verb, group, "nodepools", "", None, pool_name, path)


def request_attributes(method: str, path: str, query: Mapping[str, str]) -> Attributes | None:
    """The attributes to authorize ``method path?query`` by; None where the handler authorizes it itself."""
    if path in SELF_AUTHORIZED:
        return None
    parts = [p for p in path.split("/") if p]
    if not parts:
        return Attributes("get" if method in ("GET", "HEAD") else method.lower(), path="/")
    if parts[0] == "api":
        if len(parts) == 1:
            return Attributes("get" if method in ("GET", "HEAD") else method.lower(), path=path)
        return _kube(method, "", parts[2:], query, path)
    if parts[0] == "apis":
        if len(parts) <= 3:
            return Attributes("get" if method in ("GET", "HEAD") else method.lower(), path=path)
        return _kube(method, parts[1], parts[3:], query, path)
    if parts[0] == "v1" and len(parts) >= 2 and parts[1] == "projects":
        return _gke(method, parts, query, path)
    if parts[:2] == ["ui", "ray"] and len(parts) >= 4:  # a job's Ray dashboard, through the server
        verb = "get" if method in ("GET", "HEAD") else "create"
        return Attributes(verb, "", "services", "proxy", parts[2], parts[3], path)
    if parts[:2] == ["ui", "jobs"] and len(parts) == 4:  # a job's page
        return Attributes(_verb(method, True, query), "kueue.x-k8s.io", "workloads", "", parts[2], parts[3], path)
    if parts[:2] == ["flexq", "v1"]:
        rest = parts[2:]
        if rest[:2] == ["dashboard", "jobs"] and len(rest) == 4:  # one job's detail: its workload, events, log
            return Attributes(_verb(method, True, query), "kueue.x-k8s.io", "workloads", "", rest[2], rest[3], path)
        if rest[:1] == ["tokens"]:
            return Attributes(_verb(method, len(rest) > 1, query), "flexq.dev", "tokens", "", None,
                              rest[1] if len(rest) > 1 else "", path)
        if len(rest) == 5 and rest[0] == "namespaces" and rest[4] == "logs":
            return Attributes("get", "ray.io", rest[2], "log", rest[1], rest[3], path)
    return Attributes("get" if method in ("GET", "HEAD") else _verb(method, False, query).removesuffix("collection"),
                      path=path)
