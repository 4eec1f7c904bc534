"""Input built to hurt, and a disk that fills: query parameters of Unicode digits or endless ones, manifests nested
thousands deep, a developer's scrape of ``/metrics``, a full disk under the store and the tokens, and a home that
cannot be written are each answered as the API server answers them (a Status with its code and a one-line message),
never with a 500 or a traceback."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from flexq.api import MAX_NESTING, InputError, load_documents, load_yaml, nesting
from flexq.objects import BadRequest
from flexq.server.k8s import whole_number
from tests import admin, forks
from tests.conftest import Server, start_server
from tests.support import eventually

CONFIGMAPS = "/api/v1/namespaces/default/configmaps"
PODS = "/api/v1/namespaces/default/pods"
JSON_BODY = {"Content-Type": "application/json"}


@pytest.fixture
def server(module_server: Server) -> Server:
    """The tests here share one server: each writes under names of its own."""
    return module_server


def _refused_with_400(answer: httpx.Response, starts: str) -> None:
    assert answer.status_code == 400, answer.text[:300]
    status = answer.json()
    assert status["kind"] == "Status" and status["reason"] == "BadRequest" and status["code"] == 400
    assert status["message"].startswith(starts) and "\n" not in status["message"], status["message"]
    assert len(status["message"]) < 300, "what was sent is not echoed whole"


# --- query parameters --------------------------------------------------------------------------------------------

HOSTILE_NUMBERS = ["²", "٣", "\uff11", "9" * 5000, "99999999999999999999", " 1", "1e3", "0x10", "+1"]
"""What ``str.isdigit`` takes and ``int`` refuses (superscripts, Arabic-Indic and full-width digits), what ``int``
refuses past 4,300 digits, what no int64 holds, and what Go's ``strconv`` refuses that Python's ``int`` reads."""


@pytest.mark.parametrize(("name", "raw", "value"), [
    ("ascii", "42", 42), ("zero", "0", 0), ("leading zeros", "007", 7), ("largest", str(2**63 - 1), 2**63 - 1),
    *((f"refused {raw[:12]!r}", raw, None) for raw in [*HOSTILE_NUMBERS, "", "-1", str(2**63), "1\n"]),
])
def test_a_whole_number_in_a_query_is_ascii_digits_an_int64_holds(name: str, raw: str, value: int | None) -> None:
    if value is not None:
        assert whole_number("limit", raw) == value
        return
    with pytest.raises(BadRequest) as refused:
        whole_number("limit", raw)
    assert refused.value.code == 400 and refused.value.message.startswith("limit: Invalid value: ")
    assert "\n" not in refused.value.message and len(refused.value.message) < 120


@pytest.mark.parametrize(("field", "watch"), [("limit", False), ("resourceVersion", False),
                                             ("timeoutSeconds", True), ("resourceVersion", True)])
def test_a_list_or_watch_parameter_of_unicode_or_endless_digits_gets_400(server: Server, field: str,
                                                                         watch: bool) -> None:
    asked = {"watch": "true", "timeoutSeconds": "1"} if watch else {}
    for raw in HOSTILE_NUMBERS:
        answer = admin.get(server.url + CONFIGMAPS, params={**asked, field: raw}, timeout=10)
        _refused_with_400(answer, f"{field}: Invalid value: ")
    assert admin.get(server.url + CONFIGMAPS, params={**asked, field: "1"}, timeout=10).status_code == 200


def test_a_pod_log_with_unicode_or_endless_tail_lines_gets_400(server: Server) -> None:
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "tail"},
           "spec": {"containers": [{"name": "c", "image": "i"}]}}
    assert admin.post(server.url + PODS, json=pod).status_code == 201
    for raw in HOSTILE_NUMBERS:
        answer = admin.get(f"{server.url}{PODS}/tail/log", params={"tailLines": raw})
        _refused_with_400(answer, "tailLines: Invalid value: ")
    assert admin.get(f"{server.url}{PODS}/tail/log", params={"tailLines": "2"}).status_code == 200


# --- nesting -----------------------------------------------------------------------------------------------------


def _manifest(value: str, name: str = "deep") -> str:
    return f"apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {name}}}\ndata:\n  k: {value}\n"


def _block(levels: int) -> str:
    """A value of ``levels`` mappings, one in another, written as YAML's blocks (indentation)."""
    return "\n" + "".join("  " * (n + 2) + "a:\n" for n in range(levels)) + "  " * (levels + 2) + "x"


