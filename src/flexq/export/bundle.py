"""``flexq export gke``: what a user runs to have, on real GKE, the setup flexq holds.

Three files, read from the server through its Kubernetes API as any client would:

- ``cluster.sh``: the gcloud commands for the cluster and its node pools (:mod:`flexq.export.gcloud`),
  Kueue's install (with the feature gates the objects need), then ``kubectl apply`` of the two files below;
- ``kueue.yaml``: Namespaces, PriorityClasses, WorkloadPriorityClasses, Topologies, ResourceFlavors (their
  ``topologyName`` with them), Cohorts, AdmissionChecks, ProvisioningRequestConfigs, ClusterQueues
  (concurrent-admission policies included), LocalQueues;
- ``jobs.yaml``: ConfigMaps and the jobs not yet finished (RayJobs, RayClusters, batch/v1 Jobs), leaving
  out what a controller made (an owner reference: a RayJob's submitter Job, Workloads, pods).

Each object is cleaned (:func:`flexq.export.cleaning.clean`). Kueue objects keep the version their author
applied them in (``--kueue-version`` to choose one), except that a ClusterQueue with a
``concurrentAdmissionPolicy`` is always written in v1beta2, the only version that holds it. Every file is
rendered before the first is written, so a failure leaves the directory as it was.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import yaml

from flexq.api import KindInfo, convert, resolve
from flexq.client import Client
from flexq.controller import finished
from flexq.errors import FlexqError
from flexq.export.cleaning import clean, last_applied
from flexq.export.gcloud import DEFAULT_POOL, cluster_command, credentials_command, pool_command

__all__ = ["ExportError", "GkeExport", "build", "write"]

SYSTEM_NAMESPACES: Final = frozenset({"default", "kube-system", "kube-public", "kube-node-lease", "kueue-system"})
QUEUE_KINDS: Final = ("namespace", "priorityclass", "workloadpriorityclass", "topology", "resourceflavor", "cohort",
                      "admissioncheck", "provisioningrequestconfig", "clusterqueue", "localqueue")
JOB_KINDS: Final = ("configmap", "rayjob", "raycluster", "jobs.batch")
KUEUE_VERSIONS: Final = ("v1beta1", "v1beta2")
ELASTIC_ANNOTATION: Final = "kueue.x-k8s.io/elastic-job"
GKE_NODE_LABELS: Final = ("cloud.google.com/gce-topology-", "cloud.google.com/gke-", "kubernetes.io/hostname")


class ExportError(FlexqError):
    """The server's state cannot be exported as asked; the message says why and what to pass."""


@dataclass
class GkeExport:
    """The rendered files, by name, and the counts of objects in them."""

    files: dict[str, str] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)


def build(client: Client, *, project: str | None, location: str | None, cluster: str | None,
          kueue_version: str | None = None, include_finished: bool = False) -> GkeExport:
    if kueue_version not in (None, *KUEUE_VERSIONS):
        raise ExportError(f"--kueue-version {kueue_version!r}: expected one of {', '.join(KUEUE_VERSIONS)}")
    originals = _originals(client)
    queues = [o for name in QUEUE_KINDS for o in _exported(client, resolve(name), kueue_version, originals)]
    jobs = [o for name in JOB_KINDS for o in _exported(client, resolve(name), kueue_version, originals)
            if include_finished or finished(o["kind"], o) is None]
    jobs = [_without_status(o) for o in jobs]
    result = GkeExport()
    result.files["cluster.sh"] = _script(client, project, location, cluster, queues, jobs)
    result.files["kueue.yaml"] = _documents(queues, "Kueue's objects")
    result.files["jobs.yaml"] = _documents(jobs, "the jobs and their ConfigMaps")
    for obj in queues + jobs:
        result.counts[obj["kind"]] = result.counts.get(obj["kind"], 0) + 1
    return result


def write(export: GkeExport, out: Path) -> list[Path]:
    """Write the files into ``out`` (made if missing), each replaced whole; return their paths."""
    if out.exists() and not out.is_dir():
        raise ExportError(f"--out {out}: not a directory")
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in export.files.items():
        target = out / name
        handle, temp = tempfile.mkstemp(dir=out, prefix=f".{name}.")
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            stream.write(text)
        if name.endswith(".sh"):
            os.chmod(temp, 0o755)
        os.replace(temp, target)
        written.append(target)
    return written


