"""Nodes that go NotReady or get a taint while pods run on them, as Kueue v0.19's TAS node controller
(pkg/controller/tas/node_controller.go) and Kubernetes' taint manager treat them.

A NotReady node, or one with a NoSchedule or NoExecute taint, takes no new pods: topology-aware placement, its
replacements and the capacity driver's placement all pass it by. What happens to the pods already on it:

- **NotReady** (``kubectl patch node --subresource=status``, a cloud's ``hostNotReady``): Kubernetes taints it
  ``node.kubernetes.io/not-ready:NoExecute`` and evicts each pod when its toleration of that taint runs out: 300 s for
  a pod that does not tolerate it itself (the toleration Kubernetes' ``DefaultTolerationSeconds`` adds), its own
  ``tolerationSeconds`` where it does, never where it tolerates it for good (a node whose Ready condition is
  ``Unknown``: the same with ``node.kubernetes.io/unreachable``). With Kueue's defaults
  (``TASReplaceNodeOnPodTermination`` on) a topology-aware workload's node counts as failed then, once its pods there
  have terminated (a workload whose pods stay is healthy there, however long the node is NotReady); with that gate
  off, or ``TASReplaceNodeDueToNotReadyOverFixedTime`` on, after Kueue's ``NodeFailureDelay`` (30 s), its pods still
  running, whatever they tolerate. A node Ready again before then is kept.
- **A taint** (``kubectl taint node``, a cloud's ``hostTaints``) that a workload's pod sets do not all tolerate (their
  tolerations and their flavors'): a ``NoExecute`` one evicts its pods at once, so its node fails for it at once; a
  ``NoSchedule`` one leaves its running pods be (with ``TASReplaceNodeOnPodTermination`` off, Kueue counts the node
  failed at once). A ``NoExecute`` taint tolerated for ``tolerationSeconds`` only (Kueue's "tolerated temporarily")
  evicts the pods when that runs out (the shortest of the tolerations that match, as Kubernetes' taint manager
  counts it, from when the taint was added); the node fails for the workload then, unless the taint was removed
  first. ``TASReplaceNodeOnNodeTaints`` off, Kueue does not look at taints: pods a ``NoExecute`` taint evicted are
  gone and not replaced.

A workload's pods on a node are taken together: the first of its pod sets there to be evicted ends them all.

A node failed for a topology-aware workload is what a lost node is (:meth:`NodeLoss.hot_swap`): its pods there are
placed again in their domain (``NodeReplaced``, its message naming the cause), else the workload is evicted
(``NodeFailures``) or, ``TASFailedNodeReplacementFailFast`` off, waits for a replacement; a node Ready again ends
that wait (:meth:`NodeLoss.node_back`). A workload whose pods were evicted and that has no replacement (not
topology-aware, a plain Pod, ``TASFailedNodeReplacement`` off) is evicted and requeued, as when its node is deleted.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from typing import Final

from flexq.capacity.cluster import Cluster
from flexq.capacity.nodeloss import NodeLoss, single_pod
from flexq.capacity.notes import PoolNote, Teller
from flexq.capacity.pools import Node, NodePoolSpec
from flexq.capacity.record import Timeline
from flexq.scheduler import EventKind, Scheduler, Taint, Toleration, Workload, names_node

__all__ = ["LIFECYCLE_TAINT_KEYS", "NODE_FAILURE_DELAY", "NOT_READY_EVICTION", "NOT_READY_TAINT", "UNREACHABLE_TAINT",
           "NodeHealth", "condition_taint", "eviction_delay", "lifecycle_taints", "taint_text"]

NODE_FAILURE_DELAY: Final = 30.0
"""Kueue's ``NodeFailureDelay``: how long a node is NotReady before the gates that do not wait for pods fail it."""
NOT_READY_EVICTION: Final = 300.0
"""Kubernetes' default ``tolerationSeconds`` of ``node.kubernetes.io/not-ready:NoExecute``: when a NotReady node's
pods are evicted."""
NOT_READY_TAINT: Final = Taint("node.kubernetes.io/not-ready", "", "NoExecute")
"""The taint Kubernetes' node lifecycle controller puts on a NotReady node (its Ready condition False)."""
UNREACHABLE_TAINT: Final = Taint("node.kubernetes.io/unreachable", "", "NoExecute")
"""The one it puts on a node whose Ready condition is Unknown (its kubelet no longer heard from)."""
LIFECYCLE_TAINT_KEYS: Final = frozenset({NOT_READY_TAINT.key, UNREACHABLE_TAINT.key})
"""The taints the node lifecycle controller keeps on a node by its Ready condition (added and removed by it alone)."""
_DEFAULTS: Final = {t: Toleration(t.key, "Exists", "", "NoExecute", int(NOT_READY_EVICTION))
                    for t in (NOT_READY_TAINT, UNREACHABLE_TAINT)}
