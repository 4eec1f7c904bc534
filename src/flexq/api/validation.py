"""Validation: a document to a checked object, or :class:`InvalidObject` naming every bad field.

Two passes, as the API server and Kueue's webhooks do: the schema (types, enums, required fields,
quantities, names), then each kind's own rules (a flavor listed twice in one ClusterQueue, resources
out of step with ``coveredResources``, a ``concurrentAdmissionPolicy`` with more than one resource
group, ...), and the API server's own rules for names, paths and sizes (:mod:`flexq.api.core_rules`: a
ConfigMap's keys, a pod template's volume paths, the size of annotations). A field that the object's
version does not have (``concurrentAdmissionPolicy`` in a v1beta1 ClusterQueue) is refused as an unknown
field, before the schema. Every error carries the field path and, when the object came from a YAML file,
the line.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from pydantic import BaseModel, ValidationError

from flexq.api.core_rules import annotation_errors, config_map_errors, pod_spec_errors
from flexq.api.documents import Document, format_path
from flexq.api.kinds import KindInfo, UnknownKind, by_gvk
from flexq.api.models.common import check_dns_label
from flexq.api.models.ray import CLUSTER_SELECTOR_KEY
from flexq.api.object_errors import FieldError, InvalidObject
from flexq.api.quantity import parse_quantity

__all__ = ["schema_errors", "validate_document", "validate_object"]


def validate_object(obj: dict[str, Any], source: str = "request", index: int = 0) -> KindInfo:
    """Validate a plain object (no line information); return its kind."""
    return validate_document(Document(obj, source, index))


def validate_document(doc: Document) -> KindInfo:
    """Validate ``doc``; return its kind or raise :class:`InvalidObject` with every problem found."""
    obj = doc.obj
    kind = obj.get("kind")
    api_version = obj.get("apiVersion")
    metadata = obj.get("metadata")
    name = metadata.get("name", "") if isinstance(metadata, dict) else ""
    name = name if isinstance(name, str) else ""

    def fail(errors: list[FieldError]) -> InvalidObject:
        return InvalidObject(doc.source, doc.index, kind if isinstance(kind, str) else "", name, errors)

    missing = [
        FieldError(field, "Required value", doc.line)
        for field, value in (("apiVersion", api_version), ("kind", kind))
        if not isinstance(value, str) or not value
    ]
    if missing:
        raise fail(missing)
    assert isinstance(api_version, str) and isinstance(kind, str)
    try:
        info = by_gvk(api_version, kind)
    except UnknownKind as exc:
        raise fail([FieldError("kind", str(exc), doc.line_of("kind"))]) from None

    errors = _fields_not_in_version(info, api_version.rpartition("/")[2], doc) or schema_errors(info.model, doc)
    if not errors:
        errors = [FieldError(e.path, e.message, doc.line_of(e.path)) for e in _rules(info, obj)]
    if not errors and isinstance(metadata, dict) and not (metadata.get("name") or metadata.get("generateName")):
        errors = [FieldError("metadata.name", "Required value: name or generateName is required",
                             doc.line_of("metadata"))]
    if errors:
        raise fail(errors)
    return info


_MESSAGES: Final[dict[str, str]] = {
    "missing": "Required value",
    "string_type": "must be a string",
    "int_type": "must be an integer",
    "int_parsing": "must be an integer",
    "int_from_float": "must be an integer",
    "bool_type": "must be a boolean",
    "float_type": "must be a number",
    "dict_type": "must be an object",
    "model_type": "must be an object",
    "model_attributes_type": "must be an object",
    "list_type": "must be a list",
}


# The models describe a kind's storage version; these fields are absent from an older served version
# (Kueue added them later), so there they are unknown fields, refused as the API server's strict field
# validation refuses them (kubectl's default).
_NOT_IN_VERSION: Final[dict[tuple[str, str], tuple[str, ...]]] = {
    ("ClusterQueue", "v1beta1"): ("spec.concurrentAdmissionPolicy",),
}


def _fields_not_in_version(info: KindInfo, version: str, doc: Document) -> list[FieldError]:
    """An error for each field of ``doc`` that ``version`` of its kind does not have."""
    return [
        FieldError(path, f"Unknown field: {info.kind} {info.api_version(version)} has no such field "
                         f"(it is in {info.api_version()})", doc.line_of(path))
        for path in _NOT_IN_VERSION.get((info.kind, version), ())
        if _has_field(doc.obj, path)
    ]


def _has_field(obj: dict[str, Any], path: str) -> bool:
    node: Any = obj
    for part in path.split("."):
        if not isinstance(node, dict) or part not in node:
            return False
        node = node[part]
    return True


def schema_errors(model: type[BaseModel], doc: Document) -> list[FieldError]:
    """Every schema problem of ``doc`` against ``model``, one per field path, with lines."""
    try:
        model.model_validate(doc.obj)
    except ValidationError as exc:
        found: dict[str, FieldError] = {}
        for err in exc.errors():
            path = _path_in(doc.obj, err["loc"], err["type"] == "missing")
            message = _message(err)
            previous = found.get(path)
            # A union reports once per member; keep the most specific message.
            if previous is None or (err["type"] == "value_error" and "must be" in previous.message):
                found[path] = FieldError(path, message, doc.line_of(path))
        return list(found.values())
    return []


def _path_in(obj: Any, loc: tuple[int | str, ...], missing: bool) -> str:
    """Keep the parts of ``loc`` that name fields of ``obj`` (drop pydantic's union-member tags)."""
    parts: list[str | int] = []
    node = obj
    for i, part in enumerate(loc):
        in_dict = isinstance(node, dict) and isinstance(part, str) and part in node
        in_list = isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node)
        if in_dict or in_list:
            parts.append(part)
            node = node[part]
        elif missing and i == len(loc) - 1:
            parts.append(part)
    return format_path(parts)