def _list(client: Client, info: KindInfo) -> list[dict[str, Any]]:
    items = client.request("GET", client.path(info, None)).get("items", [])
    for item in items:  # list items may leave out apiVersion and kind, as the Kubernetes API may
        item.setdefault("apiVersion", info.api_version())
        item.setdefault("kind", info.kind)
    return sorted(items, key=lambda o: (o["metadata"].get("namespace", ""), o["metadata"]["name"]))


def _originals(client: Client) -> dict[str, dict[str, dict[str, Any]]]:
    """Each job's pod templates as it was submitted, by job uid: its Workload keeps them."""
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for workload in _list(client, resolve("workload")):
        for owner in workload["metadata"].get("ownerReferences") or []:
            if owner.get("kind") in ("RayJob", "Job"):
                out[owner["uid"]] = {ps["name"]: ps.get("template") or {}
                                     for ps in workload["spec"].get("podSets") or []}
    return out


def _exported(client: Client, info: KindInfo, kueue_version: str | None,
              originals: dict[str, dict[str, dict[str, Any]]]) -> Iterable[dict[str, Any]]:
    for obj in _list(client, info):
        meta = obj["metadata"]
        if meta.get("ownerReferences"):
            continue
        if info.kind == "Namespace" and meta["name"] in SYSTEM_NAMESPACES:
            continue
        if info.namespaced and meta.get("namespace") in SYSTEM_NAMESPACES - {"default"}:
            continue
        out = clean(obj, originals.get(meta.get("uid", "")))
        if info.group == "kueue.x-k8s.io":
            out = convert(info, out, _kueue_version(obj, out, kueue_version))
        if "status" in obj:
            out["status"] = obj["status"]  # for the finished-job filter; taken off before rendering
        yield out


def _without_status(obj: dict[str, Any]) -> dict[str, Any]:
    obj.pop("status", None)
    return obj


def _kueue_version(stored: dict[str, Any], cleaned: dict[str, Any], wanted: str | None) -> str:
    if (cleaned.get("spec") or {}).get("concurrentAdmissionPolicy") is not None:
        return "v1beta2"
    if wanted is not None:
        return wanted
    applied = str((last_applied(stored) or {}).get("apiVersion", "")).rpartition("/")[2]
    return applied if applied in KUEUE_VERSIONS else "v1beta2"


class _Dumper(yaml.SafeDumper):
    """Multi-line strings (a ConfigMap's files, a runtime env) as literal blocks, as people write them."""


def _text(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value and not any(line != line.rstrip() for line in value.splitlines()) else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _text)


def _documents(objects: list[dict[str, Any]], what: str) -> str:
    head = f"# {what}, exported from flexq by `flexq export gke`. Apply with: kubectl apply -f FILE\n"
    docs = [yaml.dump(_ordered(_without_status(o)), Dumper=_Dumper, sort_keys=False, default_flow_style=False,
                      allow_unicode=True) for o in objects]
    return head + "".join(f"---\n{doc}" for doc in docs)


def _ordered(obj: dict[str, Any]) -> dict[str, Any]:
    """apiVersion, kind, metadata (name, namespace first), then the rest, as manifests are written."""
    meta = obj.get("metadata") or {}
    first = {k: meta[k] for k in ("name", "namespace") if k in meta}
    out: dict[str, Any] = {k: obj[k] for k in ("apiVersion", "kind") if k in obj}
    out["metadata"] = {**first, **{k: v for k, v in meta.items() if k not in first}}
    out.update({k: v for k, v in obj.items() if k not in out})
    return out


