"""``apiextensions.k8s.io/v1`` CustomResourceDefinitions, read only: the kinds that a Kubernetes cluster would have
from CRDs (Kueue's, KubeRay's, the ProvisioningRequest, flexq's own), described from flexq's kind table.

kubectl lists them while validating a manifest whose kind the OpenAPI documents do not describe, to tell a CRD
(whose validation is the server's) from a kind nobody serves; without the list it stopped at ``failed to list
CRDs`` instead of saying ``no matches for kind``. Nothing is stored: the list is what flexq serves.
"""

from __future__ import annotations

from functools import cache
from typing import Any, Final

from flexq.api import KINDS, KindInfo
from flexq.server.discovery import VISIBILITY_GROUP
from flexq.server.status import status_body

__all__ = ["CRD_GROUP", "crd_answer"]

CRD_GROUP: Final = "apiextensions.k8s.io"
# Groups the API server itself serves; every other group's kinds come from CRDs (the visibility API is aggregated).
_BUILT_IN: Final = frozenset({"", "batch", "scheduling.k8s.io", "authorization.k8s.io", "authentication.k8s.io",
                              VISIBILITY_GROUP})


def _crd(info: KindInfo) -> dict[str, Any]:
    name = f"{info.plural}.{info.group}"
    names: dict[str, Any] = {"plural": info.plural, "singular": info.singular, "kind": info.kind,
                             "listKind": info.list_kind}
    if info.short_names:
        names["shortNames"] = list(info.short_names)
    if info.categories:
        names["categories"] = list(info.categories)
    versions = [{"name": v, "served": True, "storage": v == info.storage_version,
                 "subresources": {"status": {}} if info.status_subresource else {}} for v in info.versions]
    return {
        "apiVersion": f"{CRD_GROUP}/v1", "kind": "CustomResourceDefinition", "metadata": {"name": name},
        "spec": {"group": info.group, "names": names, "scope": "Namespaced" if info.namespaced else "Cluster",
                 "versions": versions},
        "status": {"acceptedNames": names, "storedVersions": [info.storage_version],
                   "conditions": [{"type": "Established", "status": "True", "reason": "InitialNamesAccepted",
                                   "message": "the initial names have been accepted"}]},
    }


@cache
def _crds() -> dict[str, dict[str, Any]]:
    return {f"{i.plural}.{i.group}": _crd(i) for i in KINDS if i.group not in _BUILT_IN}


def crd_answer(method: str, parts: list[str]) -> tuple[int, dict[str, Any]]:
    """The answer to ``/apis/apiextensions.k8s.io/<parts...>``: the group, the list or one CRD; writes refused."""
    gv = {"groupVersion": f"{CRD_GROUP}/v1", "version": "v1"}
    if parts == []:
        return 200, {"kind": "APIGroup", "apiVersion": "v1", "name": CRD_GROUP, "versions": [gv],
                     "preferredVersion": gv}
    if parts[0] != "v1" or len(parts) > 3 or (len(parts) > 1 and parts[1] != "customresourcedefinitions"):
        return 404, status_body(404, "NotFound", "the server could not find the requested resource")
    if len(parts) == 1:
        return 200, {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": f"{CRD_GROUP}/v1",
                     "resources": [{"name": "customresourcedefinitions", "singularName": "customresourcedefinition",
                                    "namespaced": False, "kind": "CustomResourceDefinition", "verbs": ["get", "list"],
                                    "shortNames": ["crd", "crds"], "categories": ["api-extensions"]}]}
    if method != "GET":
        return 405, status_body(405, "MethodNotAllowed",
                                "flexq serves its kinds itself: customresourcedefinitions are read only")
    if len(parts) == 2:
        return 200, {"kind": "CustomResourceDefinitionList", "apiVersion": f"{CRD_GROUP}/v1",
                     "metadata": {"resourceVersion": "1"}, "items": list(_crds().values())}
    crd = _crds().get(parts[2])
    if crd is None:
        return 404, status_body(404, "NotFound", f'customresourcedefinitions.{CRD_GROUP} "{parts[2]}" not found',
                                {"name": parts[2], "group": CRD_GROUP, "kind": "customresourcedefinitions"})
    return 200, crd
