"""``flexq server --workers N``: API worker processes serve the ports in front of the store's owner."""

from __future__ import annotations

import concurrent.futures
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from flexq.server.worker_record import identify
from tests.conftest import Server, free_port_pair, guide_text, start_server, stop_server
from tests.support import eventually

WORKERS = 2


def workers_of(pid: int) -> list[int]:
    """The API worker processes under the server's process (started by any of its threads); a child that is gone
    between being listed and being read (a worker just killed) is not one."""
    kids = [int(k) for task in Path(f"/proc/{pid}/task").iterdir() for k in _read(task / "children").split()]
    return [k for k in kids if "flexq.server.worker" in _read(Path(f"/proc/{k}/cmdline"))]


def _read(path: Path) -> str:
    try:
        return path.read_bytes().decode(errors="replace")
    except (FileNotFoundError, ProcessLookupError):
        return ""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    srv = start_server(tmp_path_factory.mktemp("workers") / "home", "--workers", str(WORKERS))
    try:
        yield srv
    finally:
        stop_server(srv)


def config_map(name: str, data: dict[str, str] | None = None) -> dict[str, object]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "default"},
            "data": data or {}}


CM = "/api/v1/namespaces/default/configmaps"


def test_the_ports_are_served_by_the_workers(server: Server) -> None:
    assert len(workers_of(server.process.pid)) == WORKERS
    answer = httpx.get(f"{server.url}{CM}", headers=server.headers)
    assert answer.status_code == 200


def test_concurrent_patches_through_several_workers_lose_nothing(server: Server) -> None:
    created = httpx.post(f"{server.url}{CM}", json=config_map("shared"), headers=server.headers)
    assert created.status_code == 201, created.text

    def patch(i: int) -> str:
        with httpx.Client(headers=server.headers) as client:  # a connection of its own: any worker may take it
            answer = client.patch(f"{server.url}{CM}/shared", json={"data": {f"k{i}": str(i)}},
                                  headers={"Content-Type": "application/merge-patch+json"})
            assert answer.status_code == 200, answer.text
            return str(answer.json()["metadata"]["resourceVersion"])

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        versions = list(pool.map(patch, range(40)))
    stored = httpx.get(f"{server.url}{CM}/shared", headers=server.headers).json()
    assert stored["data"] == {f"k{i}": str(i) for i in range(40)}
    assert len(set(versions)) == 40  # each answer names the version its own write was given
    assert stored["metadata"]["resourceVersion"] == max(versions, key=int)


def test_a_stale_resource_version_from_the_caller_is_a_conflict(server: Server) -> None:
    first = httpx.post(f"{server.url}{CM}", json=config_map("conflict"), headers=server.headers).json()
    httpx.patch(f"{server.url}{CM}/conflict", json={"data": {"a": "1"}}, headers={
        **server.headers, "Content-Type": "application/merge-patch+json"})
    stale = {**first, "data": {"b": "2"}}
    answer = httpx.put(f"{server.url}{CM}/conflict", json=stale, headers=server.headers)
    assert answer.status_code == 409
    assert answer.json()["reason"] == "Conflict"
    taken = httpx.post(f"{server.url}{CM}", json=config_map("conflict"), headers=server.headers)
    assert taken.status_code == 409
    assert taken.json()["reason"] == "AlreadyExists"


def test_a_watch_through_a_worker_sees_writes_through_others_in_order(server: Server) -> None:
    start = httpx.get(f"{server.url}{CM}", headers=server.headers).json()["metadata"]["resourceVersion"]
    names = [f"w{i}" for i in range(10)]
    for name in names:
        with httpx.Client(headers=server.headers) as client:
            assert client.post(f"{server.url}{CM}", json=config_map(name)).status_code == 201
    seen: list[tuple[str, int]] = []
    with httpx.stream("GET", f"{server.url}{CM}?watch=true&resourceVersion={start}", headers=server.headers,
                      timeout=10) as stream:
        for line in stream.iter_lines():
            obj = httpx.Response(200, content=line).json()["object"]
            seen.append((obj["metadata"]["name"], int(obj["metadata"]["resourceVersion"])))
            if len([s for s in seen if s[0] in names]) == len(names):
                break
    assert [name for name, _ in seen if name in names] == names
    assert [rv for _, rv in seen] == sorted(rv for _, rv in seen)


