"""Jobs admitted onto a node pool of an existing Ray cluster (:mod:`flexq.capacity.raypool`) run on that cluster.

The cluster is known by its dashboard's address: the job is submitted through its Jobs API with Ray's own
``JobSubmissionClient``, which uploads the job's files (the ConfigMaps its pods mount, written to a directory of the
job's own) as the job's ``working_dir`` package, so that the cluster needs no file of this machine; the entrypoint's
references to the mount paths become paths relative to that directory (``python /app/train.py`` ->
``python app/train.py``, run in the working dir). The run (:class:`~flexq.runtime.rayjob.RayJobRun`, given the
cluster as a borrowed one) follows the job's status and log as it follows a job on a local cluster, and stops the
job, never the cluster, when the workload is evicted or the RayJob deleted.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

import httpx

from flexq.capacity import RayAddressError, dashboard_address
from flexq.store import BaseStore, Key, NotFound

__all__ = ["AGENT_NOT_READY", "RemoteRayCluster", "ray_pool_of", "ray_pool_of_pod"]

_POOL_LABEL: Final = "cloud.google.com/gke-nodepool"
_AGENT_WAIT: Final = 60.0
AGENT_NOT_READY: Final = ("No available agent", "submit_job_internal")
"""What Ray's dashboard answers while its job agent is not up, or cannot be reached yet: the job is submitted again."""


class RemoteRayCluster:
    """An existing Ray cluster, reached through its dashboard: jobs are submitted to it; it is never started or
    stopped here, and nothing of it is forwarded from this machine."""

    def __init__(self, url: str, pool: str = "") -> None:
        self.url = url
        self.pool = pool

    @property
    def dashboard_url(self) -> str:
        return self.url

    @property
    def ports(self) -> dict[str, int]:
        return {}

    def alive(self) -> bool:
        """Whether the dashboard answers."""
        try:
            return httpx.get(f"{self.url}/api/version", timeout=10).status_code == 200
        except httpx.HTTPError:
            return False

    def exit_reason(self) -> str:
        """Nothing is known here of why an existing cluster's processes ended."""
        return ""

    def stop(self, grace: float = 5.0) -> None:
        """Nothing: the cluster is not flexq's."""

    def submit(self, entrypoint: str, submission: str, env_vars: Mapping[str, str], working_dir: Path | None,
               stop: threading.Event, runtime_env: Mapping[str, Any] | None = None) -> None:
        """Submit the job (its files uploaded as its working dir, ``runtime_env``'s other fields as given: the
        cluster installs its pip packages); RuntimeError with the cluster's answer when it is refused. A head whose
        job agent is not up yet is asked again for a while."""
        from ray.job_submission import JobSubmissionClient  # Ray is imported only where a job goes to a cluster

        runtime_env = {**(runtime_env or {}), "env_vars": dict(env_vars)}
        if working_dir is not None:
            runtime_env["working_dir"] = str(working_dir)
        deadline = time.monotonic() + _AGENT_WAIT
        while True:
            try:
                JobSubmissionClient(self.url).submit_job(entrypoint=entrypoint, submission_id=submission,
                                                         runtime_env=runtime_env)
                return
            except (RuntimeError, ConnectionError) as exc:
                if not any(m in str(exc) for m in AGENT_NOT_READY) or time.monotonic() > deadline or stop.wait(1.0):
                    raise RuntimeError(f"the Ray cluster at {self.url} refused the job: {exc}") from None


def relative_entrypoint(entrypoint: str, files: Path) -> str:
    """The entrypoint with the paths of ``files`` (the job's files, written there) relative to it: the job runs in
    its working dir on the cluster."""
    return entrypoint.replace(f"{files}/", "").replace(str(files), ".")


def ray_pool_of(store: BaseStore, cluster: Mapping[str, Any]) -> tuple[str, str] | None:
    """The node pool (name, dashboard address) of an existing Ray cluster that a Ray cluster spec (a RayJob's
    ``rayClusterSpec``, a RayCluster's ``spec``) was admitted onto (the node pool its pods' node selector names, as
    the flavor's node labels were added on admission); None for any other."""
    templates = [(cluster.get("headGroupSpec") or {}).get("template") or {}]
    templates += [g.get("template") or {} for g in cluster.get("workerGroupSpecs") or []]
    return _pool_of(store, templates)


def ray_pool_of_pod(store: BaseStore, pod: Mapping[str, Any]) -> tuple[str, str] | None:
    """:func:`ray_pool_of` for a plain Pod admitted onto such a pool."""
    return _pool_of(store, [pod])


def _pool_of(store: BaseStore, templates: list[Mapping[str, Any]]) -> tuple[str, str] | None:
    for template in templates:
        name = ((template.get("spec") or {}).get("nodeSelector") or {}).get(_POOL_LABEL)
        if not name:
            continue
        try:
            pool = store.get(Key("flexq.dev", "nodepools", "", str(name)))
        except NotFound:
            continue
        address = (pool.get("spec") or {}).get("rayAddress")
        if address:
            try:
                return str(name), dashboard_address(str(address), "spec.rayAddress")
            except RayAddressError:
                continue
    return None
