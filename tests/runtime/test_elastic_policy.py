"""How many workers the pending demand asks for (the autoscaler's bin packing), without Ray."""

from __future__ import annotations

import pytest

from flexq.runtime.elastic import GroupShape, workers_needed

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


def test_a_group_shape_comes_from_its_pod_template() -> None:
    shape = GroupShape.of({"groupName": "w", "replicas": 1, "minReplicas": 1, "maxReplicas": 3, "numOfHosts": 1,
                           "template": {"spec": {"containers": [{"resources": {"requests": {"cpu": "1500m"}}}]}}})
    assert (shape.cpus, shape.min_pods, shape.max_pods, shape.offers()) == (2, 1, 3, {"CPU": 2.0})
