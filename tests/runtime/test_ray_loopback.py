"""No port of a job's Ray cluster is reachable from another machine: the head's and a worker node's GCS, raylets,
agents, dashboard, metrics and the job's own workers all listen on the loopback interface (Ray authenticates no
one)."""

from __future__ import annotations

import time

import httpx

from flexq.runtime.emulation import Accelerators
from flexq.runtime.ray_cluster import LocalRayCluster
from flexq.runtime.remote import AGENT_NOT_READY
from tests.runtime.ray_leaks import RayProcesses
from tests.runtime.ray_ports import _address, beyond_loopback, listening
from tests.support.waiting import eventually_value

ACTOR = ("python -c \"import ray, time; ray.init(); "
         "a = ray.remote(num_cpus=0, resources={'on_w0': 1})(type('A', (), {'ping': lambda self: 'pong'})).remote(); "
         "print(ray.get(a.ping.remote()), flush=True); time.sleep(60)\"")
"""A job whose actor can only live on the worker node (its resource ``on_w0``): the node must have joined."""


def test_proc_net_addresses_read_as_written() -> None:
    assert _address("0100007F:1F90") == ("127.0.0.1", 8080)
    assert _address("00000000:0050") == ("0.0.0.0", 80)
    assert _address("0000000000000000FFFF00000100007F:0016") == ("127.0.0.1", 22)
    assert _address("00000000000000000000000001000000:0016") == ("::1", 22)
    assert beyond_loopback({("0.0.0.0", 1): "a", ("127.0.0.1", 2): "b", ("::1", 3): "c", ("::", 4): "d"}) == {
        ("0.0.0.0", 1): "a", ("::", 4): "d"}


def test_no_port_of_a_cluster_or_its_job_listens_beyond_loopback(ray_processes: RayProcesses) -> None:
    cluster = LocalRayCluster(Accelerators(description="CPU only", num_cpus=1))
    cluster.start()
    try:
        cluster.add_worker("w0", num_cpus=1, resources={"on_w0": 1.0})

        def submit() -> httpx.Response | None:  # the head's job agent starts after its dashboard, late when loaded
            response = httpx.post(f"{cluster.dashboard_url}/api/jobs/", json={"entrypoint": ACTOR}, timeout=30)
            return None if any(m in response.text for m in AGENT_NOT_READY) else response

        submitted = eventually_value(submit, timeout=120, every=1.0, what="the head's job agent to take the job")
        assert submitted.status_code == 200, submitted.text
        job = submitted.json()["submission_id"]
        deadline = time.monotonic() + 120
        while "pong" not in httpx.get(f"{cluster.dashboard_url}/api/jobs/{job}/logs", timeout=30).json()["logs"]:
            assert time.monotonic() < deadline, "the job's actor did not answer"
            time.sleep(0.5)
        assert cluster.temp_dir is not None
        temps = {str(cluster.temp_dir), *(str(temp) for _proc, temp in cluster.workers.values())}
        sockets = listening(temps)
        assert len(sockets) >= 8, sockets  # the GCS, two raylets, agents, the dashboard, the job's workers
        assert {cluster.gcs_port, cluster.dashboard_port} <= {port for _host, port in sockets}
        assert beyond_loopback(sockets) == {}
    finally:
        cluster.stop()
