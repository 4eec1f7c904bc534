"""The two roles' rules, request attributes as the API server derives them, and the token book."""

from __future__ import annotations

import os
import socket
import stat
from pathlib import Path

import pytest

from flexq.auth import Attributes, Identity, Role, TokenBook, TokenError, authorize, forbidden_message
from flexq.auth import request_attributes as attributes_of
from flexq.auth.rbac import rules_in
from flexq.auth.tokens import UnknownToken, read_token
from flexq.server.listen import ListenError, plan_listeners

DEV = Identity("alice", Role.DEVELOPER, "team-a")
ADMIN = Identity("admin", Role.ADMIN)

# (method, path, query) -> (verb, group, resource, subresource, namespace, name)
REQUESTS: dict[tuple[str, str, str], tuple[str, str, str, str, str | None, str] | None] = {
    ("GET", "/apis/kueue.x-k8s.io/v1beta2/clusterqueues", ""): ("list", "kueue.x-k8s.io", "clusterqueues", "", None,
                                                                 ""),
    ("GET", "/apis/kueue.x-k8s.io/v1beta2/clusterqueues", "watch=true"): (
        "watch", "kueue.x-k8s.io", "clusterqueues", "", None, ""),
    ("DELETE", "/apis/kueue.x-k8s.io/v1beta2/clusterqueues/cq", ""): (
        "delete", "kueue.x-k8s.io", "clusterqueues", "", None, "cq"),
    ("DELETE", "/apis/ray.io/v1/namespaces/team-a/rayjobs", ""): (
        "deletecollection", "ray.io", "rayjobs", "", "team-a", ""),
    ("POST", "/apis/ray.io/v1/namespaces/team-a/rayjobs", ""): ("create", "ray.io", "rayjobs", "", "team-a", ""),
    ("PUT", "/apis/ray.io/v1/namespaces/team-a/rayjobs/j/status", ""): (
        "update", "ray.io", "rayjobs", "status", "team-a", "j"),
    ("PATCH", "/api/v1/namespaces/team-a/configmaps/c", ""): ("patch", "", "configmaps", "", "team-a", "c"),
    ("GET", "/api/v1/namespaces/team-a", ""): ("get", "", "namespaces", "", None, "team-a"),
    ("PUT", "/api/v1/namespaces/team-a/finalize", ""): ("update", "", "namespaces", "finalize", None, "team-a"),
    ("GET", "/api/v1/namespaces/team-a/pods/p/log", "follow=true"): ("get", "", "pods", "log", "team-a", "p"),
    ("GET", "/api/v1/namespaces/team-a/pods/p/portforward", "ports=8265"): (
        "get", "", "pods", "portforward", "team-a", "p"),
    ("GET", "/api/v1/watch/namespaces/team-a/pods", ""): ("watch", "", "pods", "", "team-a", ""),
    ("GET", "/api/v1/watch", ""): ("get", "", "", "", None, ""),
    ("GET", "/api", ""): ("get", "", "", "", None, ""),
    ("GET", "/apis/ray.io/v1", ""): ("get", "", "", "", None, ""),
    ("GET", "/metrics", ""): ("get", "", "", "", None, ""),
    ("POST", "/v1/projects/demo/locations/us-east5-b/clusters", ""): (
        "create", "container.googleapis.com", "clusters", "", None, ""),
    ("GET", "/v1/projects/demo/locations/us-east5-b/clusters/tpu", ""): (
        "get", "container.googleapis.com", "clusters", "", None, "tpu"),
    ("POST", "/v1/projects/demo/zones/z/clusters/tpu/nodePools", ""): (
        "create", "container.googleapis.com", "nodepools", "", None, ""),
    ("POST", "/v1/projects/demo/locations/z/clusters/tpu/nodePools/np:setSize", ""): (
        "update", "container.googleapis.com", "nodepools", "", None, "np"),
    ("DELETE", "/v1/projects/demo/locations/z/clusters/tpu/nodePools/np", ""): (
        "delete", "container.googleapis.com", "nodepools", "", None, "np"),
    ("GET", "/v1/projects/demo", ""): ("get", "container.googleapis.com", "projects", "", None, "demo"),
    ("GET", "/v1/projects/demo/locations/z/operations/op-1", ""): (
        "get", "container.googleapis.com", "operations", "", None, "op-1"),
    ("GET", "/flexq/v1/namespaces/team-a/rayjobs/j/logs", ""): ("get", "ray.io", "rayjobs", "log", "team-a", "j"),
    ("POST", "/flexq/v1/tokens", ""): ("create", "flexq.dev", "tokens", "", None, ""),
    ("DELETE", "/flexq/v1/tokens/alice", ""): ("delete", "flexq.dev", "tokens", "", None, "alice"),
    ("POST", "/flexq/v1/apply", ""): None,
    ("GET", "/ui/ray/team-b/j/api/jobs/", ""): ("get", "", "services", "proxy", "team-b", "j"),
    ("POST", "/ui/ray/team-b/j/api/jobs/", ""): ("create", "", "services", "proxy", "team-b", "j"),
    ("GET", "/ui/jobs/team-b/w", ""): ("get", "kueue.x-k8s.io", "workloads", "", "team-b", "w"),
    ("GET", "/flexq/v1/dashboard/jobs/team-b/w", ""): ("get", "kueue.x-k8s.io", "workloads", "", "team-b", "w"),
    ("GET", "/flexq/v1/dashboard/jobs", ""): ("get", "", "", "", None, ""),
}