def test_what_the_owner_answers_comes_through_a_worker(server: Server) -> None:
    metrics = httpx.get(f"{server.url}/metrics", headers=server.headers)
    assert metrics.status_code == 200 and "kueue_" in metrics.text
    visibility = httpx.get(f"{server.url}/apis/visibility.kueue.x-k8s.io/v1beta1/clusterqueues/none/pendingworkloads",
                           headers=server.headers)
    assert visibility.status_code == 404  # the owner's answer: no such ClusterQueue (a worker alone would say 503)
    assert "none" in visibility.text
    unauthorized = httpx.get(f"{server.url}/metrics")
    assert unauthorized.status_code == 401
    assert httpx.post(f"{server.url}{CM}", json=config_map("seen"), headers=server.headers).status_code == 201
    result = server.cli("get", "configmaps")  # flexq's own API, the owner's: it reads what a worker wrote
    assert result.code == 0 and "seen" in result.out
    page = httpx.get(f"{server.url}/ui/", headers=server.headers)  # the dashboard
    assert page.status_code == 200 and "<html" in page.text.lower()
    events = httpx.get(f"{server.url}/flexq/v1/leader", headers=server.headers).json()
    assert events["leading"] is True and str(server.process.pid) in events["identity"]


def test_the_guide_flow_runs_through_workers(server: Server, tmp_path: Path) -> None:
    result = server.cli("apply", "-f", "-", input=guide_text("dws-tpu-queue.yaml"))
    assert result.code == 0, result.err
    env = server.tools_env(tmp_path)
    job = guide_text("rayjob-tpu-v6e-dws.yaml", JOB_ID="w1")
    applied = subprocess.run(["kubectl", "apply", "-f", "-"], input=job, env=env, capture_output=True, text=True,
                             timeout=60)
    assert applied.returncode == 0, applied.stderr

    def admitted() -> str:
        out = subprocess.run(["kubectl", "get", "workloads", "-o",
                              "jsonpath={.items[0].status.conditions[?(@.type=='Admitted')].status}"],
                             env=env, capture_output=True, text=True, timeout=60).stdout
        assert out == "True"
        return out

    eventually(admitted, timeout=30)


def test_a_port_forward_is_answered_by_the_owner(server: Server, tmp_path: Path) -> None:
    env = server.tools_env(tmp_path)
    forward = subprocess.run(["kubectl", "port-forward", "pod/nothing-here", "9999:80"], env=env,
                             capture_output=True, text=True, timeout=60)
    assert forward.returncode != 0
    assert 'pods "nothing-here" not found' in forward.stderr


def test_a_worker_that_dies_is_replaced(server: Server) -> None:
    before = workers_of(server.process.pid)
    os.kill(before[0], signal.SIGKILL)

    def replaced() -> list[int]:
        now = workers_of(server.process.pid)
        assert len(now) == WORKERS and before[0] not in now
        return now

    eventually(replaced, timeout=30)
    for _ in range(10):  # every connection is answered (the kernel gives it to a worker that accepts)
        with httpx.Client(headers=server.headers) as client:
            assert client.get(f"{server.url}{CM}").status_code == 200


def test_the_server_stops_with_its_workers(tmp_path: Path) -> None:
    srv = start_server(tmp_path / "home", "--workers", "1")
    kids = workers_of(srv.process.pid)
    assert len(kids) == 1
    assert (srv.home / "owner.sock").exists()
    stop_server(srv)
    time.sleep(0.2)
    assert not Path(f"/proc/{kids[0]}").exists() or b"zombie" in Path(f"/proc/{kids[0]}/status").read_bytes()
    assert not (srv.home / "owner.sock").exists()


