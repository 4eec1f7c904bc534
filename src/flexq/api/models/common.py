"""Shared building blocks of the object schemas: metadata, quantities, selectors, pod templates.

Every model allows unknown fields (``extra="allow"``): a field flexq does not model is kept as written
and shown back. Scalars are strict (``"1"`` is not an integer), as the API server's schema is.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, ClassVar, Final, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StrictBool, StrictInt, StrictStr, model_validator

from flexq.api.quantity import QuantityError, parse_quantity

__all__ = [
    "Container",
    "K8sModel",
    "LabelKey",
    "LabelSelector",
    "LabelValue",
    "Name",
    "ObjectMeta",
    "PodSpec",
    "PodTemplateSpec",
    "Quantity",
    "ResourceRequirements",
    "SchedulingGate",
    "StrictBool",
    "StrictInt",
    "StrictStr",
    "Taint",
    "Toleration",
    "TopLevel",
    "check_dns_label",
    "check_dns_subdomain",
    "check_label_value",
    "check_qualified_name",
]


class K8sModel(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True, frozen=True)

    more_fields: ClassVar[frozenset[str]] = frozenset()
    """Fields the API declares that flexq keeps as written without reading them (see :mod:`flexq.api.fields`)."""


_DNS_LABEL: Final = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS_SUBDOMAIN: Final = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_QUALIFIED_NAME: Final = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_LABEL_VALUE: Final = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


def check_dns_subdomain(value: str) -> str:
    if len(value) > 253 or not _DNS_SUBDOMAIN.match(value):
        raise ValueError(
            f'"{value}": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '
            "'-' or '.', and must start and end with an alphanumeric character"
        )
    return value


def check_dns_label(value: str) -> str:
    if len(value) > 63 or not _DNS_LABEL.match(value):
        raise ValueError(
            f'"{value}": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '
            "'-', and must start and end with an alphanumeric character"
        )
    return value


def check_qualified_name(value: str) -> str:
    prefix, _, name = value.rpartition("/")
    if (prefix and not _DNS_SUBDOMAIN.match(prefix)) or len(name) > 63 or not _QUALIFIED_NAME.match(name):
        raise ValueError(
            f'"{value}": a qualified name must be an optional DNS subdomain prefix and "/", then at most '
            "63 alphanumeric characters, '-', '_' or '.', starting and ending with an alphanumeric character"
        )
    return value


def check_label_value(value: str) -> str:
    if len(value) > 63 or not _LABEL_VALUE.match(value):
        raise ValueError(
            f'"{value}": a label value must be empty or at most 63 alphanumeric characters, '
            "'-', '_' or '.', starting and ending with an alphanumeric character"
        )
    return value


def _check_quantity(value: str | int | float) -> str | int | float:
    try:
        parse_quantity(value)
    except QuantityError as exc:
        raise ValueError(str(exc)) from None
    return value


def _check_nonnegative_quantity(value: str | int | float) -> str | int | float:
    if parse_quantity(value).value < 0:
        raise ValueError(f'invalid quantity "{value}": must be greater than or equal to 0')
    return value


Quantity = Annotated[
    StrictStr | StrictInt | float,
    AfterValidator(_check_quantity),
    AfterValidator(_check_nonnegative_quantity),
    Field(json_schema_extra={"x-kubernetes-int-or-string": True}),
]
"""A non-negative Kubernetes quantity: ``100m``, ``20Gi``, ``16``."""

LabelKey = Annotated[StrictStr, AfterValidator(check_qualified_name)]
LabelValue = Annotated[StrictStr, AfterValidator(check_label_value)]
Name = Annotated[StrictStr, AfterValidator(check_dns_subdomain)]


class ObjectMeta(K8sModel):
    name: Name | None = None
    generateName: StrictStr | None = None
    namespace: Annotated[StrictStr, AfterValidator(check_dns_label)] | None = None
    labels: dict[LabelKey, LabelValue] | None = None
    annotations: dict[StrictStr, StrictStr] | None = None
    uid: StrictStr | None = None
    resourceVersion: StrictStr | None = None
    generation: StrictInt | None = None
    creationTimestamp: StrictStr | None = None
    deletionTimestamp: StrictStr | None = None
    finalizers: list[StrictStr] | None = None
    ownerReferences: list[dict[str, Any]] | None = None

    more_fields: ClassVar[frozenset[str]] = frozenset({"deletionGracePeriodSeconds", "managedFields", "selfLink"})


class LabelSelectorRequirement(K8sModel):
    key: LabelKey
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist"]
    values: list[StrictStr] | None = None


class LabelSelector(K8sModel):
    matchLabels: dict[LabelKey, LabelValue] | None = None
    matchExpressions: list[LabelSelectorRequirement] | None = None


class Taint(K8sModel):
    key: LabelKey
    value: StrictStr | None = None
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"]

    more_fields: ClassVar[frozenset[str]] = frozenset({"timeAdded"})


class Toleration(K8sModel):
    key: StrictStr | None = None
    operator: Literal["Exists", "Equal"] | None = None
    value: StrictStr | None = None
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute", ""] | None = None
    tolerationSeconds: StrictInt | None = None

    @model_validator(mode="after")
    def _seconds_for_no_execute(self) -> Toleration:
        """Kubernetes' rule: only a ``NoExecute`` toleration is timed (the taint manager evicts for no other)."""
        if self.tolerationSeconds is not None and self.effect != "NoExecute":
            raise ValueError(f'effect: Invalid value: "{self.effect or ""}": effect must be \'NoExecute\' when '
                             "`tolerationSeconds` is set")
        return self


