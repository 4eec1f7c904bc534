"""What the dashboard draws over time: jobs waiting and admitted per ClusterQueue, read back from the workloads'
own times, and each node pool's nodes, followed from the store's commits since the server started.

Waits and admissions need no sampling: a workload says when it was created and when it was admitted, so the
picture covers the window whenever it is asked for (workloads deleted since are gone from it). Nodes leave no
trace once deleted, so :class:`PoolHistory` keeps each pool's count at every change, in memory, bounded.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Final

from flexq.server.ui_data import JobEntry
from flexq.server.ui_models import History, Series
from flexq.store import BaseStore, Change, ChangeType

__all__ = ["PoolHistory", "history"]

_POOL_LABEL: Final = "cloud.google.com/gke-nodepool"
_KEEP: Final = 5000
"""Changes of pool sizes kept; older ones are dropped (a day of a pool that changes every 20 s)."""
BUCKETS: Final = 60


class PoolHistory:
    """Each node pool's nodes (ready or booting) at every change, from the server's start. Thread-safe: fed by the
    store's listeners (on the committing thread), read by requests."""

    def __init__(self, store: BaseStore, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._pool_of: dict[str, str] = {}
        """node name -> its pool"""
        self._counts: dict[str, int] = {}
        self._changes: deque[tuple[float, dict[str, int]]] = deque(maxlen=_KEEP)
        store.subscribe(self._follow)
        for node in store.list_objects("", "nodes")[0]:
            self._pool_of[str(node["metadata"]["name"])] = _pool(node)
        self._record()

    def _record(self) -> None:
        counts: dict[str, int] = {}
        for pool in self._pool_of.values():
            counts[pool] = counts.get(pool, 0) + 1
        if self._changes and counts == self._counts:
            return
        for pool in self._counts.keys() - counts.keys():
            counts[pool] = 0  # a pool whose nodes all went: drawn down to zero, not left hanging
        self._counts = {k: v for k, v in counts.items() if v or k in self._counts}
        self._changes.append((self._clock(), dict(self._counts)))

    def _follow(self, changes: list[Change]) -> None:
        nodes = [c for c in changes if c.key.group == "" and c.key.resource == "nodes"]
        if not nodes:
            return
        with self._lock:
            for change in nodes:
                if change.type is ChangeType.DELETED:
                    self._pool_of.pop(change.key.name, None)
                else:
                    self._pool_of[change.key.name] = _pool(change.obj)
            self._record()

    def series(self, since: float, pools: Iterable[str] = ()) -> list[Series]:
        """Each pool's nodes from ``since``: its count then, then each change; ``pools`` (the NodePools there are)
        are drawn too where they never had a node."""
        with self._lock:
            changes = list(self._changes)
        pools = sorted({p for _t, counts in changes for p in counts if p} | set(pools))
        out = []
        for pool in pools:
            points: list[tuple[float, float]] = []
            for at, counts in changes:
                value = float(counts.get(pool, 0))
                if at <= since:
                    points = [(since, value)]
                elif not points or points[-1][1] != value:
                    points.append((at, value))
            out.append(Series(name=pool, points=points or [(since, 0.0)]))
        return out


def _pool(node: dict[str, Any]) -> str:
    return str((node["metadata"].get("labels") or {}).get(_POOL_LABEL, ""))


def history(entries: Iterable[JobEntry], pools: Sequence[Series], since: float, now: float,
            buckets: int = BUCKETS) -> History:
    """Jobs waiting per ClusterQueue (a step at each creation and admission) and admissions per bucket over
    ``[since, now]``. A job waits from its creation until admitted or finished (a job that never waited is not
    counted as waiting)."""
    step = max(1e-3, (now - since) / buckets)
    admissions = [0] * buckets
    deltas: dict[str, list[tuple[float, int]]] = {}
    for e in entries:
        if e.admitted is not None and since <= e.admitted <= now:
            admissions[min(buckets - 1, int((e.admitted - since) / step))] += 1
        queue = e.row.clusterQueue or e.row.queue
        if (e.ended is not None and e.ended <= since) or e.created > now:
            deltas.setdefault(queue, [])
            continue
        waits = deltas.setdefault(queue, [])
        waits.append((max(e.created, since), 1))
        if e.ended is not None and e.ended <= now:
            waits.append((e.ended, -1))
    waiting = []
    for queue, steps in sorted(deltas.items()):
        steps.sort()
        points: list[tuple[float, float]] = [(since, 0.0)]
        level = 0
        for at, delta in steps:
            level += delta
            if points[-1][0] == at:
                points[-1] = (at, float(level))
            else:
                points.append((at, float(level)))
        waiting.append(Series(name=queue, points=_squeeze(points)))
    return History(now=now, since=since, step=step, admissions=admissions, waiting=waiting, pools=list(pools))


def _squeeze(points: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """Drop points that repeat the value before them."""
    out = points[:1]
    for point in points[1:]:
        if point[1] != out[-1][1]:
            out.append(point)
    return out


