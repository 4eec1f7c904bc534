"""What must hold of a server's stored state after any crash: read through its API, compared whole."""

from __future__ import annotations

import collections
from typing import Any

import httpx

from flexq.api.quantity import Quantity

_KUEUE = "/apis/kueue.x-k8s.io/v1beta2"
WORKLOADS = f"{_KUEUE}/workloads"


def _items(client: httpx.Client, path: str, **params: str) -> list[dict[str, Any]]:
    answer = client.get(path, params=params)
    answer.raise_for_status()
    items: list[dict[str, Any]] = answer.json()["items"]
    return items


def condition_states(obj: dict[str, Any]) -> dict[str, str]:
    return {c["type"]: c["status"] for c in (obj.get("status") or {}).get("conditions") or []}


def _owner(obj: dict[str, Any]) -> dict[str, Any]:
    return next(iter(obj["metadata"].get("ownerReferences") or []), {})


def workloads_per_job(client: httpx.Client) -> dict[str, list[str]]:
    """Each Job's workloads (by the Job's name): exactly one each, when nothing is lost or doubled."""
    jobs = {j["metadata"]["name"] for j in _items(client, "/apis/batch/v1/namespaces/default/jobs")}
    found: dict[str, list[str]] = {name: [] for name in jobs}
    for wl in _items(client, f"{_KUEUE}/namespaces/default/workloads"):
        owner = _owner(wl)
        if owner.get("kind") == "Job":
            found.setdefault(owner["name"], []).append(wl["metadata"]["name"])
    return found


def admitted_events(client: httpx.Client) -> collections.Counter[str]:
    """How many times each Workload was recorded as admitted (Kueue's ``Admitted`` event)."""
    counts: collections.Counter[str] = collections.Counter()
    # Selected by the server (a run's other Events are many times more): what is left is checked again here.
    for event in _items(client, "/api/v1/namespaces/default/events",
                        fieldSelector="reason=Admitted,involvedObject.kind=Workload"):
        involved = event.get("involvedObject") or {}
        if involved.get("kind") == "Workload" and event.get("reason") == "Admitted":
            counts[involved["name"]] += int(event.get("count") or 1)
    return counts


def story(client: httpx.Client, workload: str) -> list[str]:
    """A workload's Events, oldest first: what a failure message shows."""
    events = [e for e in _items(client, "/api/v1/namespaces/default/events")
              if (e.get("involvedObject") or {}).get("name") == workload]
    events.sort(key=lambda e: (e.get("firstTimestamp") or "", e["metadata"].get("resourceVersion", "")))
    return [f"{e.get('firstTimestamp')} {e['reason']} x{e.get('count', 1)}: {e['message']}" for e in events]


def _listed(client: httpx.Client, path: str) -> tuple[list[dict[str, Any]], str]:
    answer = client.get(path)
    answer.raise_for_status()
    body = answer.json()
    return body["items"], str(body["metadata"]["resourceVersion"])


def usage_mismatches(client: httpx.Client) -> list[str]:
    """Where a ClusterQueue's reserved quota differs from the sum of its workloads' (those holding quota), compared
    only where both lists were read at the same resourceVersion: two reads are not one snapshot, and a server that
    reserves quota for one workload after another (as after a restart, when the races start again) moves between
    them at every try, workloads first and their queue's status after."""
    workloads, at = _listed(client, f"{_KUEUE}/namespaces/default/workloads")
    queues, then = _listed(client, f"{_KUEUE}/clusterqueues")
    if at != then:
        return [f"not compared: the store moved between the two reads (resourceVersion {at}, then {then})"]
    held: dict[str, dict[tuple[str, str], Quantity]] = collections.defaultdict(
        lambda: collections.defaultdict(lambda: Quantity(0)))
    for wl in workloads:
        conditions = condition_states(wl)
        admission = (wl.get("status") or {}).get("admission")
        if conditions.get("QuotaReserved") != "True" or conditions.get("Finished") == "True" or not admission:
            continue
        for podset in admission.get("podSetAssignments") or []:
            for resource, amount in (podset.get("resourceUsage") or {}).items():
                flavor = podset["flavors"][resource]
                held[admission["clusterQueue"]][(flavor, resource)] += Quantity.parse(amount)
    wrong = []
    for cq in queues:
        name = cq["metadata"]["name"]
        for flavor in (cq.get("status") or {}).get("flavorsReservation") or []:
            for resource in flavor["resources"]:
                shown = Quantity.parse(resource["total"])
                summed = held[name].get((flavor["name"], resource["name"]), Quantity(0))
                if shown != summed:
                    wrong.append(f"{name} {flavor['name']}/{resource['name']}: shows {shown}, workloads hold {summed}")
    return wrong


def capacity_mismatches(client: httpx.Client) -> list[str]:
    """ProvisioningRequests without their workload, and node pools whose count differs from their nodes."""
    wrong = []
    workloads = {wl["metadata"]["name"]: wl for wl in _items(client, f"{_KUEUE}/namespaces/default/workloads")}
    for request in _items(client, "/apis/autoscaling.x-k8s.io/v1/namespaces/default/provisioningrequests"):
        owner = _owner(request)
        if owner.get("kind") == "Workload" and owner["name"] not in workloads:
            wrong.append(f"ProvisioningRequest {request['metadata']['name']}: its Workload {owner['name']} is gone")
    nodes = collections.Counter(n["metadata"]["labels"].get("cloud.google.com/gke-nodepool")
                                for n in _items(client, "/api/v1/nodes"))
    for pool in _items(client, "/apis/flexq.dev/v1alpha1/nodepools"):
        name = pool["metadata"]["name"]
        count = int((pool.get("status") or {}).get("nodeCount") or 0)
        if count != nodes.get(name, 0):
            wrong.append(f"node pool {name}: nodeCount {count}, {nodes.get(name, 0)} Node objects")
    return wrong
