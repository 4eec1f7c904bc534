"""Every route of the server on generated requests: a 4xx in the API's own words, never a 500 or a traceback."""

from __future__ import annotations

import json
import warnings
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from flexq.api.kinds import KINDS
from flexq.auth import Role, TokenBook
from flexq.capacity.gke_pools import node_pool_webhook
from flexq.jobs.webhook import job_webhook
from flexq.objects.service import ObjectService
from flexq.server import k8s
from flexq.server.app import create_app
from flexq.server.authn import Authenticator
from flexq.store import Store
from tests.fuzz.strategies import JSON, KEYS, WILD_NUMBERS, manifests

SEGMENTS = st.sampled_from(["default", "team-a", "x", "cq", "status", "log", "portforward", "finalize", "scale",
                            "", "..", "%2F", "a" * 70, "Bad_Name", "ümlaut"])


@st.composite
def kube_paths(draw: st.DrawFn) -> str:
    info = draw(st.sampled_from(KINDS))
    version = draw(st.sampled_from([*info.versions, "v0"]))
    base = f"/apis/{info.group}/{version}" if info.group else f"/api/{version}"
    namespaced = draw(st.booleans())
    path = base + (f"/namespaces/{draw(SEGMENTS)}" if namespaced else "") + f"/{info.plural}"
    for _ in range(draw(st.integers(0, 3))):
        path += f"/{draw(SEGMENTS)}"
    return path


GKE_BASE = "/v1/projects/demo/locations/us-east5-b"
PATHS = st.one_of(
    kube_paths(),
    st.sampled_from(["/api", "/apis", "/api/v1", "/apis/kueue.x-k8s.io", "/apis/nope/v1/things", "/version",
                     "/healthz", "/metrics", "/openapi/v3", "/openapi/v3/apis/kueue.x-k8s.io/v1beta2",
                     "/openapi/v3/api/v9", "/flexq/v1/apply", "/flexq/v1/tokens", "/flexq/v1/tokens/alice",
                     "/flexq/v1/cluster-info", "/flexq/v1/namespaces/default/rayjobs/x/logs",
                     "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
                     "/apis/authentication.k8s.io/v1/selfsubjectreviews",
                     "/v1/projects/demo", "/v1/projects/demo/services/container.googleapis.com",
                     f"{GKE_BASE}/clusters", f"{GKE_BASE}/clusters/tpu", f"{GKE_BASE}/clusters/tpu/nodePools",
                     f"{GKE_BASE}/clusters/tpu/nodePools/p", f"{GKE_BASE}/clusters/tpu/nodePools/p:setSize",
                     f"{GKE_BASE}/operations", f"{GKE_BASE}/operations/op-1", "/v1/projects/demo/zones/z/clusters"]),
    st.text(max_size=30).map(lambda t: "/" + quote(t.lstrip("/"), safe="/:")),
)

CONTENT_TYPES = st.sampled_from(["application/json", "application/merge-patch+json", "application/json-patch+json",
                                 "application/strategic-merge-patch+json", "application/apply-patch+yaml",
                                 "application/yaml", "application/vnd.kubernetes.protobuf", "text/plain", ""])


@st.composite
def bodies(draw: st.DrawFn) -> bytes:
    kind = draw(st.integers(0, 7))
    if kind == 0:
        return json.dumps(draw(manifests())).encode()
    if kind == 1:
        return json.dumps(draw(JSON)).encode()
    if kind == 2:  # flexq's apply request
        return json.dumps({"sources": [{"text": json.dumps(draw(manifests()))}],
                           "fieldValidation": draw(st.sampled_from(["Strict", "Warn", "Ignore", "x"]))}).encode()
    if kind == 3:
        return draw(st.binary(max_size=64))
    if kind == 4:  # a manifest with a key repeated, or a number no 64 bits hold
        text = json.dumps(draw(manifests()))
        return (text[:-1] + ', "kind": "x"}' if draw(st.booleans()) else
                text[:-1] + f', "spec": {{"n": {draw(WILD_NUMBERS)}}}}}').encode()
    if kind == 5:  # input built to hurt: a lone surrogate, an alias bomb, more pod sets than a workload holds
        return draw(st.sampled_from(HOSTILE))
    return b"k8s\x00" + draw(st.binary(max_size=64))