def _aliased(levels: int) -> str:
    """Anchors of 90 lists each, each holding the last: shallow as written, ``levels`` * 90 deep as read."""
    lines = ["a0: &a0 " + "[" * 90 + "]" * 90]
    lines += [f"a{n}: &a{n} " + "[" * 89 + f"*a{n - 1}" + "]" * 89 for n in range(1, levels)]
    return "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: aliased}\ndata:\n  " + "\n  ".join(lines) + "\n"


@pytest.mark.parametrize(("name", "text", "line"), [
    ("flow", _manifest("[" * 5000 + "]" * 5000), 5),
    ("flow objects", _manifest("{a: " * 5000 + "1" + "}" * 5000), 5),
    ("blocks", _manifest(_block(2000)), None),
    ("aliases", _aliased(12), 1),
    ("one past the limit", _manifest("[" * MAX_NESTING + "]" * MAX_NESTING), 5),
])
def test_the_manifest_reader_refuses_nesting_past_the_limit(name: str, text: str, line: int | None) -> None:
    for read in (load_documents, load_yaml):
        with pytest.raises(InputError, match="nested deeper than 100 levels") as refused:
            read(text, "deep.yaml")
        if read is load_documents and line is not None:
            assert refused.value.line == line
    (doc,) = load_documents(_manifest("[" * (MAX_NESTING - 2) + "]" * (MAX_NESTING - 2)), "fits.yaml")
    assert nesting(doc.obj) == MAX_NESTING, "the limit itself reads"


def test_a_manifest_nested_thousands_deep_gets_400_from_apply_and_nothing_is_stored(server: Server) -> None:
    for name, value in (("flow", "[" * 5000 + "]" * 5000), ("blocks", _block(1500))):
        applied = admin.post(server.url + "/flexq/v1/apply",
                             json={"sources": [{"text": _manifest(value, f"deep-{name}"), "source": "deep.yaml"}]})
        _refused_with_400(applied, "deep.yaml:")
        assert "nested deeper than 100 levels" in applied.json()["message"]
        assert admin.get(f"{server.url}{CONFIGMAPS}/deep-{name}").status_code == 404
        as_yaml = admin.post(server.url + CONFIGMAPS, content=_manifest(value, f"deep-{name}"),
                             headers={"Content-Type": "application/yaml"})
        _refused_with_400(as_yaml, "the request body:")
        assert as_yaml.json()["message"].endswith(": malformed YAML: nested deeper than 100 levels")


@pytest.mark.parametrize("path", [
    CONFIGMAPS, "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", "/flexq/v1/apply", "/flexq/v1/tokens",
    "/flexq/v1/forecast", "/v1/projects/demo/locations/us-east5-b/clusters",
])
def test_a_json_body_nested_thousands_deep_gets_400_on_every_path(server: Server, path: str) -> None:
    for body in ("[" * 5000 + "]" * 5000, '{"a": ' + '{"a": ' * 5000 + "1" + "}" * 5001):
        answer = admin.post(server.url + path, content=body, headers=JSON_BODY)
        assert answer.status_code == 400, (path, body[:20], answer.text[:300])
    # Within what the reader takes, but past the limit: refused still, by the limit or as the wrong shape (422 from
    # flexq's own API, whose bodies are typed).
    answer = admin.post(server.url + path, content='{"sources": ' + "[" * 900 + "]" * 900 + "}", headers=JSON_BODY)
    assert answer.status_code in (400, 422), (path, answer.text[:300])


# --- a developer's /metrics --------------------------------------------------------------------------------------

