"""``kill -9`` of the server at seeded random moments of a run of 1,000 jobs (300 on PostgreSQL), each time started
again on the same state: no job lost, none admitted twice, quota usage equal to what the workloads hold,
ProvisioningRequests and node pools consistent, watches resumed from their resourceVersion without a gap."""

from __future__ import annotations

import os
import random
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import httpx
import pytest

from tests import admin, forks
from tests.conftest import free_port, guide_text
from tests.reliability import invariants
from tests.reliability.crashrun import JOBS, Crashable, Creator, Follower, batch_job, running
from tests.support import eventually

CAPACITY = """cloud:
  on-demand-pool: {available: 4, bootTime: 500ms}
  dws-pool: {queuedDelay: 1s, bootTime: 500ms}
  default-pool: {bootTime: 500ms}
provisioningTimeout: 60s
scaleDownAfter: 2s
"""
RUNS = {"sqlite": (1000, 20), "postgresql": (300, 8), "sqlite-workers": (300, 8)}
"""Jobs and kill points per store (PostgreSQL's run is shorter: it shows the same on the other back end; so is the run
of a server with API workers, whose owner is killed and its workers with it)."""
SEED = 20261201

T = TypeVar("T")


def _eventually(check: Callable[[], T], timeout: float = 60, every: float = 0.5) -> T:
    return eventually(check, timeout, every, also=(httpx.HTTPError,))


def _setup(server: Crashable) -> None:
    env = {**os.environ, "FLEXQ_SERVER": server.url, "FLEXQ_HOME": str(server.home)}

    def flexq(*args: str, input: str | None = None) -> None:
        done = forks.run(args, input=input, text=True, env=env, timeout=60)
        assert done.returncode == 0, done.stderr

    flexq("container", "clusters", "create", "tpu-cluster", "--machine-type=n2-standard-16", "--num-nodes=1")
    for pool, extra, most in (("on-demand-pool", [], 4),
                              ("dws-pool", ["--enable-queued-provisioning", "--flex-start"], 100)):
        flexq("container", "node-pools", "create", pool, "--cluster=tpu-cluster", "--machine-type=ct6e-standard-4t",
              "--tpu-topology=2x2", "--enable-autoscaling", *extra, "--num-nodes=0", "--min-nodes=0",
              f"--max-nodes={most}")
    flexq("apply", "-f", "-", input=guide_text("dws-tpu-queue.yaml"))


def _no_doubles(client: httpx.Client) -> None:
    doubled = {job: wls for job, wls in invariants.workloads_per_job(client).items() if len(wls) > 1}
    assert not doubled, f"jobs with more than one workload: {doubled}"
    twice = {wl: n for wl, n in invariants.admitted_events(client).items() if n > 1}
    assert not twice, f"workloads admitted more than once: {twice}"


def _holds(check: Callable[[httpx.Client], list[str]], client: httpx.Client) -> None:
    wrong = check(client)
    assert not wrong, wrong


def _all_finished(follower: Follower, jobs: int) -> None:
    if follower.finish_errors:  # a Job the follower could not finish never will be: no use waiting
        pytest.fail(f"Jobs not finished: {follower.finish_errors}")
    assert follower.finished() == jobs, f"{follower.finished()} of {jobs} finished"


def _unfinished(follower: Follower, creator: Creator, client: httpx.Client) -> list[str]:
    """What the server holds of each Job the follower has not seen finished: its workload's conditions and story,
    and the Job's own conditions (a failure message to act on, not a count)."""
    with follower.lock:
        seen = {s.job: (name, s) for name, s in follower.workloads.items()}
    jobs = {j["metadata"]["name"]: j for j in client.get(JOBS).json()["items"]}
    workloads = {wl["metadata"]["name"]: wl for wl in client.get(invariants.WORKLOADS).json()["items"]}
    lines = []
    for job in creator.created:
        name, followed = seen.get(job, ("", None))
        if followed is not None and followed.finished:
            continue
        job_conditions = invariants.condition_states(jobs.get(job, {}))
        if not name:
            lines.append(f"{job}: no workload seen by the watch; the Job's conditions {job_conditions}")
            continue
        held = invariants.condition_states(workloads.get(name, {}))
        lines.append(f"{job}: seen {followed}; workload {name} {held} (rv "
                     f"{workloads.get(name, {}).get('metadata', {}).get('resourceVersion')}); the Job's conditions "
                     f"{job_conditions}; its story {invariants.story(client, name)}")
    return lines


