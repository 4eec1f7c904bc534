"""How many workers the pending demand asks for (the autoscaler's bin packing), without Ray."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
import yaml

from flexq.runtime import elastic, emulation
from flexq.runtime.elastic import ElasticWorkers, GroupShape, leftover, workers_needed
from flexq.runtime.ray_cluster import WORKER_LABEL
from tests.conftest import ROOT

ONE_CPU = GroupShape("workers", cpus=1, gpus=0, resources={}, min_pods=1, max_pods=3)
FOUR_CPU = GroupShape("workers", cpus=4, gpus=0, resources={}, min_pods=1, max_pods=3)


@pytest.mark.parametrize(("demands", "shape", "needed"), [
    ([], ONE_CPU, 0),
    ([({"CPU": 1.0}, 3)], ONE_CPU, 3),
    ([({"CPU": 1.0}, 3)], FOUR_CPU, 1),
    ([({"CPU": 3.0}, 1), ({"CPU": 2.0}, 1)], FOUR_CPU, 2),
    ([({"CPU": 8.0}, 1)], FOUR_CPU, 0),  # no worker of the group could take it
    ([({"GPU": 1.0}, 1)], FOUR_CPU, 0),
    ([({"TPU": 4.0, "CPU": 1.0}, 2)], GroupShape("tpu", 1, 0, {"TPU": 4.0}), 2),
])
def test_workers_needed(demands: list[tuple[dict[str, float], int]], shape: GroupShape, needed: int) -> None:
    assert workers_needed(demands, shape) == needed


def test_demand_goes_to_the_room_existing_workers_have_first() -> None:
    assert workers_needed([({"CPU": 1.0}, 3)], ONE_CPU, [{"CPU": 1.0}]) == 2
    assert workers_needed([({"CPU": 1.0}, 3)], ONE_CPU, [{"CPU": 0.0}, {"CPU": 1.0}, {}]) == 2
    assert workers_needed([({"CPU": 3.0}, 1)], FOUR_CPU, [{"CPU": 2.0}]) == 1, "room too small for the bundle"
    assert workers_needed([({"CPU": 1.0}, 2)], FOUR_CPU, [{"CPU": 2.0}]) == 0


def test_a_group_shape_comes_from_its_pod_template() -> None:
    shape = GroupShape.of({"groupName": "w", "replicas": 1, "minReplicas": 1, "maxReplicas": 3, "numOfHosts": 1,
                           "template": {"spec": {"containers": [{"resources": {"requests": {"cpu": "1500m"}}}]}}})
    assert (shape.cpus, shape.min_pods, shape.max_pods, shape.offers()) == (2, 1, 3, {"CPU": 2.0})


class _Cluster:
    """What autoscale reads of a cluster: its GCS port and its worker nodes by name."""

    def __init__(self, *workers: str) -> None:
        self.gcs_port = 1
        self.workers = dict.fromkeys(workers)


def _status(pending: int, joined: list[str], free: dict[str, float] | None = None) -> SimpleNamespace:
    """Ray's cluster status as autoscale reads it: ``pending`` one-CPU tasks waiting; ``joined`` workers, busy
    unless ``free`` says how many CPUs one has free."""
    bundles = [SimpleNamespace(bundle={"CPU": 1.0}, count=pending)] if pending else []

    def node(name: str) -> SimpleNamespace:
        cpus = (free or {}).get(name, 0.0)
        return SimpleNamespace(labels={WORKER_LABEL: name}, resource_usage=SimpleNamespace(
            usage=[SimpleNamespace(resource_name="CPU", total=1.0, used=1.0 - cpus)], idle_time_ms=0))

    return SimpleNamespace(
        resource_demands=SimpleNamespace(ray_task_actor_demand=[SimpleNamespace(bundles_by_count=bundles)],
                                         placement_group_demand=[]),
        active_nodes=[node(name) for name in joined], idle_nodes=[])


def _autoscaler(monkeypatch: pytest.MonkeyPatch, states: list[SimpleNamespace]) -> tuple[ElasticWorkers, list[int]]:
    asked: list[int] = []
    workers = ElasticWorkers({"workers": ONE_CPU}, {"workers": 1}, lambda _line: None,
                             lambda _group, n: asked.append(n))
    looks = iter(states)
    monkeypatch.setattr(elastic, "_cluster_status", lambda _address: next(looks))
    return workers, asked


def test_growth_is_asked_for_when_two_looks_agree(monkeypatch: pytest.MonkeyPatch) -> None:
    workers, asked = _autoscaler(monkeypatch, [_status(1, ["workers-1"]), _status(1, ["workers-1"])])
    cluster: Any = _Cluster("workers-1")
    workers.autoscale(cluster, 100.0)
    assert asked == [], "one look is not enough"
    workers.autoscale(cluster, 101.0)
    assert asked == [2]


def test_a_task_counted_twice_for_a_moment_asks_for_one_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    # Two tasks, one running on workers-1 and one waiting; for one look Ray's demand counted both as waiting
    # (a task moving between raylets is in both their reports until the next one).
    workers, asked = _autoscaler(monkeypatch, [_status(2, ["workers-1"]), _status(1, ["workers-1"]),
                                               _status(1, ["workers-1"])])
    cluster: Any = _Cluster("workers-1")
    for now in (100.0, 101.0, 102.0):
        workers.autoscale(cluster, now)
    assert asked == [2]


def test_the_room_a_joined_worker_has_is_not_asked_for(monkeypatch: pytest.MonkeyPatch) -> None:
    # workers-1 has just joined with its CPU free; Ray still reports both tasks waiting: one will run on it.
    states = [_status(2, ["workers-1"], free={"workers-1": 1.0})] * 2
    workers, asked = _autoscaler(monkeypatch, states)
    cluster: Any = _Cluster("workers-1")
    workers.autoscale(cluster, 100.0)
    workers.autoscale(cluster, 101.0)
    assert asked == [2]


def test_the_demand_a_joining_worker_takes_is_not_asked_for_twice(monkeypatch: pytest.MonkeyPatch) -> None:
    states = [_status(1, ["workers-1"]), _status(1, ["workers-1"]), _status(1, ["workers-1"]),
              *[_status(1, ["workers-1", "workers-2"])] * 5]
    workers, asked = _autoscaler(monkeypatch, states)
    cluster: Any = _Cluster("workers-1")
    workers.autoscale(cluster, 99.0)
    workers.autoscale(cluster, 100.0)  # a task waits, the group is at its minimum: one more worker
    assert asked == [2]
    workers.resize({"workers": 2}, now=100.0)
    cluster.workers["workers-2"] = None
    workers.autoscale(cluster, 100.0 + elastic.SETTLE + 1)  # workers-2 is starting: the waiting task is for it
    # The worker has joined, and Ray still reports the task it is about to run: not a reason to grow.
    workers.autoscale(cluster, 100.0 + elastic.SETTLE + 2)
    workers.autoscale(cluster, 100.0 + 2 * elastic.SETTLE)
    assert asked == [2]
    workers.autoscale(cluster, 100.0 + 3 * elastic.SETTLE + 3)  # still waiting long after: a real demand
    workers.autoscale(cluster, 100.0 + 3 * elastic.SETTLE + 4)
    assert asked == [2, 3]


TPU_JOB = ROOT / "examples" / "elastic" / "rayjob-elastic-tpu.yaml"
SLICE_BUNDLE = {"TPU-v6e-16-head": 1.0, "TPU": 4.0, "CPU": 1.0}


def _tpu_workers(asked: list[int]) -> ElasticWorkers:
    job = yaml.safe_load(TPU_JOB.read_text())
    return ElasticWorkers.for_job(job, lambda _line: None, lambda _group, n: asked.append(n))


def test_a_tpu_group_grows_by_whole_slices_beyond_those_on_the_head() -> None:
    shape = _tpu_workers([]).shapes["tpu-group"]
    assert (shape.per_node, shape.on_head, shape.min_pods, shape.max_pods) == (4, 4, 4, 8)
    assert shape.offers() == {"CPU": 8.0, "TPU": 16.0, "TPU-v6e-16-head": 1.0, "accelerator_type:TPU-V6E": 1.0}
    assert shape.resources == {"TPU": 16.0}, "the head and type resources are Ray's own, from the environment"
    assert [shape.nodes_for(pods) for pods in (4, 8)] == [0, 1], "the first slice is the head's"
    env = shape.node_env("tpu-group-1")
    assert (env["TPU_NAME"], env["TPU_WORKER_ID"], env["TPU_ACCELERATOR_TYPE"], env["TPU_TOPOLOGY"]) == (
        "flexq-emulated-slice-tpu-group-1", "0", "v6e-16", "4x4")
    assert env["JAX_PLATFORMS"] == "cpu"


def test_the_guides_job_keeps_its_slice_on_the_head() -> None:
    job = yaml.safe_load((ROOT / "examples" / "guide" / "rayjob-tpu-v6e-dws.yaml").read_text())
    workers = ElasticWorkers.for_job(job, lambda _line: None, lambda _group, _n: None)
    assert workers.head_holds_slices and workers.desired == {"tpu-group": 4}
    cluster: Any = _Cluster()
    workers.reconcile(cluster)
    assert cluster.workers == {}, "no worker node: the slice the job starts with is on the head"


def test_a_real_tpu_host_adds_no_emulated_slices(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(emulation, "hardware", lambda dev=None: emulation.Hardware(tpu_chips=4))
    assert _tpu_workers([]).shapes == {}


def test_leftover_is_what_the_room_cannot_take() -> None:
    assert leftover([(SLICE_BUNDLE, 2)], [{"TPU-v6e-16-head": 1.0, "TPU": 16.0, "CPU": 8.0}]) == [(SLICE_BUNDLE, 1)]
    assert leftover([({"CPU": 1.0}, 2)], [{"CPU": 4.0}]) == []
    assert leftover([({"CPU": 1.0}, 2)], []) == [({"CPU": 1.0}, 2)]


def _head_status(pending: int, head_free: dict[str, float]) -> SimpleNamespace:
    """The head alone (no worker label), with ``head_free`` free; ``pending`` slice tasks waiting."""
    bundles = [SimpleNamespace(bundle=SLICE_BUNDLE, count=pending)] if pending else []
    head = SimpleNamespace(labels={}, resource_usage=SimpleNamespace(usage=[
        SimpleNamespace(resource_name=r, total=16.0, used=16.0 - v) for r, v in head_free.items()], idle_time_ms=0))
    return SimpleNamespace(
        resource_demands=SimpleNamespace(ray_task_actor_demand=[SimpleNamespace(bundles_by_count=bundles)],
                                         placement_group_demand=[]),
        active_nodes=[head], idle_nodes=[])


def test_a_slice_the_head_can_take_asks_for_nothing_one_it_cannot_asks_for_a_slice(
        monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[int] = []
    workers = _tpu_workers(asked)
    free_head = {"TPU-v6e-16-head": 1.0, "TPU": 16.0, "CPU": 8.0}
    busy_head = {"TPU-v6e-16-head": 0.0, "TPU": 0.0, "CPU": 7.0}
    looks = iter([_head_status(1, free_head), _head_status(1, free_head),
                  _head_status(1, busy_head), _head_status(1, busy_head)])
    monkeypatch.setattr(elastic, "_cluster_status", lambda _address: next(looks))
    cluster: Any = _Cluster()
    workers.autoscale(cluster, 100.0)
    workers.autoscale(cluster, 101.0)
    assert asked == [], "the head's slice is free: the task is about to run there"
    workers.autoscale(cluster, 102.0)
    workers.autoscale(cluster, 103.0)
    assert asked == [8], "one more slice: its 4 hosts"
