"""Finding a job's Ray cluster again when the server restarts.

Each local Ray cluster keeps a record, ``FLEXQ_HOME/ray/<rayjobs|rayclusters>/<namespace>/<name>.json``, written
as soon as its head is started and again when its job is submitted (the head's pid and temp dir, its ports and
worker nodes, the object's uid, the job's submission id, where the job's own output starts in its log, its
deadline), and removed once the cluster is stopped. Ray's processes run in sessions of their own, so a server
that is killed leaves them running. The next server reads the records before its controllers run:

- a cluster whose head still runs and answers on its dashboard is followed again (:func:`attach`): its job is not
  started a second time;
- a cluster whose head is gone has whatever is left of it killed (:func:`reap`), and its job counts a failure,
  ``RayClusterLost``, retried as its ``backoffLimit`` allows;
- a record whose object is gone, or is another object of the same name, is reaped.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import httpx

from flexq.runtime.ray_cluster import LocalRayCluster

__all__ = ["ANSWER_WAIT", "LOST_REASON", "Resume", "attach", "read_records", "reap", "reap_all", "record_path",
           "same_object"]

log = logging.getLogger("flexq.runtime")

LOST_REASON: Final = "RayClusterLost"
ANSWER_WAIT = 20.0
"""How long a head that still runs is given to answer on its dashboard (a loaded machine is slow)."""


@dataclass
class Resume:
    """How a run goes on after a restart: following ``cluster`` (found again), or, with ``lost``, from the loss
    of its cluster (the reason, for the log and the status)."""

    cluster: LocalRayCluster | None = None
    record: dict[str, Any] = field(default_factory=dict)
    lost: str = ""

    @property
    def submission(self) -> str:
        return str(self.record.get("submission") or "")

    @property
    def header_len(self) -> int:
        return int(self.record.get("header_len") or 0)

    @property
    def deadline(self) -> float:
        return float(self.record.get("deadline") or 0.0)


def record_path(home: Path, plural: str, namespace: str, name: str) -> Path:
    return home / "ray" / plural / namespace / f"{name}.json"


def read_records(home: Path, plural: str) -> dict[tuple[str, str], tuple[Path, dict[str, Any]]]:
    """(namespace, name) -> (path, record) of every readable record of kind ``plural``; an unreadable one is
    removed (it was never more than a partial write, which :meth:`LocalRayCluster.save_record` does not leave)."""
    found: dict[tuple[str, str], tuple[Path, dict[str, Any]]] = {}
    root = home / "ray" / plural
    for path in sorted(root.glob("*/*.json")) if root.is_dir() else []:
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
            if not isinstance(record, dict) or "pid" not in record or "temp_dir" not in record:
                raise ValueError("not a cluster record")
        except (OSError, ValueError) as exc:
            log.warning("cluster record %s is unreadable (%s): removed", path, exc)
            path.unlink(missing_ok=True)
            continue
        found[(path.parent.name, path.stem)] = (path, record)
    for partial in root.glob("*/*.partial") if root.is_dir() else []:
        partial.unlink(missing_ok=True)
    return found


def _answers(url: str, wait: float) -> bool:
    deadline = time.monotonic() + wait
    while True:
        try:
            if httpx.get(f"{url}/api/version", timeout=5).status_code == 200:
                return True
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline:
            return False
        time.sleep(0.5)


def attach(path: Path, record: dict[str, Any], wait: float | None = None) -> LocalRayCluster | None:
    """The cluster of ``record`` when its head still runs and its dashboard answers (within ``wait`` seconds,
    :data:`ANSWER_WAIT` unless given); else what is left of it is killed, the record removed, and None returned."""
    cluster = LocalRayCluster.from_record(record, path)
    if cluster.alive() and _answers(cluster.dashboard_url, ANSWER_WAIT if wait is None else wait) and cluster.alive():
        return cluster
    cluster.stop(grace=1.0)
    return None


def reap(path: Path, record: dict[str, Any]) -> None:
    """Kill every process of the cluster of ``record`` (its head's, its workers', its job's), remove its temp dirs
    and the record."""
    LocalRayCluster.from_record(record, path).stop(grace=2.0)


def reap_all(home: Path) -> int:
    """Reap every cluster recorded under ``home`` (a server that runs no jobs leaves none running); how many."""
    found = [entry for plural in ("rayjobs", "rayclusters") for entry in read_records(home, plural).values()]
    for path, record in found:
        log.warning("this server runs no jobs: the Ray cluster of %s is stopped", path)
        reap(path, record)
    return len(found)


def same_object(record: Mapping[str, Any], obj: Mapping[str, Any] | None) -> bool:
    """Whether ``record`` is the record of ``obj`` (not of an earlier object of the same name)."""
    return obj is not None and str(record.get("uid", "")) == str(obj["metadata"].get("uid", ""))