@pytest.mark.parametrize(("method", "path", "query"), list(REQUESTS))
def test_request_attributes(method: str, path: str, query: str) -> None:
    params = dict(p.split("=", 1) for p in query.split("&") if p)
    got = attributes_of(method, path, params)
    want = REQUESTS[(method, path, query)]
    if want is None:
        assert got is None
        return
    assert got is not None
    assert (got.verb, got.group, got.resource, got.subresource, got.namespace, got.name) == want


# (verb, group, resource/subresource, namespace, name) -> may the developer of team-a?
DEVELOPER: dict[tuple[str, str, str, str | None, str], bool] = {
    ("create", "ray.io", "rayjobs", "team-a", ""): True,
    ("delete", "ray.io", "rayjobs", "team-a", "j"): True,
    ("create", "ray.io", "rayjobs", "team-b", ""): False,
    ("list", "ray.io", "rayjobs", None, ""): False,
    ("update", "ray.io", "rayjobs/status", "team-a", "j"): False,
    ("get", "ray.io", "rayjobs/log", "team-a", "j"): True,
    ("create", "", "configmaps", "team-a", ""): True,
    ("create", "", "configmaps", "default", ""): False,
    ("create", "batch", "jobs", "team-a", ""): True,
    ("get", "", "pods/log", "team-a", "p"): True,
    ("create", "", "pods/portforward", "team-a", "p"): True,
    ("create", "", "pods/portforward", "team-b", "p"): False,
    ("list", "kueue.x-k8s.io", "workloads", "team-a", ""): True,
    ("patch", "kueue.x-k8s.io", "workloads/status", "team-a", "w"): False,
    ("delete", "kueue.x-k8s.io", "workloads", "team-a", "w"): False,
    ("list", "kueue.x-k8s.io", "localqueues", "team-a", ""): True,
    ("create", "kueue.x-k8s.io", "localqueues", "team-a", ""): False,
    ("get", "visibility.kueue.x-k8s.io", "localqueues/pendingworkloads", "team-a", "q"): True,
    ("get", "visibility.kueue.x-k8s.io", "localqueues/pendingworkloads", "team-b", "q"): False,
    ("get", "visibility.kueue.x-k8s.io", "clusterqueues/pendingworkloads", None, "cq"): False,
    ("list", "kueue.x-k8s.io", "clusterqueues", None, ""): True,
    ("get", "kueue.x-k8s.io", "clusterqueues", None, "cq"): True,
    ("delete", "kueue.x-k8s.io", "clusterqueues", None, "cq"): False,
    ("update", "kueue.x-k8s.io", "clusterqueues/status", None, "cq"): False,
    ("create", "kueue.x-k8s.io", "resourceflavors", None, ""): False,
    ("list", "kueue.x-k8s.io", "resourceflavors", None, ""): True,
    ("create", "kueue.x-k8s.io", "admissionchecks", None, ""): False,
    ("create", "kueue.x-k8s.io", "cohorts", None, ""): False,
    ("get", "", "namespaces", None, "team-a"): True,
    ("get", "", "namespaces", None, "team-b"): False,
    ("delete", "", "namespaces", None, "team-a"): False,
    ("list", "", "nodes", None, ""): True,
    ("delete", "", "nodes", None, "n"): False,
    ("get", "container.googleapis.com", "clusters", None, "tpu"): True,
    ("create", "container.googleapis.com", "clusters", None, ""): False,
    ("create", "container.googleapis.com", "nodepools", None, ""): False,
    ("create", "flexq.dev", "tokens", None, ""): False,
    ("create", "authorization.k8s.io", "selfsubjectaccessreviews", None, ""): True,
    ("list", "scheduling.k8s.io", "priorityclasses", None, ""): True,
    ("create", "scheduling.k8s.io", "priorityclasses", None, ""): False,
    ("list", "apiextensions.k8s.io", "customresourcedefinitions", None, ""): True,
    ("create", "apiextensions.k8s.io", "customresourcedefinitions", None, ""): False,
}


