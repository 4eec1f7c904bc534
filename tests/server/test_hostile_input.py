"""Input built to hurt: an alias bomb, a lone surrogate, a repeated key, a number no 64 bits hold, a field label no
kind has, a resourceVersion from the future and a body past the limit are answered as the API server answers them,
and leave the server as it was."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from flexq.api import InputError, load_documents
from flexq.objects.selectors import SelectorError, field_labels, field_selector
from flexq.server.bodylimit import MAX_MANIFEST_REQUEST_BYTES, MAX_REQUEST_BYTES
from flexq.server.k8s import FRESH_WAIT
from tests import admin
from tests.conftest import Server

CONFIGMAPS = "/api/v1/namespaces/default/configmaps"
WORKLOADS = "/apis/kueue.x-k8s.io/v1beta2/namespaces/default/workloads"
JSON_BODY = {"Content-Type": "application/json"}
YAML_BODY = {"Content-Type": "application/yaml"}


@pytest.fixture
def server(module_server: Server) -> Server:
    """The tests here share one server: each writes under names of its own, and none counts what the others wrote."""
    return module_server


def _bomb(levels: int = 9) -> str:
    """A 400-byte ConfigMap whose anchors expand to ``9 ** levels`` strings."""
    lines = ['a0: &a0 "lol"']
    for n in range(1, levels + 1):
        lines.append(f"a{n}: &a{n} [" + ", ".join([f"*a{n - 1}"] * 9) + "]")
    body = "\n  ".join(lines)
    return f"apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: bomb}}\ndata:\n  {body}\n"


def test_the_manifest_reader_refuses_excessive_aliasing_and_keeps_a_few_aliases() -> None:
    with pytest.raises(InputError, match="excessive aliasing"):
        load_documents(_bomb(), "bomb.yaml")
    (doc,) = load_documents("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: ok, labels: &l {a: b}}\n"
                            "data: {x: y}\nextra: *l\n", "fine.yaml")
    assert doc.obj["extra"] == {"a": "b"}, "ordinary anchors still read"


@pytest.mark.parametrize("how", ["apply", "yaml-body"])
def test_an_alias_bomb_gets_400_and_nothing_is_stored(server: Server, how: str) -> None:
    if how == "apply":
        answer = admin.post(server.url + "/flexq/v1/apply", json={"sources": [{"text": _bomb(), "source": "b.yaml"}]})
    else:
        answer = admin.post(server.url + CONFIGMAPS, content=_bomb(), headers={"Content-Type": "application/yaml"})
    assert answer.status_code == 400, answer.text
    assert "excessive aliasing" in answer.json()["message"]
    assert admin.get(server.url + CONFIGMAPS + "/bomb").status_code == 404


def test_a_lone_surrogate_gets_400_and_every_list_still_answers(server: Server) -> None:
    raw = '{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "boom"}, "data": {"k": "\\ud800"}}'
    answer = admin.post(server.url + CONFIGMAPS, content=raw, headers={"Content-Type": "application/json"})
    assert answer.status_code == 400 and "surrogate" in answer.json()["message"], answer.text
    paired = raw.replace("\\ud800", "\\ud83d\\udca5")
    assert admin.post(server.url + CONFIGMAPS, content=paired,
                      headers={"Content-Type": "application/json"}).status_code == 201, "a pair is a character"
    stored: dict[str, Any] = admin.get(server.url + CONFIGMAPS + "/boom").json()
    assert stored["data"]["k"] == "\U0001f4a5"
    for path in (CONFIGMAPS, "/api/v1/configmaps"):
        assert admin.get(server.url + path).status_code == 200
    assert json.loads(admin.get(server.url + "/api/v1/configmaps").text)["items"]


@pytest.mark.parametrize(("query", "field"), [("timeoutSeconds=abc", "timeoutSeconds"),
                                              ("resourceVersion=abc", "resourceVersion"),
                                              ("timeoutSeconds=-5", "timeoutSeconds")])
def test_a_watch_with_a_malformed_parameter_gets_400(server: Server, query: str, field: str) -> None:
    answer = admin.get(f"{server.url}{CONFIGMAPS}?watch=true&{query}")
    assert answer.status_code == 400, answer.text
    assert answer.json()["message"].startswith(f"{field}: Invalid value")


def test_more_pod_sets_than_a_workload_holds_get_422_naming_the_field(server: Server) -> None:
    """A RayJob's head and worker groups are its Workload's pod sets, of which Kueue allows 8."""
    pod = {"spec": {"containers": [{"name": "ray", "image": "rayproject/ray"}]}}
    groups = [{"groupName": f"g{i}", "replicas": 1, "template": pod} for i in range(10_000)]
    job = {"apiVersion": "ray.io/v1", "kind": "RayJob",
           "metadata": {"name": "wide", "labels": {"kueue.x-k8s.io/queue-name": "user-queue"}},
           "spec": {"entrypoint": "python x.py",
                    "rayClusterSpec": {"headGroupSpec": {"template": pod}, "workerGroupSpecs": groups}}}
    rayjobs = server.url + "/apis/ray.io/v1/namespaces/default/rayjobs"
    answer = admin.post(rayjobs, json=job)
    assert answer.status_code == 422 and answer.json()["reason"] == "Invalid", answer.text[:500]
    assert answer.json()["message"] == ('RayJob.ray.io "wide" is invalid: spec.rayClusterSpec.workerGroupSpecs: '
                                        "Too many: 10001: must have at most 8 items")
    assert admin.get(rayjobs + "/wide").status_code == 404
    workload = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload", "metadata": {"name": "wide"},
                "spec": {"queueName": "user-queue",
                         "podSets": [{"name": f"p{i}", "count": 1, "template": pod} for i in range(9)]}}
    answer = admin.post(server.url + "/apis/kueue.x-k8s.io/v1beta2/namespaces/default/workloads", json=workload)
    assert answer.status_code == 422, answer.text
    assert "spec.podSets: Too many: 9: must have at most 8 items" in answer.json()["message"]


# --- field selectors ---------------------------------------------------------------------------------------------


def test_field_labels_are_the_name_the_namespace_and_those_of_the_kind() -> None:
    event = {"metadata": {"name": "e"}, "involvedObject": {"name": "cq"}, "source": {"component": "kueue"}}
    assert field_selector("involvedObject.name=cq,source=kueue", field_labels("", "events"))(event)
    with pytest.raises(SelectorError, match=r"^field label not supported: involvedObject\.name$"):
        field_selector("involvedObject.name=cq", field_labels("", "configmaps"))
    assert field_selector("spec.hostNetwork=true", field_labels("", "pods"))({"spec": {"hostNetwork": True}})
    assert field_selector("metadata.namespace!=x", field_labels("kueue.x-k8s.io", "workloads"))({"metadata": {}})


def test_an_unsupported_field_label_gets_400_on_lists_and_watches(server: Server) -> None:
    for path in (CONFIGMAPS, WORKLOADS, "/api/v1/configmaps"):
        for watch in ({}, {"watch": "true", "timeoutSeconds": "1"}):
            answer = admin.get(server.url + path, params={"fieldSelector": "spec.bogus=x", **watch})
            assert answer.status_code == 400, (path, watch, answer.text)
            assert answer.json()["reason"] == "BadRequest"
            assert answer.json()["message"] == "field label not supported: spec.bogus"
    for selector in ("metadata.name", "=x", "metadata.name in (x)", "metadata.name=x,spec.bogus!=y"):
        answer = admin.get(server.url + CONFIGMAPS, params={"fieldSelector": selector})
        assert answer.status_code == 400, (selector, answer.text)
    for path, selector in ((CONFIGMAPS, "metadata.name=x,metadata.namespace=default"),
                           ("/api/v1/namespaces/default/events", "involvedObject.name=x,involvedObject.kind=CQ,"
                                                                 "involvedObject.uid=u,type=Normal,reason=R"),
                           ("/api/v1/pods", "spec.nodeName=n,status.phase!=Failed")):
        answer = admin.get(server.url + path, params={"fieldSelector": selector})
        assert answer.status_code == 200 and answer.json()["items"] == [], (path, answer.text)


# --- repeated keys -----------------------------------------------------------------------------------------------


def test_a_repeated_key_is_refused_under_strict_and_warned_of_under_warn(server: Server) -> None:
    def body(name: str) -> str:
        return ('{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "' + name + '", "name": "'
                + name + '"}, "data": {"k": "a", "k": "b"}}')

    strict = admin.post(server.url + CONFIGMAPS, params={"fieldValidation": "Strict"}, content=body("s"),
                        headers=JSON_BODY)
    assert strict.status_code == 400, strict.text
    assert strict.json()["message"] == ('ConfigMap in version "v1" cannot be handled as a ConfigMap: strict decoding '
                                        'error: duplicate field "name", duplicate field "k"'), strict.text
    assert admin.get(server.url + CONFIGMAPS + "/s").status_code == 404
    warned = admin.post(server.url + CONFIGMAPS, params={"fieldValidation": "Warn"}, content=body("w"),
                        headers=JSON_BODY)
    assert warned.status_code == 201 and warned.json()["data"] == {"k": "b"}, warned.text
    assert warned.headers.get_list("Warning") == ['299 - "duplicate field \\"name\\""',
                                                  '299 - "duplicate field \\"k\\""']
    ignored = admin.post(server.url + CONFIGMAPS, params={"fieldValidation": "Ignore"}, content=body("i"),
                         headers=JSON_BODY)
    assert ignored.status_code == 201 and "Warning" not in ignored.headers
    text = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: y\ndata:\n  k: a\n  k: b\n"
    yaml_strict = admin.post(server.url + CONFIGMAPS, params={"fieldValidation": "Strict"}, content=text,
                             headers=YAML_BODY)
    assert yaml_strict.status_code == 400
    assert yaml_strict.json()["message"].endswith('strict decoding error: line 7: key "k" already set in map')
    a_colon_in_text = '{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"k": "\\":"}}'
    answer = admin.post(server.url + CONFIGMAPS, params={"fieldValidation": "Strict"}, content=a_colon_in_text,
                        headers=JSON_BODY)
    assert answer.status_code == 201 and "Warning" not in answer.headers, answer.text


# --- numbers -----------------------------------------------------------------------------------------------------

JOBS = "/apis/batch/v1/namespaces/default/jobs"


def _job(parallelism: str, name: str = "j") -> str:
    return ('{"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "' + name + '"}, "spec": {"parallelism": '
            + parallelism + ', "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", '
            '"image": "i", "resources": {"requests": {"cpu": 1.5}}}]}}}}')


@pytest.mark.parametrize("number", ["9223372036854775808", "-9223372036854775809", ".inf", "-.inf", ".nan",
                                    "1.0e+400"])
def test_the_manifest_reader_refuses_a_number_no_64_bits_hold_with_its_line(number: str) -> None:
    with pytest.raises(InputError, match=r"^job\.yaml:1: spec\.parallelism: .*64-bit"):
        load_documents(_job(number), "job.yaml")
    multi = f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n---\napiVersion: v1\nkind: X\nspec:\n  n: {number}"
    with pytest.raises(InputError, match=r"^m\.yaml:9: spec\.n: "):
        load_documents(multi, "m.yaml")


def test_the_manifest_reader_keeps_numbers_that_fit() -> None:
    (doc,) = load_documents(_job("9223372036854775807"), "job.yaml")
    assert doc.obj["spec"]["parallelism"] == 2**63 - 1
    (doc,) = load_documents("a: [-9223372036854775808, 1.5e+300, 0.1, 1e400, NaN]\n", "x.yaml")
    assert doc.obj["a"] == [-(2**63), 1.5e300, 0.1, "1e400", "NaN"], "YAML 1.1 reads these last two as strings"


def test_a_number_no_64_bits_hold_gets_400_as_json_yaml_or_in_apply(server: Server) -> None:
    for number in ("9223372036854775808", "-9223372036854775809", "1e400", "NaN", "-Infinity"):
        answer = admin.post(server.url + JOBS, content=_job(number), headers=JSON_BODY)
        assert answer.status_code == 400, (number, answer.text)
        assert answer.json()["message"].startswith("the request body: spec.parallelism: "), answer.text
    for number in ("9223372036854775808", ".inf", ".nan"):
        text = "apiVersion: batch/v1\nkind: Job\nmetadata: {name: j}\nspec:\n  parallelism: " + number + "\n"
        answer = admin.post(server.url + JOBS, content=text, headers=YAML_BODY)
        assert answer.status_code == 400 and "spec.parallelism" in answer.json()["message"], answer.text
        applied = admin.post(server.url + "/flexq/v1/apply", json={"sources": [{"text": text, "source": "j.yaml"}]})
        assert applied.status_code == 400, applied.text
        assert applied.json()["message"].startswith("j.yaml:5: spec.parallelism: "), applied.text
    assert admin.get(server.url + JOBS + "/j").status_code == 404
    for number in ("9223372036854775807", "2"):  # refused, if at all, by what the job lacks (a queue), not as a number
        assert "64-bit" not in admin.post(server.url + JOBS, content=_job(number), headers=JSON_BODY).text
    fits = ('{"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "p"}, '
            '"value": 2147483647, "description": "1e400"}')
    assert admin.post(server.url + "/apis/scheduling.k8s.io/v1/priorityclasses", content=fits,
                      headers=JSON_BODY).status_code == 201


# --- resourceVersions from the future ----------------------------------------------------------------------------


def _current(server: Server) -> int:
    return int(admin.get(server.url + CONFIGMAPS).json()["metadata"]["resourceVersion"])


@pytest.mark.parametrize("query", ["watch=true", "resourceVersionMatch=NotOlderThan", ""])
def test_a_resource_version_the_store_has_not_reached_gets_504_after_a_wait(server: Server, query: str) -> None:
    current = _current(server)
    wanted = current + 1000
    began = time.monotonic()
    answer = admin.get(f"{server.url}{CONFIGMAPS}?resourceVersion={wanted}&{query}", timeout=20)
    assert time.monotonic() - began >= 2.5, "the store is given time to catch up"
    assert answer.status_code == 504, answer.text
    status = answer.json()
    assert status["reason"] == "Timeout" and status["code"] == 504
    prefix = f"Timeout: Too large resource version: {wanted}, current: "
    assert status["message"].startswith(prefix) and int(status["message"][len(prefix):]) >= current
    assert status["details"]["causes"][0]["reason"] == "ResourceVersionTooLarge"
    assert answer.headers["Retry-After"] == "1"


def test_a_list_and_a_watch_from_the_next_resource_version_wait_for_it(server: Server) -> None:
    for attempt in range(3):
        answers, late = _ask_ahead_then_create(server, f"-{attempt}")
        if not late:
            break
    assert answers["list"].status_code == 200, answers["list"].text
    assert int(answers["list"].json()["metadata"]["resourceVersion"]) >= answers["wanted"]
    assert answers["watch"] == 200
    assert ("ADDED", f"second-{attempt}") in [(e["type"], e["object"]["metadata"]["name"]) for e in answers["events"]]


def _ask_ahead_then_create(server: Server, suffix: str) -> tuple[dict[str, Any], bool]:
    """A list and a watch from the next resourceVersion, then two creations (``next`` and ``second``, with
    ``suffix``: each attempt makes its own); the answers, and whether the creations
    came too late to count (after the server's wait for that version ended: on a machine too busy to make them in
    time, the 504 that follows is the right answer, and the case is asked again)."""
    wanted = _current(server) + 1
    answers: dict[str, Any] = {"wanted": wanted}
    began = time.monotonic()

    def listing() -> None:
        answers["list"] = admin.get(f"{server.url}{CONFIGMAPS}?resourceVersion={wanted}", timeout=20)

    def watch() -> None:
        params = {"watch": "true", "resourceVersion": str(wanted), "timeoutSeconds": "3"}
        with admin.stream("GET", server.url + CONFIGMAPS, params=params, timeout=20) as response:
            answers["watch"] = response.status_code
            answers["events"] = [json.loads(line) for line in response.iter_lines() if line]

    threads = [threading.Thread(target=listing), threading.Thread(target=watch)]
    for thread in threads:
        thread.start()
    time.sleep(0.5)
    for name in ("next", "second"):
        assert admin.post(server.url + CONFIGMAPS, json={"apiVersion": "v1", "kind": "ConfigMap",
                                                         "metadata": {"name": name + suffix}}).status_code == 201
    created = time.monotonic() - began
    for thread in threads:
        thread.join(timeout=20)
    return answers, answers["list"].status_code == 504 and created > FRESH_WAIT - 0.5


# --- bodies past the limit ---------------------------------------------------------------------------------------


def _chunks(total: int, name: str = "big") -> Iterator[bytes]:
    yield b'{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "' + name.encode() + b'"}, "data": {"k": "'
    sent = 0
    while sent < total:
        yield b"x" * 65536
        sent += 65536
    yield b'"}}'


@pytest.mark.parametrize("path", [CONFIGMAPS, "/flexq/v1/apply"])
def test_a_body_over_the_limit_gets_413_with_or_without_a_length(server: Server, path: str) -> None:
    limit = MAX_REQUEST_BYTES if path.startswith("/api") else MAX_MANIFEST_REQUEST_BYTES
    headers = admin.headers_for(server.url, JSON_BODY)
    with httpx.Client(headers=headers, timeout=30) as client:
        told = client.post(server.url + path, content=b"{" + b" " * limit + b"}")
        assert told.status_code == 413, told.text
        assert told.json()["reason"] == "RequestEntityTooLarge"
        assert told.json()["message"] == f"Request entity too large: limit is {limit}"
        chunked = client.post(server.url + path, content=_chunks(limit + 1))  # no Content-Length
        assert chunked.status_code == 413, chunked.text
        assert "limit is" in chunked.json()["message"]
        endless = client.post(server.url + path, content=_chunks(1 << 40))  # it stops reading at the limit
        assert endless.status_code == 413
    assert admin.get(server.url + CONFIGMAPS + "/big").status_code == 404
    name = "within-" + path.rsplit("/", 1)[1]  # one for each path: the server is shared
    # Near the limit, but not past a ConfigMap's own 1 MiB of data (refused with 422, after the body is read).
    small = json.dumps({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name},
                        "data": {"k": "x" * 65536}}).encode()
    within = admin.post(server.url + CONFIGMAPS, content=small + b" " * (MAX_REQUEST_BYTES - 65536 - len(small)),
                        headers=JSON_BODY)
    assert within.status_code == 201, within.text[:300]
