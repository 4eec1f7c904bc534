"""The package faces: each package's curated ``__all__``, one exception root, no two modules of one name."""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
from collections import Counter
from pathlib import Path
from types import ModuleType

import flexq
from flexq.errors import FlexqError

_OPTIONAL = ("ray", "jax", "jaxlib")  # a module that needs these is skipped where they are not installed

# What each package offers to the others and to users: the names imported from it by code outside it.
FACES: dict[str, tuple[str, ...]] = {
    "flexq": (
        "FlexqError", "__version__",
    ),
    "flexq.api": (
        "AdmissionFairSharing", "ApiError", "CLUSTER_SELECTOR_KEY", "Column", "DEFAULT_KUEUE_CONFIG", "Document",
        "FieldCheck", "FieldError", "FieldValidation", "InputError", "InvalidObject", "KINDS", "KindInfo",
        "KueueConfig", "MAX_INPUT_BYTES", "MAX_NESTING", "PodsReadyConfig", "Quantity", "QuantityError",
        "ResourceConfig", "UnknownFields", "UnknownKind", "apply_defaults", "assignment_domains", "by_gvk",
        "by_resource", "config_key_errors", "convert", "copy_json", "decode_input", "find_placeholders", "go_quote",
        "job_labels", "job_selector", "kueue_config_of", "load_documents", "load_kueue_config", "load_yaml", "nesting",
        "normalize", "numbers_only", "parse_field_validation", "parse_kueue_config", "parse_quantity", "prune",
        "read_env_file", "resolve", "schema_errors", "storage_form", "strict_errors", "substitute", "text_only",
        "to_v1beta2", "unknown_fields", "validate_document",
    ),
    "flexq.api.models": (
        "Quantity", "check_dns_label", "check_dns_subdomain", "check_label_value", "check_qualified_name", "core",
        "flexq", "kueue", "ray",
    ),
    "flexq.auth": (
        "ANONYMOUS", "Attributes", "Identity", "PUBLIC_PATHS", "Role", "TokenBook", "TokenError", "TokenInfo",
        "TokensUnwritable", "UnknownToken", "authorize", "forbidden_message", "read_token", "request_attributes",
        "resource_path", "rules_in",
    ),
    "flexq.capacity": (
        "CATALOG", "CapacityConfig", "CapacityDriver", "CapacitySpec", "CapacityState", "Cluster",
        "EmulatedCloud", "FallbackNote", "GKE_VERSION", "LIFECYCLE_TAINT_KEYS", "MachineType", "NODE_POOL_LABEL",
        "Node", "NodePoolSpec",
        "PROVISIONING_EXPIRY", "PodGroup", "PoolNote", "ProvisioningSettings", "ProvisioningState", "RayAddressError",
        "RayPoolSync", "RequestNote", "StartedNote", "UnknownMachineType", "WorkloadNote", "answer_timer",
        "dashboard_address", "finishes_sooner_here", "gke_node_pool", "initial_nodes_written", "lifecycle_taints",
        "machine_type", "node_pool_of", "node_pool_spec", "node_pool_webhook", "provisioning_settings",
        "random_outages",
    ),
    "flexq.cli": (),
    "flexq.control": (
        "ATTEMPT_BUCKETS", "AnswerTimes", "Basis", "CapacityChanged", "CheckSet", "ControlPlane", "Histogram", "Input",
        "JobDeleted", "JobFinished", "JobHooks", "JobQueued", "JobResized", "JobStarted", "KueueCounts", "KueueState",
        "LIMIT_CAUSE", "PodsReady", "PodsReadyTimer", "QueuesReconfigured", "RunTime", "RunTimes", "SETTLE_PASSES",
        "SHORT_WAIT_BUCKETS", "TIMEOUT_REASON", "WAIT_BUCKETS", "eviction_labels", "kueue_state",
    ),
    "flexq.controller": (
        "DEFAULT_EVENT_TTL", "EventExpiry", "InLine", "PHASES", "QueueController", "RayRuntime", "Sample", "StepStats",
        "Tally", "finished",
    ),
    "flexq.export": (
        "ExportError", "build", "clean", "write",
    ),
    "flexq.forecast": (
        "CONDITION", "CapacityChangeError", "Forecast", "Fork", "HORIZON", "Lookahead", "Step", "StepKind", "describe",
        "ensemble", "flavor_lookaheads", "forecast", "forecast_status", "fork", "reshape", "samples_for",
        "under_each_flavor", "waiting", "waits",
    ),
    "flexq.importer": (
        "ClusterReadError", "KubeconfigError", "build_scenario", "client", "load_target", "read_cluster",
    ),
    "flexq.jobs": (
        "COMPLETIONS_EQUAL_PARALLELISM", "GATE", "JOB_KINDS", "JobError", "MAX_EXEC_LABEL", "MIN_PARALLELISM",
        "PRIORITY_LABEL", "Priorities", "QUEUE_LABEL", "RAY_KINDS", "TopologyRequestError", "group_of", "group_podsets",
        "group_total", "is_queued", "job_webhook", "job_webhook_for", "local_queues_of", "make_workload", "outcome",
        "pod_requests", "podsets", "priority_class_ref", "request_annotations", "request_from_object", "request_object",
        "role", "selected_cluster", "template", "topology_request", "workload_name",
    ),
    "flexq.objects": (
        "BOOT_NAMESPACES", "BadRequest", "ContinueExpired", "ListPages", "Lister", "NODE_BOOTING", "ObjectService",
        "PROVISIONING_CONTROLLER", "Page", "SelectorError", "Unchanged", "admission_check_state",
        "cluster_queue_state", "field_labels", "field_selector", "find_condition", "human_duration", "label_selector",
        "node_state", "parse_time", "set_condition", "table", "workload_eta", "workload_flavors", "workload_reason",
    ),
    "flexq.runtime": (
        "BatchJobRun", "Borrowed", "ELASTIC_ANNOTATION", "END_MARKER", "JobUser", "JobUserError", "LOG_ANNOTATION",
        "LOST_REASON", "LocalPod", "RayClusterRun", "RayJobRun", "RemotePod", "RemoteRayCluster", "Resume", "attach",
        "choose_uids", "cluster_status", "configure", "head_port_map", "is_elastic", "job_of_pod", "kuberay_objects",
        "log_reference", "parse_reports", "parse_uid_range", "pod_log_file", "pod_log_path", "pod_run_dir",
        "pod_workdir", "ray_log_path", "ray_pool_of", "ray_pool_of_pod", "raycluster_objects", "read_records", "reap",
        "reap_all", "record_path", "same_object",
    ),
    "flexq.scheduler": (
        "ALLOWED_FLAVORS", "Admission", "Assignment", "COUNTDOWNS", "CheckState", "ClusterQueueSpec", "Config",
        "DelayedTopology", "Event", "EventKind", "FAILED_TO_START", "FlavorResource", "FlavorSpec", "Granular",
        "Moment", "MomentForm", "NAMED_MOMENTS", "PARENT_LABEL", "Phrase", "PodSet", "PodSetAssignment", "PodSetUpdate",
        "PreemptionPolicy", "Quota", "QuotaTree", "REPLACED", "ResourceGroup", "Scheduler", "TIMES_OF_DAY", "Taint",
        "Text", "TimeWords", "Toleration", "TopologyAssignment", "TopologyRequest", "UsageLedger", "Workload",
        "WorkloadState", "build_config", "check_updates", "eviction_reason", "format_amount", "format_usage", "milli",
        "names_node", "node_affinity", "node_matches", "pod_set_update_objects", "pod_set_updates",
        "second_pass_backoff", "start_conflict", "toleration", "toleration_object", "with_updates", "worded"
    ),
    "flexq.server": (
        "CapacityFile", "Data", "Decoder", "Encoder", "GoAway", "ListenError", "MAX_LENGTH", "Ping", "RstStream",
        "TUNNEL_PROTOCOL", "plan_listeners", "render_kueue", "serve",
    ),
    "flexq.sim": (
        "LOWER_BOUND", "ORACLE", "PolicyRun", "Scenario", "SimProgress", "SimResult", "Simulation", "Submission",
        "compare_policies", "load_capacity", "load_generator_file", "load_scenario", "parse_capacity", "policy_name",
        "policy_run", "ratio", "read_text", "run_scenario", "summarize", "write_report",
    ),
    "flexq.store": (
        "AlreadyExists", "BaseStore", "Change", "ChangeType", "Committer", "Conflict", "ForeignTx", "Gone", "Key",
        "LeaseLike", "NotFound", "ReplicaStore", "SqliteLease", "Stale", "Store", "StoreError", "StoreOptionError",
        "StoreUnavailable", "commit_foreign", "event_note", "is_postgres", "loads", "open_lease", "open_store",
        "record_event", "record_events", "rfc3339", "shown", "sqlite_path",
    ),
    "flexq.ui": (),
}

