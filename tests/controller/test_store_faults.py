"""The live server when its store refuses writes: a full disk under FLEXQ_HOME, the database locked by another
process. Writes answer 503 with the cause, the CLI says it without a traceback, reads go on, the controller reads
its state back and decides again once writes work, and the database passes ``PRAGMA integrity_check``."""

from __future__ import annotations

import contextlib
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests import admin
from tests.conftest import Server, guide_text, start_server
from tests.support import cli as _run
from tests.support import condition, eventually, guide_setup, workloads
from tests.support.stores import fill, noise

CAPACITY = """cloud:
  on-demand-pool: {available: 4, bootTime: 8s}
  dws-pool: {queuedDelay: never}
  default-pool: {bootTime: 0s}
"""
JOB = "rayjob-tpu-v6e-dws-1"


def _stop(srv: Server) -> str:
    """Stop the server; return what it logged."""
    srv.process.terminate()
    try:
        srv.process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        srv.process.kill()
        srv.process.wait()
    assert srv.process.stderr is not None
    log = srv.process.stderr.read().decode()
    srv.process.stderr.close()
    return log


def _intact(home: Path) -> None:
    with sqlite3.connect(home / "flexq.db") as db:
        assert db.execute("PRAGMA integrity_check").fetchall() == [("ok",)]


def _events(srv: Server) -> list[dict[str, Any]]:
    return list(admin.get(srv.url + "/api/v1/namespaces/default/events").json()["items"])


def _started(srv: Server) -> None:
    """The job's pods were bound to nodes (the Event on its workload says so)."""
    name = workloads(srv)[JOB]["metadata"]["name"]
    assert [e for e in _events(srv) if e["reason"] == "Started" and e["involvedObject"]["name"] == name]


def _refused(srv: Server, cause: str) -> None:
    """A write through the API and one through the CLI are refused with ``cause``; reads are served."""
    made = admin.post(srv.url + "/api/v1/namespaces/default/configmaps", timeout=30,
                      json={"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "refused"}})
    assert made.status_code == 503, made.text
    status = made.json()
    assert status["kind"] == "Status" and status["reason"] == "ServiceUnavailable"
    assert status["message"].startswith(f"the store could not write: {cause}")
    cli = _run(srv, "apply", "-f", "-", input=guide_text("rayjob-tpu-v6e-dws.yaml", JOB_ID="2"))
    assert cli.returncode == 1 and "Traceback" not in cli.stderr
    assert f"Error from server (ServiceUnavailable): the store could not write: {cause}" in cli.stderr
    assert JOB in workloads(srv)
    assert admin.get(srv.url + "/apis/ray.io/v1/namespaces/default/rayjobs/" + JOB).status_code == 200
    assert _run(srv, "get", "clusterqueues").returncode == 0


@pytest.fixture
def small_home(tmp_path: Path) -> Iterator[Path]:
    """FLEXQ_HOME on an 8 MiB tmpfs (root only): a disk that really fills up."""
    home = tmp_path / "home"
    home.mkdir()
    made = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(home)], capture_output=True,
                          check=False)
    if made.returncode != 0:
        pytest.skip("cannot mount a tmpfs here (not root); tests/store/test_faults.py covers a full database")
    try:
        yield home
    finally:
        subprocess.run(["umount", "-l", str(home)], check=False)


