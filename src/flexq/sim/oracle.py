"""The oracle: a clairvoyant greedy schedule, the reference the policies are measured against.

It knows the future: the cloud's capacity over time, every queued-provisioning answer, and how long each
job runs. Taking jobs in arrival order, it starts each at the earliest moment, on the flavors where it
could start then, given the jobs it placed before it: their quota and their nodes stay taken while they
run. The pool rules are the policies' own: an on-demand pool boots new nodes (``bootTime``) unless nodes
a job left behind are still up (idle nodes go after ``scaleDownAfter``); a pool grows to its maximum at
most, and only while the cloud can deliver; a queued-provisioning pool's nodes come when a
ProvisioningRequest made at or after the submission is answered, and stay the job's while it runs.

It is a reference, not a bound: it does not reorder jobs (a later short job never jumps ahead), does not
preempt, and reserves quota per ClusterQueue (no borrowing from a cohort beyond what the queue could ever
hold). A policy may beat it on some jobs; no policy should be far above it on a whole trace.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from flexq.capacity import PROVISIONING_EXPIRY, CapacityConfig, Cluster, NodePoolSpec, PodGroup
from flexq.scheduler import Config, PodSet, QuotaTree, Workload
from flexq.sim.bound import MAX_ATTEMPTS, Earliest, candidate_flavors, nodes_needed, obtainable_from

__all__ = ["oracle"]

_ROUNDS = 10_000


@dataclass(slots=True)
class _Timeline:
    """Amounts taken over time: (start, end, amount) spans, end exclusive."""

    spans: list[tuple[float, float, int]] = field(default_factory=list)

    def peak(self, start: float, end: float) -> int:
        """The most taken at any moment of ``[start, end)``."""
        points = [start, *(s for s, _e, _a in self.spans if start < s < end)]
        return max(sum(a for s, e, a in self.spans if s <= p < e) for p in points) if points else 0

    def ends_after(self, t: float) -> list[float]:
        return sorted({e for _s, e, _a in self.spans if e > t})

    def add(self, start: float, end: float, amount: int) -> None:
        if amount:
            self.spans.append((start, end, amount))

    def forget_before(self, t: float) -> None:
        self.spans = [span for span in self.spans if span[1] >= t]


@dataclass(frozen=True, slots=True)
class _Need:
    """What one pod set takes on one flavor: quota per resource, and a pool's resources (None: not modelled)."""

    quota: Mapping[tuple[str, str], int]
    pool: NodePoolSpec | None
    pool_use: Mapping[str, int]
    nodes: int


