"""A job's Ray cluster stopped while it starts (a server going, a job evicted or deleted in that window) stops where
it is and leaves nothing running; a submission to a head whose dashboard refuses connections for a moment is asked
again rather than failing the job; a head that ends by itself says which of Ray's processes ended it."""

from __future__ import annotations

import http.server
import os
import signal
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from flexq.runtime.emulation import Accelerators
from flexq.runtime.ray_cluster import LocalRayCluster, RayStartError
from flexq.runtime.rayjob import _submit
from tests.runtime.ray_leaks import RayProcesses
from tests.support import eventually, eventually_value


def _start_in_thread(start: Callable[[], None]) -> tuple[threading.Thread, list[BaseException]]:
    errors: list[BaseException] = []

    def run() -> None:
        try:
            start()
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, errors


@pytest.mark.parametrize("how", ["stop", "cancel"])
def test_a_cluster_stopped_while_it_starts_leaves_nothing(how: str, ray_processes: RayProcesses) -> None:
    cluster = LocalRayCluster(Accelerators(description="CPU only", num_cpus=1))
    cancel = threading.Event()
    thread, errors = _start_in_thread(lambda: cluster.start(cancel=cancel))
    eventually_value(lambda: cluster.process, timeout=30, every=0.05)  # the head is spawned, its dashboard not up
    if how == "stop":
        cluster.stop()
    else:
        cancel.set()
    thread.join(timeout=60)
    assert not thread.is_alive(), "the start returned"
    assert [str(e) for e in errors] == ["the Ray cluster was stopped while it started"]
    assert isinstance(errors[0], RayStartError)
    assert cluster.process is None and cluster.temp_dir is None and not cluster.alive()
    # ray_processes fails the test if any process of the cluster outlives it


def test_a_stop_while_another_thread_stops_the_cluster_returns_once_it_is_gone(ray_processes: RayProcesses) -> None:
    """A job's run stops its cluster on its way out while the server stops it too: the server's stop must not
    return (and the server exit) before the processes are gone."""
    cluster = LocalRayCluster(Accelerators(description="CPU only", num_cpus=1))
    cluster.start()
    assert ray_processes.count() > 0
    first = threading.Thread(target=cluster.stop, daemon=True)
    first.start()
    cluster.stop()
    assert ray_processes.running() == {}, "the second stop returned while the first was still killing"
    first.join(timeout=30)


def test_a_cluster_stopped_before_it_spawns_starts_nothing(ray_processes: RayProcesses) -> None:
    cluster = LocalRayCluster(Accelerators(description="CPU only", num_cpus=1))
    cluster.stop()
    with pytest.raises(RayStartError, match="stopped while it started"):
        cluster.start()
    assert cluster.process is None and cluster.temp_dir is None and ray_processes.count() == 0


class _Jobs(http.server.BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        body = b'{"submission_id": "s1"}'
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


def _reserved_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.parametrize("alive", [True, False])
def test_a_refused_submission_is_asked_again_while_the_head_runs(alive: bool) -> None:
    port = _reserved_port()
    server = http.server.HTTPServer(("127.0.0.1", port), _Jobs, bind_and_activate=False)
    server.allow_reuse_address = True

    def listen() -> None:  # the dashboard comes up a moment after the first submission
        server.server_bind()
        server.server_activate()
        threading.Thread(target=server.serve_forever, daemon=True).start()

    listening = threading.Timer(1.5, listen)
    listening.start()
    stop = threading.Event()
    try:
        if alive:
            answer = _submit(f"http://127.0.0.1:{port}", {"entrypoint": "true"}, stop, lambda: True)
            assert answer.status_code == 200 and answer.json() == {"submission_id": "s1"}
        else:  # a head that exited: the refusal is the answer at once
            began = time.monotonic()
            with pytest.raises(httpx.ConnectError):
                _submit(f"http://127.0.0.1:{port}", {"entrypoint": "true"}, stop, lambda: False)
            assert time.monotonic() - began < 1.5, "not asked again"
    finally:
        listening.join()
        server.shutdown()
        server.server_close()


def test_a_head_ended_by_a_killed_raylet_says_so(ray_processes: RayProcesses) -> None:
    cluster = LocalRayCluster(Accelerators(description="CPU only", num_cpus=1))
    cluster.start()
    try:
        assert cluster.exit_reason() == ""
        temp = f"--temp_dir={cluster.temp_dir}"
        raylet = eventually_value(lambda: next(pid for pid, command in ray_processes.running().items()
                                               if command.split()[0].endswith("/raylet") and temp in command),
                                  timeout=30)
        os.kill(raylet, signal.SIGKILL)
        eventually(lambda: _assert(not cluster.alive()), timeout=30)
        assert cluster.exit_reason() == "raylet (exit code -9 (signal 9))"
    finally:
        cluster.stop()


def _assert(condition: bool) -> None:
    assert condition


REPORT = "2026-12-07 03:13:57,715\tERROR Some Ray subprocesses exited unexpectedly:\n"


@pytest.mark.parametrize("logs, said", [
    ({}, ""),
    ({"a": "started\n"}, ""),
    ({"a": REPORT + "  raylet [exit code=1]\n"}, "raylet (exit code 1)"),
    ({"a": REPORT + "  raylet [exit code=-9 (signal 9)]\n  dashboard [exit code=0]\n"},
     "raylet (exit code -9 (signal 9)), dashboard (exit code 0)"),
    ({"a": REPORT + "  gcs_server [exit code=2]\n" + REPORT + "  log_monitor [exit code=1]\n"},
     "log_monitor (exit code 1)"),
    ({"a": REPORT + "  raylet [exit code=1]\n", "b": "nothing ended\n"}, "raylet (exit code 1)"),
    ({"a": REPORT + "  raylet [exit code=1]\n", "b": REPORT + "  monitor [exit code=3]\n"}, "monitor (exit code 3)"),
])
def test_what_ray_said_of_its_ended_processes_is_read_from_its_exit_log(
        tmp_path: Path, logs: dict[str, str], said: str) -> None:
    for session, text in logs.items():
        log = tmp_path / f"session_{session}" / "logs" / "ray_process_exit.log"
        log.parent.mkdir(parents=True)
        log.write_text(text)
    assert LocalRayCluster(Accelerators(description="x"), temp_dir=tmp_path).exit_reason() == said
    assert LocalRayCluster(Accelerators(description="x")).exit_reason() == ""