"""The tolerations Kubernetes' ``DefaultTolerationSeconds`` gives a pod that does not tolerate these taints."""
_SCHEDULING: Final = ("NoSchedule", "NoExecute")


def condition_taint(node: Node) -> Taint:
    """The ``NoExecute`` taint of ``node``'s Ready condition while it is down: ``not-ready`` where the condition is
    False, ``unreachable`` where it is Unknown."""
    return UNREACHABLE_TAINT if node.unreachable else NOT_READY_TAINT


def lifecycle_taints(node: Node) -> tuple[Taint, ...]:
    """What Kubernetes' node lifecycle controller keeps on ``node`` while it is down: its :func:`condition_taint`,
    ``NoSchedule`` (by condition) and ``NoExecute`` (for evictions); none while it is Ready or booting."""
    if node.down_since is None:
        return ()
    key = condition_taint(node).key
    return Taint(key, "", "NoSchedule"), Taint(key, "", "NoExecute")


def taint_text(taint: Taint) -> str:
    return f"{taint.key}={taint.value}:{taint.effect}" if taint.value else f"{taint.key}:{taint.effect}"


class NodeHealth:
    """Nodes going NotReady and Ready again, and their taints changing (see the module's description).

    ``changed`` is told when a node may take pods again (Ready again, a taint removed)."""

    def __init__(self, cluster: Cluster, timeline: Timeline, teller: Teller, scheduler: Scheduler, loss: NodeLoss,
                 *, changed: Callable[[], None]) -> None:
        self.cluster = cluster
        self.timeline = timeline
        self.teller = teller
        self.scheduler = scheduler
        self.loss = loss
        self.changed = changed
        self._tainted_at: dict[tuple[str, Taint], float] = {}
        """When each taint of a node was added: a ``tolerationSeconds`` counts from then."""

    def plan(self, pools: Sequence[NodePoolSpec]) -> None:
        """Schedule the cloud's ``hostNotReady`` and ``hostTaints`` of ``pools`` (those still to come)."""
        cloud, now = self.cluster.cloud, self.timeline.now()
        for pool in pools:
            spec = cloud.spec(pool.name, pool.machine.name)
            for at, lasting in spec.host_not_ready:
                if cloud.origin + at >= now:
                    self.timeline.at(cloud.origin + at, partial(self._host_down, pool.name, lasting))
            for at, lasting, taint in spec.host_taints:
                if cloud.origin + at >= now:
                    self.timeline.at(cloud.origin + at, partial(self._host_tainted, pool.name, lasting, taint))

    def _host_down(self, pool: str, lasting: float | None) -> None:
        name = self.loss.host_of(pool)
        if not name:
            return
        self.not_ready(name, f"host {name} of pool {pool} is NotReady")
        node = self.cluster.nodes[name]
        if lasting is not None and node.down_since is not None:
            since = node.down_since
            self.timeline.at(since + lasting, partial(self._host_up, name, since))

    def _host_up(self, name: str, since: float) -> None:
        node = self.cluster.nodes.get(name)
        if node is not None and node.down_since == since:
            self.ready_again(name, f"host {name} of pool {node.pool} is Ready again")

    def _host_tainted(self, pool: str, lasting: float | None, taint: Taint) -> None:
        name = self.loss.host_of(pool)
        if not name or taint in self.cluster.nodes[name].taints:
            return
        self.tainted(name, (*self.cluster.nodes[name].taints, taint))
        if lasting is not None:
            self.timeline.at(self.timeline.now() + lasting, partial(self._untaint, name, taint))

    def _untaint(self, name: str, taint: Taint) -> None:
        node = self.cluster.nodes.get(name)
        if node is not None and taint in node.taints:
            self.tainted(name, tuple(t for t in node.taints if t != taint))

    def not_ready(self, name: str, why: str = "", unreachable: bool = False) -> None:
        """Node ``name`` went NotReady (``unreachable``: its Ready condition Unknown, so Kubernetes taints it
        ``node.kubernetes.io/unreachable`` rather than ``not-ready``)."""
        node = self.cluster.nodes.get(name)
        now = self.timeline.now()
        if node is None or node.down_since is not None or node.ready_at > now:
            return
        node.down_since, node.unreachable = now, unreachable
        self.teller.pool(EventKind.NODE_NOT_READY, why or f"node {name} of pool {node.pool} is NotReady",
                         PoolNote(node.pool))
        config = self.scheduler.config
        if not config.replace_on_pod_termination or config.not_ready_fixed_time:
            self.timeline.at(now + NODE_FAILURE_DELAY, partial(self._still_down, name, now, NODE_FAILURE_DELAY, None))
        for delay, keys in sorted(self._evictions(condition_taint(node), sorted(node.pods)).items()):
            self.timeline.at(now + delay, partial(self._still_down, name, now, delay, keys))

    def still_down(self, name: str, unreachable: bool) -> None:
        """A down node's Ready condition went from False to Unknown or back: the lifecycle taint it shows follows;
        the evictions already counted keep their times (Kubernetes' taint manager keeps a pod's earlier one)."""
        node = self.cluster.nodes.get(name)
        if node is not None and node.down_since is not None:
            node.unreachable = unreachable

    def ready_again(self, name: str, why: str = "") -> None:
        node = self.cluster.nodes.get(name)
        if node is None or node.down_since is None:
            return
        node.down_since, node.unreachable = None, False
        self.teller.pool(EventKind.NODE_READY, why or f"node {name} of pool {node.pool} is Ready again",
                         PoolNote(node.pool))
        self.loss.node_back(name)
        self.changed()

    def _evictions(self, taint: Taint, keys: Sequence[str]) -> dict[float, list[str]]:
        """The workloads ``keys`` by how long after ``taint`` was added their pods are evicted (those it never
        evicts left out)."""
        out: dict[float, list[str]] = {}
        for key in keys:
            wl = self.scheduler.workload(key)
            delay = 0.0 if wl is None else eviction_delay(self.scheduler, wl, taint)
            if delay is not None:
                out.setdefault(delay, []).append(key)
        return out

    def _still_down(self, name: str, since: float, delay: float, keys: list[str] | None) -> None:
        """Node ``name``, NotReady since ``since`` (``delay`` ago), fails for the workloads ``keys`` still on it, their
        pods evicted (None: for every workload there, Kueue's ``NodeFailureDelay`` over, their pods running)."""
        node = self.cluster.nodes.get(name)
        if node is None or node.down_since != since:
            return
        cause = f"was NotReady for {delay:g}s"
        on_it = sorted(node.pods) if keys is None else [k for k in keys if k in node.pods]
        self.fail(name, on_it, pods_gone=keys is not None, swap=True, cause=cause)

    def tainted(self, name: str, taints: tuple[Taint, ...], why: str = "") -> None:
        """Node ``name``'s taints are now ``taints``."""
        node = self.cluster.nodes.get(name)
        if node is None or node.taints == taints:
            return
        now = self.timeline.now()
        added = [t for t in taints if t not in node.taints and t.effect in _SCHEDULING]
        removed = [t for t in node.taints if t not in taints]
        node.taints = taints
        for taint in removed:
            self._tainted_at.pop((name, taint), None)
        for taint in added:
            self._tainted_at[(name, taint)] = now
        if added or removed:
            words = [f"+{taint_text(t)}" for t in added] + [f"-{taint_text(t)}" for t in removed]
            self.teller.pool(EventKind.NODE_TAINTED, why or f"node {name} of pool {node.pool}: taints "
                             f"{' '.join(words)}", PoolNote(node.pool))
        if removed:
            self.changed()
        for key in sorted(node.pods):
            self._tainted_for(name, key, added, now)

    def _tainted_for(self, name: str, key: str, added: Sequence[Taint], now: float) -> None:
        """The ``added`` taints of node ``name`` for workload ``key`` there (see the module's description)."""
        config = self.scheduler.config
        wl = self.scheduler.workload(key)
        delays = [(t, 0.0 if wl is None else eviction_delay(self.scheduler, wl, t)) for t in added]
        untolerated = [t for t, delay in delays if delay == 0.0]
        if any(t.effect == "NoExecute" for t in untolerated):
            evicting = next(t for t in untolerated if t.effect == "NoExecute")
            self.fail(name, [key], pods_gone=True, swap=config.replace_on_taints,
                      cause=f"was tainted {taint_text(evicting)}")
        elif untolerated and config.replace_on_taints and not config.replace_on_pod_termination:
            self.fail(name, [key], pods_gone=False, swap=True, cause=f"was tainted {taint_text(untolerated[0])}")
        else:
            held = self.cluster.nodes[name].pods.get(key)
            for taint, delay in delays:
                if taint.effect == "NoExecute" and delay is not None:
                    self.timeline.at(now + delay, partial(self._toleration_over, name, key, held, taint, now, delay))

    def bound(self, key: str, names: list[str]) -> None:
        """Workload ``key``'s pods were bound to the nodes ``names``: a ``NoExecute`` taint there that they tolerate for
        a while only evicts them when that runs out, counted from now (as Kubernetes' taint manager does for a pod
        scheduled onto a tainted node)."""
        wl = self.scheduler.workload(key)
        if wl is None:
            return
        now = self.timeline.now()
        for name in names:
            node = self.cluster.nodes.get(name)
            held = node.pods.get(key) if node is not None else None
            for taint in node.taints if node is not None else ():
                delay = eviction_delay(self.scheduler, wl, taint) if taint.effect == "NoExecute" else None
                if delay is not None:
                    since = self._tainted_at.get((name, taint))
                    self.timeline.at(now + delay, partial(self._toleration_over, name, key, held, taint, since, delay))

    def _toleration_over(self, name: str, key: str, held: object, taint: Taint, since: float | None,
                         delay: float) -> None:
        """Workload ``key``'s toleration of ``taint`` (added to node ``name`` at ``since``; None: with the node) ran
        out, ``delay`` after it was counted from: its pods there are evicted, unless the taint was removed
        meanwhile or those pods are gone (``held``: what they held on the node; pods bound there again since count
        from their own binding)."""
        node = self.cluster.nodes.get(name)
        if node is None or taint not in node.taints or self._tainted_at.get((name, taint)) != since or \
                held is None or node.pods.get(key) is not held:
            return
        self.fail(name, [key], pods_gone=True, swap=self.scheduler.config.replace_on_taints,
                  cause=f"was tainted {taint_text(taint)}, tolerated for {delay:g}s")

    def fail(self, name: str, keys: list[str], *, pods_gone: bool, swap: bool, cause: str) -> None:
        """Node ``name`` failed for the workloads ``keys``: those whose pods are gone from it (``pods_gone``) or
        that are topology-aware there get a replacement (where ``swap``) or are evicted. ``cause``: what happened
        to the node, worded after its name."""
        now = self.timeline.now()
        config = self.scheduler.config
        for key in keys:
            wl = self.scheduler.workload(key)
            if wl is None or wl.admission is None:
                continue
            tas = names_node(wl.admission, name) and config.replace_failed_nodes and not single_pod(wl)
            if not pods_gone and not tas:
                continue
            self.cluster.unbind_from(key, name, now)
            if swap and self.loss.hot_swap(key, {name}, now, {name: cause}):
                continue
            self.teller.log(self.scheduler.evict(key, now, f"Node {name} {cause}: the workload's pods on it are gone",
                                                 "NodeLost"))
        self.changed()