class _Oracle:
    def __init__(self, config: Config, capacity: CapacityConfig | None, horizon: float) -> None:
        self.config = config
        self.capacity = capacity
        self.horizon = horizon
        self.tree = QuotaTree(config.cluster_queues.values(), config.cohorts.values())
        self.cluster = Cluster(capacity.pools, capacity.cloud) if capacity is not None else None
        self.quota: dict[tuple[str, str], _Timeline] = {}
        """Quota taken, by ("<ClusterQueue>|<flavor>", resource)."""
        self.in_use: dict[tuple[str, str], _Timeline] = {}
        """Pool resources taken by running jobs."""
        self.alive: dict[tuple[str, str], _Timeline] = {}
        """Pool resources up: taken, then idle until scaled down."""

    def place(self, wl: Workload, since: float, run_for: float | None) -> Earliest:
        options = [[(f, self._need(wl, p, f)) for f in candidate_flavors(self.config, self.tree, wl.cluster_queue, p)]
                   for p in wl.podsets]
        if any(not o for o in options):
            return Earliest(None, {})
        t = since
        for _ in range(_ROUNDS):
            if t > self.horizon:
                return Earliest(None, {})
            picks: list[tuple[float, float, str]] = []
            for choices in options:
                tries = [(self._earliest(wl, need, since, t, run_for), i, f) for i, (f, need) in enumerate(choices)]
                found = [(at[0], at[1], i, f) for at, i, f in tries if at is not None]
                if not found:
                    return Earliest(None, {})
                ready, reserved, _i, flavor = min(found)
                picks.append((ready, reserved, flavor))
            # Each pod set is ready at its own moment (after a boot, or a DWS answer); the job starts when the last
            # is. Its quota is reserved from the first reservation (a DWS request holds quota while it waits, as
            # in Kueue), its nodes from the start; both must still have room.
            start = max(ready for ready, _r, _f in picks)
            reserved = min(r for _ready, r, _f in picks)
            chosen = {p.name: f for p, (_a, _r, f) in zip(wl.podsets, picks, strict=True)}
            end = self.horizon + 1 if run_for is None else start + run_for
            needs = [self._need(wl, p, chosen[p.name]) for p in wl.podsets]
            if all(self._room(wl, need, reserved, start, end) for need in needs):
                self._commit(wl, needs, reserved, start, end)
                return Earliest(start, chosen)
            t = max(start, t + 1.0)
        return Earliest(None, {})

    def _need(self, wl: Workload, podset: PodSet, flavor: str) -> _Need:
        quota = {(flavor, r): podset.total(r) for r, v in podset.requests.items() if v}
        pool = None
        if self.cluster is not None:
            spec = self.config.flavors[flavor]
            group = PodGroup(podset.name, podset.count, dict(podset.requests), {**podset.node_selector,
                             **spec.node_labels}, podset.tolerations + spec.tolerations)
            pool = self.cluster.pool_for(group)
        if pool is None:
            return _Need(quota, None, {}, 0)
        nodes = nodes_needed(pool, podset) or 0
        allocatable = pool.machine.allocatable()
        if pool.hosts_per_slice > 1 or pool.machine.tpu_chips or pool.machine.gpus:
            use = {r: nodes * v for r, v in allocatable.items()}  # whole nodes: accelerators are not shared
        else:
            use = {r: podset.total(r) for r, v in podset.requests.items() if v}
        return _Need(quota, pool, use, nodes)

    def _earliest(self, wl: Workload, need: _Need, since: float, t: float,
                  run_for: float | None) -> tuple[float, float] | None:
        """When a pod set with ``need`` could be ready at or after ``t``, and when its quota is reserved from."""
        pool = need.pool
        for _ in range(_ROUNDS):
            if t > self.horizon:
                return None
            if pool is not None and pool.queued_provisioning:
                answer = self._dws_answer(wl, pool, max(t, since))
                if answer is None:
                    return None
                at, retry = self._try(wl, need, answer, run_for, reserve_from=t)
                if at is not None:
                    return at, t
            else:
                at, retry = self._try(wl, need, t, run_for, reserve_from=t)
                if at is not None:
                    return at, t
            if retry is None or retry <= t:
                return None
            t = retry
        return None

    def _dws_answer(self, wl: Workload, pool: NodePoolSpec, since: float) -> float | None:
        """When the workload's ProvisioningRequests are answered, asked as a policy asks them: the first at the
        submission, each next one after the last expired (7 days) and Kueue's backoff (60 s x 2^(n-1))."""
        assert self.cluster is not None
        checks = [c for c, _o in self.config.cluster_queues[wl.cluster_queue].checks] or ["dws-prov"]
        cloud, machine = self.cluster.cloud, pool.machine.name
        asked = since
        for attempt in range(1, MAX_ATTEMPTS + 1):
            if asked > self.horizon:
                return None
            delay = cloud.queued_delay(pool.name, machine, f"{wl.name}-{checks[0]}-{attempt}", asked)
            if delay is not None and delay < PROVISIONING_EXPIRY:
                return asked + delay
            asked += PROVISIONING_EXPIRY + min(60.0 * 2 ** (attempt - 1), 1800.0)
        return None

    def _try(self, wl: Workload, need: _Need, t: float, run_for: float | None,
             reserve_from: float) -> tuple[float | None, float | None]:
        """(start, None) if ``need`` can start at ``t`` (after a boot), its quota held from ``reserve_from``, else
        (None, the next moment to try)."""
        cq = wl.cluster_queue
        pool = need.pool
        boot = 0.0
        if pool is not None and not pool.queued_provisioning:
            up = {r: self._timeline(self.alive, pool.name, r).peak(t, t + 1e-9) for r in need.pool_use}
            used = {r: self._timeline(self.in_use, pool.name, r).peak(t, t + 1e-9) for r in need.pool_use}
            base = pool.machine.allocatable()
            initial = {r: pool.initial_nodes * base.get(r, 0) for r in need.pool_use}
            if any(initial[r] + up[r] - used[r] < v for r, v in need.pool_use.items()):
                assert self.cluster is not None
                if not pool.autoscaling:
                    boot = -1.0
                else:
                    boot = self.cluster.cloud.boot_seconds(pool.name, pool.machine.name, pool.machine.boot_seconds)
        if boot < 0:
            return None, self._next_release(need, t)
        start = t + boot
        end = self.horizon + 1 if run_for is None else start + run_for
        for (flavor, resource), amount in need.quota.items():
            limit = self.tree.potential(cq, (flavor, resource)) if cq in self.tree.queues else 0
            if self._timeline(self.quota, f"{cq}|{flavor}", resource).peak(reserve_from, end) + amount > limit:
                return None, self._next_release(need, reserve_from, quota=(cq, flavor, resource))
        if pool is not None:
            limit_nodes = pool.max_nodes if pool.autoscaling else pool.initial_nodes
            base = pool.machine.allocatable()
            for resource, amount in need.pool_use.items():
                cap = limit_nodes * base.get(resource, 0)
                if self._timeline(self.in_use, pool.name, resource).peak(t, end) + amount > cap:
                    return None, self._next_release(need, t)
            if not pool.queued_provisioning and boot > 0:
                assert self.cluster is not None
                # The cloud must deliver the machines the pool then has: those in use and the new ones.
                busy = max((-(-self._timeline(self.in_use, pool.name, r).peak(t, t + 1e-9) // base[r])
                            for r in need.pool_use if base.get(r)), default=0)
                wanted = busy + need.nodes
                if self.cluster.cloud.obtainable(pool.name, pool.machine.name, t) < wanted:
                    return None, obtainable_from(self.cluster.cloud, pool, wanted, t, self.horizon)
        return start, None

    def _room(self, wl: Workload, need: _Need, reserved: float, start: float, end: float) -> bool:
        """Do quota (from ``reserved``) and the pool's maximum (from ``start``) leave room for ``need`` until
        ``end``?"""
        for (flavor, resource), amount in need.quota.items():
            limit = self.tree.potential(wl.cluster_queue, (flavor, resource)) if wl.cluster_queue in \
                self.tree.queues else 0
            taken = self._timeline(self.quota, f"{wl.cluster_queue}|{flavor}", resource).peak(reserved, end)
            if taken + amount > limit:
                return False
        pool = need.pool
        if pool is None:
            return True
        nodes = pool.max_nodes if pool.autoscaling else pool.initial_nodes
        base = pool.machine.allocatable()
        return all(self._timeline(self.in_use, pool.name, r).peak(start, end) + v <= nodes * base.get(r, 0)
                   for r, v in need.pool_use.items())

    def _next_release(self, need: _Need, t: float, quota: tuple[str, str, str] | None = None) -> float | None:
        ends: list[float] = []
        if quota is not None:
            ends += self._timeline(self.quota, f"{quota[0]}|{quota[1]}", quota[2]).ends_after(t)
        if need.pool is not None:
            for resource in need.pool_use:
                ends += self._timeline(self.in_use, need.pool.name, resource).ends_after(t)
        return min(ends) if ends else None

    @staticmethod
    def _timeline(store: dict[tuple[str, str], _Timeline], owner: str, resource: str) -> _Timeline:
        return store.setdefault((owner, resource), _Timeline())

    def _commit(self, wl: Workload, needs: list[_Need], reserved: float, start: float, end: float) -> None:
        linger = self.capacity.scale_down_after if self.capacity is not None else 0.0
        for need in needs:
            for (flavor, resource), amount in need.quota.items():
                self._timeline(self.quota, f"{wl.cluster_queue}|{flavor}", resource).add(reserved, end, amount)
            if need.pool is not None:
                for resource, amount in need.pool_use.items():
                    self._timeline(self.in_use, need.pool.name, resource).add(start, end, amount)
                    if not need.pool.queued_provisioning:
                        self._timeline(self.alive, need.pool.name, resource).add(start, end + linger, amount)

    def forget_before(self, t: float) -> None:
        for timelines in (self.quota, self.in_use, self.alive):
            for timeline in timelines.values():
                timeline.forget_before(t)


def oracle(config: Config, capacity: CapacityConfig | None, workloads: Iterable[Workload],
           submitted: Mapping[str, float], run_for: Mapping[str, float | None], horizon: float) -> dict[str, Earliest]:
    """Each workload's start and flavors in the oracle's schedule (start None: never, up to ``horizon``)."""
    planner = _Oracle(config, capacity, horizon)
    linger = capacity.scale_down_after if capacity is not None else 0.0
    out: dict[str, Earliest] = {}
    for wl in sorted(workloads, key=lambda w: (submitted.get(w.key, w.created), w.created)):
        since = submitted.get(wl.key, wl.created)
        planner.forget_before(since - linger)
        out[wl.key] = planner.place(wl, since, run_for.get(wl.key))
    return out
