"""Kueue's Configuration file (``config.kueue.x-k8s.io/v1beta1`` and ``v1beta2``), as Kueue's manager reads it.

``flexq server --kueue-config FILE`` and a scenario's ``spec.kueueConfig`` (the Configuration inline, or a path
relative to the scenario) take the same document. What flexq does with each field:

- served: ``waitForPodsReady`` (all of it), ``fairSharing``, ``admissionFairSharing`` (all of it),
  ``resources.excludeResourcePrefixes``, ``resources.transformations``, ``integrations.frameworks``, ``featureGates``
  (the gates whose behaviour flexq has, at the values it has);
  ``manageJobsWithoutQueueName: false`` (Kueue's default, and flexq's behaviour);
- accepted with a warning naming the field, where it only configures Kueue's manager process (ports, leader
  election, certificates, client rate limits, ...) or where Kueue's behaviour with it is what flexq does anyway;
- refused, naming the field, where flexq would silently behave otherwise (admission fair sharing, MultiKueue,
  object retention, ``quotaCheckStrategy``, DRA mappings, external frameworks, an unknown field or gate).

Defaults are Kueue v0.19's: with no file, waitForPodsReady is on (timeout 30 min, no blocking, recovery timeout =
timeout, requeue from the eviction with backoff 60 s doubling up to 3600 s, no limit) and every framework flexq
serves is managed. In a v1beta2 file the same; in a v1beta1 file waitForPodsReady is off unless ``enable: true``
(then timeout 5 min and ``blockAdmission`` true unless set), as Kueue's v1beta1 defaulting does. A file that
lists no ``integrations.frameworks`` manages ``batch/job`` only, as Kueue's.

Fair sharing is off unless the file has ``fairSharing``: in v1beta1 with ``enable: true`` (the strategies default
to ``[LessThanOrEqualToFinalShare, LessThanInitialShare]``), in v1beta2 by its presence, with
``preemptionStrategies`` required. The strategies must be one of Kueue's valid lists: either one alone, or both
in that order.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any, Final

from flexq.api.documents import Document, load_documents
from flexq.api.object_errors import FieldError, InputError, InvalidObject
from flexq.api.quantity import QuantityError, parse_quantity
from flexq.durations import DurationError, parse_duration

__all__ = ["ALPHA_GATES", "DEFAULT_KUEUE_CONFIG", "FAIR_SHARING_STRATEGIES", "FEATURE_GATES", "FRAMEWORKS",
           "AdmissionFairSharing", "KueueConfig", "PodsReadyConfig", "ResourceConfig", "Transformation",
           "kueue_config_of", "load_kueue_config", "parse_kueue_config"]

GROUP: Final = "config.kueue.x-k8s.io"
VERSIONS: Final = ("v1beta1", "v1beta2")

FRAMEWORKS: Final[Mapping[str, str]] = {"batch/job": "Job", "ray.io/rayjob": "RayJob",
                                        "ray.io/raycluster": "RayCluster", "pod": "Pod"}
"""The integrations flexq serves: Kueue's framework name -> the job kind."""
_KUEUE_FRAMEWORKS: Final = frozenset({
    "kubeflow.org/mpijob", "ray.io/rayservice", "jobset.x-k8s.io/jobset", "kubeflow.org/paddlejob",
    "kubeflow.org/pytorchjob", "kubeflow.org/tfjob", "kubeflow.org/xgboostjob", "kubeflow.org/jaxjob",
    "trainer.kubeflow.org/trainjob", "workload.codeflare.dev/appwrapper", "sparkoperator.k8s.io/sparkapplication",
    "deployment", "statefulset", "leaderworkerset.x-k8s.io/leaderworkerset"})
"""Kueue's other frameworks: their kinds are not served by flexq (their objects are refused), so listing them
changes nothing here: accepted with a warning."""