def _message(err: Any) -> str:
    kind = err["type"]
    value = err.get("input")
    if kind == "value_error":
        return str(err["msg"]).removeprefix("Value error, ")
    if kind == "literal_error":
        expected = err.get("ctx", {}).get("expected", "")
        return f"Unsupported value: {_show(value)}: supported values: {expected}"
    if kind == "too_long":
        limit = err.get("ctx", {}).get("max_length")
        return f"Too many: {len(value) if hasattr(value, '__len__') else '?'}: must have at most {limit} items"
    if kind == "too_short":
        return "Required value: must have at least 1 item"
    if kind in ("greater_than_equal", "greater_than"):
        bound = err.get("ctx", {}).get("ge", err.get("ctx", {}).get("gt"))
        return f"Invalid value: {_show(value)}: must be greater than or equal to {bound}"
    if kind in _MESSAGES:
        text = _MESSAGES[kind]
        return text if kind == "missing" else f"Invalid value: {_show(value)}: {text}"
    return str(err["msg"])


def _show(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, dict | list):
        return (type(value).__name__ == "dict" and "object") or "list"
    return repr(value)


# --- each kind's own rules -------------------------------------------------------------------------

Rule = Callable[[dict[str, Any]], list[FieldError]]


def _resource_groups(groups: list[dict[str, Any]], base: str, has_cohort: bool) -> list[FieldError]:
    errors: list[FieldError] = []
    seen_flavors: set[str] = set()
    seen_resources: set[str] = set()
    for g, group in enumerate(groups):
        gpath = f"{base}.resourceGroups[{g}]"
        covered: list[str] = list(group.get("coveredResources", []))
        for r, res in enumerate(covered):
            if res in seen_resources:
                errors.append(FieldError(f"{gpath}.coveredResources[{r}]", f'Duplicate value: "{res}"'))
            seen_resources.add(res)
        for f, flavor in enumerate(group.get("flavors", [])):
            fpath = f"{gpath}.flavors[{f}]"
            fname = flavor.get("name", "")
            if fname in seen_flavors:
                errors.append(FieldError(f"{fpath}.name", f'Duplicate value: "{fname}"'))
            seen_flavors.add(fname)
            resources = flavor.get("resources", [])
            if len(resources) != len(covered):
                errors.append(FieldError(
                    f"{fpath}.resources",
                    f"Invalid value: {len(resources)}: must have the same number of resources as "
                    f"coveredResources ({len(covered)})",
                ))
                continue
            for r, res in enumerate(resources):
                rpath = f"{fpath}.resources[{r}]"
                if res.get("name") != covered[r]:
                    errors.append(FieldError(
                        f"{rpath}.name",
                        f'Invalid value: "{res.get("name")}": must match the name in coveredResources '
                        f'("{covered[r]}")',
                    ))
                for limit in ("borrowingLimit", "lendingLimit"):
                    if res.get(limit) is not None and not has_cohort:
                        errors.append(FieldError(f"{rpath}.{limit}", "Invalid value: must be nil when cohort is empty"))
                lending = res.get("lendingLimit")
                if lending is not None and parse_quantity(lending) > parse_quantity(res["nominalQuota"]):
                    errors.append(FieldError(
                        f"{rpath}.lendingLimit",
                        f'Invalid value: "{lending}": must be less than or equal to nominalQuota',
                    ))
    return errors


def _cluster_queue(obj: dict[str, Any]) -> list[FieldError]:
    spec = obj["spec"]
    has_cohort = bool(spec.get("cohort") or spec.get("cohortName"))
    errors = _resource_groups(spec.get("resourceGroups") or [], "spec", has_cohort)
    if spec.get("admissionChecks") is not None and spec.get("admissionChecksStrategy") is not None:
        errors.append(FieldError(
            "spec", "Invalid value: either admissionChecks or admissionChecksStrategy can be set, but not both"
        ))
    if spec.get("cohort") and spec.get("cohortName") and spec["cohort"] != spec["cohortName"]:
        errors.append(FieldError("spec.cohortName", "Invalid value: must equal spec.cohort when both are set"))
    return errors + _concurrent_admission(spec)


