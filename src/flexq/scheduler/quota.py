"""Quota as Kueue accounts it: a tree of ClusterQueues under (hierarchical) cohorts.

Each node has a ``subtree`` quota per (flavor, resource): a ClusterQueue's is its nominal quota; a
cohort's is its own nominal plus what each child lends it (the child's subtree minus its guaranteed
part). A node's *guaranteed* quota is what it does not lend: ``subtree - lendingLimit`` when a
lendingLimit is set, else nothing. Usage flows up the same way: a parent counts only the part of a
child's usage above the child's guarantee. :meth:`QuotaTree.available` and
:meth:`QuotaTree.potential` are Kueue's ``available`` and ``potentialAvailable``.

Usage changes are incremental and exactly reversible, so what-if questions (a cycle's reservations,
preemption) are asked inside :meth:`QuotaTree.trial`: each change made through the :class:`Trial` is
undone when it ends.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from flexq.scheduler.model import ClusterQueueSpec, CohortSpec, FlavorResource, Quota

__all__ = ["Node", "QuotaTree", "Trial"]


@dataclass(slots=True, eq=False)
class Node:
    name: str
    is_cohort: bool
    quotas: dict[FlavorResource, Quota] = field(default_factory=dict)
    parent: Node | None = None
    children: list[Node] = field(default_factory=list)
    subtree: dict[FlavorResource, int] = field(default_factory=dict)
    usage: dict[FlavorResource, int] = field(default_factory=dict)
    version: int = 0
    """Bumped on the root at every usage change in its tree (for caches of decisions)."""
    guarantees: dict[FlavorResource, int] = field(default_factory=dict)
    """What the node keeps for itself (its subtree's quota less its lending limit), where it has a lending limit."""
    weight: float = 1.0
    """Its fair-sharing weight (``spec.fairSharing.weight``)."""

    def guaranteed(self, fr: FlavorResource) -> int:
        return self.guarantees.get(fr, 0)

    def borrowing_limit(self, fr: FlavorResource) -> int | None:
        quota = self.quotas.get(fr)
        return None if quota is None else quota.borrowing_limit


def _quotas(groups: Iterable[object]) -> dict[FlavorResource, Quota]:
    out: dict[FlavorResource, Quota] = {}
    for group in groups:
        out.update(getattr(group, "quotas"))  # noqa: B009 - ResourceGroup of either spec kind
    return out


class QuotaTree:
    """The quota tree of a set of ClusterQueues and cohorts, with their usage."""

    def __init__(self, cluster_queues: Iterable[ClusterQueueSpec], cohorts: Iterable[CohortSpec] = ()) -> None:
        self.cohorts: dict[str, Node] = {}
        self._heights: dict[Node, int] = {}
        """Each node's cohort height (the tree's shape is fixed once built)."""
        self.queues: dict[str, Node] = {}
        self.lendable_cache: dict[Node, dict[str, int]] = {}
        """What each cohort can lend per resource (fair sharing's denominator; quota only, so fixed)."""
        specs = {c.name: c for c in cohorts}
        for name, spec in specs.items():
            self.cohorts[name] = Node(name, True, _quotas(spec.groups), weight=spec.fair_weight)
        for cq in cluster_queues:
            node = Node(cq.name, False, _quotas(cq.groups), weight=cq.fair_weight)
            self.queues[cq.name] = node
            if cq.cohort:
                self._attach(node, self._cohort(cq.cohort))
        for name, spec in specs.items():
            if spec.parent and not self._would_cycle(name, spec.parent):
                self._attach(self.cohorts[name], self._cohort(spec.parent))
        for root in [n for n in self.cohorts.values() if n.parent is None]:
            self._compute_subtree(root)
        for node in self.queues.values():
            if node.parent is None:
                self._compute_subtree(node)
        # The shape of the tree is fixed once built: each queue's root and each root's queues, computed once.
        self._roots: dict[str, Node] = {}
        self._members: dict[Node, list[str]] = {}
        for name, node in self.queues.items():
            top = node
            while top.parent is not None:
                top = top.parent
            self._roots[name] = top
            self._members.setdefault(top, []).append(name)

    def _cohort(self, name: str) -> Node:
        if name not in self.cohorts:
            self.cohorts[name] = Node(name, True)
        return self.cohorts[name]

    def _would_cycle(self, child: str, parent: str) -> bool:
        node: Node | None = self._cohort(parent)
        while node is not None:
            if node.name == child:
                return True
            node = node.parent
        return False

    @staticmethod
    def _attach(child: Node, parent: Node) -> None:
        child.parent = parent
        parent.children.append(child)

    def _compute_subtree(self, node: Node) -> None:
        for child in node.children:
            self._compute_subtree(child)
        subtree = {fr: q.nominal for fr, q in node.quotas.items()}
        for child in node.children:
            for fr, amount in child.subtree.items():
                subtree[fr] = subtree.get(fr, 0) + amount - child.guaranteed(fr)
        node.subtree = subtree
        node.guarantees = {fr: max(0, subtree.get(fr, 0) - q.lending_limit) for fr, q in node.quotas.items()
                           if q.lending_limit is not None}

    # --- the two questions ---------------------------------------------------------------------------

    def available(self, cq: str, fr: FlavorResource) -> int:
        """What ``cq`` can still take of ``fr`` now, borrowing from its cohorts where allowed."""
        return self._available(self.queues[cq], fr)

    def _available(self, node: Node, fr: FlavorResource) -> int:
        parent = node.parent
        if parent is None:
            return node.subtree.get(fr, 0) - node.usage.get(fr, 0)
        guaranteed = node.guarantees.get(fr, 0) if node.guarantees else 0  # (Node.guaranteed, inline: a hot path)
        used = node.usage.get(fr, 0)
        local = guaranteed - used if guaranteed > used else 0
        from_parent = self._available(parent, fr)
        quota = node.quotas.get(fr)
        limit = None if quota is None else quota.borrowing_limit
        if limit is not None:
            stored = node.subtree.get(fr, 0) - guaranteed
            used_in_parent = max(0, used - guaranteed)
            from_parent = min(stored - used_in_parent + limit, from_parent)
        return local + from_parent

    def potential(self, cq: str, fr: FlavorResource) -> int:
        """The most ``cq`` could ever hold of ``fr`` (its maximum capacity), whatever the usage."""
        return self.potential_of(self.queues[cq], fr)

    def potential_of(self, node: Node, fr: FlavorResource) -> int:
        """Kueue's ``potentialAvailable`` of any node (a ClusterQueue or a cohort)."""
        return self._potential(node, fr)

    def _potential(self, node: Node, fr: FlavorResource) -> int:
        if node.parent is None:
            return node.subtree.get(fr, 0)
        amount = node.guaranteed(fr) + self._potential(node.parent, fr)
        limit = node.borrowing_limit(fr)
        if limit is not None:
            amount = min(node.subtree.get(fr, 0) + limit, amount)
        return amount

    def nominal(self, cq: str, fr: FlavorResource) -> int:
        return self.queues[cq].subtree.get(fr, 0)

    def usage(self, cq: str, fr: FlavorResource) -> int:
        return self.queues[cq].usage.get(fr, 0)

    def borrowing(self, cq: str, fr: FlavorResource, extra: int = 0) -> bool:
        """Whether ``cq`` holding ``extra`` more of ``fr`` would use more than its own quota."""
        node = self.queues[cq]
        return node.usage.get(fr, 0) + extra > node.subtree.get(fr, 0)

    @staticmethod
    def local_available(node: Node, fr: FlavorResource) -> int:
        return max(0, node.guaranteed(fr) - node.usage.get(fr, 0))

    def height(self, node: Node) -> int:
        """Kueue's cohort height: 1 for a cohort of ClusterQueues, one more per level of cohorts below."""
        known = self._heights.get(node)
        if known is None:
            cohorts = [c for c in node.children if c.is_cohort]
            known = self._heights[node] = max([min(len(node.children), 1), *(1 + self.height(c) for c in cohorts)])
        return known

    def borrow_level(self, cq: str, fr: FlavorResource, val: int) -> tuple[int, bool]:
        """(height of the lowest subtree in which ``val`` more fits, whether reclaiming below the root may help).

        0 when ``cq`` does not need to borrow. This is Kueue's ``FindHeightOfLowestSubtreeThatFits``.
        """
        node = self.queues[cq]
        if node.parent is None:
            return 0, False
        if not self.borrowing(cq, fr, val):
            return 0, True
        remaining = val - self.local_available(node, fr)
        ancestor: Node | None = node.parent
        while ancestor is not None:
            if ancestor.subtree.get(fr, 0) >= ancestor.usage.get(fr, 0) + remaining:
                return self.height(ancestor), ancestor.parent is not None
            remaining -= self.local_available(ancestor, fr)
            ancestor = ancestor.parent
        return self.height(self.root(cq)), False

    @staticmethod
    def within_nominal(node: Node, frs: Iterable[FlavorResource]) -> bool:
        subtree, usage = node.subtree, node.usage
        for fr in frs:  # noqa: SIM110 - a loop: this is the hottest check of preemption
            if subtree.get(fr, 0) < usage.get(fr, 0):
                return False
        return True

    def root(self, cq: str) -> Node:
        return self._roots[cq]

    def members(self, cq: str) -> list[str]:
        """Every ClusterQueue in the same cohort tree as ``cq`` (``cq`` alone when it has no cohort)."""
        return self._members[self._roots[cq]]

    def same_tree(self, a: str, b: str) -> bool:
        return self.root(a) is self.root(b)

    # --- usage -------------------------------------------------------------------------------------

    def add(self, cq: str, usage: Mapping[FlavorResource, int], sign: int = 1) -> None:
        """Add (``sign=1``) or remove (``-1``) a workload's usage, propagating to the cohorts."""
        leaf = self.queues[cq]
        for fr, amount in usage.items():
            node = leaf
            delta = sign * amount
            while delta:  # loops and local names: this runs for every change of every trial
                used = node.usage
                before = used.get(fr, 0)
                after = before + delta
                used[fr] = after
                parent = node.parent
                if parent is None:
                    break
                guarantees = node.guarantees
                if guarantees:
                    guaranteed = guarantees.get(fr, 0)
                    before -= guaranteed
                    after -= guaranteed
                delta = (after if after > 0 else 0) - (before if before > 0 else 0)
                node = parent
        self._roots[cq].version += 1

    def add_all(self, changes: Mapping[str, Mapping[FlavorResource, int]], sign: int = 1) -> None:
        """:meth:`add` of several queues' usages at once: each queue's own changed, and what each passes up summed at
        its parent before it goes further, so that a cohort is walked up from once, not once per queue. The tree
        ends as it would after one :meth:`add` per queue: its usage is a function of its queues' usage alone."""
        if len(changes) < 2:
            for cq, usage in changes.items():
                self.add(cq, usage, sign)
            return
        pending: dict[Node, dict[FlavorResource, int]] = {}
        queues = self.queues
        _pass_up([(queues[cq], usage) for cq, usage in changes.items()], sign, pending)
        for root in {self._roots[cq] for cq in changes}:
            root.version += 1
        while pending:  # (a node may come round again, where a queue lower down passes it more: all of it counts)
            node = next(iter(pending))
            _pass_up([(node, pending.pop(node))], 1, pending)

    def remove(self, cq: str, usage: Mapping[FlavorResource, int]) -> None:
        self.add(cq, usage, -1)

    def trial(self) -> Trial:
        """Try usage changes, in a ``with`` block: those made through the :class:`Trial` are undone on exit (others
        stay)."""
        return Trial(self)

    def without(self, removals: Iterable[tuple[str, Mapping[FlavorResource, int]]]) -> Trial:
        """Temporarily remove usages (what-if for preemption), in a ``with`` block; restored on exit."""
        trial = Trial(self)
        for cq, usage in removals:
            trial.remove(cq, usage)
        return trial


def _pass_up(changes: list[tuple[Node, Mapping[FlavorResource, int]]], sign: int,
             pending: dict[Node, dict[FlavorResource, int]]) -> None:
    """Change each node's usage by ``sign`` times its amounts and add what it passes up to its parent (the part above
    its guaranteed quota) to the parent's entry of ``pending``."""
    for node, delta in changes:  # loops and local names: this runs for every queue of every trial's flush
        used, parent, guarantees = node.usage, node.parent, node.guarantees
        up = None if parent is None else pending.get(parent)
        for fr, amount in delta.items():
            if not amount:
                continue
            before = used.get(fr, 0)
            after = used[fr] = before + sign * amount
            if parent is None:
                continue
            if guarantees:
                guaranteed = guarantees.get(fr, 0)
                before -= guaranteed
                after -= guaranteed
            passed = (after if after > 0 else 0) - (before if before > 0 else 0)
            if passed:
                if up is None:
                    up = pending[parent] = {}
                up[fr] = up.get(fr, 0) + passed


class Trial:
    """Usage changes made to try something out, each remembered so that it can be undone (all of them when
    the trial ends, or back to a :meth:`mark`)."""

    __slots__ = ("_tree", "_undo")

    def __init__(self, tree: QuotaTree) -> None:
        self._tree = tree
        self._undo: list[tuple[str, Mapping[FlavorResource, int], int]] = []

    def __enter__(self) -> Trial:
        return self

    def __exit__(self, *exc: object) -> None:
        self.undo()

    def add(self, cq: str, usage: Mapping[FlavorResource, int]) -> None:
        self._tree.add(cq, usage)
        self._undo.append((cq, usage, -1))

    def remove(self, cq: str, usage: Mapping[FlavorResource, int]) -> None:
        self._tree.add(cq, usage, -1)
        self._undo.append((cq, usage, 1))

    def add_all(self, changes: Mapping[str, Mapping[FlavorResource, int]], sign: int = 1) -> None:
        """Several queues' usages added (``sign`` 1) or removed (-1) at once (:meth:`QuotaTree.add_all`)."""
        self._tree.add_all(changes, sign)
        undo = self._undo
        for cq, usage in changes.items():
            undo.append((cq, usage, -sign))

    def mark(self) -> int:
        """A point to :meth:`undo` back to."""
        return len(self._undo)

    def undo(self, mark: int = 0) -> None:
        """Undo the changes made since ``mark`` (all of them by default).

        The tree's usage is a function of its ClusterQueues' usage alone, whatever the order of the changes that
        led to it: each queue's changes are undone as one, their sum, and a queue whose changes cancel out (a
        victim tried out, then put back) is left alone.
        """
        undo = self._undo
        if len(undo) == mark + 1:  # one change (most trials): undone as it is
            cq, usage, sign = undo.pop()
            if any(usage.values()):
                self._tree.add(cq, usage, sign)
        else:
            self._undo_net(mark)

    def _undo_net(self, mark: int) -> None:
        undo = self._undo
        changes = undo[mark:]
        del undo[mark:]
        net: dict[str, dict[FlavorResource, int]] = {}
        for cq, usage, sign in changes:
            total = net.get(cq)
            if total is None:
                total = net[cq] = {}
            for fr, amount in usage.items():
                total[fr] = total.get(fr, 0) + sign * amount
        # Most queues' changes cancel out (victims tried, then put back): the rest are undone together.
        self._tree.add_all({cq: total for cq, total in net.items() if any(total.values())})