FEATURE_GATES: Final[Mapping[str, bool]] = {
    # Kueue v0.19's gates and their defaults (pkg/features/kube_features.go).
    "PartialAdmission": True, "FlavorFungibility": True, "VisibilityOnDemand": True,
    "DisableWaitForPodsReady": False, "PrioritySortingWithinCohort": True, "FairSharingPreemptWithinNominal": True,
    "FairSharingPrioritizeNonBorrowing": True, "MultiKueue": True, "TopologyAwareScheduling": True,
    "LocalQueueMetrics": True, "TASProfileMixed": True, "HierarchicalCohorts": True, "AdmissionFairSharing": True,
    "ObjectRetentionPolicies": True, "TASFailedNodeReplacement": True, "ElasticJobsViaWorkloadSlices": True,
    "ElasticJobsViaWorkloadSlicesWithTAS": False, "TASFailedNodeReplacementFailFast": True,
    "TASReplaceNodeOnPodTermination": True, "SkipReassignmentForPodOwnedWorkloads": True,
    "TASReplaceNodeDueToNotReadyOverFixedTime": False, "ManagedJobsNamespaceSelectorAlwaysRespected": True,
    "TASBalancedPlacement": False, "TASAssignmentsEncodingByHostnamePrefix": True, "KueueDRAIntegration": True,
    "KueueDRAIntegrationExtendedResource": True, "KueueDRARejectWorkloadsWhenDRADisabled": True,
    "KueueDRAIntegrationPartitionableDevices": True, "KueueDRAIntegrationConsumableCapacity": False,
    "MultiKueueAdaptersForCustomJobs": True, "WorkloadRequestUseMergePatch": False,
    "MultiKueueAllowInsecureKubeconfigs": False, "MultiKueueKubeConfigPathValidation": False, "ReclaimablePods": True,
    "PropagateBatchJobLabelsToWorkload": True, "MultiKueueClusterProfile": False, "FailureRecoveryPolicy": False,
    "SkipFinalizersForPodsSuspendedByParent": True, "MultiKueueWaitForWorkloadAdmitted": True,
    "MultiKueueRedoAdmissionOnEvictionInWorker": True, "TLSOptions": True, "RemoveFinalizersWithStrictPatch": True,
    "TASReplaceNodeOnNodeTaints": True, "AssignQueueLabelsForPods": True, "TASMultiLayerTopology": True,
    "SchedulingEquivalenceHashing": True, "SchedulerLongRequeueInterval": False,
    "SchedulerTimestampPreemptionBuffer": False, "CustomMetricLabels": False, "SparkApplicationIntegration": False,
    "MultiKueueOrchestratedPreemption": False, "PriorityBoost": False, "AdmissionGatedBy": True,
    "ShortWorkloadNames": False, "FastQuotaReleaseInPodIntegration": False,
    "RejectUpdatesToCQWithInvalidOnFlavors": False, "FinishOrphanedWorkloads": True,
    "MultiKueueIncrementalDispatcherConfig": True, "MultiKueueIncrementalDispatcherRespectConfigOrder": True,
    "ConcurrentAdmission": False, "QuotaCheckStrategy": True, "MetricForWorkloadCreationLatency": True,
    "TASRespectNodeAffinityPreferred": False, "MultiKueueManagerQuotaAutomation": False,
    "WorkloadIdentifierAnnotations": True, "WorkloadPriorityClassDefaulting": False, "MetricsForCohorts": True,
    "CleanupProvisioningRequestsOnEviction": True, "TASHandleOverlappingFlavors": True,
    "UnadmittedWorkloadsObservability": False, "TASRecomputeAssignmentWithinSchedulingCycle": True,
    "UnadmittedWorkloadsExplicitStatus": False, "DeferRayServiceFinalizationForRedisCleanup": True,
    "TASCacheNodeMatchResults": True, "TASCachingRemainingResources": True, "TASCacheTopologyTree": False,
    "SchedulerLibraryIntegration": False, "VectorizedResourceRequests": True,
    "WorkloadValidateResourcesAreNonNegative": True, "TASValidateWorkloadSliceSize": True,
    "WorkloadValidationForPodSetMetadata": True, "PrioritizePreemptorWorkloads": False, "LWSImmutableGroupSize": True,
    "FlavorFungibilityPreserveScanProgress": True, "SkipAncestorCheckForDeletedWorkloads": True,
    "MultiKueueRemoteSpecSync": True, "RecomputeAssignmentUponPreemptionTargetsOverlap": False,
    "PodIntegrationValidateGroupOwner": True, "ValidateRayAndSparkJobUpdates": True,
}
"""Kueue v0.19's feature gates and their defaults."""