@pytest.mark.parametrize("key", list(DEVELOPER))
def test_developer_rules(key: tuple[str, str, str, str | None, str]) -> None:
    verb, group, full, namespace, name = key
    resource, _, sub = full.partition("/")
    attrs = Attributes(verb, group, resource, sub, namespace, name)
    assert authorize(DEV, attrs) is DEVELOPER[key]
    assert authorize(ADMIN, attrs) is True


@pytest.mark.parametrize("namespace", ["team-a", "team-b"])
def test_the_rules_listed_are_the_rules_applied(namespace: str) -> None:
    """What ``kubectl auth can-i --list -n NAMESPACE`` shows a developer is what they may do there, and no more."""
    held = rules_in(DEV, namespace)
    assert held is not None and rules_in(ADMIN, namespace) is None
    rules, paths = held
    for rule in rules:
        for verb in rule.verbs:
            for full in rule.resources:
                resource, _, sub = full.partition("/")
                assert authorize(DEV, Attributes(verb, rule.group, resource, sub, namespace, namespace)), (verb, full)
    for key, allowed in DEVELOPER.items():
        verb, group, full, scope, _ = key
        if scope == namespace:
            listed = any(verb in r.verbs and r.group == group and full in r.resources for r in rules)
            assert listed is allowed, key
    assert "/metrics" in paths and "/apis/*" in paths


@pytest.mark.parametrize(("verb", "path", "allowed"), [
    ("get", "/metrics", True), ("get", "/apis", True), ("get", "/ui/jobs", True), ("get", "/openapi/v3", True),
    ("post", "/flexq/v1/anything", False), ("get", "/debug/pprof", False)])
def test_developer_paths(verb: str, path: str, allowed: bool) -> None:
    assert authorize(DEV, Attributes(verb, path=path)) is allowed


def test_refusals_are_worded_as_kubernetes_words_them() -> None:
    assert forbidden_message(DEV, Attributes("delete", "kueue.x-k8s.io", "clusterqueues", "", None, "cq")) == (
        'clusterqueues.kueue.x-k8s.io "cq" is forbidden: User "alice" cannot delete resource "clusterqueues" in '
        'API group "kueue.x-k8s.io" at the cluster scope')
    assert forbidden_message(DEV, Attributes("create", "", "configmaps", "", "default")) == (
        'configmaps is forbidden: User "alice" cannot create resource "configmaps" in API group "" in the '
        'namespace "default"')
    assert forbidden_message(DEV, Attributes("create", "", "pods", "portforward", "b", "p")).endswith(
        'cannot create resource "pods/portforward" in API group "" in the namespace "b"')
    assert forbidden_message(DEV, Attributes("post", path="/x")) == 'forbidden: User "alice" cannot post path "/x"'