_CONCURRENT: Final = "when ConcurrentAdmissionPolicy is defined"


def _concurrent_admission(spec: dict[str, Any]) -> list[FieldError]:
    """Kueue's webhook rules for ``spec.concurrentAdmissionPolicy`` (v1beta2, alpha), with its messages."""
    policy = spec.get("concurrentAdmissionPolicy")
    if policy is None:
        return []
    groups: list[dict[str, Any]] = spec.get("resourceGroups") or []
    errors: list[FieldError] = []
    if len(groups) != 1:
        errors.append(FieldError("spec.resourceGroups",
                                 f"Invalid value: {len(groups)}: must have exactly one ResourceGroup {_CONCURRENT}"))
    elif len(groups[0]["flavors"]) > 16:
        errors.append(FieldError(
            "spec.resourceGroups[0].flavors",
            f"Invalid value: {len(groups[0]['flavors'])}: cannot have more than 16 resource flavors in the "
            f"ResourceGroup {_CONCURRENT}",
        ))
    errors += _migration_constraints(policy["migration"], groups)
    if spec.get("queueingStrategy") == "StrictFIFO":
        errors.append(FieldError(
            "spec.queueingStrategy",
            f'Invalid value: "StrictFIFO": StrictFIFO queueing strategy cannot be used {_CONCURRENT}',
        ))
    return errors


def _migration_constraints(migration: dict[str, Any], groups: list[dict[str, Any]]) -> list[FieldError]:
    constraints = migration.get("constraints")
    if constraints is None:
        return []
    path = "spec.concurrentAdmissionPolicy.migration.constraints"
    mode = migration["mode"]
    if mode != "TryPreferredFlavors":
        return [FieldError(path, f'Forbidden: may only be set when migration.mode is "TryPreferredFlavors" '
                                 f'(got "{mode}")')]
    last = constraints.get("lastAcceptableFlavorName")
    flavors = list(dict.fromkeys(f["name"] for group in groups for f in group["flavors"]))
    if last is None or last in flavors:
        return []
    return [FieldError(f"{path}.lastAcceptableFlavorName",
                       f'Invalid value: "{last}": must be one of the flavors defined in the ClusterQueue: '
                       f"[{' '.join(flavors)}]")]


def _cohort(obj: dict[str, Any]) -> list[FieldError]:
    spec = obj.get("spec") or {}
    errors = _resource_groups(spec.get("resourceGroups") or [], "spec", True)
    parent = spec.get("parent") or spec.get("parentName")
    if parent and parent == obj["metadata"].get("name"):
        errors.append(FieldError("spec.parentName", "Invalid value: a cohort cannot be its own parent"))
    return errors


def _names_unique(items: list[dict[str, Any]], key: str, path: str) -> list[FieldError]:
    seen: set[str] = set()
    errors: list[FieldError] = []
    for i, item in enumerate(items):
        value = str(item.get(key))
        if value in seen:
            errors.append(FieldError(f"{path}[{i}].{key}", f'Duplicate value: "{value}"'))
        seen.add(value)
    return errors


MAX_POD_SETS: Final = 8
"""The most pod sets a Workload has (its CRD's ``podSets`` maxItems): a Ray cluster's are its head and each worker
group."""


def _worker_groups(spec: dict[str, Any], path: str) -> list[FieldError]:
    groups = spec.get("workerGroupSpecs") or []
    if len(groups) + 1 > MAX_POD_SETS:  # Kueue's RayJob and RayCluster webhooks; the groups' own errors can wait
        return [FieldError(f"{path}.workerGroupSpecs",
                           f"Too many: {len(groups) + 1}: must have at most {MAX_POD_SETS} items")]
    errors = _names_unique(groups, "groupName", f"{path}.workerGroupSpecs")
    for i, group in enumerate(groups):
        gpath = f"{path}.workerGroupSpecs[{i}]"
        low, high = group.get("minReplicas"), group.get("maxReplicas")
        if low is not None and high is not None and low > high:
            errors.append(FieldError(f"{gpath}.minReplicas",
                                     f"Invalid value: {low}: must be less than or equal to maxReplicas ({high})"))
        try:
            check_dns_label(group["groupName"])
        except ValueError as exc:
            errors.append(FieldError(f"{gpath}.groupName", f"Invalid value: {exc}"))
    return errors


