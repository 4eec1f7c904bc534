"""The registry of kinds flexq serves: group, versions, names, scope, printer columns and schema.

This is the one table the server's discovery, the CLI's name resolution, validation and table
printing all read, so a kind added here is served everywhere.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final, cast

from flexq.errors import FlexqError

if TYPE_CHECKING:
    from pydantic import BaseModel

__all__ = ["KINDS", "Column", "KindInfo", "UnknownKind", "by_gvk", "by_resource", "resolve"]

KUEUE: Final = "kueue.x-k8s.io"


@dataclass(frozen=True, slots=True)
class Column:
    """A printer column, as a CRD's ``additionalPrinterColumns`` entry."""

    name: str
    json_path: str
    type: str = "string"
    priority: int = 0
    description: str = ""
    format: str = ""


@dataclass(frozen=True, slots=True)
class KindInfo:
    group: str
    versions: tuple[str, ...]
    kind: str
    plural: str
    singular: str
    namespaced: bool
    schema: str
    """The pydantic model of the kind's objects, as ``module.Class`` under :mod:`flexq.api.models`: loaded when
    first read (:attr:`model`), so that what only names kinds (the CLI) does not build every schema."""
    short_names: tuple[str, ...] = ()
    columns: tuple[Column, ...] = ()
    status_subresource: bool = True
    categories: tuple[str, ...] = ()
    verbs: tuple[str, ...] = field(
        default=("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")
    )

    @property
    def model(self) -> type[BaseModel]:
        """The pydantic model the kind's objects validate against."""
        module, _, name = self.schema.rpartition(".")
        return cast("type[BaseModel]", getattr(importlib.import_module(f"flexq.api.models.{module}"), name))

    @property
    def storage_version(self) -> str:
        return self.versions[0]

    def api_version(self, version: str | None = None) -> str:
        v = version or self.storage_version
        return f"{self.group}/{v}" if self.group else v

    @property
    def list_kind(self) -> str:
        return self.kind + "List"

    @property
    def names(self) -> tuple[str, ...]:
        """Every name a user may type for this kind, lower case."""
        return (self.plural, self.singular, self.kind.lower(), *self.short_names)


_AGE: Final = Column("Age", ".metadata.creationTimestamp", "date")


_ACTIVE: Final = (
    Column("Active", ".status.conditions[?(@.type=='Active')].status",
           description="Whether the object can be used (Kueue's Active condition)"),
    Column("Reason", ".status.conditions[?(@.type=='Active')].reason",
           description="Why the object is, or is not, active"),
)


def _wl_cond(name: str, cond: str) -> Column:
    return Column(name, f".status.conditions[?(@.type=='{cond}')].status")