ALPHA_GATES: Final[Mapping[str, bool]] = {
    # KEP-7029 (kubernetes-sigs/kueue#7029, proposed, not in a release): a ClusterQueue's default maximum execution
    # time, ``spec.workloadDefaults.maximumExecutionTimeSeconds``, under the gate its implementation proposes.
    "ClusterQueueMaxExecutionTime": False,
}
"""Gates of features Kueue has proposed but not released, which flexq serves as alphas under the proposals' names
and defaults (off)."""

_SERVED_GATES: Final[Mapping[str, frozenset[bool]]] = {
    "DisableWaitForPodsReady": frozenset({True, False}),  # honoured: true turns waitForPodsReady off
    "ConcurrentAdmission": frozenset({True}),  # flexq serves ClusterQueues' concurrentAdmissionPolicy
    "HierarchicalCohorts": frozenset({True}),
    "FlavorFungibility": frozenset({True}),
    "ElasticJobsViaWorkloadSlices": frozenset({True}),
    "VisibilityOnDemand": frozenset({True}),
    "TopologyAwareScheduling": frozenset({True}),  # Topology objects and topology-aware flavors are served
    "TASProfileMixed": frozenset({True}),  # unconstrained pod sets placed LeastFreeCapacity
    "AdmissionFairSharing": frozenset({True, False}),  # honoured: false turns admissionFairSharing off
    "FairSharingPreemptWithinNominal": frozenset({True}),  # fair sharing's preemption within nominal quota
    "FairSharingPrioritizeNonBorrowing": frozenset({True}),  # its cycle order: not borrowing first
    "TASFailedNodeReplacement": frozenset({True, False}),  # honoured: false evicts at once on a lost node
    # honoured: false keeps a workload with no replacement at once and tries again (:mod:`flexq.capacity.nodeloss`)
    "TASFailedNodeReplacementFailFast": frozenset({True, False}),
    # honoured: when a NotReady or tainted node counts as failed (:mod:`flexq.capacity.nodehealth`)
    "TASReplaceNodeOnPodTermination": frozenset({True, False}),
    "TASReplaceNodeOnNodeTaints": frozenset({True, False}),
    "TASReplaceNodeDueToNotReadyOverFixedTime": frozenset({True, False}),
    "TASBalancedPlacement": frozenset({True, False}),  # honoured: a preferred request spread evenly
    # honoured: a head whose placement an earlier one of the cycle took is assigned again (off: skipped)
    "TASRecomputeAssignmentWithinSchedulingCycle": frozenset({True, False}),
    "TASMultiLayerTopology": frozenset({True}),  # podset-slice-required-topology-constraints are placed
    "SkipReassignmentForPodOwnedWorkloads": frozenset({True}),  # a lost node's plain Pod is not moved
    "PartialAdmission": frozenset({True}),  # kueue.x-k8s.io/job-min-parallelism is honoured
}
"""The gates whose behaviour flexq has, at the values where it has it; any other gate or value is refused."""

FAIR_SHARING_STRATEGIES: Final = ("LessThanOrEqualToFinalShare", "LessThanInitialShare")
"""Kueue's fair-sharing preemption strategies, in its default order."""
_VALID_STRATEGY_LISTS: Final = (("LessThanOrEqualToFinalShare",), ("LessThanInitialShare",), FAIR_SHARING_STRATEGIES)
"""The strategy lists Kueue's validation accepts."""

_MANAGER_FIELDS: Final = ("webhook", "leaderElection", "metrics", "health", "pprofBindAddress", "controller", "tls",
                          "internalCertManagement", "clientConnection", "visibilityServer", "namespace")
"""Fields that configure Kueue's manager process (its ports, certificates, leader election, client): flexq serves
its own, so these change nothing; accepted with a warning."""
_REFUSED_FIELDS: Final[Mapping[str, str]] = {
    "multiKueue": "MultiKueue is not implemented by flexq",
    "objectRetentionPolicies": "flexq does not delete finished or deactivated Workloads by itself",
    "queueVisibility": "removed from Kueue (the visibility API replaced it)",
}