def test_pages_of_a_list_are_of_one_list_whichever_worker_takes_them(server: Server) -> None:
    url = "/api/v1/namespaces/paged/configmaps"
    assert httpx.post(f"{server.url}/api/v1/namespaces", json={"apiVersion": "v1", "kind": "Namespace",
                                                               "metadata": {"name": "paged"}},
                      headers=server.headers).status_code == 201
    for i in range(12):
        assert httpx.post(f"{server.url}{url}", json={**config_map(f"cm-{i:02d}"), "metadata": {
            "name": f"cm-{i:02d}", "namespace": "paged"}}, headers=server.headers).status_code == 201
    names: list[str] = []
    token, first_rv = "", ""
    while True:
        with httpx.Client(headers=server.headers) as client:  # each page on a connection of its own
            page = client.get(f"{server.url}{url}", params={"limit": 5, **({"continue": token} if token else {})})
        assert page.status_code == 200, page.text
        body = page.json()
        first_rv = first_rv or body["metadata"]["resourceVersion"]
        assert body["metadata"]["resourceVersion"] == first_rv
        names += [o["metadata"]["name"] for o in body["items"]]
        if not token:  # a write between the pages does not show in them
            httpx.post(f"{server.url}{url}", json={**config_map("cm-05a"), "metadata": {
                "name": "cm-05a", "namespace": "paged"}}, headers=server.headers)
        token = body["metadata"].get("continue", "")
        if not token:
            break
    assert names == [f"cm-{i:02d}" for i in range(12)]
    whole = httpx.get(f"{server.url}{url}", params={"limit": 500}, headers=server.headers).json()
    assert len(whole["items"]) == 13 and "continue" not in whole["metadata"]  # one page: served by a worker


def test_a_stream_the_owner_answers_comes_through_as_it_is_written(server: Server) -> None:
    """The dashboard's change events: each event reaches the client when the owner writes it, not at the end."""
    with httpx.stream("GET", f"{server.url}/flexq/v1/dashboard/changes", headers=server.headers, timeout=10) as stream:
        assert stream.headers["content-type"].startswith("text/event-stream")
        lines = stream.iter_lines()
        assert next(lines) == "retry: 2000"
        first = next(line for line in lines if line.startswith("data: "))
        httpx.post(f"{server.url}{CM}", json=config_map("streamed"), headers=server.headers)
        later = next(line for line in lines if line.startswith("data: "))  # the write's event, while streaming
    assert int(later.removeprefix("data: ")) > int(first.removeprefix("data: "))


def test_workers_in_front_of_postgresql_write_to_it_themselves(tmp_path: Path, postgres_url: str) -> None:
    srv = start_server(tmp_path / "home", "--workers", "2", "--store", postgres_url)
    try:
        assert len(workers_of(srv.process.pid)) == 2
        assert not (srv.home / "commit.sock").exists()  # no commits to hand over: PostgreSQL orders the writers
        assert httpx.post(f"{srv.url}{CM}", json=config_map("pg"), headers=srv.headers).status_code == 201

        def patch(i: int) -> int:
            with httpx.Client(headers=srv.headers) as client:
                answer = client.patch(f"{srv.url}{CM}/pg", json={"data": {f"k{i}": str(i)}},
                                      headers={"Content-Type": "application/merge-patch+json"})
                assert answer.status_code == 200, answer.text
                return answer.status_code

        with concurrent.futures.ThreadPoolExecutor(6) as pool:
            list(pool.map(patch, range(24)))
        stored = httpx.get(f"{srv.url}{CM}/pg", headers=srv.headers).json()
        assert stored["data"] == {f"k{i}": str(i) for i in range(24)}
        leader = httpx.get(f"{srv.url}/flexq/v1/leader", headers=srv.headers).json()
        assert leader["leading"] is True and str(srv.process.pid) in leader["identity"]
    finally:
        stop_server(srv)


