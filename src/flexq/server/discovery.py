"""Discovery documents: ``/version``, ``/api``, ``/apis``, and each group-version's resource list."""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Mapping, Sequence
from typing import Any, Final

from flexq import __version__
from flexq.api import KINDS, KindInfo

__all__ = ["KUBE_VERSION", "REVIEW_RESOURCES", "VISIBILITY_GROUP", "VISIBILITY_VERSIONS", "api_group_list",
           "api_versions", "group_versions", "resource_list", "version_info"]

KUBE_VERSION: Final = (1, 32)


def version_info() -> dict[str, str]:
    major, minor = KUBE_VERSION
    return {
        "major": str(major), "minor": str(minor),
        "gitVersion": f"v{major}.{minor}.0+flexq.{__version__}",
        "gitCommit": "", "gitTreeState": "clean", "buildDate": "2026-01-01T00:00:00Z",
        "goVersion": "", "compiler": "flexq", "platform": "linux/amd64",
    }


REVIEW_RESOURCES: Final = {
    "authorization.k8s.io": {"selfsubjectaccessreviews": "SelfSubjectAccessReview",
                             "selfsubjectrulesreviews": "SelfSubjectRulesReview"},
    "authentication.k8s.io": {"selfsubjectreviews": "SelfSubjectReview"},
}
"""The review resources (``kubectl auth can-i``, ``kubectl auth can-i --list``, ``kubectl auth whoami``): v1,
create only, nothing stored."""

VISIBILITY_GROUP: Final = "visibility.kueue.x-k8s.io"
VISIBILITY_VERSIONS: Final = ("v1beta2", "v1beta1")
"""Kueue's on-demand visibility API, as Kueue 0.19 serves it (v1beta2 preferred; both of one shape): each queue's
pending workloads (:mod:`flexq.server.visibility`), read only, nothing stored."""
_VISIBILITY_RESOURCES: Final = (("clusterqueues/pendingworkloads", False), ("localqueues/pendingworkloads", True))


@functools.cache
def group_versions() -> Mapping[str, Sequence[str]]:
    """Every served group with its versions, preferred first (core group is ""): worked out once, as the kinds
    are fixed (every request under ``/apis`` asks)."""
    out: dict[str, list[str]] = {}
    for info in KINDS:
        versions = out.setdefault(info.group, [])
        for v in info.versions:
            if v not in versions:
                versions.append(v)
    for group in REVIEW_RESOURCES:
        out[group] = ["v1"]
    out[VISIBILITY_GROUP] = list(VISIBILITY_VERSIONS)
    return {group: tuple(versions) for group, versions in out.items()}


def api_versions(address: str) -> dict[str, Any]:
    return {"kind": "APIVersions", "versions": ["v1"],
            "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": address}]}


def api_group_list() -> dict[str, Any]:
    groups = []
    for group, versions in group_versions().items():
        if not group:
            continue
        gvs = [{"groupVersion": f"{group}/{v}", "version": v} for v in versions]
        groups.append({"name": group, "versions": gvs, "preferredVersion": gvs[0]})
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}


def _hash(info: KindInfo) -> str:
    return hashlib.sha256(f"{info.group}/{info.kind}".encode()).hexdigest()[:11]


def resource_list(group: str, version: str) -> dict[str, Any] | None:
    if group in REVIEW_RESOURCES:
        if version != "v1":
            return None
        return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": f"{group}/v1", "resources": [
            {"name": plural, "singularName": "", "namespaced": False, "kind": kind, "verbs": ["create"]}
            for plural, kind in REVIEW_RESOURCES[group].items()]}
    if group == VISIBILITY_GROUP:
        if version not in VISIBILITY_VERSIONS:
            return None
        # The queues themselves are not listed: only their subresource is served (and kubectl's names for the
        # queues stay Kueue's own group's).
        return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": f"{group}/{version}", "resources": [
            {"name": name, "singularName": "", "namespaced": namespaced, "kind": "PendingWorkloadsSummary",
             "verbs": ["get"]} for name, namespaced in _VISIBILITY_RESOURCES]}
    kinds = [k for k in KINDS if k.group == group and version in k.versions]
    if not kinds:
        return None
    resources: list[dict[str, Any]] = []
    for info in kinds:
        entry: dict[str, Any] = {
            "name": info.plural, "singularName": info.singular, "namespaced": info.namespaced,
            "kind": info.kind, "verbs": list(info.verbs), "storageVersionHash": _hash(info),
        }
        if info.short_names:
            entry["shortNames"] = list(info.short_names)
        if info.categories:
            entry["categories"] = list(info.categories)
        resources.append(entry)
        if info.status_subresource:
            resources.append({"name": f"{info.plural}/status", "singularName": "", "namespaced": info.namespaced,
                              "kind": info.kind, "verbs": ["get", "patch", "update"]})
    gv = f"{group}/{version}" if group else version
    return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": resources}