class ResourceRequirements(K8sModel):
    requests: dict[StrictStr, Quantity] | None = None
    limits: dict[StrictStr, Quantity] | None = None

    more_fields: ClassVar[frozenset[str]] = frozenset({"claims"})


class Container(K8sModel):
    name: Annotated[StrictStr, AfterValidator(check_dns_label)]
    image: StrictStr | None = None
    command: list[StrictStr] | None = None
    args: list[StrictStr] | None = None
    env: list[dict[str, Any]] | None = None
    ports: list[dict[str, Any]] | None = None
    resources: ResourceRequirements | None = None
    volumeMounts: list[dict[str, Any]] | None = None

    more_fields: ClassVar[frozenset[str]] = frozenset({"envFrom", "imagePullPolicy", "lifecycle", "livenessProbe",
        "readinessProbe", "resizePolicy", "restartPolicy", "restartPolicyRules", "securityContext", "startupProbe",
        "stdin", "stdinOnce", "terminationMessagePath", "terminationMessagePolicy", "tty", "volumeDevices",
        "workingDir"})


class SchedulingGate(K8sModel):
    name: Annotated[StrictStr, AfterValidator(check_qualified_name)]


class PodSpec(K8sModel):
    containers: Annotated[list[Container], Field(min_length=1)]
    schedulingGates: list[SchedulingGate] | None = None
    nodeName: StrictStr | None = None
    initContainers: list[Container] | None = None
    nodeSelector: dict[StrictStr, StrictStr] | None = None
    tolerations: list[Toleration] | None = None
    volumes: list[dict[str, Any]] | None = None
    restartPolicy: Literal["Always", "OnFailure", "Never"] | None = None
    priorityClassName: StrictStr | None = None
    affinity: dict[str, Any] | None = None

    more_fields: ClassVar[frozenset[str]] = frozenset({"activeDeadlineSeconds", "automountServiceAccountToken",
        "dnsConfig", "dnsPolicy", "enableServiceLinks", "ephemeralContainers", "hostAliases", "hostIPC",
        "hostNetwork", "hostPID", "hostUsers", "hostname", "hostnameOverride", "imagePullSecrets", "nodeName", "os",
        "overhead", "preemptionPolicy", "priority", "readinessGates", "resourceClaims", "resources",
        "runtimeClassName", "schedulerName", "schedulingGates", "schedulingGroup", "securityContext",
        "serviceAccount", "serviceAccountName", "setHostnameAsFQDN", "shareProcessNamespace", "subdomain",
        "terminationGracePeriodSeconds", "topologySpreadConstraints"})


class PodTemplateSpec(K8sModel):
    metadata: dict[str, Any] | None = None
    spec: PodSpec


class TopLevel(K8sModel):
    """The fields every object has."""

    apiVersion: StrictStr
    kind: StrictStr
    metadata: ObjectMeta
    status: dict[str, Any] | None = None
