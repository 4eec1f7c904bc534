"""The guide's cluster as a scenario: its queue manifests and the three node pools cluster.sh creates."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from flexq.sim.runner import SimResult, run_scenario
from flexq.sim.scenario import load_scenario
from tests.conftest import GUIDE

POOLS = """    pools:
      - {name: default-pool, machineType: n2-standard-16, numNodes: 1, autoscaling: false}
      - {name: on-demand-pool, machineType: ct6e-standard-4t, tpuTopology: 4x4, maxNodes: 4}
      - {name: dws-pool, machineType: ct6e-standard-4t, tpuTopology: 4x4, maxNodes: 4, flexStart: true,
         queuedProvisioning: true}
"""


def guide_scenario(tmp_path: Path, capacity: str, submit: str, until: str = "2h", *, settings: str = "",
                   queue: Path = GUIDE / "dws-tpu-queue.yaml", name: str = "scenario.yaml") -> Path:
    """Write a scenario: ``settings`` (capacity lines before the pools), the pools, then ``capacity`` (lines
    after them, e.g. ``cloud:``), ``submit`` entries and ``until`` (empty: none)."""
    path = tmp_path / name
    path.write_text(f"""
apiVersion: flexq.dev/v1alpha1
kind: Scenario
metadata: {{name: {path.stem}}}
spec:
  env: {{ONDEMAND_NODEPOOL: on-demand-pool, DWS_NODEPOOL: dws-pool}}
  include: [{queue}]
  capacity:
{settings}{POOLS}{capacity}
  submit:
{submit or "    []"}
{f"  until: {until}" if until else ""}
""")
    return path


def job(job_id: str, at: str = "0s", run_for: str = "10m") -> str:
    """A submit entry: the guide's RayJob with ``JOB_ID``."""
    return (f"    - {{at: {at}, file: {GUIDE / 'rayjob-tpu-v6e-dws.yaml'}, env: {{JOB_ID: \"{job_id}\"}}, "
            f"runFor: {run_for}}}\n")


def run_guide(tmp_path: Path, capacity: str, submit: str, until: str = "2h",
              queue: Path = GUIDE / "dws-tpu-queue.yaml") -> SimResult:
    """Run :func:`guide_scenario` to its end."""
    return run_scenario(load_scenario(guide_scenario(tmp_path, capacity, submit, until, queue=queue)))


def job_events(result: SimResult, job_id: str) -> list[dict[str, Any]]:
    """The events of the workload of the guide's RayJob ``job_id``."""
    key = next(w.key for w in result.workloads if w.owner.endswith(f"/rayjob-tpu-v6e-dws-{job_id}"))
    return [e for e in result.events if e["workload"] == key]


def first_event(events: list[dict[str, Any]], kind: str, **match: Any) -> dict[str, Any]:
    """The first of ``events`` of ``kind`` whose fields equal ``match``."""
    return next(e for e in events if e["event"] == kind and all(e.get(k) == v for k, v in match.items()))