KINDS: Final[tuple[KindInfo, ...]] = (
    KindInfo(KUEUE, ("v1beta2", "v1beta1"), "ResourceFlavor", "resourceflavors", "resourceflavor",
             False, "kueue.ResourceFlavor", ("flavor", "flavors", "rf"), (_AGE,), status_subresource=False,
             categories=("kueue",)),
    KindInfo(KUEUE, ("v1beta2", "v1beta1"), "Topology", "topologies", "topology", False, "kueue.Topology", ("topo",),
             (_AGE,), status_subresource=False, categories=("kueue",)),
    KindInfo(KUEUE, ("v1beta2", "v1beta1"), "ClusterQueue", "clusterqueues", "clusterqueue", False,
             "kueue.ClusterQueue", ("cq",), (
                 Column("Cohort", ".spec.cohortName", description="cohort that this ClusterQueue belongs to"),
                 Column("Strategy", ".spec.queueingStrategy", priority=1,
                        description="The queueing strategy used to prioritize workloads"),
                 Column("Pending Workloads", ".status.pendingWorkloads", "integer",
                        description="Number of pending workloads"),
                 Column("Admitted Workloads", ".status.admittedWorkloads", "integer", priority=1,
                        description="Number of admitted workloads that haven't finished yet"),
                 *_ACTIVE,
             ), categories=("kueue",)),
    KindInfo(KUEUE, ("v1beta2", "v1beta1"), "Cohort", "cohorts", "cohort", False, "kueue.Cohort",
             ("co",), (_AGE,), categories=("kueue",)),
    KindInfo(KUEUE, ("v1beta2", "v1beta1"), "LocalQueue", "localqueues", "localqueue", True,
             "kueue.LocalQueue", ("queue", "queues", "lq"), (
                 Column("ClusterQueue", ".spec.clusterQueue", description="Backing ClusterQueue"),
                 Column("Pending Workloads", ".status.pendingWorkloads", "integer",
                        description="Number of pending workloads"),
                 Column("Admitted Workloads", ".status.admittedWorkloads", "integer",
                        description="Number of admitted workloads that haven't finished yet."),
                 *_ACTIVE,
             ), categories=("kueue",)),
    KindInfo(KUEUE, ("v1beta2", "v1beta1"), "AdmissionCheck", "admissionchecks", "admissioncheck", False,
             "kueue.AdmissionCheck", ("ac",), (
                 Column("Controller", ".spec.controllerName"),
                 *_ACTIVE,
                 _AGE,
             ), categories=("kueue",)),
    KindInfo(KUEUE, ("v1beta2", "v1beta1"), "ProvisioningRequestConfig", "provisioningrequestconfigs",
             "provisioningrequestconfig", False, "kueue.ProvisioningRequestConfig", ("prc",), (
                 Column("Class", ".spec.provisioningClassName"),
                 _AGE,
             ), status_subresource=False, categories=("kueue",)),
    KindInfo(KUEUE, ("v1beta2", "v1beta1"), "WorkloadPriorityClass", "workloadpriorityclasses",
             "workloadpriorityclass", False, "kueue.WorkloadPriorityClass", ("wpc",), (
                 Column("Value", ".value", "integer",
                        description="Value of workloadPriorityClass's Priority"),
                 _AGE,
             ), status_subresource=False, categories=("kueue",)),
    KindInfo("scheduling.k8s.io", ("v1",), "PriorityClass", "priorityclasses", "priorityclass", False,
             "core.PriorityClass", ("pc",), (
                 Column("Value", ".value", "integer"),
                 Column("Global-Default", ".globalDefault", "boolean"),
                 Column("Preemption Policy", ".preemptionPolicy"),
                 _AGE,
             ), status_subresource=False),
    KindInfo(KUEUE, ("v1beta2", "v1beta1"), "Workload", "workloads", "workload", True, "kueue.Workload",
             ("wl", "kwl", "kueueworkload", "kueueworkloads"), (
                 Column("Queue", ".spec.queueName", description="Name of the queue this workload was submitted to"),
                 Column("Reserved in", ".status.admission.clusterQueue",
                        description="Name of the ClusterQueue where the workload is reserving quota"),
                 _wl_cond("Admitted", "Admitted"),
                 _wl_cond("Finished", "Finished"),
                 Column("Flavors", "#wl-flavors", description="Flavors of each pod set (pod set=flavor)"),
                 Column("ETA", "#wl-eta",
                        description="When the workload is expected to start (~: an estimate; <: at the latest)"),
                 Column("Reason", "#wl-reason", description="Why the workload is not admitted yet"),
                 _AGE,
             ), categories=("kueue",)),
    KindInfo("ray.io", ("v1",), "RayJob", "rayjobs", "rayjob", True, "ray.RayJob", (), (
        Column("Job Status", ".status.jobStatus"),
        Column("Deployment Status", ".status.jobDeploymentStatus"),
        Column("Ray Cluster Name", ".status.rayClusterName"),
        Column("Start Time", ".status.startTime", "string"),
        Column("End Time", ".status.endTime", "string"),
        _AGE,
    ), categories=("all",)),
    KindInfo("ray.io", ("v1",), "RayCluster", "rayclusters", "raycluster", True, "ray.RayCluster", (), (
        Column("Desired Workers", ".status.desiredWorkerReplicas", "integer"),
        Column("Available Workers", ".status.availableWorkerReplicas", "integer"),
        Column("CPUs", ".status.desiredCPU"),
        Column("Memory", ".status.desiredMemory"),
        Column("TPUs", ".status.desiredTPU"),
        Column("Status", ".status.state"),
        _AGE,
    ), categories=("all",)),
    KindInfo("batch", ("v1",), "Job", "jobs", "job", True, "core.Job", (), (
        Column("Status", "#job-status"),
        Column("Completions", "#completions"),
        Column("Duration", "#duration"),
        _AGE,
    ), categories=("all",)),
    KindInfo("", ("v1",), "ConfigMap", "configmaps", "configmap", True, "core.ConfigMap", ("cm",), (
        Column("Data", "#data", "integer"),
        _AGE,
    ), status_subresource=False),
    KindInfo("", ("v1",), "Namespace", "namespaces", "namespace", False, "core.Namespace", ("ns",), (
        Column("Status", ".status.phase"),
        _AGE,
    ), verbs=("create", "delete", "get", "list", "patch", "update", "watch")),
    KindInfo("", ("v1",), "Pod", "pods", "pod", True, "core.Pod", ("po",), (
        Column("Ready", "#pod-ready"),
        Column("Status", "#pod-status"),
        Column("Restarts", "#pod-restarts", "integer"),
        _AGE,
        Column("IP", ".status.podIP", priority=1),
        Column("Node", ".spec.nodeName", priority=1),
    ), categories=("all",)),
    KindInfo("", ("v1",), "Service", "services", "service", True, "core.Service", ("svc",), (
        Column("Type", ".spec.type"),
        Column("Cluster-IP", ".spec.clusterIP"),
        Column("External-IP", "#svc-external"),
        Column("Port(s)", "#svc-ports"),
        _AGE,
    ), categories=("all",)),
    KindInfo("", ("v1",), "Node", "nodes", "node", False, "core.Node", ("no",), (
        Column("Status", "#node-status"),
        Column("Roles", "#node-roles"),
        _AGE,
        Column("Version", ".status.nodeInfo.kubeletVersion"),
        Column("Pool", "#node-pool", priority=1),
    )),
    KindInfo("", ("v1",), "Event", "events", "event", True, "core.Event", ("ev",), (
        Column("Last Seen", ".lastTimestamp", "date"),
        Column("Type", ".type"),
        Column("Reason", ".reason"),
        Column("Object", "#involved"),
        Column("Message", ".message"),
    ), status_subresource=False),
    KindInfo("flexq.dev", ("v1alpha1",), "Cluster", "clusters", "cluster", False, "flexq.Cluster", (), (
        Column("Location", ".spec.location"),
        Column("Machine Type", ".spec.machineType"),
        Column("Status", ".status.status"),
        _AGE,
    )),
    KindInfo("flexq.dev", ("v1alpha1",), "NodePool", "nodepools", "nodepool", False, "flexq.NodePool", ("np",), (
        Column("Cluster", ".spec.cluster"),
        Column("Machine Type", ".spec.machineType"),
        Column("Topology", ".spec.tpuTopology"),
        Column("Flex Start", ".spec.flexStart"),
        Column("Queued", ".spec.queuedProvisioning"),
        Column("Min", ".spec.autoscaling.minNodeCount", "integer"),
        Column("Max", ".spec.autoscaling.maxNodeCount", "integer"),
        Column("Ray Address", ".spec.rayAddress", priority=1),
        Column("Nodes", ".status.nodeCount", "integer"),
        _AGE,
    )),
    KindInfo("autoscaling.x-k8s.io", ("v1",), "ProvisioningRequest", "provisioningrequests",
             "provisioningrequest", True, "core.ProvisioningRequest", ("provreq", "provreqs"), (
                 Column("Class", ".spec.provisioningClassName"),
                 Column("Accepted", ".status.conditions[?(@.type=='Accepted')].status"),
                 Column("Provisioned", ".status.conditions[?(@.type=='Provisioned')].status"),
                 Column("Failed", ".status.conditions[?(@.type=='Failed')].status", priority=1),
                 _AGE,
             )),
)