def _mode(path: Path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def test_token_book(tmp_path: Path) -> None:
    book = TokenBook(tmp_path)
    admin = book.ensure_admin()
    assert book.ensure_admin() == admin == read_token(tmp_path), "made once, then reused"
    assert _mode(tmp_path / "auth" / "admin.token") == 0o600 and _mode(tmp_path / "auth" / "tokens.json") == 0o600
    assert admin not in (tmp_path / "auth" / "tokens.json").read_text(), "only digests are kept"
    assert book.identify(admin) == Identity("admin", Role.ADMIN)

    token, info = book.create(Role.DEVELOPER, "team-a")
    assert info.name == "developer-team-a-1" and book.identify(token) == Identity(info.name, Role.DEVELOPER, "team-a")
    other = TokenBook(tmp_path)
    assert other.identify(token) is not None, "a second process on the same home knows it"
    other.revoke(info.name)
    assert book.identify(token) is None, "revoked in one process, refused in the other"
    assert book.identify("fq_made-up") is None and book.identify("") is None

    for role, namespace, name, fragment in [
        (Role.DEVELOPER, None, None, "needs --namespace"),
        (Role.ADMIN, "team-a", None, "not bound to a namespace"),
        (Role.DEVELOPER, "Team_A", None, "not a valid namespace"),
        (Role.DEVELOPER, "team-a", "Bad Name", "--name"),
    ]:
        with pytest.raises(TokenError, match=fragment):
            book.create(role, namespace, name)
    book.create(Role.DEVELOPER, "team-a", "alice")
    with pytest.raises(TokenError, match="exists already"):
        book.create(Role.DEVELOPER, "team-b", "alice")
    with pytest.raises(UnknownToken):
        book.revoke("nobody")
    with pytest.raises(TokenError, match="cannot be revoked"):
        book.revoke("admin")


@pytest.mark.parametrize(("host", "port", "tls_port", "tls", "auth", "want"), [
    ("127.0.0.1", 8585, None, True, None, ("127.0.0.1", 8585, "127.0.0.1", 8586, "token", "127.0.0.1")),
    ("127.0.0.1", 8585, 0, True, "token", ("127.0.0.1", 8585, "127.0.0.1", 0, "token", "127.0.0.1")),
    ("localhost", 9000, None, False, None, ("localhost", 9000, None, None, "token", "127.0.0.1")),
    ("localhost", 9000, None, False, "anonymous", ("localhost", 9000, None, None, "anonymous", "127.0.0.1")),
    ("10.1.2.3", 8585, None, True, None, ("127.0.0.1", 8585, "10.1.2.3", 8586, "token", "10.1.2.3")),
])
def test_listeners(host: str, port: int, tls_port: int | None, tls: bool, auth: str | None,
                   want: tuple[object, ...]) -> None:
    plan = plan_listeners(host, port, tls_port, tls, auth)
    assert (plan.http_host, plan.http_port, plan.tls_host, plan.tls_port, plan.auth, plan.endpoint_host) == want


@pytest.mark.parametrize(("host", "tls_port", "tls", "auth", "fragment"), [
    ("0.0.0.0", None, True, "anonymous", "refusing anonymous access on 0.0.0.0"),
    ("10.1.2.3", None, False, None, "refusing to serve 10.1.2.3 without TLS"),
    ("127.0.0.1", 8585, True, None, "--tls-port 8585 is --port too"),
    ("127.0.0.1", None, True, "everyone", "--auth 'everyone'"),
])
def test_refused_listeners(host: str, tls_port: int | None, tls: bool, auth: str | None, fragment: str) -> None:
    with pytest.raises(ListenError, match=fragment):
        plan_listeners(host, 8585, tls_port, tls, auth)


def test_the_names_a_server_answers_to() -> None:
    loopback = plan_listeners("127.0.0.1", 8585, None, True, None, ("flexq.internal",))
    assert sorted(set(loopback.host_names())) == ["127.0.0.1", "flexq.internal"]
    everywhere = plan_listeners("0.0.0.0", 8585, None, True, None)
    assert socket.gethostname() in everywhere.host_names() and "0.0.0.0" in everywhere.host_names()
    with pytest.raises(ListenError, match="--allowed-host 'http://x'"):
        plan_listeners("127.0.0.1", 8585, None, True, None, ("http://x",))
