"""Hypothesis strategies for what clients send: JSON-like values, manifests near the real kinds, request parts."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from flexq.api.kinds import KINDS

SCALARS = st.one_of(st.none(), st.booleans(), st.integers(min_value=-(2**63), max_value=2**63),
                    st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=20),
                    st.sampled_from(["", "0", "1Gi", "100m", "-1", "default", "cpu", "google.com/tpu", "a" * 300,
                                     "Strict", "TryNextFlavor", "on-demand", "${VAR}", "\u0000", "💥"]))

KEYS = st.one_of(st.text(max_size=12), st.sampled_from([
    "metadata", "name", "namespace", "labels", "annotations", "spec", "status", "resourceGroups", "flavors",
    "resources", "nominalQuota", "coveredResources", "cohort", "cohortName", "queueingStrategy", "preemption",
    "podSets", "template", "containers", "requests", "limits", "count", "clusterQueue", "admissionChecks",
    "controllerName", "parameters", "rayClusterSpec", "headGroupSpec", "workerGroupSpecs", "replicas",
    "entrypoint", "nodeSelector", "tolerations", "data", "value", "concurrentAdmissionPolicy", "migration",
    "provisioningClassName", "retryStrategy", "suspend", "conditions", "generateName", "resourceVersion"]))

WILD_NUMBERS = st.sampled_from(["9223372036854775808", "-9223372036854775809", "18446744073709551616", "1e400",
                                "-1.5e999", "NaN", "Infinity", "-Infinity"])
"""JSON numbers no 64 bits hold (the API server refuses each): integers beyond int64, floats beyond float64."""

JSON: st.SearchStrategy[Any] = st.recursive(
    SCALARS, lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(KEYS, inner, max_size=5)),
    max_leaves=25)

GVKS = [(f"{info.group}/{v}" if info.group else v, info.kind) for info in KINDS for v in info.versions]


@st.composite
def manifests(draw: st.DrawFn) -> dict[str, Any]:
    """An object that claims a real kind and version, with a plausible-to-wild body."""
    api_version, kind = draw(st.sampled_from(GVKS))
    obj: dict[str, Any] = {"apiVersion": api_version, "kind": kind,
                           "metadata": draw(st.one_of(st.fixed_dictionaries(
                               {"name": st.sampled_from(["x", "cq", "a-b", "Bad_Name", ""])},
                               optional={"namespace": st.sampled_from(["default", "team-a", "Bad NS"]),
                                         "labels": st.dictionaries(st.text(max_size=8), SCALARS, max_size=2)}),
                               JSON))}
    obj.update(draw(st.dictionaries(KEYS, JSON, max_size=4)))
    return obj
