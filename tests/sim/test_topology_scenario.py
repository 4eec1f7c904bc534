"""Topology-aware scheduling in virtual time (examples/tas/scenario-tas.yaml): eight hosts in two sub-blocks, jobs
of four pods that must share a sub-block. Each takes a sub-block; the third waits for one to free (its quota fits);
one of five pods never fits any (TopologyPlacementFailed's message); the pods run on the hosts assigned."""

from __future__ import annotations

from pathlib import Path

from flexq.sim.runner import run_scenario
from flexq.sim.scenario import load_scenario

SCENARIO = Path(__file__).parents[2] / "examples" / "tas" / "scenario-tas.yaml"


def _short(workload: str) -> str:
    return workload.split("/")[1].removeprefix("job-").rsplit("-", 1)[0]


def test_jobs_take_a_sub_block_each_and_wait_for_one_to_free() -> None:
    events = run_scenario(load_scenario(SCENARIO)).events
    hosts = {_short(e["workload"]) + f"@{e['t']}": [d["values"][0] for d in
                                                    e["topologyAssignments"]["main"]["domains"]]
             for e in events if e["event"] == "QuotaReserved"}
    started = {_short(e["workload"]) + f"@{e['t']}": e["nodes"] for e in events if e["event"] == "Started"}
    first, second = [f"gke-tas-pool-{n}-0" for n in (1, 2, 3, 4)], [f"gke-tas-pool-{n}-0" for n in (5, 6, 7, 8)]
    assert hosts == {"a@0": first, "b@1": second, "c@1800": first}
    assert started == hosts, "the pods are bound to the hosts of their topology assignment"
    pending = [(_short(e["workload"]), e["t"], e["reason"]) for e in events if e["event"] == "Pending"]
    assert pending[-1] == ("d", 3601, 'couldn\'t assign flavors to pod set main: topology "gke-default" allows '
                                      'to fit only 4 out of 5 pod(s)')
    assert ("c", 2, 'couldn\'t assign flavors to pod set main: topology "gke-default" doesn\'t allow to fit any of '
                    '4 pod(s). Total nodes: 8; excluded: resource "cpu": 8 (quota frees next at t=30m)') in pending
    assert not any(e["event"] == "QuotaReserved" and _short(e["workload"]) == "d" for e in events)