@pytest.mark.long
@pytest.mark.timeout(900)
@pytest.mark.parametrize("store", sorted(RUNS))
def test_kill_9_at_random_points_loses_and_doubles_nothing(store: str, tmp_path: Path,
                                                           request: pytest.FixtureRequest) -> None:
    jobs, kills_wanted = RUNS[store]
    (tmp_path / "capacity.yaml").write_text(CAPACITY)
    flags = ["--capacity", str(tmp_path / "capacity.yaml")]
    if store == "postgresql":
        flags += ["--store", request.getfixturevalue("postgres_url"), "--lease-duration", "2s"]
    if store == "sqlite-workers":
        flags += ["--workers", "2"]
    server = Crashable(tmp_path / "home", free_port(), *flags)
    rng = random.Random(SEED)
    server.start()
    try:
        _setup(server)
        creator = Creator(server.url, [batch_job(f"job-{i:04d}", "user-queue", 4) for i in range(jobs)], rate=25)
        follower = Follower(server.url, runtime=0.3)
        with admin.client(server.url, timeout=30) as client, \
                running(creator, *follower.threads()):
            kills = []
            for point in range(kills_wanted):
                time.sleep(rng.uniform(0.2, 2.5))
                kills.append((round(time.monotonic(), 2), follower.finished()))
                server.kill()
                server.start()
                _eventually(lambda: _no_doubles(client))
                if point == kills_wanted // 2:  # a quiet moment: none created or finished, the quota held
                    follower.paused.set()
                    creator.paused.set()
                    try:
                        _eventually(lambda: _holds(invariants.usage_mismatches, client), 60)
                    except AssertionError as exc:  # what the server says of its leading, and did
                        leader = client.get("/flexq/v1/leader").text
                        raise AssertionError(f"{exc}\nleader: {leader}\n{server.log_tail()}") from None
                    follower.paused.clear()
                    creator.paused.clear()
            try:
                _eventually(lambda: _all_finished(follower, jobs), timeout=240, every=1)
            except AssertionError as unfinished:
                raise AssertionError(f"{unfinished}: {_unfinished(follower, creator, client)}") from None
            follower.close()
            creator.stop.set()

            assert sorted(creator.created) == [f"job-{i:04d}" for i in range(jobs)] and not creator.refused
            per_job = invariants.workloads_per_job(client)
            assert sorted(per_job) == sorted(creator.created), "a job was lost"
            assert all(len(wls) == 1 for wls in per_job.values()), "a job has more than one workload"
            twice = {wl: invariants.story(client, wl) for wl, n in invariants.admitted_events(client).items() if n > 1}
            assert not twice, f"admitted more than once: {twice}"
            assert len(invariants.admitted_events(client)) == jobs
            seen = follower.workloads
            assert {s.admissions for s in seen.values()} == {1}, "the watch saw a workload admitted twice"
            assert not any(s.admitted_after_finish for s in seen.values())
            assert not follower.finish_errors and follower.gone == 0
            # The watch, resumed after every restart from the last resourceVersion it had, saw every change.
            listed = {wl["metadata"]["name"]: str(wl["metadata"]["resourceVersion"])
                      for wl in client.get(invariants.WORKLOADS).json()["items"]
                      if (wl["metadata"].get("ownerReferences") or [{}])[0].get("kind") == "Job"}
            assert {name: s.rv for name, s in seen.items()} == listed
            _eventually(lambda: _holds(invariants.usage_mismatches, client))
            _eventually(lambda: _holds(invariants.capacity_mismatches, client))
        assert len(kills) == kills_wanted and server.starts == kills_wanted + 1
    finally:
        server.stop()