def _packages() -> list[str]:
    return ["flexq", *(info.name for info in pkgutil.walk_packages(flexq.__path__, "flexq.") if info.ispkg)]


def _modules() -> list[ModuleType]:
    """Every module of flexq that imports here."""
    found: list[ModuleType] = [flexq]
    for info in pkgutil.walk_packages(flexq.__path__, "flexq."):
        try:
            found.append(importlib.import_module(info.name))
        except ImportError as exc:
            if (exc.name or "").split(".")[0] not in _OPTIONAL:
                raise
    return found


def test_every_package_has_its_face_in_the_table() -> None:
    assert sorted(_packages()) == sorted(FACES)


def test_each_package_offers_exactly_its_face() -> None:
    for name, face in FACES.items():
        package = importlib.import_module(name)
        assert package.__doc__, f"{name} says what it is"
        assert tuple(sorted(package.__all__)) == face, name
        missing = [attr for attr in face if not hasattr(package, attr)]
        assert missing == [], f"{name} lists names it lacks: {missing}"


def test_no_public_name_hides_a_module_of_its_package() -> None:
    for name, face in FACES.items():
        package = importlib.import_module(name)
        modules = {info.name for info in pkgutil.iter_modules(package.__path__)}
        hidden = [attr for attr in face if attr in modules and not inspect.ismodule(getattr(package, attr))]
        assert hidden == [], f"{name}: {hidden} would stand in for the module of that name"


def test_every_exception_flexq_defines_derives_from_flexq_error() -> None:
    strays = sorted(
        f"{module.__name__}.{name}"
        for module in _modules()
        for name, value in vars(module).items()
        if inspect.isclass(value) and issubclass(value, BaseException) and value.__module__ == module.__name__
        and not issubclass(value, FlexqError)
    )
    assert strays == []


def test_no_two_modules_share_a_name() -> None:
    root = Path(flexq.__file__).parent
    counts = Counter(path.name for path in root.rglob("*.py") if path.name not in ("__init__.py", "__main__.py"))
    shared = sorted(name for name, count in counts.items() if count > 1)
    assert shared == [], "a module takes a name another package's module has"


def test_no_function_over_60_lines() -> None:
    """Modules are split by concept, not by length (an object split across files to look small is harder to read);
    a function longer than a screen is a list of steps to name."""
    root = Path(flexq.__file__).parent
    long_functions = []
    for path in sorted(root.rglob("*.py")):
        text = path.read_text()
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                if length > 60:
                    long_functions.append(f"{path.relative_to(root)}:{node.lineno} {node.name} ({length} lines)")
    assert long_functions == [], "make these functions named steps"