_QUEUES = """apiVersion: v1
kind: Namespace
metadata: {name: team-a}
---
apiVersion: v1
kind: Namespace
metadata: {name: team-b}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {name: metrics-flavor}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: metrics-cq}
spec:
  namespaceSelector: {}
  resourceGroups:
    - coveredResources: [cpu]
      flavors: [{name: metrics-flavor, resources: [{name: cpu, nominalQuota: 4}]}]
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {name: queue-of-a, namespace: team-a}
spec: {clusterQueue: metrics-cq}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {name: queue-of-b, namespace: team-b}
spec: {clusterQueue: metrics-cq}
"""


def _series(text: str) -> set[tuple[str, tuple[tuple[str, str], ...]]]:
    return {(s.name, tuple(sorted(s.labels.items()))) for f in text_string_to_metric_families(text)
            for s in f.samples}


def test_a_developers_scrape_holds_their_namespace_and_the_cluster_wide_series(server: Server) -> None:
    """A developer may read their LocalQueues and every ClusterQueue through the API: their scrape holds those,
    never another namespace's LocalQueue names nor the server's threads (named after every namespace's pods)."""
    applied = admin.post(server.url + "/flexq/v1/apply", json={"sources": [{"text": _QUEUES, "source": "q.yaml"}]})
    assert applied.status_code == 200, applied.text
    made = admin.post(server.url + "/flexq/v1/tokens", json={"role": "developer", "namespace": "team-a",
                                                            "name": "metrics-alice"})
    assert made.status_code == 201, made.text
    alice = {"Authorization": f"Bearer {made.json()['token']}"}

    def both_queues_counted() -> str:
        text = admin.get(server.url + "/metrics").text
        assert 'namespace="team-b"' in text and 'namespace="team-a"' in text
        return text

    everything = eventually(both_queues_counted)
    answer = httpx.get(server.url + "/metrics", headers=alice, timeout=30)
    assert answer.status_code == 200
    mine = answer.text
    assert "team-b" not in mine and "queue-of-b" not in mine
    assert "flexq_thread_cpu_seconds" not in mine and "flexq_thread_cpu_seconds" in everything
    assert 'kueue_local_queue_status{active="True",name="queue-of-a",namespace="team-a"' in mine
    assert 'kueue_cluster_queue_status{cluster_queue="metrics-cq"' in mine
    kept = _series(mine)
    left_out = {s for s in _series(everything) - kept if not s[0].startswith("flexq_thread_cpu_seconds")}
    assert all(dict(labels)["namespace"] == "team-b" for _, labels in left_out), "only another's are left out"
    assert all(dict(labels).get("namespace", "team-a") == "team-a" for _, labels in kept)


# --- a full disk -------------------------------------------------------------------------------------------------


@pytest.fixture
def small_home(tmp_path: Path) -> Iterator[Path]:
    """``FLEXQ_HOME`` on a 24 MiB tmpfs (root only): a disk that really fills."""
    mount = tmp_path / "disk"
    mount.mkdir()
    made = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=24m", "tmpfs", str(mount)], capture_output=True,
                          check=False)
    if made.returncode != 0:
        pytest.skip("cannot mount a tmpfs here (not root): tests/store/test_faults.py covers the store alone")
    try:
        yield mount / "home"
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def _free(folder: Path) -> int:
    st = os.statvfs(folder)
    return st.f_bavail * st.f_frsize


def _fill_to_the_end(path: Path) -> None:
    """Write ``path`` until the disk has no room left."""
    with open(path, "wb", buffering=0) as out:
        try:
            while True:
                out.write(b"\0" * 4096)
        except OSError:
            pass


def _stop(srv: Server) -> str:
    """Stop ``srv``; what it wrote to its stderr."""
    admin.unregister(srv.url)
    srv.process.terminate()
    srv.process.wait(timeout=30)
    assert srv.process.stderr is not None
    said = srv.process.stderr.read().decode()
    srv.process.stderr.close()
    return said


