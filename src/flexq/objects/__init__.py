"""The object service between the front doors and the store: validate, convert, default, patch, status.

Import ``table`` from flexq.objects.table (the name is its module's).
"""

from flexq.objects.conditions import find_condition, set_condition
from flexq.objects.queue_status import PROVISIONING_CONTROLLER, admission_check_state, cluster_queue_state
from flexq.objects.selectors import SelectorError, field_selector, label_selector
from flexq.objects.service import BOOT_NAMESPACES, BadRequest, ObjectService
from flexq.objects.table import human_duration, parse_time, workload_eta, workload_flavors, workload_reason

__all__ = [
    "BOOT_NAMESPACES",
    "PROVISIONING_CONTROLLER",
    "BadRequest",
    "ObjectService",
    "SelectorError",
    "admission_check_state",
    "cluster_queue_state",
    "field_selector",
    "find_condition",
    "human_duration",
    "label_selector",
    "parse_time",
    "set_condition",
    "workload_eta",
    "workload_flavors",
    "workload_reason",
]
