"""What a racing variant's admission is without what a sibling already holds for the pod sets they share: the
discount (the part of its usage the carrier holds) and the admission with it taken off, first pod sets first."""

from __future__ import annotations

import pytest

from flexq.scheduler.holdings import discount, without
from flexq.scheduler.model import Admission, PodSetAssignment

CPU, TPU = ("default-cpu", "cpu"), ("dws", "tpu")


def _admission(*podsets: tuple[str, dict[tuple[str, str], int]]) -> Admission:
    return Admission.of("cq", tuple(PodSetAssignment(name, {fr[1]: fr[0] for fr in usage}, usage, 1)
                                    for name, usage in podsets))


@pytest.mark.parametrize(("usage", "shared", "expected"), [
    ({CPU: 1000, TPU: 4000}, {CPU: 1000}, {CPU: 1000}),
    ({CPU: 1000, TPU: 4000}, {CPU: 3000}, {CPU: 1000}),  # never more than it uses
    ({CPU: 2000}, {CPU: 500, TPU: 4000}, {CPU: 500}),  # only what it uses
    ({CPU: 1000}, {CPU: 0}, {}),
    ({CPU: 1000}, None, {}),
])
def test_the_discount_is_what_the_carrier_holds_of_what_the_variant_uses(
        usage: dict[tuple[str, str], int], shared: dict[tuple[str, str], int] | None,
        expected: dict[tuple[str, str], int]) -> None:
    assert discount(usage, shared) == expected


def test_the_discount_comes_off_the_first_pod_sets_first() -> None:
    admission = _admission(("head", {CPU: 2000}), ("workers", {CPU: 2000, TPU: 4000}))
    left = without(admission, {CPU: 3000})
    assert [ps.usage for ps in left.podsets] == [{CPU: 0}, {CPU: 1000, TPU: 4000}]
    assert (left.cluster_queue, left.total) == ("cq", {CPU: 1000, TPU: 4000})
    assert [ps.usage for ps in without(admission, {}).podsets] == [ps.usage for ps in admission.podsets]