class UnknownKind(FlexqError, LookupError):
    """No kind of that name, group or version is served."""

    def __init__(self, what: str) -> None:
        self.what = what
        super().__init__(what)


_BY_GK: Final = {(k.group, k.kind): k for k in KINDS}
_BY_GR: Final = {(k.group, k.plural): k for k in KINDS}


def by_gvk(api_version: str, kind: str) -> KindInfo:
    """The kind named by an object's ``apiVersion`` and ``kind``; raise :class:`UnknownKind`."""
    group, _, version = api_version.rpartition("/")
    info = _BY_GK.get((group, kind))
    if info is None:
        raise UnknownKind(f'no kind "{kind}" is registered for version "{api_version}"')
    if version not in info.versions:
        served = ", ".join(info.api_version(v) for v in info.versions)
        raise UnknownKind(f'no kind "{kind}" is registered for version "{api_version}" (served: {served})')
    return info


def by_resource(group: str, plural: str) -> KindInfo | None:
    return _BY_GR.get((group, plural))


_RESOLVED: dict[str, KindInfo] = {}
"""The names :func:`resolve` was asked, lower case, and the kind each means: the controller resolves a kind for
every object it writes, and the search is a walk over every kind's names. Finite, as the names that resolve are
(each kind's names, with a prefix of its group)."""


def resolve(name: str) -> KindInfo:
    """The kind a user means by ``name``: ``cq``, ``clusterqueues``, ``rayjob``, ``jobs.batch``."""
    lowered = name.lower()
    known = _RESOLVED.get(lowered)
    if known is not None:
        return known
    info = _search(lowered)
    if info is None:
        raise UnknownKind(f'the server doesn\'t have a resource type "{name}"')
    _RESOLVED[lowered] = info
    return info


def _search(wanted: str) -> KindInfo | None:
    group: str | None = None
    if "." in wanted:
        wanted, _, group = wanted.partition(".")
    for info in KINDS:
        if wanted in info.names and (group is None or info.group == group or info.group.startswith(group)):
            return info
    return None
