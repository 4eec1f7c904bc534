"""What a real cluster's Kueue holds, read through its Kubernetes API: the queues and the recent Workloads.

Kueue objects are read in the newest version the cluster serves (v1beta2, else v1beta1, from the API
group's discovery document); a kind the cluster does not serve (Cohorts before Kueue 0.11, Topologies before
0.14 in v1beta1) is skipped.
PriorityClasses come along, except the cluster's own ``system-*`` ones. Nothing is written to the cluster.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final

import httpx

from flexq.errors import FlexqError

__all__ = ["QUEUE_KINDS", "ClusterReadError", "ClusterState", "read_cluster"]

KUEUE: Final = "kueue.x-k8s.io"
# (plural, kind), in the order a scenario lists them: what a queue refers to comes before it.
QUEUE_KINDS: Final = (("workloadpriorityclasses", "WorkloadPriorityClass"), ("topologies", "Topology"),
                      ("resourceflavors", "ResourceFlavor"),
                      ("cohorts", "Cohort"), ("provisioningrequestconfigs", "ProvisioningRequestConfig"),
                      ("admissionchecks", "AdmissionCheck"), ("clusterqueues", "ClusterQueue"),
                      ("localqueues", "LocalQueue"))


class ClusterReadError(FlexqError):
    """The cluster's API refused or failed a read; the message names the URL and the answer."""


@dataclass
class ClusterState:
    server: str
    kueue_version: str
    objects: list[dict[str, Any]] = field(default_factory=list)
    workloads: list[dict[str, Any]] = field(default_factory=list)


def _get(http: httpx.Client, path: str, *, missing_ok: bool = False) -> dict[str, Any] | None:
    url = str(http.base_url).rstrip("/") + path
    try:
        response = http.get(path)
    except httpx.HTTPError as exc:
        raise ClusterReadError(f"GET {url}: {exc}") from None
    if response.status_code == 404 and missing_ok:
        return None
    if response.status_code in (401, 403):
        raise ClusterReadError(f"GET {url}: {response.status_code} {response.reason_phrase}: the context's "
                               "credentials may not read Kueue's objects (list permission on kueue.x-k8s.io)")
    if response.status_code >= 400:
        raise ClusterReadError(f"GET {url}: {response.status_code} {response.text.strip()[:300]}")
    try:
        body = response.json()
    except ValueError:
        raise ClusterReadError(f"GET {url}: the answer is not JSON (is this a Kubernetes API server?)") from None
    if not isinstance(body, dict):
        raise ClusterReadError(f"GET {url}: expected a JSON object")
    return body


def _items(http: httpx.Client, path: str, api_version: str, kind: str) -> list[dict[str, Any]] | None:
    body = _get(http, path, missing_ok=True)
    if body is None:
        return None
    items = [i for i in body.get("items") or [] if isinstance(i, dict)]
    for item in items:  # list items may leave these out
        item.setdefault("apiVersion", api_version)
        item.setdefault("kind", kind)
    return items


def read_cluster(http: httpx.Client) -> ClusterState:
    """Read the queues and Workloads; raise :class:`ClusterReadError` when the cluster cannot be read."""
    group = _get(http, f"/apis/{KUEUE}", missing_ok=True)
    if group is None:
        raise ClusterReadError(f"{http.base_url}: the cluster serves no {KUEUE} API: is Kueue installed?")
    served = [v.get("version") for v in group.get("versions") or [] if isinstance(v, dict)]
    version = next((v for v in ("v1beta2", "v1beta1") if v in served), None)
    if version is None:
        raise ClusterReadError(f"{http.base_url}: Kueue serves {', '.join(map(str, served))}; flexq reads "
                               "v1beta2 or v1beta1")
    state = ClusterState(str(http.base_url), version)
    api_version = f"{KUEUE}/{version}"
    for plural, kind in QUEUE_KINDS:
        state.objects += _items(http, f"/apis/{api_version}/{plural}", api_version, kind) or []
    classes = _items(http, "/apis/scheduling.k8s.io/v1/priorityclasses", "scheduling.k8s.io/v1", "PriorityClass")
    state.objects = [c for c in classes or [] if not c["metadata"]["name"].startswith("system-")] + state.objects
    state.workloads = _items(http, f"/apis/{api_version}/workloads", api_version, "Workload") or []
    return state
