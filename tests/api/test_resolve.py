"""resolve: the kind a name means, the same when asked again (it is remembered), and a name that means none refused
every time it is asked."""

from __future__ import annotations

import pytest

from flexq.api import UnknownKind, resolve

CASES = {
    "cq": ("kueue.x-k8s.io", "ClusterQueue"),
    "ClusterQueues": ("kueue.x-k8s.io", "ClusterQueue"),
    "Job": ("batch", "Job"),
    "jobs.batch": ("batch", "Job"),
    "jobs.bat": ("batch", "Job"),
    "RayJob": ("ray.io", "RayJob"),
    "workload": ("kueue.x-k8s.io", "Workload"),
    "EVENTS": ("", "Event"),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_name_means_the_same_kind_each_time(name: str) -> None:
    first, again, other_case = resolve(name), resolve(name), resolve(name.swapcase())
    assert (first.group, first.kind) == CASES[name]
    assert again is first and other_case is first


@pytest.mark.parametrize("name", ["jobs.ray", "nosuchkind", "cq.batch"])
def test_a_name_that_means_no_kind_is_refused_each_time(name: str) -> None:
    for _ in range(2):
        with pytest.raises(UnknownKind, match=f'resource type "{name}"'):
            resolve(name)