def eviction_delay(scheduler: Scheduler, wl: Workload, taint: Taint) -> float | None:
    """How long after ``taint`` was added to their node Kubernetes evicts ``wl``'s pods (those of its admitted pod
    sets: their tolerations and their flavors'), as its taint manager counts it: 0 where a pod set does not tolerate
    it, None where every one tolerates it for good, else the shortest time a pod set tolerates it for. A pod set that
    does not tolerate ``node.kubernetes.io/not-ready`` itself gets Kubernetes' default toleration of it (300 s)."""
    if wl.admission is None:
        return None
    flavors = scheduler.config.flavors
    podsets = {p.name: p for p in wl.podsets}
    delays: list[float] = []
    for assigned in wl.admission.podsets:
        podset = podsets.get(assigned.name)
        tolerations = (*(podset.tolerations if podset is not None else ()),
                       *(t for f in assigned.flavors.values() if f in flavors for t in flavors[f].tolerations))
        matching = [t for t in tolerations if t.tolerates(taint)]
        if not matching and taint in _DEFAULTS:
            matching = [_DEFAULTS[taint]]
        if not matching:
            return 0.0
        if taint.effect == "NoExecute":
            timed = [t.seconds for t in matching if t.seconds is not None]
            if timed:
                delays.append(float(max(0, min(timed))))
    return min(delays) if delays else None
