"""One RayJob, run for real: its Ray cluster, its entrypoint through the Jobs API, its log and status.

Lifecycle (KubeRay's): jobDeploymentStatus Initializing (cluster starting) -> Running (entrypoint
submitted; jobStatus PENDING -> RUNNING) -> Complete (SUCCEEDED) or Failed (FAILED, STOPPED). The
driver log is kept in a file that ``flexq logs`` reads (and follows); it ends, like the KubeRay submitter's
log, with ``Job '<id>' succeeded`` (or failed). Metrics the script reports with ``ray.train.report``
are read from the log into the status. The cluster goes when the job ends if
``shutdownAfterJobFinishes``, else when the RayJob is deleted. Every job has a deadline
(``activeDeadlineSeconds``, else an hour), after which it is stopped. ``FLEXQ_CHECKPOINT_DIR`` names a
directory of the RayJob's own that outlives its runs (for Ray Train's ``RunConfig(storage_path=...)``).
"""

from __future__ import annotations

import ast
import re
import threading
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

import httpx

from flexq.jobs.workload import pod_requests
from flexq.runtime.elastic import ElasticWorkers, asks_tpu, is_elastic
from flexq.runtime.emulation import Accelerators, accelerators_for
from flexq.runtime.environment import EnvironmentError_, prepare
from flexq.runtime.ray_cluster import LocalRayCluster, RayStartError

__all__ = ["END_MARKER", "RayJobRun", "parse_metrics", "parse_reports"]

END_MARKER: Final = "\x00flexq-end\x00"
DEFAULT_DEADLINE: Final = 3600.0
_REPORT: Final = re.compile(r"Reporting training result (\d+): TrainingReport\(.*?metrics=(\{.*?\}), "
                            r"validation=\w+\)(?: from rank (\d+))?")
_AGENT_WAIT: Final = 120.0
"""How long a submission is retried while the head's job agent is not up yet (it starts after the dashboard,
late on a loaded machine, and Ray answers "No available agent to submit job, please try again later")."""
_CLEAN_LOGS: Final = {"RAY_TRAIN_ENABLE_PRINT_PATCH": "0", "RAY_DEDUP_LOGS": "0", "RAY_COLOR_PREFIX": "0"}


def _stamp() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _submit(url: str, body: Mapping[str, Any], stop: threading.Event) -> httpx.Response:
    deadline = time.monotonic() + _AGENT_WAIT
    while True:
        response = httpx.post(f"{url}/api/jobs/", json=dict(body), timeout=30)
        if "No available agent" not in response.text or time.monotonic() > deadline or stop.wait(1.0):
            return response


def parse_reports(log: str) -> list[dict[str, Any]]:
    """Every report the script made with ``train.report``, in order (rank 0's copy of each), with its number
    under ``report``. A log holding several runs (after an eviction) holds each run's reports."""
    reports: list[dict[str, Any]] = []
    for match in _REPORT.finditer(log):
        if match.group(3) not in (None, "0"):
            continue  # every worker logs its copy of the report
        try:
            value = ast.literal_eval(match.group(2))
        except (ValueError, SyntaxError):
            continue
        if isinstance(value, dict):
            reports.append({**value, "report": int(match.group(1))})
    return reports


def parse_metrics(log: str) -> dict[str, Any] | None:
    """The last metrics the script reported with ``train.report`` (rank 0's copy of each report)."""
    reports = parse_reports(log)
    return reports[-1] if reports else None