def test_a_full_disk_refuses_writes_and_the_controller_catches_up_once_space_is_freed(
        tmp_path: Path, small_home: Path) -> None:
    capacity = tmp_path / "capacity.yaml"
    capacity.write_text(CAPACITY)
    srv = start_server(small_home, "--capacity", str(capacity))
    log = ""
    try:
        guide_setup(srv, guide_text("dws-tpu-queue.yaml"), jobs=("1",))

        def booting() -> None:
            assert any(e["reason"] == "ScaledUp" for e in _events(srv))

        eventually(booting)
        filler = small_home / "filler"
        with filler.open("wb", buffering=0) as out, contextlib.suppress(OSError):
            while out.write(b"\0" * 65536):  # until nothing more fits: the server writes while the disk fills
                pass
        _refused(srv, "database or disk is full")
        time.sleep(9)  # the nodes are ready now: the controller's start of the job is refused
        with pytest.raises(AssertionError):
            _started(srv)  # nothing refused is shown as done
        filler.unlink()
        eventually(lambda: _started(srv), timeout=20)
        assert condition(workloads(srv)[JOB], "Admitted") == "True"
        assert admin.post(srv.url + "/api/v1/namespaces/default/configmaps", json={
            "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "after"}}).status_code == 201
    finally:
        log = _stop(srv)
    assert "writes were refused, it reads its state back" in log and "Traceback" not in log
    _intact(small_home)


_HOLDER = """
import sqlite3, sys, time
db = sqlite3.connect(sys.argv[1], isolation_level=None)
db.execute("BEGIN EXCLUSIVE")
print("locked", flush=True)
sys.stdin.read()  # until the test closes it
db.execute("ROLLBACK")
"""


def test_a_database_locked_by_another_process_refuses_writes_and_reads_go_on(tmp_path: Path) -> None:
    capacity = tmp_path / "capacity.yaml"
    capacity.write_text(CAPACITY.replace("bootTime: 8s", "bootTime: 0s"))
    home = tmp_path / "home"
    srv = start_server(home, "--capacity", str(capacity))
    holder: subprocess.Popen[str] | None = None
    try:
        guide_setup(srv, guide_text("dws-tpu-queue.yaml"), jobs=("1",))
        eventually(lambda: _started(srv))
        holder = subprocess.Popen([sys.executable, "-c", _HOLDER, str(home / "flexq.db")],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        began = time.monotonic()
        errors: list[BaseException] = []

        def refuse() -> None:
            try:
                _refused(srv, "database is locked")
            except BaseException as exc:  # told in the test's thread
                errors.append(exc)

        waiting = threading.Thread(target=refuse)
        waiting.start()  # its writes wait for the lock (5 s each), then are refused
        took: list[float] = []
        while waiting.is_alive():
            t = time.monotonic()
            assert admin.get(srv.url + "/apis/kueue.x-k8s.io/v1beta2/clusterqueues", timeout=5).status_code == 200
            took.append(time.monotonic() - t)
            time.sleep(0.05)
        waiting.join()
        assert not errors, errors
        assert time.monotonic() - began >= 10, "each write waited for the lock (5 s), then was refused"
        # A read that waited behind a write would take most of its 5 s wait, and few would fit in those 10 s; on a
        # busy machine one read can still take a few seconds, so the count and the median tell, the slowest less so.
        assert len(took) > 20 and sorted(took)[len(took) // 2] < 0.5, "reads are served while writes wait for the lock"
        assert max(took) < 4.5, "no read waited for a whole lock wait"
        _release(holder)
        holder = None
        applied = _run(srv, "apply", "-f", "-", input=guide_text("rayjob-tpu-v6e-dws.yaml", JOB_ID="2"))
        assert applied.returncode == 0, applied.stderr

        def queued() -> None:
            assert "rayjob-tpu-v6e-dws-2" in workloads(srv)

        eventually(queued)
    finally:
        if holder is not None:
            _release(holder)
        log = _stop(srv)
    assert "Traceback" not in log
    _intact(home)


def _release(holder: subprocess.Popen[str]) -> None:
    """Let the process holding the database's lock roll back and end, and close its pipes."""
    assert holder.stdin is not None and holder.stdout is not None
    holder.stdin.close()
    try:
        holder.wait(timeout=20)
    finally:
        holder.kill()
        holder.wait()
        holder.stdout.close()


def test_a_job_status_the_store_refuses_is_written_once_it_takes_writes(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    from flexq.controller import ray_runs as runtime_module
    from flexq.store import Key, Store

    monkeypatch.setattr(runtime_module, "STATUS_RETRY", 0.1)
    store = Store(tmp_path / "flexq.db")
    key = Key("ray.io", "rayjobs", "default", "job")
    store.create(key, {"apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": {"name": "job"}, "spec": {}})
    runtime = runtime_module.RayRuntime(store, tmp_path)
    store._db.execute("PRAGMA max_page_count=60")
    for size in (4000, 200, 1):  # no room left, not even in the pages' free bytes
        fill(store, f"cm-{size}", size)
    message = noise("status", 2000)  # too big for any page's free bytes, packed or not
    runtime._status("default", "job", {"jobStatus": "RUNNING", "jobDeploymentStatus": "Running", "message": message},
                    publish=False)
    runtime._status("default", "job", {"jobStatus": "SUCCEEDED"}, publish=False)  # refused too: kept, not raised
    time.sleep(0.3)
    assert "status" not in store.get(key)
    store._db.execute("PRAGMA max_page_count=1073741823")

    def written() -> None:
        assert store.get(key).get("status") == {"jobStatus": "SUCCEEDED", "jobDeploymentStatus": "Running",
                                                "message": message}

    eventually(written, timeout=5)
    assert [e["reason"] for e in store.list_objects("", "events", "default")[0]] == ["Completed"]
    store.close()
    _intact(tmp_path)