def _ray_job(obj: dict[str, Any]) -> list[FieldError]:
    spec = obj["spec"]
    if spec.get("rayClusterSpec") is None and not spec.get("clusterSelector"):
        return [FieldError("spec.rayClusterSpec",
                           "Required value: one of rayClusterSpec or clusterSelector must be set")]
    if spec.get("rayClusterSpec") is not None and spec.get("clusterSelector"):
        return [FieldError("spec.clusterSelector",
                           "Invalid value: rayClusterSpec and clusterSelector cannot both be set")]
    mode = spec.get("submissionMode", "K8sJobMode")
    if mode in ("K8sJobMode", "HTTPMode", "SidecarMode") and not spec.get("entrypoint"):
        return [FieldError("spec.entrypoint", f"Required value: entrypoint is required in {mode}")]
    if spec.get("clusterSelector"):
        return _cluster_selector(spec, mode)
    if spec.get("rayClusterSpec") is not None:
        return _worker_groups(spec["rayClusterSpec"], "spec.rayClusterSpec")
    return []


def _cluster_selector(spec: dict[str, Any], mode: str) -> list[FieldError]:
    """KubeRay's rules for a RayJob that runs on an existing RayCluster."""
    if not spec["clusterSelector"].get(CLUSTER_SELECTOR_KEY):
        return [FieldError(f"spec.clusterSelector[{CLUSTER_SELECTOR_KEY}]",
                           "Required value: the name of the RayCluster to run on")]
    if spec.get("suspend"):
        return [FieldError("spec.suspend", "Invalid value: true: a RayJob on an existing cluster (clusterSelector) "
                                           "cannot be suspended")]
    if mode == "SidecarMode":
        return [FieldError("spec.submissionMode", "Unsupported value: SidecarMode: not with clusterSelector")]
    if int(spec.get("backoffLimit") or 0) > 0:
        return [FieldError("spec.backoffLimit", f"Invalid value: {spec['backoffLimit']}: a RayJob on an existing "
                                                "cluster (clusterSelector) is not retried")]
    return []


def _ray_cluster(obj: dict[str, Any]) -> list[FieldError]:
    return _worker_groups(obj["spec"], "spec")


def _workload(obj: dict[str, Any]) -> list[FieldError]:
    return _names_unique(obj["spec"]["podSets"], "name", "spec.podSets")


def _job(obj: dict[str, Any]) -> list[FieldError]:
    policy = obj["spec"]["template"]["spec"].get("restartPolicy")
    if policy not in ("Never", "OnFailure"):
        shown = f'"{policy}"' if policy else '""'
        return [FieldError("spec.template.spec.restartPolicy",
                           f'Unsupported value: {shown}: supported values: "OnFailure", "Never"')]
    return []


# The pod templates of each kind, whose volume paths are checked as the API server checks a pod's (KubeRay's pods
# would be refused so when made; flexq makes none, and writes their ConfigMap volumes itself).


def _pod_volumes(obj: dict[str, Any]) -> list[FieldError]:
    return pod_spec_errors(obj["spec"], "spec")


def _job_volumes(obj: dict[str, Any]) -> list[FieldError]:
    return pod_spec_errors(obj["spec"]["template"]["spec"], "spec.template.spec")


def _ray_cluster_volumes(spec: dict[str, Any] | None, path: str) -> list[FieldError]:
    if spec is None:
        return []
    errors = pod_spec_errors(spec["headGroupSpec"]["template"]["spec"], f"{path}.headGroupSpec.template.spec")
    for i, group in enumerate(spec.get("workerGroupSpecs") or []):
        errors += pod_spec_errors(group["template"]["spec"], f"{path}.workerGroupSpecs[{i}].template.spec")
    return errors


def _ray_job_volumes(obj: dict[str, Any]) -> list[FieldError]:
    spec = obj["spec"]
    errors = _ray_cluster_volumes(spec.get("rayClusterSpec"), "spec.rayClusterSpec")
    submitter = spec.get("submitterPodTemplate")
    if submitter is not None:
        errors += pod_spec_errors(submitter["spec"], "spec.submitterPodTemplate.spec")
    return errors


_RULES: Final[dict[str, tuple[Rule, ...]]] = {
    "ClusterQueue": (_cluster_queue,),
    "Cohort": (_cohort,),
    "RayJob": (_ray_job, _ray_job_volumes),
    "RayCluster": (_ray_cluster, lambda obj: _ray_cluster_volumes(obj["spec"], "spec")),
    "Workload": (_workload,),
    "Job": (_job, _job_volumes),
    "Pod": (_pod_volumes,),
    "ConfigMap": (config_map_errors,),
}


def _rules(info: KindInfo, obj: dict[str, Any]) -> list[FieldError]:
    """Each kind's own rules, after those of every object's metadata."""
    errors = annotation_errors(obj["metadata"])
    for rule in _RULES.get(info.kind, ()):
        errors += rule(obj)
    return errors