class RayJobRun:
    def __init__(self, job: Mapping[str, Any], configmaps: Mapping[str, Mapping[str, str]], workdir: Path,
                 on_status: Callable[[dict[str, Any]], None],
                 on_scale: Callable[[str, int], None] = lambda _group, _pods: None) -> None:
        self.job = job
        self.configmaps = configmaps
        self.workdir = workdir
        self.log_path = workdir / "driver.log"
        self.on_status = on_status
        self.cluster: LocalRayCluster | None = None
        self.submission = ""
        self._stop = threading.Event()
        self.suspended = False
        """Stopped because the workload was evicted: the job will run again, so no final status is written."""
        self._notes: list[str] = []
        """Lines flexq adds to the log while the job runs (after the job's own output)."""
        self.elastic = ElasticWorkers.for_job(job, self._notes.append, on_scale) if is_elastic(job) else None
        """An elastic job's worker nodes (None: the whole cluster is one node)."""
        self._thread = threading.Thread(target=self._run, name=f"rayjob-{job['metadata']['name']}", daemon=True)
        self.done = threading.Event()

    def start(self) -> None:
        self._thread.start()

    def stop(self, wait: float = 30.0) -> None:
        """Stop the job and its cluster (eviction, deletion, server shutdown)."""
        self._stop.set()
        self._thread.join(timeout=wait)
        if self.cluster is not None:
            self.cluster.stop()

    def resize(self, counts: Mapping[str, int]) -> None:
        """The admitted pods per worker group changed (an elastic job grew or shrank): the run adds or removes
        worker nodes to match."""
        if self.elastic is not None:
            self.elastic.resize(counts)

    def _append(self, text: str) -> None:
        with self.log_path.open("a", encoding="utf-8") as fh:
            fh.write(text)

    def _run(self) -> None:
        meta, spec = self.job["metadata"], self.job.get("spec") or {}
        name = meta["name"]
        self.workdir.mkdir(parents=True, exist_ok=True)
        previous = self.log_path.read_text(encoding="utf-8", errors="replace") if self.log_path.exists() else ""
        previous = previous.replace(END_MARKER, "")
        # A run after an eviction keeps the earlier runs' log above its own.
        self.log_path.write_text(previous + (f"{'=' * 12} flexq: the job runs again {'=' * 12}\n" if previous
                                             else ""), encoding="utf-8")
        self.submission = f"{name}-{int(time.time()) % 100000:05d}"
        start = _stamp()
        self.on_status({"jobDeploymentStatus": "Initializing", "jobStatus": "", "rayClusterName": f"{name}-raycluster",
                        "jobId": self.submission, "startTime": start})
        attempts = int(spec.get("backoffLimit") or 0) + 1
        failed = 0
        outcome: dict[str, Any] = {}
        for attempt in range(1, attempts + 1):
            outcome = self._attempt(spec)
            if outcome["jobStatus"] == "SUCCEEDED" or outcome.get("reason") in ("ValidationFailed", "Stopped",
                                                                                "DeadlineExceeded"):
                break
            failed += 1
            if attempt < attempts and not self._stop.is_set():
                self._append(f"flexq: the job failed ({outcome.get('message', '')}); retrying, attempt "
                             f"{attempt + 1} of {attempts} (backoffLimit {attempts - 1})\n")
                self.on_status({"jobDeploymentStatus": "Retrying", "failed": failed})
                if self.cluster is not None:
                    self.cluster.stop()
                    self.cluster = None
                self.submission = f"{name}-{int(time.time()) % 100000:05d}-{attempt + 1}"
                self.on_status({"jobId": self.submission})
        outcome["failed"] = failed
        outcome["succeeded"] = 1 if outcome["jobStatus"] == "SUCCEEDED" else 0
        if self.cluster is not None and (spec.get("shutdownAfterJobFinishes") or self._stop.is_set()):
            self.cluster.stop()
        verdict = {"SUCCEEDED": "succeeded", "STOPPED": "was stopped"}.get(outcome["jobStatus"], "failed")
        self._append(f"Job '{self.submission}' {verdict}\n{'-' * 40}\n" + END_MARKER)
        metrics = parse_metrics(self.log_path.read_text(encoding="utf-8", errors="replace"))
        if not self.suspended:
            self.on_status({**outcome, "endTime": _stamp(), **({"trainingMetrics": metrics} if metrics else {})})
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
        env = prepare(self.job, self.configmaps, self.workdir)
        for warning in env.warnings:
            self._append(f"flexq: warning: {warning}\n")
        cluster_spec = spec.get("rayClusterSpec") or {}
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
        self._append(f"flexq: starting a Ray cluster: {accelerators.description}\n")
        params = (cluster_spec.get("headGroupSpec") or {}).get("rayStartParams") or {}
        self.cluster = LocalRayCluster(accelerators, start_params={str(k): str(v) for k, v in params.items()})
        self.cluster.start()
        if self.elastic is not None:
            self.elastic.reconcile(self.cluster)
            self._append("".join(self._notes))
            self._notes.clear()
        if self._stop.is_set():
            return {"jobStatus": "STOPPED", "jobDeploymentStatus": "Failed", "reason": "Stopped",
                    "message": "stopped before it started"}
        url = self.cluster.dashboard_url
        checkpoints = self.workdir / "checkpoints"
        checkpoints.mkdir(parents=True, exist_ok=True)
        body = {"entrypoint": env.entrypoint, "submission_id": self.submission,
                "runtime_env": {"env_vars": {**_CLEAN_LOGS, "FLEXQ_CHECKPOINT_DIR": str(checkpoints),
                                             **env.env_vars}}}
        response = _submit(url, body, self._stop)
        if response.status_code >= 400:
            raise RuntimeError(f"the Ray Jobs API refused the job: {response.text[:500]}")
        self.on_status({"jobDeploymentStatus": "Running", "jobStatus": "PENDING", "dashboardURL": url.removeprefix(
            "http://")})
        deadline = time.monotonic() + float(spec.get("activeDeadlineSeconds") or DEFAULT_DEADLINE)
        header = self.log_path.read_text(encoding="utf-8")
        reported = "PENDING"
        metrics: dict[str, Any] | None = None
        while True:
            state = httpx.get(f"{url}/api/jobs/{self.submission}", timeout=30).json()
            logs = httpx.get(f"{url}/api/jobs/{self.submission}/logs", timeout=30).json().get("logs", "")
            self.log_path.write_text(header + logs + "".join(self._notes), encoding="utf-8")
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
                return {"jobStatus": status, "jobDeploymentStatus": "Complete" if status == "SUCCEEDED" else "Failed",
                        "message": message, **({"reason": "AppFailed"} if status == "FAILED" else {})}
            if self._stop.is_set() or time.monotonic() > deadline:
                httpx.post(f"{url}/api/jobs/{self.submission}/stop", timeout=30)
                if self._stop.is_set():
                    return {"jobStatus": "STOPPED", "jobDeploymentStatus": "Failed", "reason": "Stopped",
                            "message": "stopped: the workload was evicted or the RayJob deleted"}
                return {"jobStatus": "FAILED", "jobDeploymentStatus": "Failed", "reason": "DeadlineExceeded",
                        "message": "the job ran past its deadline and was stopped"}
            if self.elastic is not None:
                self.elastic.reconcile(self.cluster)
                self.elastic.autoscale(self.cluster, time.monotonic())
            time.sleep(1.0)
