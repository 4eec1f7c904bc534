"""Kueue's Configuration file as flexq reads it: Kueue v0.19's defaults (v1beta2 and v1beta1), what is served, what is
accepted with a warning naming the field, and what is refused (naming the field and its line)."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import pytest

from flexq.api import (
    DEFAULT_KUEUE_CONFIG,
    AdmissionFairSharing,
    InputError,
    InvalidObject,
    PodsReadyConfig,
    load_kueue_config,
)
from flexq.api import parse_kueue_config as parse
from flexq.api.kueue_config import ResourceConfig, Transformation

V2 = "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\n"
V1 = "apiVersion: config.kueue.x-k8s.io/v1beta1\nkind: Configuration\n"

# name -> (text, pods_ready expected)
PODS_READY: dict[str, tuple[str, PodsReadyConfig | None]] = {
    "v1beta2 without the field: on, Kueue v0.19's defaults": (V2, PodsReadyConfig(1800.0, False, 1800.0)),
    "v1beta2 zero timeout: defaulted to 30 minutes": (V2 + "waitForPodsReady: {timeout: 0s}",
                                                      PodsReadyConfig(1800.0, False, 1800.0)),
    "v1beta2 all set": (V2 + "waitForPodsReady:\n  timeout: 5m\n  recoveryTimeout: 3m\n  blockAdmission: false\n"
                        "  requeuingStrategy: {timestamp: Creation, backoffLimitCount: 3, backoffBaseSeconds: 10,"
                        " backoffMaxSeconds: 100}\n",
                        PodsReadyConfig(300.0, False, 180.0, "Creation", 10, 100, 3)),
    "recovery timeout 0s turns recovery off": (V2 + "waitForPodsReady: {timeout: 10m, recoveryTimeout: 0s}",
                                               PodsReadyConfig(600.0, False, None)),
    "the gate DisableWaitForPodsReady turns it off": (V2 + "featureGates: {DisableWaitForPodsReady: true}", None),
    "v1beta1 without enable: off": (V1 + "waitForPodsReady: {timeout: 10m}", None),
    "v1beta1 enabled: 5 minutes and blocking by default": (V1 + "waitForPodsReady: {enable: true}",
                                                          PodsReadyConfig(300.0, True, 300.0)),
}


@pytest.mark.parametrize("name", PODS_READY)
def test_wait_for_pods_ready_defaults_as_kueue_v0_19(name: str) -> None:
    text, expected = PODS_READY[name]
    assert parse(text, "k.yaml").pods_ready == expected


def test_without_a_file_kueue_v0_19s_defaults_and_every_framework_flexq_serves() -> None:
    assert DEFAULT_KUEUE_CONFIG.pods_ready == PodsReadyConfig()
    assert [DEFAULT_KUEUE_CONFIG.manages(k) for k in ("Job", "RayJob", "RayCluster", "Pod")] == [True] * 4
    assert not DEFAULT_KUEUE_CONFIG.resources


def test_the_backoff_doubles_from_the_base_and_is_capped() -> None:
    config = PodsReadyConfig(base=60, max_backoff=3600)
    assert [config.backoff(n) for n in range(1, 9)] == [60, 120, 240, 480, 960, 1920, 3600, 3600]


def test_frameworks_listed_are_managed_and_a_file_without_them_manages_batch_jobs_only() -> None:
    listed = parse(V2 + "integrations: {frameworks: [ray.io/rayjob, pod, kubeflow.org/mpijob]}", "k.yaml")
    assert [listed.manages(k) for k in ("Job", "RayJob", "RayCluster", "Pod")] == [False, True, False, True]
    assert listed.warnings == ("integrations.frameworks[2]: kubeflow.org/mpijob: its kind is not served by flexq "
                               "(its objects are refused): no effect",)
    assert [parse(V2, "k.yaml").manages(k) for k in ("Job", "RayJob")] == [True, False]


def test_transformations_retain_replace_multiply_and_exclusions_as_kueue_computes_them() -> None:
    config = parse(V2 + """resources:
  excludeResourcePrefixes: [example.com/]
  transformations:
  - {input: cpu, strategy: Retain, outputs: {cpu_credits: 1}}
  - {input: nvidia.com/mig-4g.5gb, strategy: Replace, outputs: {example.com/accelerator-memory: 5Gi, gpc: 4}}
  - {input: google.com/tpu, multiplyBy: chips-per-host, outputs: {tpu-chips: 500m}}