def _script(client: Client, project: str | None, location: str | None, cluster: str | None,
            queues: list[dict[str, Any]], jobs: list[dict[str, Any]]) -> str:
    clusters = {c["metadata"]["name"]: c for c in _list(client, resolve("clusters.flexq.dev"))}
    pools = sorted(_list(client, resolve("nodepool")),
                   key=lambda p: (p["metadata"].get("creationTimestamp", ""), p["metadata"]["name"]))
    for pool in pools:  # pools of a capacity file may name a cluster no command made
        clusters.setdefault(pool["spec"]["cluster"], {"metadata": {"name": pool["spec"]["cluster"]}, "spec": {}})
    if not clusters:
        raise ExportError("flexq holds no cluster to export: create one (flexq container clusters create NAME "
                          "...) or start the server with a capacity file")
    if cluster is None:
        if len(clusters) > 1:
            raise ExportError(f"flexq holds {len(clusters)} clusters ({', '.join(sorted(clusters))}): "
                              "pass --cluster NAME")
        cluster = next(iter(clusters))
    if cluster not in clusters:
        raise ExportError(f"--cluster {cluster}: no such cluster (flexq holds {', '.join(sorted(clusters))})")
    spec = clusters[cluster].get("spec") or {}
    own = [p for p in pools if p["spec"]["cluster"] == cluster]
    where = location or spec.get("location") or next((p["spec"]["location"] for p in own
                                                        if p["spec"].get("location")), None)
    if not where:
        raise ExportError(f"cluster {cluster} has no location: pass --location ZONE (for example us-east5-b)")
    default = next((p for p in own if p["metadata"]["name"] == DEFAULT_POOL), None)
    if default is not None and not spec.get("machineType"):
        spec = {**spec, "machineType": default["spec"]["machineType"],
                "numNodes": default["spec"].get("initialNodeCount")}
    who = project or spec.get("project")
    lines = ["#!/usr/bin/env bash",
             f"# Cluster {cluster}, its node pools and its queues on GKE, exported from flexq by `flexq export gke`.",
             "# Run it from this directory (kubectl applies kueue.yaml and jobs.yaml next to it).",
             "set -euo pipefail",
             'cd "$(dirname "$0")"',
             f'PROJECT_ID="${{PROJECT_ID:-{who}}}"' if who else
             'PROJECT_ID="${PROJECT_ID:-$(gcloud config get project)}"',
             "",
             cluster_command({"metadata": {"name": cluster}, "spec": spec}, where), "",
             credentials_command(cluster, where), ""]
    lines += [pool_command(p, where) + "\n" for p in own if p["metadata"]["name"] != DEFAULT_POOL]
    lines += _topology_notes(queues) + _default_notes(queues)
    lines += [_helm(queues, jobs), "",
              "kubectl wait deployment/kueue-controller-manager --namespace kueue-system --for=condition=Available "
              "--timeout=300s",
              "kubectl apply -f kueue.yaml",
              "kubectl apply -f jobs.yaml" if jobs else "# no jobs to submit (jobs.yaml is empty)"]
    return "\n".join(lines) + "\n"


def _topology_notes(queues: list[dict[str, Any]]) -> list[str]:
    """A comment for each Topology: GKE labels its nodes with their place itself (flexq's emulated nodes carry the same
    labels); a level of another label is the user's to put on the nodes."""
    lines = []
    for topology in (q for q in queues if q["kind"] == "Topology"):
        labels = [str(level.get("nodeLabel")) for level in (topology.get("spec") or {}).get("levels") or []]
        own = [label for label in labels if not label.startswith(GKE_NODE_LABELS)]
        lines.append(f"# Topology {topology['metadata']['name']} places pods by the node labels {', '.join(labels)}: "
                     "GKE sets " + ("them" if not own else "its own") + " on each node (compactly placed capacity, "
                     "as from a reservation, carries the topology ones)")
        if own:
            lines.append(f"# label the nodes with {', '.join(own)} yourself: kubectl label nodes NODE LABEL=VALUE")
    return [*lines, ""] if lines else []


def _default_notes(queues: list[dict[str, Any]]) -> list[str]:
    """A comment for each ClusterQueue with ``spec.workloadDefaults`` (KEP-7029): a proposal of Kueue's, not in its
    releases yet, whose API server drops the field."""
    named = [q["metadata"]["name"] for q in queues
             if q["kind"] == "ClusterQueue" and (q.get("spec") or {}).get("workloadDefaults")]
    if not named:
        return []
    return [f"# ClusterQueue {', '.join(named)}: spec.workloadDefaults (a default maximum execution time, KEP-7029) is "
            "not in Kueue's releases yet, whose API server drops it; label the jobs with "
            "kueue.x-k8s.io/max-exec-time-seconds instead", ""]


def _helm(queues: list[dict[str, Any]], jobs: list[dict[str, Any]]) -> str:
    gates = []
    if any(ELASTIC_ANNOTATION in (j["metadata"].get("annotations") or {}) for j in jobs):
        gates.append("ElasticJobsViaWorkloadSlices")
    if any((q.get("spec") or {}).get("concurrentAdmissionPolicy") for q in queues if q["kind"] == "ClusterQueue"):
        gates.append("ConcurrentAdmission")
    words = ["helm install kueue oci://registry.k8s.io/kueue/charts/kueue", "--namespace kueue-system",
             "--create-namespace"]
    for i, gate in enumerate(gates):
        words += [f'--set "controllerManager.featureGates[{i}].name={gate}"',
                  f'--set "controllerManager.featureGates[{i}].enabled=true"']
    return " \\\n  ".join(words)
