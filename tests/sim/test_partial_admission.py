"""Kueue's partial admission in a scenario: Kueue's ``sample-job-partial-admission.yaml`` (parallelism 20, at least 5
pods) in a queue with room for 9 runs with 9 pods at once, not after the queue empties."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from flexq.sim.runner import run_scenario
from flexq.sim.scenario import load_scenario
from tests.queues import queue_yaml

SAMPLE = """
apiVersion: batch/v1
kind: Job
metadata:
  name: sample-job-partial-admission
  namespace: default
  labels:
    kueue.x-k8s.io/queue-name: q
  annotations:
    kueue.x-k8s.io/job-min-parallelism: "5"
spec:
  parallelism: 20
  completions: 20
  template:
    spec:
      containers:
      - name: dummy-job
        image: registry.k8s.io/e2e-test-images/agnhost:2.53
        args: ["entrypoint-tester", "hello", "world"]
        resources:
          requests:
            cpu: 1
            memory: "200Mi"
      restartPolicy: Never
"""


def _events(tmp_path: Path, cpu: int, annotations: dict[str, str] | None = None) -> list[dict[str, Any]]:
    job = yaml.safe_load(SAMPLE)
    if annotations is not None:
        job["metadata"]["annotations"] = annotations
    scenario = {"apiVersion": "flexq.dev/v1alpha1", "kind": "Scenario", "metadata": {"name": "partial"},
                "spec": {"objects": list(yaml.safe_load_all(queue_yaml(("default-flavor", None), cpu=cpu))),
                         "submit": [{"at": "0s", "runFor": "10m", "object": job}], "until": "1h"}}
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(scenario))
    return [e for e in run_scenario(load_scenario(path)).events if e["event"] in ("QuotaReserved", "Finished")]


def test_the_sample_job_runs_with_the_pods_that_fit(tmp_path: Path) -> None:
    events = _events(tmp_path, cpu=9)
    assert [(e["t"], e["event"]) for e in events] == [(0, "QuotaReserved"), (600, "Finished")]
    assert events[0]["podSetCounts"] == {"main": 9}, "admitted with 9 of its 20 pods"


def test_without_its_minimum_it_waits_for_all_its_pods(tmp_path: Path) -> None:
    assert _events(tmp_path, cpu=9, annotations={}) == []
