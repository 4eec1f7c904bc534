"""A lost host of a multi-host TPU slice in virtual time: the slice is repaired (or, DWS's, released) whole, and the
requeued job gets a slice back on its pool instead of waiting for a fallback."""

from __future__ import annotations

from pathlib import Path

from flexq.capacity.catalog import machine_type
from flexq.capacity.cloud import EmulatedCloud
from flexq.capacity.cluster import Cluster, PodGroup
from flexq.capacity.pools import NodePoolSpec
from tests.sim.guide_setup import first_event, job, job_events, run_guide


def test_a_failed_host_gets_its_slice_repaired_and_the_job_starts_there_again(tmp_path: Path) -> None:
    result = run_guide(tmp_path, """    cloud:
      on-demand-pool: {available: 4, bootTime: 3m, hostFailures: [20m]}
      dws-pool: {queuedDelay: never}""", job("1", run_for="1h"), until="3h")
    job1 = job_events(result, "1")
    first = first_event(job1, "Started")
    assert first["t"] == 180 and sum("on-demand-pool" in n for n in first["nodes"]) == 4
    lost = first_event(result.events, "NodeDeleted")
    assert lost["t"] == 1200 and lost["reason"] == f"host {min(n for n in first['nodes'] if 'on-demand' in n)} " \
        "of pool on-demand-pool failed"
    repaired = first_event(result.events, "SliceRepaired")
    assert repaired["t"] == 1200 and repaired["nodes"] == 4 and "4 node(s) are recreated, ready t=23m" in \
        repaired["reason"]
    evicted = first_event(job1, "Evicted")
    assert evicted["t"] == 1200 and "failed: the workload's pods on it are gone" in evicted["reason"]
    again = [e for e in job1 if e["event"] == "Started"][1]
    assert again["t"] == 1200 + 180 and again["nodes"] == first["nodes"], "the same slice, repaired"
    assert first_event(job1, "Finished")["t"] == again["t"] + 3600
    assert not [e for e in result.events if e["event"] in ("Fallback", "NodesUnavailable", "SliceReleased")]


def test_a_failed_host_of_a_dws_slice_releases_it_and_the_job_asks_for_a_new_one(tmp_path: Path) -> None:
    result = run_guide(tmp_path, """    cloud:
      on-demand-pool: {stockouts: [{from: 0s, to: 10h}]}
      dws-pool: {queuedDelay: 10m, hostFailures: [30m]}""", job("1", run_for="1h"), until="4h")
    job1 = job_events(result, "1")
    first = first_event(job1, "Started")
    assert first["t"] == 600
    released = first_event(result.events, "SliceReleased")
    assert released["t"] == 1800 and released["nodes"] == 0 and "other 3 node(s)" in released["reason"]
    assert not [e for e in result.events if e["event"] == "SliceRepaired"]
    requests = [e for e in job1 if e["event"] == "ProvisioningRequest" and e["state"] == "Accepted"]
    assert [e["t"] for e in requests] == [0, 1800]
    again = [e for e in job1 if e["event"] == "Started"][1]
    dws = [n for n in first["nodes"] if "dws-pool" in n]
    assert again["t"] == 1800 + 600 and len(dws) == 4 and not set(again["nodes"]) & set(dws), "a new slice"
    assert first_event(job1, "Finished")["t"] == again["t"] + 3600


def test_host_failures_in_an_empty_pool_do_nothing(tmp_path: Path) -> None:
    result = run_guide(tmp_path, """    cloud:
      on-demand-pool: {hostFailures: [1m]}""", "", until="10m")
    assert not [e for e in result.events if e["event"] in ("NodeDeleted", "SliceRepaired")]


def test_a_pool_of_single_hosts_is_asked_only_for_the_nodes_it_lacks() -> None:
    pool = NodePoolSpec("cpu-pool", machine_type("n2-standard-16"), max_nodes=10, initial_nodes=1)
    cluster = Cluster([pool], EmulatedCloud())
    cluster.start_with_initial_nodes(0.0)
    group = PodGroup("workers", 3, {"cpu": 10_000}, {"cloud.google.com/gke-nodepool": "cpu-pool"}, ())
    assert cluster.place([group], 0.0).missing == {"cpu-pool": 2}, "one node is there: two more, not three"


def test_a_slice_lost_in_a_stock_out_is_released_and_comes_back_with_the_capacity(tmp_path: Path) -> None:
    result = run_guide(tmp_path, """    cloud:
      on-demand-pool: {bootTime: 3m, hostFailures: [20m], stockouts: [{from: 20m, to: 1h}]}
      dws-pool: {queuedDelay: never}""", job("1", run_for="1h"), until="4h")
    released = first_event(result.events, "SliceReleased")
    assert released["t"] == 1200 and released["nodes"] == 0
    assert not [e for e in result.events if e["event"] == "SliceRepaired"]
    again = [e for e in job_events(result, "1") if e["event"] == "Started"][1]
    assert again["t"] == 3600 + 180 and sum("on-demand-pool" in n for n in again["nodes"]) == 4
