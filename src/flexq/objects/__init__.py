"""The object service between the front doors and the store: validate, convert, default, patch, status; the
Tables ``kubectl get`` prints."""

from __future__ import annotations

from typing import TYPE_CHECKING

from flexq.faces import lazy_face

if TYPE_CHECKING:
    from flexq.objects.conditions import NODE_BOOTING, find_condition, node_state, set_condition
    from flexq.objects.pages import ContinueExpired, Lister, ListPages, Page, Unchanged
    from flexq.objects.queue_status import PROVISIONING_CONTROLLER, admission_check_state, cluster_queue_state
    from flexq.objects.selectors import SelectorError, field_labels, field_selector, label_selector
    from flexq.objects.service import BOOT_NAMESPACES, BadRequest, ObjectService
    from flexq.objects.tables import human_duration, parse_time, table, workload_eta, workload_flavors, workload_reason
else:
    __getattr__, __dir__ = lazy_face(__name__, __file__)

__all__ = [
    "BOOT_NAMESPACES",
    "NODE_BOOTING",
    "PROVISIONING_CONTROLLER",
    "BadRequest",
    "ContinueExpired",
    "ListPages",
    "Lister",
    "ObjectService",
    "Page",
    "SelectorError",
    "Unchanged",
    "admission_check_state",
    "cluster_queue_state",
    "field_labels",
    "field_selector",
    "find_condition",
    "human_duration",
    "label_selector",
    "node_state",
    "parse_time",
    "set_condition",
    "table",
    "workload_eta",
    "workload_flavors",
    "workload_reason",
]