""", "k.yaml").resources
    assert config == ResourceConfig(("example.com/",), (
        Transformation("cpu", False, (("cpu_credits", Fraction(1)),)),
        Transformation("nvidia.com/mig-4g.5gb", True, (("example.com/accelerator-memory", Fraction(5 * 2**30)),
                                                        ("gpc", Fraction(4)))),
        Transformation("google.com/tpu", False, (("tpu-chips", Fraction(1, 2)),), "chips-per-host")))
    assert config.apply({"cpu": 3000, "memory": 1000, "example.com/thing": 5000}) == {
        "cpu": 3000, "memory": 1000, "cpu_credits": 3000}
    assert config.apply({"nvidia.com/mig-4g.5gb": 2000}) == {"example.com/accelerator-memory": 10 * 2**30 * 1000,
                                                             "gpc": 8000}
    assert config.apply({"google.com/tpu": 4000, "chips-per-host": 2000}) == {
        "google.com/tpu": 4000, "chips-per-host": 2000, "tpu-chips": 4000}


# name -> (text, admissionFairSharing expected)
ADMISSION_FAIR_SHARING: dict[str, tuple[str, AdmissionFairSharing | None]] = {
    "without the field: off (Kueue's default)": (V2, None),
    "empty: on, half-life 0, sampled every 5 minutes": (V2 + "admissionFairSharing: {}", AdmissionFairSharing()),
    "all set": (V2 + "admissionFairSharing:\n  usageHalfLifeTime: 168h\n  usageSamplingInterval: 1m\n"
                "  resourceWeights: {cpu: 0, nvidia.com/gpu: 2.5}\n",
                AdmissionFairSharing(168 * 3600.0, 60.0, {"cpu": 0.0, "nvidia.com/gpu": 2.5})),
    "v1beta1 the same": (V1 + "admissionFairSharing: {usageHalfLifeTime: 10s, usageSamplingInterval: 1s}",
                         AdmissionFairSharing(10.0, 1.0)),
    "the gate AdmissionFairSharing false turns it off": (
        V2 + "featureGates: {AdmissionFairSharing: false}\nadmissionFairSharing: {usageHalfLifeTime: 1h}", None),
}


@pytest.mark.parametrize("name", ADMISSION_FAIR_SHARING)
def test_admission_fair_sharing_as_kueue_v0_19_reads_it(name: str) -> None:
    text, expected = ADMISSION_FAIR_SHARING[name]
    assert parse(text, "k.yaml").admission_fair_sharing == expected


# name -> (text, the errors expected: "line N: path: message" prefixes)
REFUSED: dict[str, tuple[str, list[str]]] = {
    "an unknown field": (V2 + "waitForPodReady: {}\n", ["line 3: waitForPodReady: unknown field"]),
    "an unknown nested field": (V2 + "waitForPodsReady:\n  timeout: 5m\n  enable: true\n",
                                ["line 5: waitForPodsReady.enable: unknown field"]),
    "admission fair sharing out of Kueue's bounds": (
        V2 + "admissionFairSharing:\n  usageHalfLifeTime: -1h\n  usageSamplingInterval: 0s\n"
        "  resourceWeights: {cpu: -1, memory: lots}\n  usageWindow: 1h\n", [
            "line 4: admissionFairSharing.usageHalfLifeTime: invalid duration",
            "line 5: admissionFairSharing.usageSamplingInterval: must be greater than 0",
            "line 6: admissionFairSharing.resourceWeights.cpu: must be greater than or equal to 0",
            "line 6: admissionFairSharing.resourceWeights.memory: must be a number",
            "line 7: admissionFairSharing.usageWindow: unknown field"]),
    "v1beta2 fair sharing without strategies": (V2 + "fairSharing: {}\n", [
        "line 3: fairSharing.preemptionStrategies: Required value: must be specified"]),
    "fair-sharing strategies Kueue refuses": (
        V2 + "fairSharing:\n  preemptionStrategies: [LessThanInitialShare, LessThanOrEqualToFinalShare]\n", [
            "line 4: fairSharing.preemptionStrategies: Unsupported value: ['LessThanInitialShare', "
            "'LessThanOrEqualToFinalShare']: supported values: [LessThanOrEqualToFinalShare], [LessThanInitialShare], "
            "[LessThanOrEqualToFinalShare, LessThanInitialShare]"]),
    "v1beta1 fair sharing enable not a boolean": (V1 + "fairSharing: {enable: yes please}\n",
                                                  ["line 3: fairSharing.enable: must be a boolean"]),
    "manageJobsWithoutQueueName true": (V2 + "manageJobsWithoutQueueName: true\n",
                                        ["line 3: manageJobsWithoutQueueName: not supported"]),
    "a bad timeout and strategy": (V2 + "waitForPodsReady:\n  timeout: 5\n  requeuingStrategy:\n"
                                   "    timestamp: Now\n    backoffBaseSeconds: -1\n", [
                                       "line 4: waitForPodsReady.timeout: must be a duration string",
                                       "line 6: waitForPodsReady.requeuingStrategy.timestamp: Unsupported value",
                                       "line 7: waitForPodsReady.requeuingStrategy.backoffBaseSeconds: must be "
                                       "greater than or equal to 0"]),
    "an unknown and an unserved gate": (V2 + "featureGates:\n  NoSuchGate: true\n  MultiKueue: true\n", [
        "line 4: featureGates.NoSuchGate: unrecognized feature gate: NoSuchGate",
        "line 5: featureGates.MultiKueue: not supported: flexq does not implement MultiKueue=true"]),
    "topology-aware scheduling off": (V2 + "featureGates:\n  TopologyAwareScheduling: false\n", [
        "line 4: featureGates.TopologyAwareScheduling: not supported: flexq does not implement "
        "TopologyAwareScheduling=false"]),
    "an unknown framework and a duplicate": (V2 + "integrations:\n  frameworks:\n  - pod\n  - pod\n  - kubeflow/x\n", [
        "line 6: integrations.frameworks[1]: Duplicate value: 'pod'",
        "line 7: integrations.frameworks[2]: Unsupported value: 'kubeflow/x'"]),
    "a transformation without input, a bad output, a quota check strategy": (
        V2 + "resources:\n  quotaCheckStrategy: BlockUndeclared\n  transformations:\n  - {outputs: {a: 1}}\n"
        "  - {input: cpu, strategy: Keep, outputs: {b: lots}}\n", [
            "line 4: resources.quotaCheckStrategy: not supported",
            "line 6: resources.transformations[0].input: Required value",
            "line 7: resources.transformations[1].strategy: Unsupported value: 'Keep'",
            "line 7: resources.transformations[1].outputs.b: "]),
    "not a Configuration": ("apiVersion: kueue.x-k8s.io/v1beta2\nkind: ClusterQueue\n", [
        "line 1: apiVersion: must be config.kueue.x-k8s.io/v1beta2", "line 2: kind: must be Configuration"]),
}


# name -> (text, the fair-sharing strategies expected; None: fair sharing off)
FAIR_SHARING: dict[str, tuple[str, tuple[str, ...] | None]] = {
    "no fairSharing: off (Kueue's default)": (V2, None),
    "v1beta2: on with the strategies given": (V2 + "fairSharing: {preemptionStrategies: [LessThanInitialShare]}",
                                              ("LessThanInitialShare",)),
    "v1beta2: both strategies in Kueue's order": (
        V2 + "fairSharing: {preemptionStrategies: [LessThanOrEqualToFinalShare, LessThanInitialShare]}",
        ("LessThanOrEqualToFinalShare", "LessThanInitialShare")),
    "v1beta1 enabled: the strategies default to both": (V1 + "fairSharing: {enable: true}",
                                                        ("LessThanOrEqualToFinalShare", "LessThanInitialShare")),
    "v1beta1 enabled with one strategy": (
        V1 + "fairSharing: {enable: true, preemptionStrategies: [LessThanOrEqualToFinalShare]}",
        ("LessThanOrEqualToFinalShare",)),
    "v1beta1 without enable: off": (V1 + "fairSharing: {preemptionStrategies: [LessThanInitialShare]}", None),
}


# name -> (text, whether a lost node's topology-aware pods get a replacement)
NODE_REPLACEMENT: dict[str, tuple[str, bool]] = {
    "no gate: on (Kueue v0.19's default)": (V2, True),
    "TASFailedNodeReplacement off": (V2 + "featureGates: {TASFailedNodeReplacement: false}", False),
    "on, with pod termination's gate either way": (
        V2 + "featureGates: {TASFailedNodeReplacement: true, TASReplaceNodeOnPodTermination: false}", True),
}


@pytest.mark.parametrize("name", NODE_REPLACEMENT)
def test_failed_node_replacement_follows_its_gate(name: str) -> None:
    text, expected = NODE_REPLACEMENT[name]
    assert parse(text, "kueue.yaml").replace_failed_nodes is expected


@pytest.mark.parametrize(("text", "expected"), [(V2, True), (
    V2 + "featureGates: {TASFailedNodeReplacementFailFast: false}", False)], ids=["default: on", "off"])
def test_failed_node_replacement_fail_fast_is_accepted_either_way(text: str, expected: bool) -> None:
    """Kueue v0.19's TASFailedNodeReplacementFailFast (beta, on): off, a workload with no replacement at once waits
    for one (flexq.capacity.nodeloss) rather than being evicted."""
    config = parse(text, "kueue.yaml")
    assert config.gate("TASFailedNodeReplacementFailFast") is expected


# name -> (text, ClusterQueueMaxExecutionTime's value)
ALPHA: dict[str, tuple[str, bool]] = {
    "no gate: off, as its proposal has it": (V2, False),
    "on": (V2 + "featureGates: {ClusterQueueMaxExecutionTime: true}", True),
    "off, beside a Kueue gate at its default that flexq serves": (
        V2 + "featureGates: {ClusterQueueMaxExecutionTime: false, PartialAdmission: true}", False),
}


@pytest.mark.parametrize("name", ALPHA)
def test_a_proposed_gate_flexq_serves_as_an_alpha_is_off_unless_turned_on(name: str) -> None:
    text, expected = ALPHA[name]
    assert parse(text, "kueue.yaml").gate("ClusterQueueMaxExecutionTime") is expected


@pytest.mark.parametrize("name", FAIR_SHARING)
def test_fair_sharing_is_on_where_kueue_turns_it_on_with_its_strategies(name: str) -> None:
    text, expected = FAIR_SHARING[name]
    config = parse(text, "k.yaml")
    assert config.fair_sharing == expected
    assert any(w.startswith("fairSharing: off") for w in config.warnings) == (name == "v1beta1 without enable: off")


@pytest.mark.parametrize("name", REFUSED)
def test_what_flexq_does_not_implement_is_refused_naming_the_field_and_line(name: str) -> None:
    text, expected = REFUSED[name]
    with pytest.raises(InvalidObject) as caught:
        parse(text, "k.yaml")
    got = [str(e) for e in caught.value.errors]
    assert len(got) == len(expected), got
    assert all(g.startswith(e) for g, e in zip(sorted(got), sorted(expected), strict=True)), got


def test_kueues_own_manager_configuration_is_accepted_with_a_warning_per_field_that_changes_nothing() -> None:
    config = parse(V2 + "health: {healthProbeBindAddress: ':8081'}\nmetrics: {bindAddress: ':8443'}\n"
                        "webhook: {port: 9443}\nleaderElection: {leaderElect: true}\nclientConnection: {qps: 300}\n"
                        "integrations: {frameworks: [batch/job, ray.io/rayjob]}\n", "k.yaml")
    assert [w.split(":")[0] for w in config.warnings] == ["health", "metrics", "webhook", "leaderElection",
                                                          "clientConnection"]
    assert all("no effect" in w for w in config.warnings)


def test_a_file_is_read_and_a_missing_one_named(tmp_path: Path) -> None:
    (tmp_path / "k.yaml").write_text(V2 + "waitForPodsReady: {timeout: 2m}\n")
    assert load_kueue_config(tmp_path / "k.yaml").pods_ready == PodsReadyConfig(120.0, False, 120.0)
    with pytest.raises(InputError, match=r"missing\.yaml: no such file"):
        load_kueue_config(tmp_path / "missing.yaml")
