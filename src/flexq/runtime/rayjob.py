"""One RayJob, run for real: its Ray cluster, its entrypoint through the Jobs API, its log and status.

Lifecycle (KubeRay's): jobDeploymentStatus Initializing (cluster starting) -> Running (entrypoint
submitted; jobStatus PENDING -> RUNNING) -> Complete (SUCCEEDED) or Failed (FAILED, STOPPED). The
driver log is kept in a file that ``flexq logs`` reads (and follows); it ends, like the KubeRay submitter's
log, with ``Job '<id>' succeeded`` (or failed). Metrics the script reports with ``ray.train.report``
are read from the log into the status. The cluster goes when the job ends if
``shutdownAfterJobFinishes``, else when the RayJob is deleted. Every job has a deadline
(``activeDeadlineSeconds``, else an hour), after which it is stopped. ``FLEXQ_CHECKPOINT_DIR`` names a
directory of the RayJob's own that outlives its runs (for Ray Train's ``RunConfig(storage_path=...)``).

A failed attempt (the script failed, a worker was killed, the head exited: ``RayClusterLost``) is retried on a
new cluster while ``status.failed`` stays within ``backoffLimit``, as KubeRay does; the count is KubeRay's,
kept in the status across evictions and restarts. A run resumed after a server restart (``resume``) follows the
cluster found again where the last server left it, or starts from the loss of its cluster
(:mod:`flexq.runtime.reattach`).
"""

from __future__ import annotations

import contextlib
import shutil
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

import httpx

from flexq.jobs import pod_requests, selected_cluster
from flexq.runtime.elastic import ElasticWorkers, asks_tpu, is_elastic
from flexq.runtime.emulation import Accelerators, accelerators_for
from flexq.runtime.environment import EnvironmentError_, prepare
from flexq.runtime.job_user import job_user
from flexq.runtime.ray_cluster import LocalRayCluster, RayClusterHandle, RayStartError, ended_note
from flexq.runtime.reattach import LOST_REASON, Resume
from flexq.runtime.remote import AGENT_NOT_READY, RemoteRayCluster, relative_entrypoint
from flexq.runtime.train_reports import parse_metrics, parse_reports
from flexq.store import rfc3339

__all__ = ["END_MARKER", "Borrowed", "RayJobRun", "parse_metrics", "parse_reports"]

END_MARKER: Final = "\x00flexq-end\x00"
DEFAULT_DEADLINE: Final = 3600.0
_AGENT_WAIT: Final = 120.0
"""How long a submission is retried while the head's job agent is not up yet (it starts after the dashboard,
late on a loaded machine, and Ray answers "No available agent to submit job, please try again later")."""
_CLEAN_LOGS: Final = {"RAY_TRAIN_ENABLE_PRINT_PATCH": "0", "RAY_DEDUP_LOGS": "0", "RAY_COLOR_PREFIX": "0"}
_CHECK_TIMEOUT: Final = 120.0
"""Seconds the dashboard of a cluster whose head still runs may leave the job's checks unanswered."""
_FINAL: Final = ("ValidationFailed", "Stopped", "DeadlineExceeded")
"""Failures that are not retried: the job cannot run here, or was stopped."""
_RUNS_ON: Final = "flexq: the job runs on "
"""How the log says which existing cluster the job runs on (the job's output follows that line)."""


@dataclass(frozen=True, slots=True)
class Borrowed:
    """An existing Ray cluster and its pods' spec: a RayCluster's, or a Ray-cluster node pool's (the job's spec)."""

    cluster: RayClusterHandle
    spec: Mapping[str, Any]
    what: str = ""
    """What the log calls the cluster (default: the RayCluster the job names)."""


def _submit(url: str, body: Mapping[str, Any], stop: threading.Event, alive: Callable[[], bool]) -> httpx.Response:
    """Submit the job to the cluster's Jobs API, asking again while the head runs but its dashboard refuses the
    connection or has no agent to take the job yet (a loaded machine starts them late), up to a deadline."""
    deadline = time.monotonic() + _AGENT_WAIT
    while True:
        try:
            response = httpx.post(f"{url}/api/jobs/", json=dict(body), timeout=30)
        except httpx.ConnectError:  # nothing was sent: asking again cannot submit twice
            if time.monotonic() > deadline or not alive() or stop.wait(1.0):
                raise
            continue
        if not any(m in response.text for m in AGENT_NOT_READY) or time.monotonic() > deadline or stop.wait(1.0):
            return response