@dataclass(frozen=True, slots=True)
class PodsReadyConfig:
    """Kueue's ``waitForPodsReady``: an admitted workload whose pods are not all ready within ``timeout`` seconds
    is evicted (``PodsReadyTimeout``) and requeued after ``base * 2^(n-1)`` seconds (at most ``max_backoff``), the
    n-th time; past ``limit`` requeues (None: never) it is deactivated (``RequeuingLimitExceeded``)."""

    timeout: float = 1800.0
    block_admission: bool = False
    recovery_timeout: float | None = 1800.0
    """How long a running workload whose pods stopped being ready may take to recover (None: no limit)."""
    timestamp: str = "Eviction"
    """What orders a requeued workload in its queue: ``Eviction`` (when it was evicted) or ``Creation``."""
    base: int = 60
    max_backoff: int = 3600
    limit: int | None = None

    def backoff(self, count: int) -> float:
        """The delay before the ``count``-th requeue (Kueue's ``base * 2^(count-1)``, capped; without its jitter)."""
        return float(min(self.base * 2 ** max(count - 1, 0), self.max_backoff))


@dataclass(frozen=True, slots=True)
class AdmissionFairSharing:
    """Kueue's ``admissionFairSharing``: each LocalQueue's admitted usage is sampled every ``sampling`` seconds into a
    decaying sum (halved every ``half_life`` seconds; 0: only the last sample counts), and a ClusterQueue whose
    ``admissionScope.admissionMode`` is ``UsageBasedAdmissionFairSharing`` tries first the workloads of the
    LocalQueue with the least of it (resources weighted by ``weights``, default 1, divided by the LocalQueue's
    ``fairSharing.weight``)."""

    half_life: float = 0.0
    sampling: float = 300.0
    weights: Mapping[str, float] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Transformation:
    """One of Kueue's ``resources.transformations``: each unit of ``input`` counts as ``outputs``; the input is kept
    (``Retain``) or dropped (``Replace``); ``multiply_by`` scales the outputs by another requested resource."""

    input: str
    replace: bool
    outputs: tuple[tuple[str, Fraction], ...]
    multiply_by: str = ""


@dataclass(frozen=True, slots=True)
class ResourceConfig:
    """Kueue's ``resources``: what a pod's requests count as against quota."""

    exclude_prefixes: tuple[str, ...] = ()
    transformations: tuple[Transformation, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.exclude_prefixes or self.transformations)

    def apply(self, requests: Mapping[str, int]) -> dict[str, int]:
        """A pod's requests (thousandths) as Kueue counts them: excluded prefixes dropped, then transformed (Kueue's
        ``dropExcludedResources`` then ``applyResourceTransformations``: outputs summed apart from what is retained,
        a negative total output counted as 0)."""
        kept = {name: amount for name, amount in requests.items()
                if not any(name.startswith(prefix) for prefix in self.exclude_prefixes)}
        by_input = {t.input: t for t in self.transformations}
        if not any(name in by_input for name in kept):
            return kept
        retained: dict[str, int] = {}
        generated: dict[str, Fraction] = {}
        for name, amount in kept.items():
            rule = by_input.get(name)
            if rule is None:
                retained[name] = amount
                continue
            base = Fraction(amount, 1000)
            if rule.multiply_by and rule.multiply_by in kept:
                base *= Fraction(kept[rule.multiply_by], 1000)
            for output, factor in rule.outputs:
                generated[output] = generated.get(output, Fraction(0)) + base * factor
            if not rule.replace:
                retained[name] = amount
        for output, total in generated.items():
            retained[output] = retained.get(output, 0) + max(math.ceil(total * 1000), 0)
        return retained


