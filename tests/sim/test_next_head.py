"""Behind a workload that does not fit, the next one in its queue is tried at once (Kueue runs its next cycle
within milliseconds): in virtual time it is admitted at the same instant, as the live server admits it."""

from __future__ import annotations

from pathlib import Path

import yaml

from flexq.sim.runner import run_scenario
from flexq.sim.scenario import load_scenario
from tests.support import job

JOBS = (("big", "1500m"), ("blocked", "1"), ("small", "500m"))
"""Arriving together, in this order, at a ClusterQueue of 2 cpu: big runs, blocked waits for it, small fits
beside it."""


def test_the_head_behind_one_that_does_not_fit_is_admitted_at_the_same_instant(tmp_path: Path) -> None:
    from tests.queues import queue_yaml

    scenario = {"apiVersion": "flexq.dev/v1alpha1", "kind": "Scenario", "metadata": {"name": "next-head"},
                "spec": {"objects": list(yaml.safe_load_all(queue_yaml(("default-flavor", None), cpu=2))),
                         "submit": [{"at": "0s", "runFor": "1h", "object": job(name, queue="q", cpu=cpu).object()}
                                    for name, cpu in JOBS],
                         "until": "10s"}}
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(scenario))
    result = run_scenario(load_scenario(path))
    admitted = {e["workload"].split("/")[1].removeprefix("job-").rsplit("-", 1)[0]: e["t"]
                for e in result.events if e["event"] == "Admitted"}
    assert admitted == {"big": 0, "small": 0}, "small is admitted beside big at once, while blocked waits"
