"""Kueue's Configuration ``resources`` and ``integrations`` in a scenario: Kueue's shared-quota example
(``admin/shared-quota-setup.yaml``: 9 cpu on-demand, 9 spot, and 14 ``cpu_credits`` shared) admits 4 jobs of 3 cpu
(12 credits) once each cpu counts a credit, where without the transformation all 6 (18 cpu) would run; a framework
the Configuration does not list is not managed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from flexq.sim.runner import run_scenario
from flexq.sim.scenario import load_scenario
from tests import forks
from tests.support import job

SHARED_QUOTA = """
- {apiVersion: kueue.x-k8s.io/v1beta2, kind: ResourceFlavor, metadata: {name: on-demand},
   spec: {nodeLabels: {node-type: on-demand}}}
- {apiVersion: kueue.x-k8s.io/v1beta2, kind: ResourceFlavor, metadata: {name: spot},
   spec: {nodeLabels: {node-type: spot}}}
- {apiVersion: kueue.x-k8s.io/v1beta2, kind: ResourceFlavor, metadata: {name: credits}}
- apiVersion: kueue.x-k8s.io/v1beta2
  kind: ClusterQueue
  metadata: {name: team-cluster-queue}
  spec:
    namespaceSelector: {}
    resourceGroups:
    - coveredResources: [cpu]
      flavors:
      - {name: on-demand, resources: [{name: cpu, nominalQuota: 9}]}
      - {name: spot, resources: [{name: cpu, nominalQuota: 9}]}
    - coveredResources: [cpu_credits]
      flavors:
      - {name: credits, resources: [{name: cpu_credits, nominalQuota: 14}]}
- {apiVersion: kueue.x-k8s.io/v1beta2, kind: LocalQueue, metadata: {namespace: default, name: team-queue},
   spec: {clusterQueue: team-cluster-queue}}
"""
CREDITS = {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
           "resources": {"transformations": [{"input": "cpu", "strategy": "Retain", "outputs": {"cpu_credits": 1}}]}}





def _run(tmp_path: Path, config: dict[str, Any] | None) -> list[dict[str, Any]]:
    jobs = [job(f"sample-job-{n}", queue="team-queue", cpu=3, pods=1).completions(1).object() for n in range(6)]
    spec: dict[str, Any] = {"objects": yaml.safe_load(SHARED_QUOTA), "until": "1h",
                            "submit": [{"at": "0s", "runFor": "10m", "object": made} for made in jobs]}
    if config is not None:
        spec["kueueConfig"] = config
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump({"apiVersion": "flexq.dev/v1alpha1", "kind": "Scenario",
                                    "metadata": {"name": "shared-quota"}, "spec": spec}))
    return run_scenario(load_scenario(path)).events


def test_cpu_credits_cap_the_cpu_of_both_flavors_together(tmp_path: Path) -> None:
    admitted = [e for e in _run(tmp_path, CREDITS) if e["event"] == "Admitted"]
    assert [(e["t"], e["podSets"]["main"]) for e in admitted] == [
        (0, {"cpu": "on-demand", "cpu_credits": "credits"}), (0, {"cpu": "on-demand", "cpu_credits": "credits"}),
        (0, {"cpu": "on-demand", "cpu_credits": "credits"}), (0, {"cpu": "spot", "cpu_credits": "credits"}),
        (600, {"cpu": "on-demand", "cpu_credits": "credits"}), (600, {"cpu": "on-demand", "cpu_credits": "credits"})]


def test_without_the_transformation_the_credits_count_nothing(tmp_path: Path) -> None:
    admitted = [e for e in _run(tmp_path, None) if e["event"] == "Admitted"]
    assert [e["t"] for e in admitted] == [0] * 6  # 18 cpu of 18: the 14-credit cap is never asked


def test_a_framework_not_listed_is_not_managed(tmp_path: Path) -> None:
    config = {**CREDITS, "integrations": {"frameworks": ["ray.io/rayjob"]}}
    events = _run(tmp_path, config)
    assert [e["event"] for e in events] == ["Refused"] * 6
    assert events[0]["reason"] == ("Job default/sample-job-0 is not managed: the Kueue configuration's "
                                   "integrations.frameworks does not list batch/job")


def test_simulate_names_each_field_that_changes_nothing_and_runs(tmp_path: Path) -> None:

    config = {**CREDITS, "webhook": {"port": 9443}, "integrations": {"frameworks": ["batch/job"]}}
    _run(tmp_path, config)  # writes the scenario
    proc = forks.run(["simulate", str(tmp_path / "s.yaml"), "--no-progress"], text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.splitlines() == [f"warning: {tmp_path / 's.yaml'}: spec.kueueConfig.webhook: configures "
                                        "Kueue's manager process; flexq serves its own: no effect"]