def _bomb(levels: int = 9) -> bytes:
    lines = ['a0: &a0 "lol"'] + [f"a{n}: &a{n} [" + ", ".join([f"*a{n - 1}"] * 9) + "]" for n in range(1, levels + 1)]
    return ("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: bomb}\ndata:\n  " + "\n  ".join(lines) + "\n").encode()


_POD = {"spec": {"containers": [{"name": "ray", "image": "x"}]}}
HOSTILE: tuple[bytes, ...] = (
    b'{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}, "data": {"k": "\\ud800"}}',
    _bomb(),
    json.dumps({"apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": {"name": "wide"},
                "spec": {"entrypoint": "x", "rayClusterSpec": {
                    "headGroupSpec": {"template": _POD},
                    "workerGroupSpecs": [{"groupName": f"g{i}", "replicas": 1, "template": _POD} for i in range(100)]}}}
               ).encode(),
)
"""Bodies the hostile-input tests refuse one by one, here among everything else the fuzzer sends."""


QUERIES = st.dictionaries(st.sampled_from(["fieldValidation", "dryRun", "labelSelector", "fieldSelector",
                                           "resourceVersion", "limit", "continue", "includeObject", "propagationPolicy",
                                           "timeoutSeconds"]),
                          st.one_of(st.sampled_from(["Strict", "Warn", "Ignore", "All", "a=b", "a in (b)", "!a",
                                                     "metadata.name=x", "spec.bogus=x", "involvedObject.name=x",
                                                     "status.phase!=x", "0", "-1", "x"]), st.text(max_size=10)),
                          max_size=3)

SEEN: Counter[tuple[int, str]] = Counter()

with warnings.catch_warnings():  # starlette's test client asks for httpx2 and falls back on httpx with a warning
    warnings.simplefilter("ignore")
    from starlette.testclient import TestClient


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[TestClient, dict[str, str]]]:
    home: Path = tmp_path_factory.mktemp("fuzz-home")
    store = Store(home / "flexq.db")
    book = TokenBook(home)
    tokens = {"admin": book.ensure_admin(), "developer": book.create(Role.DEVELOPER, "team-a")[0],
              "bogus": "fq_not-a-token"}
    app = create_app(ObjectService(store, hooks=[job_webhook, node_pool_webhook]),
                     auth=Authenticator(book, anonymous=False))
    try:
        # A resourceVersion the store has not reached is waited for (a digit string drawn as one): briefly here.
        with pytest.MonkeyPatch.context() as patch, TestClient(app) as test_client:
            patch.setattr(k8s, "FRESH_WAIT", 0.01)
            yield test_client, tokens
    finally:
        store.close()


@pytest.mark.long
@settings(max_examples=4000, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(method=st.sampled_from(["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"]), path=PATHS,
       body=bodies(), content_type=CONTENT_TYPES, query=QUERIES,
       who=st.sampled_from(["admin", "admin", "developer", "bogus", None]), key=KEYS)
def test_generated_requests(client: tuple[TestClient, dict[str, str]], method: str, path: str, body: bytes,
                            content_type: str, query: dict[str, str], who: str | None, key: str) -> None:
    test_client, tokens = client
    headers = {"Content-Type": content_type} if content_type else {}
    if who is not None:
        headers["Authorization"] = f"Bearer {tokens[who]}"
    response = test_client.request(method, path, content=body if method in ("POST", "PUT", "PATCH", "DELETE") else
                                   None, params=query, headers=headers)
    assert response.status_code < 500, (method, path, response.status_code, response.text[:500])
    reason = ""
    if (response.status_code >= 400 and response.content
            and response.headers.get("content-type", "").startswith("application/json")):
        got: Any = response.json()
        if isinstance(got, dict) and got.get("kind") == "Status":
            assert got.get("message"), got
            reason = str(got.get("reason"))
        elif isinstance(got, dict) and "error" in got:
            assert got["error"].get("message"), got
            reason = str(got["error"].get("status"))
        else:
            reason = "detail"
    SEEN[(response.status_code, reason)] += 1