class RayJobRun:
    def __init__(self, job: Mapping[str, Any], configmaps: Mapping[str, Mapping[str, str]], workdir: Path,
                 on_status: Callable[[dict[str, Any]], None],
                 on_scale: Callable[[str, int], None] = lambda _group, _pods: None, *,
                 record: Path | None = None, resume: Resume | None = None,
                 borrow: Callable[[], Borrowed | None] | None = None, log_path: Path | None = None) -> None:
        self.job = job
        self.configmaps = configmaps
        self.workdir = workdir
        self.log_path = log_path if log_path is not None else workdir.with_name(workdir.name + ".log")
        """The driver log: the server's file, outside the working directory (which the job's user can write)."""
        self.on_status = on_status
        self.cluster: RayClusterHandle | None = resume.cluster if resume is not None else None
        self.submission = ""
        self.record = record
        """Where the cluster's record is kept (see :mod:`flexq.runtime.reattach`); None: no record."""
        self.resume = resume
        """The run goes on from a run of an earlier server (its cluster found again, or lost)."""
        self.borrow = borrow
        """For a RayJob on an existing RayCluster (``clusterSelector``): that cluster and the RayCluster's spec once it
        is up, else None. The run submits to it (with the ConfigMaps its pods mount) and never stops it."""
        self.rejoin = False
        """The job was submitted to the existing cluster by an earlier server: its submission is followed again
        if the cluster still knows it."""
        self._stop = threading.Event()
        self.suspended = False
        """Stopped because the workload was evicted: the job will run again, so no final status is written."""
        self.detach = False
        """The server is going; the job, on a cluster not flexq's, runs on unfollowed (the next server follows it)."""
        self._notes: list[str] = []
        """Lines flexq adds to the log while the job runs (after the job's own output)."""
        self._written = ""
        """What the log holds since the run last wrote it whole."""
        self.elastic = (ElasticWorkers.for_job(job, self._notes.append, on_scale) if is_elastic(job) and borrow is None
                        else None)
        """An elastic job's worker nodes (None: the whole cluster is one node)."""
        self._thread = threading.Thread(target=self._run, name=f"rayjob-{job['metadata']['name']}", daemon=True)
        self.done = threading.Event()

    @property
    def started(self) -> bool:
        return self._thread.ident is not None

    def start(self) -> None:
        self._thread.start()

    def stop(self, wait: float = 30.0) -> None:
        """Stop the job and its cluster (eviction, deletion, server shutdown)."""
        self._stop.set()
        if self.started:
            self._thread.join(timeout=wait)
        if self.cluster is not None and self.borrow is None:
            self.cluster.stop()

    def resize(self, counts: Mapping[str, int]) -> None:
        """The admitted pods per worker group changed (an elastic job grew or shrank): the run adds or removes
        worker nodes to match."""
        if self.elastic is not None:
            self.elastic.resize(counts)

    def _append(self, text: str) -> None:
        with self.log_path.open("a", encoding="utf-8") as fh:
            fh.write(text)
        if self._written:
            self._written += text

    def _new_submission(self, attempt: int = 1) -> str:
        return f"{self.job['metadata']['name']}-{int(time.time()) % 100000:05d}" + (f"-{attempt}" if attempt > 1
                                                                                     else "")

    def _begin(self) -> None:
        """The log and status the run starts with. A run after an eviction keeps the earlier runs' log above its
        own; a run resumed after a restart goes on with the log and status the last server left."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.log_path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        if self.resume is not None:
            self.submission = self.resume.submission or self._new_submission()
            return
        status = self.job.get("status") or {}
        if self.borrow is not None and status.get("jobId") and status.get("jobDeploymentStatus") == "Running":
            self.rejoin, self.submission = True, str(status["jobId"])
            # The log up to the job's output: the job's output is written again below it as the cluster gives it.
            text = self.log_path.read_text(encoding="utf-8", errors="replace") if self.log_path.exists() else ""
            cut = text.rfind(_RUNS_ON)
            self.log_path.write_text((text[:cut] if cut >= 0 else text).replace(END_MARKER, "") +
                                     "flexq: the server restarted; the job is followed again\n", encoding="utf-8")
            return
        previous = self.log_path.read_text(encoding="utf-8", errors="replace") if self.log_path.exists() else ""
        previous = previous.replace(END_MARKER, "")
        self.log_path.write_text(previous + (f"{'=' * 12} flexq: the job runs again {'=' * 12}\n" if previous
                                             else ""), encoding="utf-8")
        self.submission = self._new_submission()
        cluster = selected_cluster("RayJob", self.job) or f"{self.job['metadata']['name']}-raycluster"
        self.on_status({"jobDeploymentStatus": "Initializing", "jobStatus": "", "rayClusterName": cluster,
                        "jobId": self.submission, "startTime": rfc3339(datetime.now(UTC))})

    def _run(self) -> None:
        spec = self.job.get("spec") or {}
        self._begin()
        attempts = int(spec.get("backoffLimit") or 0) + 1
        # KubeRay counts failures in the status: a run resumed after a restart goes on counting.
        failed = int((self.job.get("status") or {}).get("failed") or 0)
        outcome: dict[str, Any] = {}
        while True:
            outcome = self._attempt(spec)
            if outcome["jobStatus"] == "SUCCEEDED" or outcome.get("reason") in _FINAL:
                break
            failed += 1
            if failed >= attempts or self._stop.is_set():
                break
            self._append(f"flexq: the job failed ({outcome.get('message', '')}); retrying, attempt "
                         f"{failed + 1} of {attempts} (backoffLimit {attempts - 1})\n")
            self.on_status({"jobDeploymentStatus": "Retrying", "failed": failed})
            if self.cluster is not None and self.borrow is None:
                self.cluster.stop()
            self.cluster = None
            self.submission = self._new_submission(failed + 1)
            self.on_status({"jobId": self.submission})
        self._end(spec, outcome, failed)

    def _end(self, spec: Mapping[str, Any], outcome: dict[str, Any], failed: int) -> None:
        if self.detach:
            self.done.set()
            return
        outcome["failed"] = failed
        outcome["succeeded"] = 1 if outcome["jobStatus"] == "SUCCEEDED" else 0
        verdict = {"SUCCEEDED": "succeeded", "STOPPED": "was stopped"}.get(outcome["jobStatus"], "failed")
        self._append(f"Job '{self.submission}' {verdict}\n{'-' * 40}\n" + END_MARKER)
        metrics = parse_metrics(self.log_path.read_text(encoding="utf-8", errors="replace"))
        # The end is written before the cluster is torn down: a server killed while the cluster stops finds the job
        # finished (and reaps what is left of the cluster) instead of finding the cluster half gone.
        if not self.suspended:
            self.on_status({**outcome, "endTime": outcome.get("endTime") or rfc3339(datetime.now(UTC)),
                            **({"trainingMetrics": metrics} if metrics else {})})
        if self.cluster is not None and self.borrow is None and (spec.get("shutdownAfterJobFinishes")
                                                                 or self._stop.is_set() or not self.cluster.alive()):
            self.cluster.stop()
        self.done.set()

    def _attempt(self, spec: Mapping[str, Any]) -> dict[str, Any]:
        try:
            return self._execute(spec)
        except (EnvironmentError_, RayStartError) as exc:
            self._append(f"{exc}\n")
            reason = "ValidationFailed" if isinstance(exc, EnvironmentError_) else "SubmissionFailed"
            return {"jobStatus": "FAILED", "jobDeploymentStatus": "Failed", "reason": reason, "message": str(exc)}
        except Exception as exc:
            self._append(f"flexq: the job failed to run: {exc}\n")
            return {"jobStatus": "FAILED", "jobDeploymentStatus": "Failed", "reason": "SubmissionFailed",
                    "message": str(exc)}

    def _execute(self, spec: Mapping[str, Any]) -> dict[str, Any]:
        resumed, self.resume = self.resume, None
        if resumed is not None and resumed.lost:
            self._append(f"flexq: {resumed.lost}\n")
            return _lost(resumed.lost)
        if resumed is not None and resumed.cluster is not None:
            return self._follow(spec, *self._reattach(spec, resumed.cluster, resumed))
        stopped = self._launch(spec)
        if stopped is not None:
            return stopped
        header = self.log_path.read_text(encoding="utf-8")
        deadline = time.time() + float(spec.get("activeDeadlineSeconds") or DEFAULT_DEADLINE)
        if isinstance(self.cluster, LocalRayCluster) and self.borrow is None:
            self.cluster.record.update(submission=self.submission, header_len=len(header), deadline=deadline)
            self.cluster.save_record()
        return self._follow(spec, header, deadline)

    def _reattach(self, spec: Mapping[str, Any], cluster: LocalRayCluster, resumed: Resume) -> tuple[str, float]:
        """Take the cluster found again after a restart: the log says so above the job's output (so that the log
        keeps growing at its end, as followers expect); returns the log's header and the job's deadline."""
        self.cluster = cluster
        if self.elastic is not None:
            self.elastic.adopt(cluster)
        text = self.log_path.read_text(encoding="utf-8", errors="replace") if self.log_path.exists() else ""
        head = cluster.process.pid if cluster.process is not None else 0
        header = (text[:resumed.header_len] + f"flexq: the server restarted; the job's Ray cluster ran on (head pid "
                  f"{head}) and is followed again\n")
        self._write_log(header + text[resumed.header_len:])
        cluster.record["header_len"] = len(header)
        cluster.save_record()
        deadline = resumed.deadline or time.time() + float(spec.get("activeDeadlineSeconds") or DEFAULT_DEADLINE)
        return header, deadline

    def _write_log(self, text: str) -> None:
        """The log becomes ``text``: appended to when it only grows (a follower reads it as it grows), else
        rewritten."""
        if text == self._written:
            return
        if self._written and text.startswith(self._written) and self.log_path.exists():
            with self.log_path.open("a", encoding="utf-8") as fh:
                fh.write(text[len(self._written):])
        else:
            self.log_path.write_text(text, encoding="utf-8")
        self._written = text

    def _launch(self, spec: Mapping[str, Any]) -> dict[str, Any] | None:
        """Start the cluster and submit the entrypoint; an outcome when the run was stopped meanwhile."""
        job: Mapping[str, Any] = self.job
        if self.borrow is not None:
            waited = self._borrow_cluster(self.borrow, spec)
            if not isinstance(waited, Borrowed):
                return waited
            job = {**job, "spec": {**spec, "rayClusterSpec": waited.spec}}  # the cluster's pods mount its ConfigMaps
        remote = isinstance(self.cluster, RemoteRayCluster)
        files = self.workdir / "working_dir"  # uploaded to a remote cluster: the job's files only
        if remote and files.exists():
            shutil.rmtree(files)
        env = prepare(job, self.configmaps, files if remote else self.workdir, remote=remote)
        for warning in env.warnings:
            self._append(f"flexq: warning: {warning}\n")
        if self.borrow is None:
            try:
                self._start_cluster(spec)
            except RayStartError:
                if not self._stop.is_set():
                    raise
        if self._stop.is_set():
            return {"jobStatus": "STOPPED", "jobDeploymentStatus": "Failed", "reason": "Stopped",
                    "message": "stopped before it started"}
        assert self.cluster is not None
        url = self.cluster.dashboard_url
        if self.rejoin and _known(url, self.submission):
            pass  # submitted by an earlier server, and still known there: followed, not submitted again
        elif isinstance(self.cluster, RemoteRayCluster):
            self.cluster.submit(relative_entrypoint(env.entrypoint, files), self.submission,
                                {**_CLEAN_LOGS, **env.env_vars}, files if env.files else None, self._stop,
                                env.runtime_env)
        else:
            checkpoints = self.workdir / "checkpoints"
            checkpoints.mkdir(parents=True, exist_ok=True)
            job_user(str(self.job["metadata"].get("namespace") or "default")).give(self.workdir)  # the job user's
            body = {"entrypoint": env.entrypoint, "submission_id": self.submission,
                    "runtime_env": {"env_vars": {**_CLEAN_LOGS, "FLEXQ_CHECKPOINT_DIR": str(checkpoints),
                                                 **env.env_vars}}}
            response = _submit(url, body, self._stop, self.cluster.alive)
            if response.status_code >= 400:
                raise RuntimeError(f"the Ray Jobs API refused the job: {response.text[:500]}")
        self.on_status({"jobDeploymentStatus": "Running", "jobStatus": "PENDING", "dashboardURL": url.removeprefix(
            "http://")})
        return None

    def _start_cluster(self, spec: Mapping[str, Any]) -> None:
        """Start the job's own Ray cluster, as its ``rayClusterSpec`` asks."""
        cluster_spec = spec.get("rayClusterSpec") or {}
        accelerators = self._accelerators(cluster_spec)
        self._append(f"flexq: starting a Ray cluster: {accelerators.description}\n")
        params = (cluster_spec.get("headGroupSpec") or {}).get("rayStartParams") or {}
        meta = self.job["metadata"]
        cluster = LocalRayCluster(accelerators, start_params={str(k): str(v) for k, v in params.items()},
                                  record_path=self.record, record={
                                      "kind": "RayJob", "namespace": meta.get("namespace", "default"),
                                      "name": meta["name"], "uid": str(meta.get("uid", ""))})
        self.cluster = cluster
        cluster.start(cancel=self._stop)
        if self.elastic is not None:
            self.elastic.reconcile(cluster)
            self._append("".join(self._notes))
            self._notes.clear()

    def _borrow_cluster(self, borrow: Callable[[], Borrowed | None],
                        spec: Mapping[str, Any]) -> Borrowed | dict[str, Any]:
        """Wait for the existing RayCluster the job names to be up (as KubeRay waits for it); an outcome when the
        run was stopped, or reached its deadline, first."""
        name = selected_cluster("RayJob", self.job)
        deadline = time.time() + float(spec.get("activeDeadlineSeconds") or DEFAULT_DEADLINE)
        said = False
        while (borrowed := borrow()) is None:
            if not said:
                self._append(f"flexq: waiting for RayCluster {name} to be ready\n")
                said = True
            if self._stop.wait(0.5):
                return {"jobStatus": "STOPPED", "jobDeploymentStatus": "Failed", "reason": "Stopped",
                        "message": "stopped before it started"}
            if time.time() > deadline:
                return {"jobStatus": "FAILED", "jobDeploymentStatus": "Failed", "reason": "DeadlineExceeded",
                        "message": f"RayCluster {name} was not ready before the job's deadline"}
        self.cluster = borrowed.cluster
        self._append(f"{_RUNS_ON}{borrowed.what or f'RayCluster {name}'} (its dashboard "
                     f"{self.cluster.dashboard_url})\n")
        return borrowed

    def _accelerators(self, cluster_spec: Mapping[str, Any]) -> Accelerators:
        groups = []
        for group in cluster_spec.get("workerGroupSpecs") or []:
            if self.elastic is not None and not asks_tpu(group):
                continue  # the group's pods are worker nodes of their own
            pod = (group.get("template") or {}).get("spec") or {}
            pods = int(group.get("replicas", 1)) * int(group.get("numOfHosts", 1))
            groups.append((dict(pod.get("nodeSelector") or {}), pod_requests(pod), pods))
        accelerators = accelerators_for(groups)
        if self.elastic is not None and not groups:
            head = ((cluster_spec.get("headGroupSpec") or {}).get("template") or {}).get("spec") or {}
            cpus = max(1, -(-pod_requests(head).get("cpu", 1000) // 1000))
            accelerators = Accelerators(num_cpus=cpus, description=f"a head node ({cpus} CPU) and elastic worker "
                                        "groups: " + ", ".join(f"{g} {n} worker(s)" for g, n in
                                                              self.elastic.desired.items()))
        return accelerators

    def _follow(self, spec: Mapping[str, Any], header: str, deadline: float) -> dict[str, Any]:
        """Follow the submitted job to its end: its log into the log file, its metrics and state into the status.
        A head that exits (or a job it does not know) is the cluster lost; a dashboard silent for longer than
        :data:`_CHECK_TIMEOUT` fails the job as KubeRay does."""
        assert self.cluster is not None
        url = self.cluster.dashboard_url
        reported = "PENDING"
        metrics: dict[str, Any] | None = None
        silent_since: float | None = None
        while True:
            try:
                answer = _check(url, self.submission)
            except LookupError as exc:
                return _lost(str(exc))
            if answer is None:
                silent_since = silent_since or time.monotonic()
                if not self.cluster.alive():
                    return _lost(f"the Ray cluster's head exited while the job ran{ended_note(self.cluster)}")
                if time.monotonic() - silent_since > _CHECK_TIMEOUT:
                    return {"jobStatus": "FAILED", "jobDeploymentStatus": "Failed",
                            "reason": "JobStatusCheckTimeoutExceeded",
                            "message": f"the Ray dashboard did not answer for {_CHECK_TIMEOUT:.0f}s"}
            else:
                silent_since = None
                state, logs = answer
                self._write_log(header + logs + "".join(self._notes))
                latest = parse_metrics(logs)
                if latest is not None and latest != metrics:
                    metrics = latest
                    self.on_status({"trainingMetrics": metrics})
                status = str(state.get("status", "PENDING"))
                if status != reported and status == "RUNNING":
                    self.on_status({"jobStatus": "RUNNING"})
                    reported = status
                if status in ("SUCCEEDED", "FAILED", "STOPPED"):
                    message = str(state.get("message") or "")
                    return {"jobStatus": status, "jobDeploymentStatus": "Complete" if status == "SUCCEEDED" else
                            "Failed", "message": message, **({"reason": "AppFailed"} if status == "FAILED" else {}),
                            **_ended(state)}
            if self._stop.is_set() or time.time() > deadline:
                return self._stopped(url)
            if self.elastic is not None and isinstance(self.cluster, LocalRayCluster):
                self.elastic.reconcile(self.cluster)
                self.elastic.autoscale(self.cluster, time.monotonic())
            time.sleep(1.0)

    def _stopped(self, url: str) -> dict[str, Any]:
        if self._stop.is_set() and self.detach:
            return {"jobStatus": "STOPPED", "jobDeploymentStatus": "Running", "reason": "Stopped",
                    "message": "the server is going; the job runs on"}
        with contextlib.suppress(httpx.HTTPError):
            httpx.post(f"{url}/api/jobs/{self.submission}/stop", timeout=30)
        if self._stop.is_set():
            return {"jobStatus": "STOPPED", "jobDeploymentStatus": "Failed", "reason": "Stopped",
                    "message": "stopped: the workload was evicted or the RayJob deleted"}
        return {"jobStatus": "FAILED", "jobDeploymentStatus": "Failed", "reason": "DeadlineExceeded",
                "message": "the job ran past its deadline and was stopped"}


def _check(url: str, submission: str) -> tuple[dict[str, Any], str] | None:
    """The job's state and log from the dashboard (None: it does not answer; LookupError: it knows no such job)."""
    try:
        response = httpx.get(f"{url}/api/jobs/{submission}", timeout=30)
        if response.status_code == 404:
            raise LookupError(f"the Ray cluster does not know the job's submission {submission}")
        logs = httpx.get(f"{url}/api/jobs/{submission}/logs", timeout=30) if response.status_code == 200 else None
        if logs is None or logs.status_code != 200:
            return None  # a head whose GCS is gone still answers, with errors
        state, text = response.json(), logs.json().get("logs", "")
    except (httpx.HTTPError, ValueError, AttributeError):
        return None
    return (state, str(text)) if isinstance(state, dict) else None


def _ended(state: Mapping[str, Any]) -> dict[str, str]:
    """``endTime`` from when the driver ended as the cluster tells it (milliseconds since the epoch): a job found
    finished after a restart ended then, not when the server came back."""
    ended = state.get("end_time")
    if isinstance(ended, int | float) and not isinstance(ended, bool) and ended > 0:
        return {"endTime": rfc3339(datetime.fromtimestamp(ended / 1000, UTC))}
    return {}


def _known(url: str, submission: str) -> bool:
    """Whether the Ray cluster at ``url`` knows the job's submission."""
    try:
        return httpx.get(f"{url}/api/jobs/{submission}", timeout=30).status_code == 200
    except httpx.HTTPError:
        return False


def _lost(message: str) -> dict[str, Any]:
    return {"jobStatus": "FAILED", "jobDeploymentStatus": "Failed", "reason": LOST_REASON, "message": message}
