"""Who holds quota: a workload's admission entered into the quota tree and taken out again, and the quota of the
pod sets that racing variants share, held once, by one *carrier*.

:class:`Holdings` acts on the :class:`~flexq.scheduler.state.SchedulerState` (its tree, ``holding``, ``carrier``
and ``full``). The functions below are pure: what a variant's admission is without what a sibling already holds.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from flexq.scheduler.model import Admission, FlavorResource, Workload
from flexq.scheduler.state import SchedulerState

__all__ = ["Holdings", "discount", "podsets_of", "without"]


class Holdings:
    """The quota that workloads hold, in the tree and in ``holding``."""

    def __init__(self, state: SchedulerState) -> None:
        self.state = state

    def hold(self, wl: Workload) -> None:
        """``wl`` holds its admission's quota."""
        assert wl.admission is not None
        state = self.state
        state.holding.setdefault(wl.cluster_queue, {})[wl.key] = wl
        state.queues.moved(wl)
        if wl.cluster_queue in state.tree.queues:
            state.tree.add(wl.cluster_queue, wl.admission.usage())

    def release(self, wl: Workload) -> None:
        """``wl`` gives back its quota (another holder takes over the shared pod sets' part if it carried them);
        its cohort tree's set-aside workloads are looked at again, and so are the StrictFIFO heads waiting for the
        nodes it gives back (:meth:`nodes_freed`)."""
        assert wl.admission is not None
        state = self.state
        freed = wl.admission
        state.holding.get(wl.cluster_queue, {}).pop(wl.key, None)
        state.queues.moved(wl)
        if wl.cluster_queue in state.tree.queues:
            state.tree.remove(wl.cluster_queue, wl.admission.usage())
        wl.admission = None
        wl.evicting = False
        state.full.pop(wl.key, None)
        parent = wl.parent or wl.key
        if state.carrier.get(parent) == wl.key:
            # Another holder takes over the shared pod sets' quota (a sibling that reserved without them).
            del state.carrier[parent]
            for key in state.variants.get(parent, ()):
                if key in state.full:
                    self.make_full(state.workloads[key])
                    state.carrier[parent] = key
                    break
        self.wake_tree(wl.cluster_queue)
        self.nodes_freed(freed)

    def wake_tree(self, cq: str) -> None:
        """Something changed in ``cq``'s cohort tree: its queues' set-aside workloads return, their heads unblock."""
        state = self.state
        if cq not in state.tree.queues:
            return
        state.queues.wake(state.tree.members(cq), state.workloads)

    def nodes_freed(self, admission: Admission) -> None:
        """The pods of ``admission`` leave the nodes a topology-aware flavor placed them on: a blocked StrictFIFO
        queue with a flavor of the same topology tries its head again, whatever its cohort tree. Kueue requeues a
        StrictFIFO head at once and tries it every cycle, so it sees nodes that another tree's workload gave back; a
        BestEffortFIFO workload set aside stays aside until its own tree or the nodes change (Kueue's
        ``QueueAssociatedInadmissibleWorkloadsAfter`` requeues the freeing workload's ClusterQueue and cohort tree
        only)."""
        state = self.state
        if not state.queues.any_blocked():
            return
        flavors = state.config.flavors
        topologies = {flavors[f].topology for ps in admission.podsets if ps.topology is not None
                      for f in ps.flavors.values() if f in flavors and flavors[f].topology}
        if not topologies:
            return
        state.queues.unblock([cq.name for cq in state.config.cluster_queues.values() if state.queues.blocked(cq.name)
                              and any(f in flavors and flavors[f].topology in topologies
                                      for group in cq.groups for f in group.flavors)])

    def make_full(self, wl: Workload) -> None:
        """A variant that reserved without the shared pod sets' quota takes it on."""
        state = self.state
        full = state.full.pop(wl.key, None)
        if full is None or wl.admission is None:
            return
        extra = {fr: v - wl.admission.total.get(fr, 0) for fr, v in full.total.items()}
        if wl.cluster_queue in state.tree.queues:
            state.tree.add(wl.cluster_queue, {fr: v for fr, v in extra.items() if v})
        wl.admission = full
        state.queues.moved(wl)

    def take_shared(self, variant: Workload, parent: Workload) -> None:
        """The winner takes the shared pod sets' quota over from the sibling that held it."""
        state = self.state
        carrier = state.workloads.get(state.carrier.get(parent.key, ""))
        if variant.key in state.full and carrier is not None and carrier is not parent and \
                carrier.admission is not None:
            held = carrier.admission
            shared = discount(held.total, self.shared(variant))
            state.full[carrier.key] = held
            carrier.admission = without(held, shared)
            state.tree.remove(carrier.cluster_queue, {fr: v for fr, v in shared.items() if v})
            self.make_full(variant)
            state.carrier[parent.key] = variant.key

    def shared(self, wl: Workload) -> dict[FlavorResource, int] | None:
        """What the carrier of ``wl``'s race holds for the pod sets they share, if ``wl`` is a variant that
        does not carry it."""
        if not wl.parent or wl.allowed is None:
            return None
        allowed = wl.allowed_flavors()
        state = self.state
        carrier = state.workloads.get(state.carrier.get(wl.parent, ""))
        if carrier is None or carrier is wl or carrier.admission is None:
            return None
        shared = {fr: v for fr, v in carrier.admission.total.items() if fr[0] in allowed and fr[0] != wl.flavor}
        return shared or None


def discount(usage: Mapping[FlavorResource, int], shared: Mapping[FlavorResource, int] | None
              ) -> dict[FlavorResource, int]:
    """The part of ``usage`` that a sibling variant already holds."""
    if not shared:
        return {}
    return {fr: min(v, shared[fr]) for fr, v in usage.items() if shared.get(fr)}


def without(admission: Admission, discount: Mapping[FlavorResource, int]) -> Admission:
    """``admission`` with ``discount`` taken off its pod sets' usage (first pod sets first)."""
    left = dict(discount)
    podsets = []
    for ps in admission.podsets:
        usage = dict(ps.usage)
        for fr, v in usage.items():
            take = min(v, left.get(fr, 0))
            if take:
                usage[fr] = v - take
                left[fr] -= take
        podsets.append(dataclasses.replace(ps, usage=usage))
    return Admission.of(admission.cluster_queue, tuple(podsets))


def podsets_of(admission: Admission) -> dict[str, dict[str, str]]:
    """The flavors each pod set of ``admission`` took, as events carry them."""
    return {ps.name: dict(sorted(ps.flavors.items())) for ps in admission.podsets}
