"""Tokens and the guide's two roles on a real server: 401, 403 as Kubernetes words it, kubectl auth can-i."""

from __future__ import annotations

import re
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from flexq.auth import read_token
from tests import admin, forks
from tests.conftest import Server, guide_text, start_server, stop_server

CQ = "/apis/kueue.x-k8s.io/v1beta2/clusterqueues"
POOLS = "/v1/projects/demo/locations/us-east5-b/clusters/tpu-cluster/nodePools"


@pytest.fixture
def secured(tmp_path: Path) -> Iterator[Server]:
    """A server as a user starts it: tokens required, on loopback too."""
    srv = start_server(tmp_path / "home")
    try:
        yield srv
    finally:
        stop_server(srv)


def test_tokens_and_roles(secured: Server, tmp_path: Path) -> None:
    url = secured.url
    assert read_token(secured.home) is not None

    # No token, or one the server never issued: 401, in each API's own words. Health stays public.
    anonymous_delete = httpx.delete(f"{url}{CQ}/cluster-queue")
    assert anonymous_delete.status_code == 401 and anonymous_delete.json()["reason"] == "Unauthorized"
    assert httpx.get(f"{url}{CQ}", headers={"Authorization": "Bearer fq_guessed"}).status_code == 401
    assert httpx.get(f"{url}{POOLS}").json()["error"]["status"] == "UNAUTHENTICATED"
    assert httpx.get(f"{url}/healthz").status_code == 200
    assert httpx.get(f"{url}/metrics").status_code == 401

    # The administrator (the token under FLEXQ_HOME) sets up the guide's queues and a team namespace.
    assert secured.cli("container", "clusters", "create", "tpu-cluster", "--location=us-east5-b").code == 0
    setup = guide_text("dws-tpu-queue.yaml") + "---\napiVersion: v1\nkind: Namespace\nmetadata: {name: team-a}\n"
    applied = secured.cli("apply", "-f", "-", input=setup)
    assert applied.code == 0, applied.err

    created = secured.cli("token", "create", "--role", "developer", "--namespace", "team-a", "--name", "alice")
    assert created.code == 0, created.err
    alice = created.out.strip()
    assert alice.startswith("fq_") and "not shown again" in created.err

    # A developer: jobs and ConfigMaps in team-a, the queues read-only, nothing of the administrator's.
    config_map = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: script, namespace: %s}\ndata: {a: b}\n"
    assert secured.cli("apply", "-f", "-", token=alice, input=config_map % "team-a").code == 0
    elsewhere = secured.cli("apply", "-f", "-", token=alice, input=config_map % "default")
    assert elsewhere.code != 0 and "Traceback" not in elsewhere.err
    assert ('configmaps "script" is forbidden: User "alice" cannot create resource "configmaps" in API group "" in '
            'the namespace "default"') in elsewhere.err
    assert "cluster-queue" in secured.cli("get", "clusterqueues", token=alice).out
    refused = secured.cli("delete", "clusterqueue", "cluster-queue", token=alice)
    assert refused.code != 0 and ('clusterqueues.kueue.x-k8s.io "cluster-queue" is forbidden: User "alice" cannot '
                                  'delete resource "clusterqueues" in API group "kueue.x-k8s.io" at the cluster scope'
                                  ) in refused.err
    as_alice = {"Authorization": f"Bearer {alice}"}
    pool = admin.post(f"{url}{POOLS}", headers=as_alice, json={"nodePool": {"name": "p"}})
    assert pool.status_code == 403 and pool.json()["error"]["status"] == "PERMISSION_DENIED"
    assert admin.get(f"{url}/v1/projects/demo/locations/us-east5-b/clusters/tpu-cluster",
                     headers=as_alice).status_code == 200, "get-credentials reads the cluster"
    assert secured.cli("token", "create", "--role", "admin", token=alice).code != 0, "no tokens for developers"
    _developers_see_their_own_namespace_only(secured, as_alice)
    assert admin.get(f"{url}/flexq/v1/tokens", headers=as_alice).status_code == 403

    # What a developer may do in a namespace (kubectl auth can-i --list): a review, found by discovery.
    reviews = admin.get(f"{url}/apis/authorization.k8s.io/v1", headers=as_alice).json()["resources"]
    assert "selfsubjectrulesreviews" in {r["name"] for r in reviews}
    for namespace, jobs in (("team-a", True), ("default", False)):
        answer = admin.post(f"{url}/apis/authorization.k8s.io/v1/selfsubjectrulesreviews", headers=as_alice,
                            json={"kind": "SelfSubjectRulesReview", "spec": {"namespace": namespace}})
        assert answer.status_code == 201, answer.text
        held = {(g, r) for rule in answer.json()["status"]["resourceRules"] for g in rule["apiGroups"]
                for r in rule["resources"]}
        assert (("ray.io", "rayjobs") in held) is jobs and ("kueue.x-k8s.io", "clusterqueues") in held
    unnamed = admin.post(f"{url}/apis/authorization.k8s.io/v1/selfsubjectrulesreviews", json={"spec": {}})
    assert unnamed.status_code == 400 and unnamed.json()["message"].startswith("spec.namespace: Required value")

    if shutil.which("kubectl") is not None:
        config = tmp_path / "alice.kubeconfig"
        assert secured.cli("kubeconfig", "--write", str(config), token=alice).code == 0
        admin_config = tmp_path / "admin.kubeconfig"
        assert secured.cli("kubeconfig", "--write", str(admin_config)).code == 0

        def kubectl(*args: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run(["kubectl", *args], capture_output=True, text=True, timeout=60, check=False,
                                  env={**secured.env(), "KUBECONFIG": str(config), "HOME": str(tmp_path)})

        answers = {("create", "rayjobs", "team-a"): "yes", ("create", "rayjobs", "default"): "no",
                   ("delete", "clusterqueues", ""): "no", ("list", "clusterqueues", ""): "yes",
                   ("create", "configmaps", "team-a"): "yes", ("create", "resourceflavors", ""): "no"}
        for (verb, resource, namespace), want in answers.items():
            got = kubectl("auth", "can-i", verb, resource, *(["-n", namespace] if namespace else []))
            assert got.stdout.strip() == want, (verb, resource, namespace, got.stdout, got.stderr)
            assert got.returncode == (0 if want == "yes" else 1)
        # Their rules: the namespace's in team-a, the queues' and the cluster's everywhere; an administrator's: all.
        rules = {ns: kubectl("auth", "can-i", "--list", "-n", ns) for ns in ("team-a", "default")}
        assert all(r.returncode == 0 for r in rules.values()), [r.stderr for r in rules.values()]
        verbs = {ns: dict(re.findall(r"^(\S+)\s+\[\]\s+\[\S*\]\s+\[(.*)\]$", r.stdout, re.M))
                 for ns, r in rules.items()}
        assert "create" in verbs["team-a"]["rayjobs.ray.io"] and "create" in verbs["team-a"]["configmaps"]
        assert "rayjobs.ray.io" not in verbs["default"] and "configmaps" not in verbs["default"]
        for listed in verbs.values():
            queues = ("clusterqueues.kueue.x-k8s.io", "resourceflavors.kueue.x-k8s.io")
            assert [listed[q] for q in queues] == ["get list watch"] * 2
        assert re.search(r"^namespaces\s+\[\]\s+\[team-a\]\s+\[get list watch\]$", rules["team-a"].stdout, re.M)
        everything = subprocess.run(["kubectl", "auth", "can-i", "--list", "-n", "team-a"], capture_output=True,
                                    text=True, timeout=60, check=False, env={**secured.env(), "HOME": str(tmp_path),
                                                                             "KUBECONFIG": str(admin_config)})
        assert re.search(r"^\*\.\*\s+\[\]\s+\[\]\s+\[\*\]$", everything.stdout, re.M), everything.stderr
        whoami = kubectl("auth", "whoami")
        assert whoami.returncode == 0 and "alice" in whoami.stdout, whoami.stderr
        denied = kubectl("delete", "clusterqueue", "cluster-queue")
        assert denied.returncode != 0 and 'User "alice" cannot delete resource "clusterqueues"' in denied.stderr

    # The dashboard in a browser: the token once in the address, then a cookie for the pages and their events.
    signed = admin.get(f"{url}/ui/?token={alice}", follow_redirects=False)
    assert signed.status_code == 303 and signed.headers["location"] == "/ui/"
    assert "HttpOnly" in signed.headers["set-cookie"] and alice not in signed.headers["location"]
    assert httpx.get(f"{url}/flexq/v1/dashboard/overview").status_code == 401
    assert admin.get(f"{url}/flexq/v1/dashboard/overview", cookies={"flexq-token": alice}).status_code == 200
    assert admin.get(f"{url}/ui/?token=fq_wrong", follow_redirects=False).status_code == 401
    # A one-time code (what flexq dashboard opens) stands for the caller's token: once, and only the token's holder
    # (not the dashboard's cookie) can ask for one.
    code = httpx.post(f"{url}/flexq/v1/sign-in-codes", headers=as_alice, timeout=30)
    assert code.status_code == 201 and alice not in code.text, code.text
    signed = httpx.get(f"{url}/ui/?code={code.json()['code']}", follow_redirects=False, timeout=30)
    assert signed.status_code == 303 and f"flexq-token={alice}" in signed.headers["set-cookie"]
    assert httpx.get(f"{url}/ui/?code={code.json()['code']}", follow_redirects=False, timeout=30).status_code == 401
    assert httpx.post(f"{url}/flexq/v1/sign-in-codes", timeout=30).status_code == 401
    assert httpx.post(f"{url}/flexq/v1/sign-in-codes", cookies={"flexq-token": alice}, timeout=30).status_code != 201

    listed = secured.cli("token", "list")
    assert "alice" in listed.out and "developer" in listed.out and alice not in listed.out
    assert secured.cli("token", "revoke", "alice").code == 0
    assert admin.get(f"{url}{CQ}", headers=as_alice).status_code == 401, "a revoked token is refused"


def _developers_see_their_own_namespace_only(server: Server, as_alice: dict[str, str]) -> None:
    """The dashboard's job list, a job's detail, its page and its Ray dashboard are authorized per namespace."""
    pod = ("apiVersion: v1\nkind: Pod\nmetadata: {name: other, namespace: default, labels: "
           "{kueue.x-k8s.io/queue-name: user-queue}}\nspec: {containers: [{name: c, image: app}]}\n")
    assert server.cli("apply", "-f", "-", input=pod).code == 0
    deadline = time.monotonic() + 30
    while not (rows := admin.get(f"{server.url}/flexq/v1/dashboard/jobs").json()["items"]):
        assert time.monotonic() < deadline, "the pod's workload did not show"
        time.sleep(0.2)
    assert httpx.get(f"{server.url}/flexq/v1/dashboard/jobs", headers=as_alice).json()["total"] == 0
    workload = rows[0]["name"]
    for path in [f"/flexq/v1/dashboard/jobs/default/{workload}", f"/ui/jobs/default/{workload}",
                 "/ui/ray/default/other/api/jobs/"]:
        assert httpx.get(server.url + path, headers=as_alice).status_code == 403, path
    assert admin.get(f"{server.url}/flexq/v1/dashboard/jobs/default/{workload}").status_code == 200

    # The overview's ProvisioningRequests in flight: the developer's namespace's only.
    for namespace in ("default", "team-a"):
        created = admin.post(f"{server.url}/apis/autoscaling.x-k8s.io/v1/namespaces/{namespace}/provisioningrequests",
                             json={"apiVersion": "autoscaling.x-k8s.io/v1", "kind": "ProvisioningRequest",
                                   "metadata": {"name": f"pr-{namespace}"},
                                   "spec": {"provisioningClassName": "queued-provisioning.gke.io",
                                            "podSets": [{"podTemplateRef": {"name": "t"}, "count": 1}]}})
        assert created.status_code == 201, created.text

    def shown(headers: dict[str, str] | None = None) -> set[str]:
        view = admin.get(f"{server.url}/flexq/v1/dashboard/overview", headers=headers).json()
        return {f"{p['namespace']}/{p['name']}" for p in view["provisioning"]}
    assert shown() == {"default/pr-default", "team-a/pr-team-a"}
    assert shown(as_alice) == {"team-a/pr-team-a"}


def test_anonymous_mode_only_when_asked_and_on_loopback_only(tmp_path: Path) -> None:
    srv = start_server(tmp_path / "home", "--auth", "anonymous")
    try:  # a caller without a token is the administrator
        assert httpx.post(f"{srv.url}/flexq/v1/apply", json={"sources": [{"text": guide_text("dws-tpu-queue.yaml")}]}
                          ).status_code == 200
        srv.process.terminate()
        banner = srv.process.communicate(timeout=15)[1].decode()
        assert "WARNING: anonymous mode" in banner and "run commands as this server's user" in banner
    finally:
        stop_server(srv)
    for flags, fragment in [(["--host", "0.0.0.0", "--auth", "anonymous"], "refusing anonymous access on 0.0.0.0"),
                            (["--host", "0.0.0.0", "--no-tls"], "refusing to serve 0.0.0.0 without TLS"),
                            (["--allowed-host", "a/b"], "--allowed-host 'a/b'")]:
        proc = forks.run(["server", "--home", str(tmp_path / "h"), *flags], text=True, timeout=60)
        assert proc.returncode != 0 and fragment in proc.stderr and "Traceback" not in proc.stderr
        assert not (tmp_path / "h" / "flexq.db").exists(), "nothing started, nothing written"
