"""Admission fair sharing in a scenario: the LocalQueue's usage is sampled to the scenario's end, its admission's
entry penalty and its run folded in and decaying after, as ``kueue_local_queue_admission_fair_sharing_usage``."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from flexq.sim.runner import run_scenario
from flexq.sim.scenario import load_scenario
from tests.support import job

QUEUES = """
- {apiVersion: kueue.x-k8s.io/v1beta1, kind: ResourceFlavor, metadata: {name: default}}
- apiVersion: kueue.x-k8s.io/v1beta2
  kind: ClusterQueue
  metadata: {name: shared}
  spec:
    namespaceSelector: {}
    admissionScope: {admissionMode: UsageBasedAdmissionFairSharing}
    resourceGroups:
      - coveredResources: [cpu]
        flavors: [{name: default, resources: [{name: cpu, nominalQuota: 4}]}]
- {apiVersion: kueue.x-k8s.io/v1beta2, kind: LocalQueue, metadata: {name: a, namespace: default},
   spec: {clusterQueue: shared, fairSharing: {weight: "0.5"}}}
"""
JOB = job("a1", queue="a", cpu=1, pods=4).image("x").object()


def test_usage_is_sampled_to_the_end_with_the_entry_penalty_and_the_run_decaying(tmp_path: Path) -> None:
    config = {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
              "integrations": {"frameworks": ["batch/job"]},
              "admissionFairSharing": {"usageHalfLifeTime": "10m", "usageSamplingInterval": "1m"}}
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump({"apiVersion": "flexq.dev/v1alpha1", "kind": "Scenario", "metadata": {"name": "afs"},
                                    "spec": {"objects": yaml.safe_load(QUEUES), "kueueConfig": config,
                                             "submit": [{"at": "0s", "runFor": "10m", "object": JOB}],
                                             "until": "2h"}}))
    result = run_scenario(load_scenario(path), metrics=True)
    assert result.kueue is not None
    usage = result.kueue[1].lq_fair_usage
    alpha = 1 - 0.5 ** (60 / 600)
    # Admitted at 0 s: the penalty 4 * alpha; ten samples of 4 cpu to 10 min; then 110 samples of nothing to 2 h.
    at_end = (4 + (4 * alpha - 4) * 0.5 ** 1) * 0.5 ** 11
    assert usage == {("a", "default", "shared"): pytest.approx(at_end / 0.5)}
