"""The object schemas flexq validates against (pydantic models; unknown fields are kept), one module per API group."""

from flexq.api.models import core, flexq, kueue, ray
from flexq.api.models.common import (
    Quantity,
    check_dns_label,
    check_dns_subdomain,
    check_label_value,
    check_qualified_name,
)

__all__ = [
    "Quantity",
    "check_dns_label",
    "check_dns_subdomain",
    "check_label_value",
    "check_qualified_name",
    "core",
    "flexq",
    "kueue",
    "ray",
]
