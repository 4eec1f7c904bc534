"""A scenario's objects are checked as ``flexq apply`` checks them: a field its kind does not declare is refused
(strict decoding), named with its file, line and path, and ``flexq simulate`` exits non-zero without a traceback."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from flexq.api.object_errors import InvalidObject
from flexq.scheduler.model import PodSetUpdate, Toleration
from flexq.sim.runner import run_scenario
from flexq.sim.scenario import ScenarioError, load_scenario
from tests import forks

SCENARIO = """apiVersion: flexq.dev/v1alpha1
kind: Scenario
metadata: {name: fields}
spec:
  objects:
    - {apiVersion: kueue.x-k8s.io/v1beta2, kind: ResourceFlavor, metadata: {name: default}}
    - apiVersion: kueue.x-k8s.io/v1beta2
      kind: ClusterQueue
      metadata: {name: cq}
      spec:
        namespaceSelector: {}
        concurrentAdmissionPolicy:
          migration:
            mode: TryPreferredFlavors
            constraints: {lastAcceptableFlavorName: default}
        resourceGroups:
          - coveredResources: [cpu]
            flavors: [{name: default, resources: [{name: cpu, nominalQuota: 4}]}]
    - apiVersion: kueue.x-k8s.io/v1beta2
      kind: LocalQueue
      metadata: {name: lq, namespace: default}
      spec: {clusterQueue: cq}
  submit:
    - at: 0s
      runFor: 1m
      object:
        apiVersion: batch/v1
        kind: Job
        metadata: {name: j, labels: {kueue.x-k8s.io/queue-name: lq}}
        spec:
          template:
            spec:
              restartPolicy: Never
              containers: [{name: c, image: busybox, resources: {requests: {cpu: 1}}}]
"""

CONCURRENT = """        concurrentAdmissionPolicy:
          migration:
            mode: TryPreferredFlavors
            constraints: {lastAcceptableFlavorName: default}
"""


def _write(tmp_path: Path, old: str, new: str) -> Path:
    assert old in SCENARIO
    path = tmp_path / "scenario.yaml"
    path.write_text(SCENARIO.replace(old, new, 1))
    return path


def test_the_scenario_as_written_runs(tmp_path: Path) -> None:
    result = run_scenario(load_scenario(_write(tmp_path, "", "")))
    assert [e["event"] for e in result.events if e["event"] in ("Admitted", "Finished")][-1] == "Finished"


@pytest.mark.parametrize(("old", "new", "line", "path"), [
    (CONCURRENT + "        resourceGroups:", "        resourceGroupz:",
     12, "spec.resourceGroupz"),
    ("constraints: {lastAcceptableFlavorName", "constraints: {lastAcceptableFlavor", 15,
     "spec.concurrentAdmissionPolicy.migration.constraints.lastAcceptableFlavor"),
    ("      spec: {clusterQueue: cq}", "      spec: {clusterQueue: cq, stopPolicyy: Hold}", 22, "spec.stopPolicyy"),
])
def test_an_unknown_field_of_an_object_is_refused_with_its_line(tmp_path: Path, old: str, new: str, line: int,
                                                                  path: str) -> None:
    scenario = load_scenario(_write(tmp_path, old, new))
    with pytest.raises(InvalidObject) as caught:
        run_scenario(scenario)
    assert str(caught.value).endswith(f'line {line}: {path}: unknown field "{path}" (strict decoding error)')
    assert str(caught.value).startswith(str(tmp_path / "scenario.yaml"))


def test_an_unknown_field_of_a_submitted_job_is_refused_with_its_line(tmp_path: Path) -> None:
    scenario = load_scenario(_write(tmp_path, "              restartPolicy: Never",
                                    "              restartPolicy: Never\n              nodeSelectr: {a: b}"))
    with pytest.raises(ScenarioError, match=r"line 34: spec\.template\.spec\.nodeSelectr: unknown field"):
        run_scenario(scenario)


def test_flexq_simulate_exits_non_zero_naming_the_field(tmp_path: Path) -> None:
    path = _write(tmp_path, CONCURRENT + "        resourceGroups:",
                  "        resourceGroupz:")
    env = {**os.environ, "FLEXQ_HOME": str(tmp_path / "home")}
    proc = forks.run(["simulate", str(path)], text=True, timeout=60, env=env)
    assert proc.returncode != 0
    assert f'{path}: document 2 (ClusterQueue \'cq\') is invalid\n  line 12: spec.resourceGroupz: unknown field ' \
           '"spec.resourceGroupz" (strict decoding error)' in proc.stderr
    assert "Traceback" not in proc.stderr


def test_a_missing_scenario_file_is_named_once(tmp_path: Path) -> None:
    env = {**os.environ, "FLEXQ_HOME": str(tmp_path / "home")}
    proc = forks.run(["simulate", str(tmp_path / "missing.yaml")], text=True, timeout=60, env=env)
    assert (proc.returncode, proc.stderr) == (1, f"error: {tmp_path / 'missing.yaml'}: no such file\n")


def test_a_ready_check_carries_its_pod_set_updates(tmp_path: Path) -> None:
    # spec.checks[].podSetUpdates, as a Workload's status lists a check's (Kueue's PodSetUpdate): the second pass
    # places the pod set by them (tests/scheduler/test_tas_delayed.py).
    checks = """  checks:
    - at: 5s
      workload: default/j
      check: prov
      state: Ready
      podSetUpdates:
        - name: main
          annotations: {autoscaling.x-k8s.io/consume-provisioning-request: j-prov-1}
          nodeSelector: {cloud.google.com/gke-nodepool: dws-pool}
          tolerations: [{key: cloud.google.com/gke-queued, operator: Exists, effect: NoSchedule}]
  submit:"""
    (check,) = load_scenario(_write(tmp_path, "  submit:", checks)).checks
    assert check.pod_set_updates == {"main": PodSetUpdate(
        {"autoscaling.x-k8s.io/consume-provisioning-request": "j-prov-1"},
        node_selector={"cloud.google.com/gke-nodepool": "dws-pool"},
        tolerations=(Toleration("cloud.google.com/gke-queued", "Exists", effect="NoSchedule"),))}
