"""A developer's job stays in its own directory and its own processes: each trick a job can try, tried.

A job runs code its submitter wrote. These tests are that code: pods of a developer of ``team-a`` that name the
administrator's token in their log annotation, put links where the server writes, leave a process behind with
``setsid``, and reach for another team's directory and processes; and a server killed (SIGKILL) under running pods,
whose next server must run each of them exactly once. Where the server is not root, jobs run as its own user (the
security docs say so): the tests that need a user apart skip with that reason.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import stat
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from flexq.runtime.beneath import OutsideError, read_beneath, write_beneath
from flexq.runtime.environment import EnvironmentError_, prepare
from flexq.runtime.process_tree import ProcessTree, cgroup_root
from flexq.runtime.ray_cluster import _start_log
from tests import admin
from tests.conftest import Server, free_port_pair, start_server, stop_server
from tests.server.test_job_isolation import SETUP as ISOLATION_SETUP

pytestmark = pytest.mark.long

SETUP = ISOLATION_SETUP + """---
apiVersion: v1
kind: Namespace
metadata: {name: team-b}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: lq, namespace: team-b}
spec: {clusterQueue: pods}
"""

ROOT = os.geteuid() == 0
NOT_ROOT = "the server is not root: its jobs run as its own user, who can read its files (the security docs say so)"


def _pod(namespace: str, name: str, script: str, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace, "labels": {"kueue.x-k8s.io/queue-name": "lq"},
                         "annotations": annotations or {}},
            "spec": {"restartPolicy": "Never", "containers": [{
                "name": "main", "image": "busybox", "command": ["sh", "-c", script],
                "resources": {"requests": {"cpu": "1"}}}]}}


class Team:
    """A developer of one namespace: their token, and the server they reach with it."""

    def __init__(self, server: Server, namespace: str) -> None:
        done = server.cli("token", "create", "--role", "developer", "--namespace", namespace)
        assert done.code == 0, done.err
        self.server, self.namespace = server, namespace
        self.headers = {"Authorization": f"Bearer {done.out.strip()}"}

    def url(self, path: str) -> str:
        return f"{self.server.url}/api/v1/namespaces/{self.namespace}/pods{path}"

    def create(self, pod: dict[str, Any]) -> dict[str, Any]:
        made = httpx.post(self.url(""), json=pod, headers=self.headers, timeout=30)
        assert made.status_code == 201, made.text
        body: dict[str, Any] = made.json()
        return body

    def get(self, name: str) -> dict[str, Any]:
        got = httpx.get(self.url(f"/{name}"), headers=self.headers, timeout=30)
        assert got.status_code == 200, got.text
        body: dict[str, Any] = got.json()
        return body

    def log(self, name: str, **params: str) -> str:
        got = httpx.get(self.url(f"/{name}/log"), params=params, headers=self.headers, timeout=30)
        assert got.status_code == 200, got.text
        return got.text

    def phase(self, name: str) -> str:
        return str((self.get(name).get("status") or {}).get("phase", ""))

    def until(self, name: str, *phases: str, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while self.phase(name) not in phases:
            assert time.monotonic() < deadline, f"pod {name} is {self.phase(name)}, not {phases}: {self.log(name)}"
            time.sleep(0.2)

    def delete(self, name: str) -> None:
        gone = httpx.delete(self.url(f"/{name}"), headers=self.headers, timeout=30)
        assert gone.status_code == 200, gone.text


@pytest.fixture(scope="module")
def running(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    srv = start_server(tmp_path_factory.mktemp("contained") / "home", "--runtime", "ray")
    try:
        done = srv.cli("apply", "-f", "-", input=SETUP)
        assert done.code == 0, done.err
        yield srv
    finally:
        stop_server(srv)


def _alive(pid: int, mark: str) -> bool:
    try:
        return mark in Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return False


def test_a_log_annotation_names_no_file(running: Server) -> None:
    """The server's log for a pod is where the server puts it: an annotation naming a file, or another namespace's
    job, reads nothing of it, whether the pod is queued (and runs) or not (and never runs)."""
    team = Team(running, "team-a")
    secret = (running.home / "auth" / "admin.token").read_text().strip()
    targets = [str(running.home / "auth" / "admin.token"), "rayjobs/../../../auth/admin",
               "rayjobs/x/../../../../auth/admin.token"]
    for number, target in enumerate(targets):
        team.create(_pod("team-a", f"annotated-{number}", "echo plain-output", {"flexq.dev/log": target}))
        unqueued = _pod("team-a", f"unqueued-{number}", "echo never-run", {"flexq.dev/log": target})
        del unqueued["metadata"]["labels"]
        team.create(unqueued)
    for number, target in enumerate(targets):
        team.until(f"annotated-{number}", "Succeeded")
        for params in ({}, {"follow": "true"}, {"tailLines": "5"}):
            text = team.log(f"annotated-{number}", **params)
            assert "plain-output" in text and secret not in text, (target, params, text)
            got = httpx.get(team.url(f"/unqueued-{number}/log"), params=params, headers=team.headers, timeout=30)
            assert secret not in got.text, (target, params)
            assert (got.status_code, got.text) == (200, "") if "follow" not in params else \
                (got.status_code == 400 and "waiting to start" in got.text), (target, params, got.text)


def test_links_in_the_working_directory_lead_nowhere(running: Server) -> None:
    """A pod replaces every name the server might write or read in its directory with a link to the admin token:
    the token is neither read into the log nor written to."""
    team = Team(running, "team-a")
    token = running.home / "auth" / "admin.token"
    before = token.read_bytes()
    links = " ".join(f"ln -sf {token} {name};" for name in ("pod.log", "log", "driver.log", "run.json", "main-0.exit"))
    script = (f"{links} mkfifo fifo 2>/dev/null; ln {token} hard 2>&1; ls -la; "
              f"cat {running.home}/runs/pods/team-a/*/log 2>&1; echo planted >> {running.home}/runs/x 2>&1; "
              "echo linked")
    team.create(_pod("team-a", "linker", script))
    team.until("linker", "Succeeded", "Failed")
    text = team.log("linker") + team.log("linker", follow="true")
    assert "linked" in text
    assert before.decode().strip() not in text, "the token was read"
    assert token.read_bytes() == before and stat.S_IMODE(token.stat().st_mode) == 0o600, "the token was written"
    if not ROOT:
        pytest.skip(NOT_ROOT)
    assert "Permission denied" in text, "the job reached the server's own folders"
    assert not (running.home / "runs" / "x").exists()


def test_a_process_that_leaves_its_session_ends_with_its_pod(running: Server) -> None:
    """``setsid`` and a double fork leave the pod's session, not its process tree: the pod's end ends them."""
    if not cgroup_root():
        pytest.skip("no cgroup can be made on this machine: pods' processes are ended by session only")
    team = Team(running, "team-a")
    team.create(_pod("team-a", "escaper", "(setsid sh -c 'exec sleep 313' </dev/null >/dev/null 2>&1 &); "
                                          "sleep 0.5; echo started"))
    team.until("escaper", "Succeeded")
    deadline = time.monotonic() + 10
    while any(_alive(int(p.name), "sleep 313") for p in Path("/proc").iterdir() if p.name.isdigit()):
        assert time.monotonic() < deadline, "a process the pod left with setsid outlived the pod"
        time.sleep(0.1)


def test_one_team_cannot_reach_anothers_files_or_processes(running: Server) -> None:
    if not ROOT:
        pytest.skip(NOT_ROOT)
    a, b = Team(running, "team-a"), Team(running, "team-b")
    victim = a.create(_pod("team-a", "victim", "echo secret-of-a > mine; echo pid:$$; exec sleep 120"))
    a.until("victim", "Running")
    workdir = running.home / "runtime" / "pods" / "team-a" / f"victim.{victim['metadata']['uid']}"
    deadline = time.monotonic() + 10
    while "pid:" not in a.log("victim"):
        assert time.monotonic() < deadline, a.log("victim")
        time.sleep(0.1)
    pid = int(a.log("victim").split("pid:")[1].split()[0])
    attack = (f"id -u; cat {workdir}/mine 2>&1; echo x > {workdir}/planted 2>&1; kill -9 {pid} 2>&1; "
              f"ls {workdir} 2>&1; cat /proc/{pid}/environ 2>&1 | head -c 100; echo; echo attack-done")
    b.create(_pod("team-b", "attacker", attack))
    b.until("attacker", "Succeeded", "Failed")
    text = b.log("attacker")
    assert "attack-done" in text
    assert "secret-of-a" not in text and not (workdir / "planted").exists(), text
    assert a.phase("victim") == "Running" and _alive(pid, "sleep 120"), f"team-b killed team-a's pod: {text}"
    uid_a = workdir.stat().st_uid
    assert uid_a != 0 and stat.S_IMODE(workdir.stat().st_mode) == 0o700
    assert int(text.split()[0]) not in (0, uid_a), "the teams' jobs run as the same user"

    a.delete("victim")  # the pod's deletion ends its processes and removes its directories
    deadline = time.monotonic() + 15
    while _alive(pid, "sleep 120") or workdir.exists():
        assert time.monotonic() < deadline, "the deleted pod's process or directory is left"
        time.sleep(0.1)
    assert not list((running.home / "runs" / "pods" / "team-a").glob("victim.*"))


# --- the server's own file access, beneath a job's folder ------------------------------------------------------


@pytest.fixture
def jobdir() -> Iterator[Path]:
    folder = Path(tempfile.mkdtemp(prefix="fq-beneath-"))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def test_reads_and_writes_beneath_follow_no_link(jobdir: Path) -> None:
    outside = jobdir.parent / f"{jobdir.name}-outside"
    outside.write_text("secret")
    try:
        (jobdir / "sub").mkdir()
        os.symlink(outside, jobdir / "file-link")
        os.symlink(jobdir.parent, jobdir / "dir-link")
        os.symlink("/proc/self/root/etc/hostname", jobdir / "proc-link")
        os.mkfifo(jobdir / "fifo")
        (jobdir / "plain").write_text("mine")
        cases = {
            "file-link": OutsideError, "dir-link/" + outside.name: OutsideError, "proc-link": OutsideError,
            "fifo": OutsideError, "../" + outside.name: OutsideError, outside.as_posix(): OutsideError,
            "sub/../../" + outside.name: OutsideError, "missing": FileNotFoundError,
        }
        for relative, error in cases.items():
            with pytest.raises(error):
                read_beneath(jobdir, relative)
            if relative != "missing":  # a new file is what a write makes; everything else is refused
                with pytest.raises(OSError):
                    write_beneath(jobdir, relative, b"overwritten")
        assert read_beneath(jobdir, "plain") == b"mine"
        with pytest.raises(FileExistsError):
            write_beneath(jobdir, "plain", b"x")
        write_beneath(jobdir, "sub/new/file", b"made")
        assert (jobdir / "sub" / "new" / "file").read_bytes() == b"made"
        assert outside.read_text() == "secret"
    finally:
        outside.unlink()


def test_a_link_where_ray_start_logs_truncates_nothing(jobdir: Path) -> None:
    """A program of the job's user may put a link where the server makes ``ray start``'s log in a temp dir it gave
    that user: the log is made new, through no link, and what the link names is left as it was."""
    outside = jobdir.parent / f"{jobdir.name}-shadow"
    outside.write_text("root's")
    try:
        os.symlink(outside, jobdir / "ray-start.log")
        with pytest.raises(OSError):
            _start_log(jobdir)
        assert outside.read_text() == "root's"
        (jobdir / "ray-start.log").unlink()
        with _start_log(jobdir) as log:
            log.write(b"started")
        assert (jobdir / "ray-start.log").read_bytes() == b"started"
    finally:
        outside.unlink()


def test_a_configmap_key_or_mount_cannot_write_outside_the_job(jobdir: Path) -> None:
    """The runtime's own check, behind the API's: keys and mount paths that leave the job's folder are refused, and
    a link an earlier run left where the files go is replaced, never written through."""
    outside = jobdir.parent / f"{jobdir.name}-cron"
    outside.mkdir()
    try:
        def job(mount: str) -> dict[str, Any]:
            template = {"spec": {"volumes": [{"name": "v", "configMap": {"name": "code"}}],
                                 "containers": [{"name": "c", "volumeMounts": [{"name": "v", "mountPath": mount}]}]}}
            return {"spec": {"entrypoint": "true", "rayClusterSpec": {"headGroupSpec": {"template": template}}}}

        for key in ("../x", "a/../../x", "/etc/cron.d/x", "x\0y"):
            with pytest.raises(EnvironmentError_):
                prepare(job("/app"), {"code": {key: "payload"}}, jobdir / "work")
        for mount in ("/..", "..", "/"):
            with pytest.raises(EnvironmentError_):
                prepare(job(mount), {"code": {"k": "payload"}}, jobdir / "work")
        shutil.rmtree(jobdir / "work" / "app", ignore_errors=True)
        os.symlink(outside, jobdir / "work" / "app")
        prepare(job("/app"), {"code": {"train.py": "print(1)"}}, jobdir / "work")
        assert not list(outside.iterdir()), "written through a link an earlier run left"
        assert (jobdir / "work" / "app" / "train.py").read_text() == "print(1)"
        assert not (jobdir / "work" / "app").is_symlink()
    finally:
        shutil.rmtree(outside)


def test_a_process_tree_ends_what_left_its_session() -> None:
    if not cgroup_root():
        pytest.skip("no cgroup can be made on this machine")
    tree = ProcessTree.create("test-tree")
    try:
        launcher = tree.spawn(["sh", "-c", "(setsid sh -c 'exec sleep 271' &); exit 0"], cwd=None,
                              env={"PATH": "/usr/bin:/bin"}, stdout=subprocess.DEVNULL, user=None, status=None)
        assert launcher.wait(10) == 0
        deadline = time.monotonic() + 5
        while not tree.members():
            assert time.monotonic() < deadline
            time.sleep(0.05)
        escaped = tree.members()
        assert escaped and all(_alive(pid, "sleep 271") for pid in escaped)
        tree.kill(grace=0.2)
        assert not tree.running() and not any(_alive(pid, "sleep 271") for pid in escaped)
    finally:
        tree.kill(grace=0)
        tree.remove()
    assert not tree.groups["2"].exists()


# --- a server killed under running pods ----------------------------------------------------------------------


def _job(count: Path) -> dict[str, Any]:
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": "once", "namespace": "team-a", "labels": {"kueue.x-k8s.io/queue-name": "lq"}},
            "spec": {"parallelism": 1, "completions": 1, "backoffLimit": 3, "suspend": True, "template": {"spec": {
                "restartPolicy": "Never", "containers": [{
                    "name": "main", "image": "busybox",
                    "command": ["sh", "-c", f"echo job >> {count}; sleep 8; echo job-done"],
                    "resources": {"requests": {"cpu": "1"}}}]}}}}


def _jobs_pods(server: Server) -> list[dict[str, Any]]:
    got = admin.get(f"{server.url}/api/v1/namespaces/team-a/pods",
                    params={"labelSelector": "batch.kubernetes.io/job-name=once"})
    items: list[dict[str, Any]] = got.json()["items"]
    return items


def _eventually(check: Any, what: str, timeout: float = 60) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        with contextlib.suppress(httpx.HTTPError, KeyError, IndexError):
            value = check()
            if value:
                return value
        assert time.monotonic() < deadline, what
        time.sleep(0.2)


def test_a_server_killed_under_running_pods_runs_each_exactly_once(tmp_path: Path) -> None:
    """kill -9 the server while a batch Job's pod and a plain Pod run; the next server follows both to their end:
    each ran once, each counted once, nothing is left running."""
    shared = Path(tempfile.mkdtemp(prefix="fq-count-"))
    shared.chmod(0o1777)
    count = shared / "count"
    port = free_port_pair()
    home = tmp_path / "home"
    srv = start_server(home, "--runtime", "ray", port=port)
    try:
        assert srv.cli("apply", "-f", "-", input=SETUP).code == 0
        made = admin.post(f"{srv.url}/apis/batch/v1/namespaces/team-a/jobs", json=_job(count))
        assert made.status_code == 201, made.text
        plain = _pod("team-a", "plain", f"echo pod >> {count}; sleep 8; echo pod-done")
        assert admin.post(f"{srv.url}/api/v1/namespaces/team-a/pods", json=plain).status_code == 201
        _eventually(lambda: count.exists() and sorted(count.read_text().split()) == ["job", "pod"],
                    "both pods started")
        srv.process.send_signal(signal.SIGKILL)
        srv.process.wait()
        admin.unregister(srv.url)
        if srv.process.stderr:
            srv.process.stderr.close()
        srv = start_server(home, "--runtime", "ray", port=port)

        def job_status() -> dict[str, Any]:
            job = admin.get(f"{srv.url}/apis/batch/v1/namespaces/team-a/jobs/once").json()
            status: dict[str, Any] = job.get("status") or {}
            ended = any(c.get("type") in ("Complete", "Failed") and c.get("status") == "True"
                        for c in status.get("conditions") or [])
            return status if ended else {}

        status = _eventually(job_status, "the Job ends", timeout=90)
        pod = _eventually(lambda: (lambda p: p if (p.get("status") or {}).get("phase") in ("Succeeded", "Failed")
                                   else None)(admin.get(f"{srv.url}/api/v1/namespaces/team-a/pods/plain").json()),
                          "the plain Pod ends", timeout=60)
        assert sorted(count.read_text().split()) == ["job", "pod"], "a pod ran twice"
        assert (status.get("succeeded"), status.get("failed")) == (1, 0), status
        assert [p["status"]["phase"] for p in _jobs_pods(srv)] == ["Succeeded"]
        assert pod["status"]["phase"] == "Succeeded", pod["status"]
        assert "pod-done" in admin.get(f"{srv.url}/api/v1/namespaces/team-a/pods/plain/log").text
        events = admin.get(f"{srv.url}/api/v1/namespaces/team-a/events").json()["items"]
        assert any(e["reason"] == "Reattached" and e["involvedObject"]["name"] == "plain" for e in events), \
            "the state written says the pod was followed again"

        def finished() -> bool:
            wls = admin.get(f"{srv.url}/apis/kueue.x-k8s.io/v1beta2/namespaces/team-a/workloads").json()["items"]
            return bool(wls) and all(any(c["type"] == "Finished" and c["status"] == "True"
                                         for c in (w.get("status") or {}).get("conditions") or []) for w in wls)
        _eventually(finished, "every workload finished, its quota given back")
    finally:
        stop_server(srv)
        shutil.rmtree(shared, ignore_errors=True)
    assert not any(_alive(int(p.name), "sleep 8") for p in Path("/proc").iterdir() if p.name.isdigit())