@pytest.mark.parametrize(("owner", "ends"), [("dies", "killed"), ("lives", "answers")])
def test_a_worker_whose_owner_exits_under_a_request_ends_without_answering(owner: str, ends: str) -> None:
    """An exiting owner's sockets close before its workers are signalled: a worker that lost them under a request
    ends at once (SIGKILL) if the owner is exiting, and answers (returns) if the owner lives."""
    script = """
import ctypes, os, signal, sys, time
from flexq.server.worker import end_with_owner
ctypes.CDLL(None).prctl(36, 1)  # PR_SET_CHILD_SUBREAPER: the orphaned worker comes back here
r, w = os.pipe()
owner = os.fork()
if owner == 0:
    if os.fork() == 0:  # the worker, its request cut off: it waits to see whether the owner is exiting
        os.write(w, b"%d " % os.getpid())
        end_with_owner(os.getppid(), wait=float(sys.argv[2]))
        os.write(w, b"answers")
        os._exit(0)
    time.sleep(30)
    os._exit(0)
worker = int(os.read(r, 16))
time.sleep(0.2)
if sys.argv[1] == "dies":
    os.kill(owner, signal.SIGKILL)
else:
    print(os.read(r, 16).decode())
    os.kill(owner, signal.SIGKILL)
while True:
    pid, status = os.wait()
    if pid == worker:
        break
if os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL:
    print("killed")
"""
    done = subprocess.run([sys.executable, "-c", script, owner, "5" if owner == "dies" else "0.3"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [ends]


def _record(home: Path) -> dict[str, list[int] | list[list[int]]]:
    return dict(json.loads((home / "workers.json").read_text()))


def test_the_server_records_its_workers_and_forgets_them_when_it_stops(tmp_path: Path) -> None:
    srv = start_server(tmp_path / "home", "--workers", str(WORKERS))
    try:
        kids = workers_of(srv.process.pid)
        recorded = _record(srv.home)
        assert recorded["owner"] == list(identify(srv.process.pid))
        assert sorted(w[0] for w in recorded["workers"]) == sorted(kids)  # type: ignore[index]
        before = kids[0]
        os.kill(before, signal.SIGKILL)  # a worker started again is recorded again
        eventually(lambda: _assert_recorded_anew(srv, before), timeout=30)
    finally:
        stop_server(srv)
    assert not (srv.home / "workers.json").exists()


def _assert_recorded_anew(srv: Server, gone: int) -> None:
    now = workers_of(srv.process.pid)
    assert len(now) == WORKERS and gone not in now
    assert sorted(w[0] for w in _record(srv.home)["workers"]) == sorted(now)  # type: ignore[index]


_HOLDER = """
import socket, sys, time
sock = socket.socket()
sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
sock.bind(("127.0.0.1", int(sys.argv[1])))
sock.listen(8)
print("listening", flush=True)
time.sleep(float(sys.argv[2]))
"""


@contextlib.contextmanager
def _holding(port: int, seconds: float = 120) -> Iterator[subprocess.Popen[bytes]]:
    """A process listening on ``port`` for ``seconds`` (then it ends by itself), killed on the way out."""
    holder = subprocess.Popen([sys.executable, "-c", _HOLDER, str(port), str(seconds)], stdout=subprocess.PIPE)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == b"listening\n"
        yield holder
    finally:
        holder.kill()
        holder.wait()
        if holder.stdout is not None:
            holder.stdout.close()


def _dead_process() -> tuple[int, int]:
    """A process that has ended (as a server killed with -9), named as the record names it."""
    gone = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    named = identify(gone.pid)
    gone.kill()
    gone.wait()
    return named


@pytest.mark.parametrize("owner", ["gone", "running"])
def test_a_server_started_again_waits_for_the_last_ones_workers_only_if_their_owner_is_gone(
        tmp_path: Path, owner: str) -> None:
    """A server killed with -9 takes its workers with it, but they may still hold the ports a moment: the next server
    of that home waits for them, and ends those that outlive the wait. A worker still holding the port stands here
    for one slow to die; where its owner still runs (another server of this home), it is left alone."""
    home = tmp_path / "home"
    home.mkdir()
    port = free_port_pair()
    with _holding(port) as holder:
        owner_named = _dead_process() if owner == "gone" else identify(os.getpid())
        (home / "workers.json").write_text(json.dumps({"owner": list(owner_named),
                                                       "workers": [list(identify(holder.pid))]}))
        if owner == "gone":
            srv = start_server(home, port=port)
            try:
                assert holder.wait(timeout=10) == -signal.SIGKILL  # it outlived the wait: ended by the new server
                assert httpx.get(f"{srv.url}/healthz").status_code == 200
            finally:
                stop_server(srv)
        else:
            with pytest.raises(RuntimeError, match="Address already in use"):
                start_server(home, port=port)
            assert holder.poll() is None


def test_a_server_killed_a_moment_after_it_forked_leaves_its_port_to_the_next_once_its_child_is_gone(
        tmp_path: Path) -> None:
    """What a killed server forked a moment before it died (a forecast's process, not yet run to close the ports it
    inherited) is not in its record: the next server of that home, finding the last one killed, tries its port again
    for a while, and listens once that process is gone."""
    home = tmp_path / "home"
    home.mkdir()
    port = free_port_pair()
    with _holding(port, 1.5) as holder:
        (home / "workers.json").write_text(json.dumps({"owner": list(_dead_process()), "workers": []}))
        srv = start_server(home, port=port)
        try:
            assert holder.poll() == 0, "it ended by itself, the new server listening after it"
            assert httpx.get(f"{srv.url}/healthz").status_code == 200
        finally:
            stop_server(srv)
