"""Nodes that go NotReady or get a taint while pods run on them, as Kueue v0.19's TAS node controller
(pkg/controller/tas/node_controller.go) and Kubernetes' taint manager treat them.

A NotReady node, or one with a NoSchedule or NoExecute taint, takes no new pods: topology-aware placement, its
replacements and the capacity driver's placement all pass it by. What happens to the pods already on it:

- **NotReady** (``kubectl patch node --subresource=status``, a cloud's ``hostNotReady``): Kubernetes evicts its pods
  when their toleration of ``node.kubernetes.io/not-ready:NoExecute`` runs out (300 s, the default every pod gets).
  With Kueue's defaults (``TASReplaceNodeOnPodTermination`` on) a topology-aware workload's node counts as failed
  then, once its pods there have terminated; with that gate off, or ``TASReplaceNodeDueToNotReadyOverFixedTime`` on,
  after Kueue's ``NodeFailureDelay`` (30 s), its pods still running. A node Ready again before then is kept.
- **A taint** (``kubectl taint node``, a cloud's ``hostTaints``) that a workload's pod sets do not all tolerate (their
  tolerations and their flavors'): a ``NoExecute`` one evicts its pods at once, so its node fails for it at once; a
  ``NoSchedule`` one leaves its running pods be (with ``TASReplaceNodeOnPodTermination`` off, Kueue counts the node
  failed at once). ``TASReplaceNodeOnNodeTaints`` off, Kueue does not look at taints: pods a ``NoExecute`` taint evicted
  are gone and not replaced.

A node failed for a topology-aware workload is what a lost node is (:meth:`NodeLoss.hot_swap`): its pods there are
placed again in their domain (``NodeReplaced``), else the workload is evicted (``NodeFailures``). A workload whose
pods were evicted and that has no replacement (not topology-aware, a plain Pod, ``TASFailedNodeReplacement`` off) is
evicted and requeued, as when its node is deleted. A ``tolerationSeconds`` is not modelled: a toleration tolerates.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from typing import Final

from flexq.capacity.cluster import Cluster
from flexq.capacity.nodeloss import NodeLoss, single_pod
from flexq.capacity.notes import PoolNote, Teller
from flexq.capacity.pools import NodePoolSpec
from flexq.capacity.record import Timeline
from flexq.scheduler import EventKind, Scheduler, Taint, Workload, names_node

__all__ = ["NODE_FAILURE_DELAY", "NOT_READY_EVICTION", "NodeHealth", "taint_text"]

NODE_FAILURE_DELAY: Final = 30.0
"""Kueue's ``NodeFailureDelay``: how long a node is NotReady before the gates that do not wait for pods fail it."""
NOT_READY_EVICTION: Final = 300.0
"""Kubernetes' default ``tolerationSeconds`` of ``node.kubernetes.io/not-ready:NoExecute``: when a NotReady node's
pods are evicted."""
_SCHEDULING: Final = ("NoSchedule", "NoExecute")


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

    def not_ready(self, name: str, why: str = "") -> None:
        node = self.cluster.nodes.get(name)
        now = self.timeline.now()
        if node is None or node.down_since is not None or node.ready_at > now:
            return
        node.down_since = now
        self.teller.pool(EventKind.NODE_NOT_READY, why or f"node {name} of pool {node.pool} is NotReady",
                         PoolNote(node.pool))
        config = self.scheduler.config
        if not config.replace_on_pod_termination or config.not_ready_fixed_time:
            self.timeline.at(now + NODE_FAILURE_DELAY, partial(self._still_down, name, now, False))
        self.timeline.at(now + NOT_READY_EVICTION, partial(self._still_down, name, now, True))

    def ready_again(self, name: str, why: str = "") -> None:
        node = self.cluster.nodes.get(name)
        if node is None or node.down_since is None:
            return
        node.down_since = None
        self.teller.pool(EventKind.NODE_READY, why or f"node {name} of pool {node.pool} is Ready again",
                         PoolNote(node.pool))
        self.changed()

    def _still_down(self, name: str, since: float, pods_gone: bool) -> None:
        node = self.cluster.nodes.get(name)
        if node is None or node.down_since != since:
            return
        why = f"Node {name} was NotReady for {int(self.timeline.now() - since)}s"
        self.fail(name, sorted(node.pods), pods_gone=pods_gone, swap=True, why=why)

    def tainted(self, name: str, taints: tuple[Taint, ...], why: str = "") -> None:
        """Node ``name``'s taints are now ``taints``."""
        node = self.cluster.nodes.get(name)
        if node is None or node.taints == taints:
            return
        added = [t for t in taints if t not in node.taints and t.effect in _SCHEDULING]
        removed = [t for t in node.taints if t not in taints]
        node.taints = taints
        if added or removed:
            words = [f"+{taint_text(t)}" for t in added] + [f"-{taint_text(t)}" for t in removed]
            self.teller.pool(EventKind.NODE_TAINTED, why or f"node {name} of pool {node.pool}: taints "
                             f"{' '.join(words)}", PoolNote(node.pool))
        if removed:
            self.changed()
        config = self.scheduler.config
        for key in sorted(node.pods):
            wl = self.scheduler.workload(key)
            untolerated = [t for t in added if wl is None or not _tolerated(self.scheduler, wl, t)]
            if any(t.effect == "NoExecute" for t in untolerated):
                self.fail(name, [key], pods_gone=True, swap=config.replace_on_taints,
                          why=f"Node {name} was tainted {taint_text(untolerated[0])}")
            elif untolerated and config.replace_on_taints and not config.replace_on_pod_termination:
                self.fail(name, [key], pods_gone=False, swap=True,
                          why=f"Node {name} was tainted {taint_text(untolerated[0])}")

    def fail(self, name: str, keys: list[str], *, pods_gone: bool, swap: bool, why: str) -> None:
        """Node ``name`` failed for the workloads ``keys``: those whose pods are gone from it (``pods_gone``) or
        that are topology-aware there get a replacement (where ``swap``) or are evicted."""
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
            if swap and self.loss.hot_swap(key, {name}, now):
                continue
            self.teller.log(self.scheduler.evict(key, now, f"{why}: the workload's pods on it are gone", "NodeLost"))
        self.changed()


def _tolerated(scheduler: Scheduler, wl: Workload, taint: Taint) -> bool:
    """Whether every admitted pod set of ``wl`` tolerates ``taint`` (its tolerations and its flavors')."""
    if wl.admission is None:
        return True
    flavors = scheduler.config.flavors
    podsets = {p.name: p for p in wl.podsets}
    for assigned in wl.admission.podsets:
        podset = podsets.get(assigned.name)
        tolerations = (*(podset.tolerations if podset is not None else ()),
                       *(t for f in assigned.flavors.values() if f in flavors for t in flavors[f].tolerations))
        if not any(t.tolerates(taint) for t in tolerations):
            return False
    return True
