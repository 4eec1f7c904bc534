"""A pod template's topology annotations, the Workload's ``topologyRequest`` made of them, and back: each form of
request survives the trip both ways (the importer makes a job's annotations from a real cluster's Workload)."""

from __future__ import annotations

from flexq.jobs import request_annotations, request_from_object, request_object, topology_request

LEVEL = "cloud.google.com/gce-topology-subblock"

CASES: dict[str, tuple[dict[str, str], dict[str, object]]] = {
    "required": ({"kueue.x-k8s.io/podset-required-topology": LEVEL}, {"required": LEVEL}),
    "preferred": ({"kueue.x-k8s.io/podset-preferred-topology": LEVEL}, {"preferred": LEVEL}),
    "unconstrained": ({"kueue.x-k8s.io/podset-unconstrained-topology": "true"}, {"unconstrained": True}),
    "slices": ({"kueue.x-k8s.io/podset-required-topology": "cloud.google.com/gce-topology-block",
                "kueue.x-k8s.io/podset-slice-required-topology": LEVEL, "kueue.x-k8s.io/podset-slice-size": "4"},
               {"required": "cloud.google.com/gce-topology-block", "podSetSliceRequiredTopology": LEVEL,
                "podSetSliceSize": 4}),
}


def test_annotations_and_topology_request_both_ways() -> None:
    seen = {}
    for name, (written, _) in CASES.items():
        request = topology_request(written)
        assert request is not None, name
        back = request_from_object(request_object(request))
        seen[name] = (request_object(request), back == request, request_annotations(request))
    assert seen == {name: (obj, True, written) for name, (written, obj) in CASES.items()}
    assert topology_request({}) is None and request_from_object({"podIndexLabel": "x"}) is None