@dataclass(frozen=True, slots=True)
class KueueConfig:
    """What flexq takes from a Kueue Configuration (or, without one, Kueue v0.19's defaults)."""

    pods_ready: PodsReadyConfig | None = field(default_factory=PodsReadyConfig)
    """waitForPodsReady (None: off)."""
    resources: ResourceConfig = field(default_factory=ResourceConfig)
    frameworks: frozenset[str] = frozenset(FRAMEWORKS)
    """The integrations managed (Kueue's framework names)."""
    feature_gates: Mapping[str, bool] = field(default_factory=dict)
    admission_fair_sharing: AdmissionFairSharing | None = None
    """admissionFairSharing (None: off, Kueue's default)."""
    warnings: tuple[str, ...] = ()
    """The fields accepted that change nothing in flexq, each named with why."""
    source: str = ""
    fair_sharing: tuple[str, ...] | None = None
    """Fair sharing's preemption strategies, in order (None: fair sharing off, Kueue's default)."""

    @property
    def replace_failed_nodes(self) -> bool:
        """Kueue's ``TASFailedNodeReplacement`` (on by default): a lost node's pods of a topology-aware workload are
        given a replacement node, where there is one, rather than the workload being evicted."""
        return self.feature_gates.get("TASFailedNodeReplacement", FEATURE_GATES["TASFailedNodeReplacement"])

    def gate(self, name: str) -> bool:
        """A feature gate's value: the Configuration's, else Kueue v0.19's default."""
        return self.feature_gates.get(name, FEATURE_GATES[name] if name in FEATURE_GATES else ALPHA_GATES[name])

    def manages(self, kind: str) -> bool:
        """Whether jobs of ``kind`` (Job, RayJob, RayCluster, Pod) are managed (their framework is enabled)."""
        return any(FRAMEWORKS[name] == kind for name in self.frameworks if name in FRAMEWORKS)

    def framework_of(self, kind: str) -> str:
        return next(name for name, of in FRAMEWORKS.items() if of == kind)


DEFAULT_KUEUE_CONFIG: Final = KueueConfig()


