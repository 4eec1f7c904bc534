"""The rules each role is held to, in Kubernetes' RBAC terms (verbs on group/resource, in a scope).

An administrator may do everything. A developer may, in their own namespace, create and change jobs
(RayJobs, RayClusters, batch Jobs, Pods) and ConfigMaps, read their workloads, local queues, events,
ProvisioningRequests and their local queues' pending workloads (Kueue's visibility API; a ClusterQueue's are
the administrator's, as with Kueue's batch-user role), read their jobs' logs and forward ports to them;
everywhere, read the queues' cluster-wide objects (ClusterQueues, flavors, cohorts, admission checks, priority
classes), nodes, the GKE cluster and its node pools, and ask what they may do.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from flexq.auth.identity import Identity, Role

__all__ = ["Attributes", "Rule", "authorize", "forbidden_message", "rules_in"]

READ: Final = frozenset({"get", "list", "watch"})
WRITE: Final = READ | {"create", "update", "patch", "delete", "deletecollection"}


@dataclass(frozen=True, slots=True)
class Attributes:
    """What a request does, as Kubernetes' authorizer sees it. ``resource`` is empty for a plain path."""

    verb: str
    group: str = ""
    resource: str = ""
    subresource: str = ""
    namespace: str | None = None
    name: str = ""
    path: str = ""

    @property
    def full_resource(self) -> str:
        return f"{self.resource}/{self.subresource}" if self.subresource else self.resource


@dataclass(frozen=True, slots=True)
class Rule:
    verbs: frozenset[str]
    group: str
    resources: frozenset[str]
    """``plural`` or ``plural/subresource``."""

    def allows(self, attrs: Attributes) -> bool:
        return attrs.verb in self.verbs and attrs.group == self.group and attrs.full_resource in self.resources


def _rule(verbs: frozenset[str], group: str, *resources: str) -> Rule:
    return Rule(verbs, group, frozenset(resources))


DEVELOPER_IN_NAMESPACE: Final = (
    _rule(WRITE, "ray.io", "rayjobs", "rayclusters"),
    _rule(READ, "ray.io", "rayjobs/status", "rayclusters/status", "rayjobs/log"),
    _rule(WRITE, "batch", "jobs"),
    _rule(READ, "batch", "jobs/status"),
    _rule(WRITE, "", "configmaps", "pods"),
    _rule(READ, "", "pods/log", "pods/status", "services", "events"),
    _rule(frozenset({"get", "create"}), "", "pods/portforward", "services/proxy"),
    _rule(READ, "kueue.x-k8s.io", "workloads", "workloads/status", "localqueues", "localqueues/status"),
    _rule(READ, "visibility.kueue.x-k8s.io", "localqueues/pendingworkloads"),
    _rule(READ, "autoscaling.x-k8s.io", "provisioningrequests", "provisioningrequests/status"),
    _rule(READ, "", "namespaces"),
)
"""A developer's rules inside their own namespace (their Namespace object included)."""

DEVELOPER_EVERYWHERE: Final = (
    _rule(READ, "kueue.x-k8s.io", "clusterqueues", "clusterqueues/status", "resourceflavors", "cohorts",
          "cohorts/status", "admissionchecks", "admissionchecks/status", "workloadpriorityclasses",
          "provisioningrequestconfigs", "topologies"),
    _rule(READ, "scheduling.k8s.io", "priorityclasses"),
    _rule(READ, "apiextensions.k8s.io", "customresourcedefinitions"),
    _rule(READ, "", "nodes"),
    _rule(READ, "flexq.dev", "clusters", "nodepools", "nodepools/status"),
    _rule(READ, "container.googleapis.com", "clusters", "nodepools", "operations", "projects"),
    _rule(frozenset({"create"}), "authorization.k8s.io", "selfsubjectaccessreviews", "selfsubjectrulesreviews"),
    _rule(frozenset({"create"}), "authentication.k8s.io", "selfsubjectreviews"),
)
"""A developer's rules in every namespace and at the cluster scope."""

PUBLIC_PATHS: Final = frozenset({"/healthz", "/livez", "/readyz", "/version", "/flexq/v1/cluster-info"})
"""Paths anyone may read, without a token (Kubernetes' ``system:public-info-viewer``)."""

_READ_PATH_PREFIXES: Final = ("/api", "/apis", "/openapi", "/version", "/healthz", "/livez", "/readyz",
                              "/metrics", "/docs", "/ui", "/flexq/v1")
"""Plain paths every authenticated caller may read: discovery, the OpenAPI documents, metrics, the dashboard."""


def authorize(who: Identity, attrs: Attributes) -> bool:
    if who.role is Role.ADMIN:
        return True
    if not attrs.resource:
        return attrs.verb == "get" and any(attrs.path == p or attrs.path.startswith(p + "/")
                                           for p in _READ_PATH_PREFIXES)
    if any(rule.allows(attrs) for rule in DEVELOPER_EVERYWHERE):
        return True
    own = who.namespace is not None and (
        attrs.namespace == who.namespace
        or (attrs.group == "" and attrs.resource == "namespaces" and attrs.name == who.namespace))
    return own and any(rule.allows(attrs) for rule in DEVELOPER_IN_NAMESPACE)


def rules_in(who: Identity, namespace: str) -> tuple[tuple[Rule, ...], tuple[str, ...]] | None:
    """The rules ``who`` holds in ``namespace`` (those of the cluster scope included) and the plain paths they may
    read (``/x/*``: every path under ``/x``), as ``kubectl auth can-i --list`` shows them; None for an
    administrator, who may do everything."""
    if who.role is Role.ADMIN:
        return None
    rules = DEVELOPER_EVERYWHERE + (DEVELOPER_IN_NAMESPACE if namespace == who.namespace else ())
    return rules, tuple(path for prefix in _READ_PATH_PREFIXES for path in (prefix, prefix + "/*"))


def forbidden_message(who: Identity, attrs: Attributes) -> str:
    """Kubernetes' wording of a refusal."""
    if not attrs.resource:
        return f'forbidden: User "{who.user}" cannot {attrs.verb} path "{attrs.path}"'
    qualified = f"{attrs.resource}.{attrs.group}" if attrs.group else attrs.resource
    subject = f'{qualified} "{attrs.name}"' if attrs.name else qualified
    scope = f'in the namespace "{attrs.namespace}"' if attrs.namespace else "at the cluster scope"
    return (f'{subject} is forbidden: User "{who.user}" cannot {attrs.verb} resource "{attrs.full_resource}" '
            f'in API group "{attrs.group}" {scope}')
