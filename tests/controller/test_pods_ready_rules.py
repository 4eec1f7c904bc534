"""What "all its pods are ready" means for each job kind the live server runs (waitForPodsReady): a RayJob's Ray
cluster up with all its worker slices and the job submitted to it (KubeRay's ``jobDeploymentStatus`` Running, or
Complete), a RayCluster ``ready``. (A Pod's: its process started; a batch Job, which flexq does not run: placed.)"""

from __future__ import annotations

from typing import Any

import pytest

from flexq.controller.job_events import pods_ready

# name -> (kind, status, ready)
CASES: dict[str, tuple[str, dict[str, Any], bool]] = {
    "a RayJob whose cluster starts": ("RayJob", {"jobDeploymentStatus": "Initializing"}, False),
    "a RayJob submitted to its cluster": ("RayJob", {"jobDeploymentStatus": "Running", "jobStatus": "PENDING"}, True),
    "a RayJob running": ("RayJob", {"jobDeploymentStatus": "Running", "jobStatus": "RUNNING"}, True),
    "a RayJob complete": ("RayJob", {"jobDeploymentStatus": "Complete", "jobStatus": "SUCCEEDED"}, True),
    "a RayJob suspended": ("RayJob", {"jobDeploymentStatus": "Suspended"}, False),
    "a RayJob without status": ("RayJob", {}, False),
    "a RayCluster ready": ("RayCluster", {"state": "ready"}, True),
    "a RayCluster suspended": ("RayCluster", {"state": "suspended"}, False),
    "a batch Job (its readiness is its placement)": ("Job", {"active": 1}, False),
}


@pytest.mark.parametrize("name", CASES)
def test_when_a_jobs_pods_are_ready(name: str) -> None:
    kind, status, ready = CASES[name]
    assert pods_ready(kind, {"status": status}) is ready