def load_kueue_config(path: Path) -> KueueConfig:
    """Read and check a Configuration file; raises :class:`InputError` or :class:`InvalidObject`."""
    source = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(source, "no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(source, f"cannot read: {exc}") from None
    return parse_kueue_config(text, source)


def parse_kueue_config(text: str, source: str) -> KueueConfig:
    """The Configuration in ``text`` (from ``source``, for messages)."""
    docs = load_documents(text, source)
    if len(docs) != 1:
        raise InputError(source, f"expected one Configuration document, found {len(docs)}")
    return kueue_config_of(docs[0])


def kueue_config_of(doc: Document, base: str = "") -> KueueConfig:
    """The Configuration at ``base`` in ``doc`` (the whole document where ``base`` is empty; a scenario's
    ``spec.kueueConfig``); every problem is reported at once, with its field path and line."""
    obj: Any = doc.obj
    for part in base.split(".") if base else ():
        obj = obj.get(part) if isinstance(obj, dict) else None
    return _Reader(doc, base).read(obj)


class _Reader:
    def __init__(self, doc: Document, base: str) -> None:
        self.doc = doc
        self.base = base
        self.errors: list[FieldError] = []
        self.warnings: list[str] = []

    def _path(self, path: str) -> str:
        return f"{self.base}.{path}" if self.base else path

    def fail(self, path: str, message: str) -> None:
        full = self._path(path)
        self.errors.append(FieldError(full, message, self.doc.line_of(full)))

    def warn(self, path: str, message: str) -> None:
        self.warnings.append(f"{self._path(path)}: {message}")

    def read(self, obj: Any) -> KueueConfig:
        if not isinstance(obj, dict):
            self.fail("", "must be an object (a Kueue Configuration)")
            raise self._invalid()
        version = self._header(obj)
        pods_ready: PodsReadyConfig | None = None
        resources = ResourceConfig()
        frameworks = frozenset({"batch/job"})
        gates: dict[str, bool] = {}
        fair: tuple[str, ...] | None = None
        for key, value in obj.items():
            if key in ("apiVersion", "kind"):
                continue
            if key in ("waitForPodsReady", "admissionFairSharing"):
                continue  # read below, after the feature gates that may turn them off
            if key in _MANAGER_FIELDS:
                self.warn(key, "configures Kueue's manager process; flexq serves its own: no effect")
            elif key in _REFUSED_FIELDS:
                self.fail(key, f"not supported: {_REFUSED_FIELDS[key]}")
            elif key == "manageJobsWithoutQueueName":
                if value is True:
                    self.fail(key, "not supported: true is not implemented by flexq (a job without the queue label "
                              "goes to its namespace's LocalQueue named default, or is refused)")
                elif value is not False:
                    self.fail(key, "must be a boolean")
            elif key == "managedJobsNamespaceSelector":
                self.warn(key, "flexq has no system namespaces to exempt: jobs of every namespace are managed")
            elif key == "integrations":
                frameworks = self._integrations(value)
            elif key == "resources":
                resources = self._resources(value)
            elif key == "featureGates":
                gates = self._gates(value)
            elif key == "fairSharing":
                fair = self._fair_sharing(value, version)
            else:
                self.fail(key, "unknown field")
        if "integrations" not in obj:
            self.warn("integrations.frameworks", "not given: as Kueue, only batch/job is managed (RayJobs, "
                      "RayClusters and Pods are left alone)")
        if not gates.get("DisableWaitForPodsReady", False):
            pods_ready = self._pods_ready(obj.get("waitForPodsReady"), version)
        elif "waitForPodsReady" in obj:
            self.warn("waitForPodsReady", "off: featureGates.DisableWaitForPodsReady is true")
        admission = self._admission_fair_sharing(obj["admissionFairSharing"]) if "admissionFairSharing" in obj else None
        if admission is not None and not gates.get("AdmissionFairSharing", True):
            self.warn("admissionFairSharing", "off: featureGates.AdmissionFairSharing is false")
            admission = None
        if self.errors:
            raise self._invalid()
        return KueueConfig(pods_ready, resources, frameworks, gates, admission, tuple(self.warnings), self.doc.source,
                           fair)

    def _invalid(self) -> InvalidObject:
        return InvalidObject(self.doc.source, self.doc.index, "Configuration", "", self.errors)

    def _header(self, obj: dict[str, Any]) -> str:
        api_version = obj.get("apiVersion")
        group, _, version = str(api_version or "").rpartition("/")
        if group != GROUP or version not in VERSIONS:
            self.fail("apiVersion", f"must be {GROUP}/v1beta2 or {GROUP}/v1beta1, not {api_version!r}")
        if obj.get("kind") != "Configuration":
            self.fail("kind", f"must be Configuration, not {obj.get('kind')!r}")
        return version

    def _object(self, value: Any, path: str, known: tuple[str, ...]) -> dict[str, Any]:
        if value is None:
            return {}
        if not isinstance(value, dict):
            self.fail(path, "must be an object")
            return {}
        for key in value:
            if key not in known:
                self.fail(f"{path}.{key}", "unknown field")
        return value

    def _duration(self, value: Any, path: str) -> float | None:
        if not isinstance(value, str):
            self.fail(path, "must be a duration string (for example 10m, 1h30m, 300s)")
            return None
        try:
            return parse_duration(value)
        except DurationError as exc:
            self.fail(path, str(exc))
            return None

    def _int(self, value: Any, path: str) -> int | None:
        if isinstance(value, bool) or not isinstance(value, int) or not -2**31 <= value < 2**31:
            self.fail(path, "must be a 32-bit integer")
            return None
        if value < 0:
            self.fail(path, "must be greater than or equal to 0")
            return None
        return value

    def _pods_ready(self, value: Any, version: str) -> PodsReadyConfig | None:
        path = "waitForPodsReady"
        v1beta1 = version == "v1beta1"
        known = ("timeout", "blockAdmission", "requeuingStrategy", "recoveryTimeout") + (("enable",) if v1beta1
                                                                                         else ())
        raw = self._object(value, path, known)
        if v1beta1:
            enable = raw.get("enable", False)
            if not isinstance(enable, bool):
                self.fail(f"{path}.enable", "must be a boolean")
            if enable is not True:
                if raw and set(raw) != {"enable"}:
                    self.warn(path, "off: enable is not true (Kueue's v1beta1 default)")
                return None
        timeout = 300.0 if v1beta1 else 1800.0
        if "timeout" in raw:
            timeout = self._duration(raw["timeout"], f"{path}.timeout") or timeout
        block = raw.get("blockAdmission", v1beta1)
        if not isinstance(block, bool):
            self.fail(f"{path}.blockAdmission", "must be a boolean")
            block = False
        recovery: float | None = timeout
        if "recoveryTimeout" in raw:
            recovery = self._duration(raw["recoveryTimeout"], f"{path}.recoveryTimeout")
            recovery = recovery or None  # "0s" turns it off, as Kueue's
        strategy = self._object(raw.get("requeuingStrategy"), f"{path}.requeuingStrategy",
                                ("timestamp", "backoffLimitCount", "backoffBaseSeconds", "backoffMaxSeconds"))
        where = f"{path}.requeuingStrategy"
        timestamp = strategy.get("timestamp", "Eviction")
        if timestamp not in ("Eviction", "Creation"):
            self.fail(f"{where}.timestamp", f'Unsupported value: {timestamp!r}: supported values: "Creation", '
                      '"Eviction"')
        limit = strategy.get("backoffLimitCount")
        limit = self._int(limit, f"{where}.backoffLimitCount") if limit is not None else None
        base = self._int(strategy.get("backoffBaseSeconds", 60), f"{where}.backoffBaseSeconds")
        most = self._int(strategy.get("backoffMaxSeconds", 3600), f"{where}.backoffMaxSeconds")
        return PodsReadyConfig(timeout, block, recovery, str(timestamp), 60 if base is None else base,
                               3600 if most is None else most, limit)

    def _admission_fair_sharing(self, value: Any) -> AdmissionFairSharing:
        """Kueue's validation: the half-life not negative, the sampling interval above 0 (default 5m), weights not
        negative."""
        path = "admissionFairSharing"
        raw = self._object(value, path, ("usageHalfLifeTime", "usageSamplingInterval", "resourceWeights"))
        half_life = 0.0
        if "usageHalfLifeTime" in raw:
            half_life = self._duration(raw["usageHalfLifeTime"], f"{path}.usageHalfLifeTime") or 0.0
        sampling: float | None = 300.0
        if "usageSamplingInterval" in raw:
            sampling = self._duration(raw["usageSamplingInterval"], f"{path}.usageSamplingInterval")
            if sampling == 0:
                self.fail(f"{path}.usageSamplingInterval", "must be greater than 0")
        weights: dict[str, float] = {}
        raw_weights = raw.get("resourceWeights") or {}
        if not isinstance(raw_weights, dict):
            self.fail(f"{path}.resourceWeights", "must be a map of resource names to numbers")
            raw_weights = {}
        for name, weight in raw_weights.items():
            where = f"{path}.resourceWeights.{name}"
            if isinstance(weight, bool) or not isinstance(weight, int | float):
                self.fail(where, "must be a number")
            elif weight < 0:
                self.fail(where, "must be greater than or equal to 0")
            else:
                weights[str(name)] = float(weight)
        return AdmissionFairSharing(half_life, sampling or 300.0, weights)

    def _fair_sharing(self, value: Any, version: str) -> tuple[str, ...] | None:
        """``fairSharing``: its preemption strategies, or None where it leaves fair sharing off."""
        path = "fairSharing"
        v1beta1 = version == "v1beta1"
        raw = self._object(value, path, ("preemptionStrategies",) + (("enable",) if v1beta1 else ()))
        if not isinstance(value, dict):
            return None
        if v1beta1:
            enable = raw.get("enable", False)
            if not isinstance(enable, bool):
                self.fail(f"{path}.enable", "must be a boolean")
            if enable is not True:
                if set(raw) - {"enable"}:
                    self.warn(path, "off: enable is not true (Kueue's v1beta1 default)")
                return None
        strategies = raw.get("preemptionStrategies")
        if not strategies:
            if v1beta1:
                return FAIR_SHARING_STRATEGIES  # Kueue's v1beta1 defaulting
            self.fail(f"{path}.preemptionStrategies", "Required value: must be specified")
            return None
        if not isinstance(strategies, list) or tuple(strategies) not in _VALID_STRATEGY_LISTS:
            valid = ", ".join("[" + ", ".join(s) + "]" for s in _VALID_STRATEGY_LISTS)
            self.fail(f"{path}.preemptionStrategies", f"Unsupported value: {strategies!r}: supported values: {valid}")
            return None
        return tuple(strategies)

    def _integrations(self, value: Any) -> frozenset[str]:
        raw = self._object(value, "integrations", ("frameworks", "externalFrameworks", "labelKeysToCopy",
                                                   "podOptions"))
        for key in ("externalFrameworks", "labelKeysToCopy", "podOptions"):
            if raw.get(key):
                self.fail(f"integrations.{key}", "not supported: not implemented by flexq")
        names = raw.get("frameworks")
        if names is None:
            return frozenset({"batch/job"})
        if not isinstance(names, list):
            self.fail("integrations.frameworks", "must be a list")
            return frozenset()
        seen: set[str] = set()
        for i, name in enumerate(names):
            where = f"integrations.frameworks[{i}]"
            if name in seen:
                self.fail(where, f"Duplicate value: {name!r}")
            elif name in _KUEUE_FRAMEWORKS:
                self.warn(where, f"{name}: its kind is not served by flexq (its objects are refused): no effect")
            elif name not in FRAMEWORKS:
                self.fail(where, f"Unsupported value: {name!r}: supported values: "
                          + ", ".join(f'"{n}"' for n in sorted({*FRAMEWORKS, *_KUEUE_FRAMEWORKS})))
            seen.add(str(name))
        return frozenset(seen & set(FRAMEWORKS))

    def _resources(self, value: Any) -> ResourceConfig:
        raw = self._object(value, "resources", ("excludeResourcePrefixes", "transformations", "quotaCheckStrategy",
                                                "deviceClassMappings"))
        if raw.get("deviceClassMappings"):
            self.fail("resources.deviceClassMappings", "not supported: Dynamic Resource Allocation is not "
                      "implemented by flexq")
        if "quotaCheckStrategy" in raw:
            self.fail("resources.quotaCheckStrategy", "not supported: not implemented by flexq")
        prefixes = raw.get("excludeResourcePrefixes") or []
        if not isinstance(prefixes, list) or not all(isinstance(p, str) for p in prefixes):
            self.fail("resources.excludeResourcePrefixes", "must be a list of strings")
            prefixes = []
        rules: list[Transformation] = []
        inputs: set[str] = set()
        items = raw.get("transformations") or []
        if not isinstance(items, list):
            self.fail("resources.transformations", "must be a list")
            items = []
        for i, item in enumerate(items):
            where = f"resources.transformations[{i}]"
            rule = self._object(item, where, ("input", "strategy", "multiplyBy", "outputs"))
            name = rule.get("input")
            if not isinstance(name, str) or not name:
                self.fail(f"{where}.input", "Required value")
                continue
            if name in inputs:
                self.fail(f"{where}.input", f"Duplicate value: {name!r}")
            inputs.add(name)
            strategy = rule.get("strategy", "Retain")
            if strategy not in ("Retain", "Replace"):
                self.fail(f"{where}.strategy", f'Unsupported value: {strategy!r}: supported values: "Replace", '
                          '"Retain"')
            raw_outputs = rule.get("outputs")
            outputs = self._object(raw_outputs, f"{where}.outputs",
                                   tuple(raw_outputs) if isinstance(raw_outputs, dict) else ())
            factors: list[tuple[str, Fraction]] = []
            for output, amount in outputs.items():
                try:
                    factors.append((str(output), parse_quantity(amount).value))
                except QuantityError as exc:
                    self.fail(f"{where}.outputs.{output}", str(exc))
            multiply = rule.get("multiplyBy", "")
            if not isinstance(multiply, str):
                self.fail(f"{where}.multiplyBy", "must be a string")
                multiply = ""
            rules.append(Transformation(name, strategy == "Replace", tuple(sorted(factors)), multiply))
        return ResourceConfig(tuple(prefixes), tuple(rules))

    def _gates(self, value: Any) -> dict[str, bool]:
        if not isinstance(value, dict):
            self.fail("featureGates", "must be a map of feature names to booleans")
            return {}
        gates: dict[str, bool] = {}
        for name, on in value.items():
            where = f"featureGates.{name}"
            if not isinstance(on, bool):
                self.fail(where, "must be a boolean")
            elif name not in FEATURE_GATES and name not in ALPHA_GATES:
                self.fail(where, f"unrecognized feature gate: {name}")
            elif on not in _SERVED_GATES.get(name, frozenset()) and name not in ALPHA_GATES:
                self.fail(where, f"not supported: flexq does not implement {name}={str(on).lower()} (Kueue's default: "
                          f"{str(FEATURE_GATES[name]).lower()})")
            else:
                gates[str(name)] = on
        return gates