def test_a_full_disk_takes_deletes_and_says_so_at_readyz_and_at_a_restart(small_home: Path) -> None:
    srv = start_server(small_home)
    disk = small_home.parent
    try:
        reserve = (small_home / "flexq.db-reserve").stat().st_size
        assert admin.get(srv.url + "/readyz").text == "ok"
        (disk / "filler").write_bytes(b"\0" * (_free(disk) - reserve - 300_000))
        made = 0
        while (answer := admin.post(srv.url + CONFIGMAPS, json={
                "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"cm-{made}"},
                "data": {"x": os.urandom(30_000).hex()}})).status_code == 201:
            made += 1
        assert made > 1 and answer.status_code == 503, answer.text
        assert answer.json()["reason"] == "ServiceUnavailable" and "\n" not in answer.json()["message"]
        ready = admin.get(srv.url + "/readyz")
        assert ready.status_code == 503 and "only deletes are taken" in ready.text, ready.text
        assert admin.delete(f"{srv.url}{CONFIGMAPS}/cm-0").status_code == 200, "space is freed through the API"
        refused = admin.post(srv.url + CONFIGMAPS, json={"apiVersion": "v1", "kind": "ConfigMap",
                                                         "metadata": {"name": "small"}})
        assert refused.status_code == 503 and "only deletes are taken" in refused.json()["message"]
        (disk / "filler-2").write_bytes(b"\0" * (_free(disk) - reserve // 2))
    finally:
        said = _stop(srv)
    assert "WARNING: the store's disk is nearly full" in said, said

    srv = start_server(small_home)  # a restart on the full disk
    try:
        ready = admin.get(srv.url + "/readyz")
        assert ready.status_code == 503 and "only deletes are taken" in ready.text, ready.text
        assert admin.delete(f"{srv.url}{CONFIGMAPS}/cm-1").status_code == 200
        _fill_to_the_end(disk / "filler-3")
        token = admin.post(srv.url + "/flexq/v1/tokens", json={"role": "developer", "namespace": "team-a"})
        assert token.status_code == 503, token.text
        assert token.json()["reason"] == "ServiceUnavailable" and "No space left" in token.json()["message"]
        assert token.headers["Retry-After"] == "10"
        assert [t["name"] for t in admin.get(srv.url + "/flexq/v1/tokens").json()] == ["admin"]
        for filler in ("filler", "filler-2", "filler-3"):
            (disk / filler).unlink()
        assert admin.get(srv.url + "/readyz").text == "ok", "room again: every write is taken"
        assert admin.post(srv.url + CONFIGMAPS, json={"apiVersion": "v1", "kind": "ConfigMap",
                                                      "metadata": {"name": "after"}}).status_code == 201
        assert admin.post(srv.url + "/flexq/v1/tokens", json={"role": "developer",
                                                              "namespace": "team-a"}).status_code == 201
    finally:
        said = _stop(srv)
    assert "WARNING: the disk of" in said and "only deletes are taken" in said, said


# --- a home that cannot be written -------------------------------------------------------------------------------


@pytest.fixture
def read_only(tmp_path: Path) -> Iterator[Path]:
    """A folder this user cannot write: a read-only tmpfs as root (for whom modes do not stop writes), else 0555."""
    folder = tmp_path / "ro"
    folder.mkdir()
    if os.geteuid() != 0:
        folder.chmod(0o555)
        yield folder
        folder.chmod(0o755)
        return
    made = subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=1m", "tmpfs", str(folder)], capture_output=True,
                          check=False)
    if made.returncode != 0:
        pytest.skip("root, and cannot mount a read-only tmpfs here: a mode would not stop root's writes")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=False)


@pytest.mark.parametrize("where", ["itself", "a folder in it"])
def test_a_home_that_cannot_be_written_is_refused_in_one_line_naming_it(read_only: Path, where: str) -> None:
    home = read_only if where == "itself" else read_only / "home"
    ran = forks.run(["server", "--home", str(home), "--port", "0", "--runtime", "none"], text=True, timeout=60)
    assert ran.returncode != 0
    assert ran.stderr.startswith(f"error: FLEXQ_HOME {home} cannot be written (")
    assert ran.stderr.count("\n") == 1 and "Traceback" not in ran.stderr, ran.stderr
