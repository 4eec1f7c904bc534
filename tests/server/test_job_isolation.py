"""A developer's job cannot read the server's secrets: the administrator's token, the CA's key, the store.

Where the server runs as root, a job runs as a user of its own (``flexq-jobs``); everywhere, its environment carries
none of the server's credentials.
"""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from flexq.runtime.job_user import job_environment
from tests import admin
from tests.conftest import Server, start_server, stop_server

SETUP = """apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: small}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: pods}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu]
    flavors: [{name: small, resources: [{name: cpu, nominalQuota: 4}]}]
---
apiVersion: v1
kind: Namespace
metadata: {name: team-a}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: lq, namespace: team-a}
spec: {clusterQueue: pods}
"""


def test_a_jobs_environment_carries_no_credential() -> None:
    base = {"PATH": "/usr/bin", "HOME": "/root", "FLEXQ_TOKEN": "t", "FLEXQ_STORE": "postgresql://u:p@h/db",
            "KUBECONFIG": "/k", "CLOUDSDK_CONFIG": "/g", "PGPASSWORD": "p", "GITHUB_TOKEN": "g", "MY_API_KEY": "k",
            "AWS_SECRET_ACCESS_KEY": "a", "LANG": "C.UTF-8", "RAY_DEDUP_LOGS": "0"}
    assert job_environment(base) == {"PATH": "/usr/bin", "HOME": "/root", "LANG": "C.UTF-8", "RAY_DEDUP_LOGS": "0"}


@pytest.fixture
def running(tmp_path: Path) -> Iterator[Server]:
    """A server that runs what it admits, with a token in its own environment."""
    os.environ["FLEXQ_TOKEN_CANARY_TOKEN"] = "canary-in-the-servers-environment"
    try:
        srv = start_server(tmp_path / "home", "--runtime", "ray")
    finally:
        del os.environ["FLEXQ_TOKEN_CANARY_TOKEN"]
    try:
        yield srv
    finally:
        stop_server(srv)


def _flexq(server: Server, *args: str, token: str | None = None, input: str | None = None) -> str:
    done = server.cli(*args, token=token, input=input)
    assert done.code == 0, done.err
    return done.out


def _pod(server: Server, name: str) -> dict[str, Any]:
    got = admin.get(f"{server.url}/api/v1/namespaces/team-a/pods/{name}")
    assert got.status_code == 200, got.text
    body: dict[str, Any] = got.json()
    return body


def test_a_developers_pod_cannot_read_the_admin_token_or_the_ca_key(running: Server) -> None:
    home = running.home
    secrets = {"admin token": home / "auth" / "admin.token", "CA key": home / "tls" / "ca.key",
               "store": home / "flexq.db", "token book": home / "auth" / "tokens.json"}
    for what, path in secrets.items():
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, what
    assert stat.S_IMODE((home / "auth").stat().st_mode) == 0o700

    _flexq(running, "apply", "-f", "-", input=SETUP)
    alice = _flexq(running, "token", "create", "--role", "developer", "--namespace", "team-a").strip()
    reads = "; ".join(f"cat {path} && echo READ:{what.replace(' ', '-')}" for what, path in secrets.items())
    pod = f"""apiVersion: v1
kind: Pod
metadata: {{name: thief, namespace: team-a, labels: {{kueue.x-k8s.io/queue-name: lq}}}}
spec:
  restartPolicy: Never
  containers:
  - name: main
    image: busybox
    command: [sh, -c, 'id -u; env; {reads}; echo done']
    resources: {{requests: {{cpu: "1"}}}}
"""
    _flexq(running, "apply", "-f", "-", token=alice, input=pod)
    deadline = time.monotonic() + 60
    while (_pod(running, "thief").get("status") or {}).get("phase") not in ("Succeeded", "Failed"):
        assert time.monotonic() < deadline, "the pod did not finish"
        time.sleep(0.5)
    log = admin.get(f"{running.url}/api/v1/namespaces/team-a/pods/thief/log").text
    assert "done" in log, log
    assert running.token not in log and "BEGIN" not in log, "the token or the key was read"
    assert "canary-in-the-servers-environment" not in log, "the server's environment reached the job"
    if os.geteuid() != 0:
        pytest.skip("the server is not root: its jobs run as its own user, who can read its files (the security "
                    "docs say so); only the environment is kept from them")
    if stat.S_IMODE(home.stat().st_mode) == 0o700:  # 0711 where jobs run as a user of their own
        pytest.skip("the job user cannot run this installation's interpreter (a folder above it is not searchable "
                    "by other users): the server runs jobs as root and says so at its start")
    assert "READ:" not in log, log
    assert log.splitlines()[0].strip() != "0", "the job ran as root"
    assert "Permission denied" in log
