"""Two servers on one PostgreSQL database, or on one SQLite file with ``--shared``: one leads the controllers, the
other serves the API (seeing the leader's writes), and takes over within a lease period when the leader is
killed."""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest

from flexq.store.url import StoreOptionError, open_store
from tests import admin, forks
from tests.conftest import Server, start_server, stop_server
from tests.support import condition, eventually, job

LEASE = 2.0
QUEUES = """
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: default}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: cq}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: default
      resources: [{name: cpu, nominalQuota: 10}]
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: lq, namespace: default}
spec: {clusterQueue: cq}
"""
WL = "/apis/kueue.x-k8s.io/v1beta2/namespaces/default/workloads"





def _apply(srv: Server, text: str) -> None:
    response = admin.post(srv.url + "/flexq/v1/apply", json={"sources": [{"text": text}]}, timeout=10)
    assert response.status_code == 200, response.text


def _leader(srv: Server) -> dict[str, Any]:
    answer: dict[str, Any] = admin.get(srv.url + "/flexq/v1/leader", timeout=5).json()
    return answer


def _admitted(srv: Server, job: str) -> Callable[[], None]:
    def check() -> None:
        items = admin.get(srv.url + WL, timeout=5).json()["items"]
        mine = [w for w in items if w["metadata"]["ownerReferences"][0]["name"] == job]
        assert mine and condition(mine[0], "Admitted") == "True"
    return check


def _watch(srv: Server, since: str, seen: list[dict[str, Any]], ready: threading.Event) -> None:
    with admin.stream("GET", srv.url + WL, params={"watch": "1", "resourceVersion": since, "timeoutSeconds": "20"},
                      timeout=30) as response:
        ready.set()
        for line in response.iter_lines():
            if line:
                event = orjson.loads(line)
                seen.append(event)
                if condition(event["object"], "Admitted") == "True":
                    return


@pytest.fixture(params=["postgresql", "sqlite", "sqlite, API workers"])
def pair(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    """Two servers on one store: a PostgreSQL database, or one SQLite file that both use with ``--shared`` (each
    server alone, or serving its API through two workers)."""
    if request.param == "postgresql":
        flags: tuple[str, ...] = ("--store", request.getfixturevalue("postgres_url"))
    else:
        flags = ("--store", f"sqlite:///{tmp_path / 'shared.db'}", "--shared")
    if request.param.endswith("API workers"):
        flags += ("--workers", "2")
    flags += ("--lease-duration", f"{LEASE:g}s")
    servers: list[Server] = []
    try:
        servers.append(start_server(tmp_path / "a", *flags))
        eventually(lambda: _assert(_leader(servers[0])["leading"]), timeout=10)
        servers.append(start_server(tmp_path / "b", *flags))
        yield servers
    finally:
        for srv in servers:
            stop_server(srv)


def _assert(value: bool) -> None:
    assert value


def test_a_follower_serves_the_api_and_takes_over_when_the_leader_is_killed(pair: list[Server]) -> None:
    leader, follower = pair
    told = _leader(follower)
    assert told["leading"] is False and told["holder"] == _leader(leader)["identity"]
    _apply(follower, QUEUES)
    since = admin.get(follower.url + WL, timeout=5).json()["metadata"]["resourceVersion"]
    seen: list[dict[str, Any]] = []
    ready = threading.Event()
    watcher = threading.Thread(target=_watch, args=(follower, since, seen, ready), daemon=True)
    watcher.start()
    assert ready.wait(10)
    # written through the follower, admitted by the leader's controller
    _apply(follower, job("first", queue="lq", cpu=1).yaml())
    eventually(_admitted(leader, "first"), timeout=15)
    watcher.join(timeout=15)
    assert seen and condition(seen[-1]["object"], "Admitted") == "True", "the follower's watch sees the leader's writes"
    assert seen[0]["type"] == "ADDED"
    assert _roles(leader) == {"leader"} and _roles(follower) <= {"follower"}, "Kueue's replica_role"

    leader.process.kill()  # kill -9: no release of the lease
    leader.process.wait(timeout=10)
    killed = time.monotonic()
    eventually(lambda: _assert(_leader(follower)["leading"]), timeout=3 * LEASE)
    took = time.monotonic() - killed
    assert took < LEASE + 2.0, f"took over in {took:.1f}s: the lease expires at most {LEASE:g}s after the kill"
    _apply(follower, job("second", queue="lq", cpu=1).yaml())
    eventually(_admitted(follower, "second"), timeout=15)
    assert _leader(follower)["lease"]["leaseTransitions"] == 1
    assert _roles(follower) == {"leader"}


def _roles(srv: Server) -> set[str]:
    """The ``replica_role`` values of the server's Kueue metrics."""
    text = admin.get(srv.url + "/metrics", timeout=5).text
    return {line.split('replica_role="')[1].split('"')[0] for line in text.splitlines()
            if line.startswith("kueue_") and 'replica_role="' in line}


def test_a_store_that_cannot_be_reached_is_named(tmp_path: Path) -> None:
    store = "postgresql://flexq:secret@127.0.0.1:1/none"
    done = forks.run(["server", "--home", str(tmp_path / "h"),
                     "--port", "0", "--no-tls", "--runtime", "none", "--store", store], text=True, timeout=30)
    assert done.returncode == 1 and "Traceback" not in done.stderr and "secret" not in done.stderr
    assert done.stderr.startswith("error: --store postgresql://flexq:***@127.0.0.1:1/none: cannot use the database: "
                                  "connection failed"), done.stderr
    assert not (tmp_path / "h").exists(), "nothing is written"
    for malformed, said in [("mysql://x", "expected postgresql://USER@HOST:PORT/DB"),
                            ("postgresql://x/db?nope=1", "not a PostgreSQL URL")]:
        with pytest.raises(StoreOptionError, match=re.escape(f"--store {malformed}: {said}")):
            open_store(malformed, tmp_path / "h")
