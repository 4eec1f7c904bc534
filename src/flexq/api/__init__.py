"""The object API: kinds, schemas, versions, defaults, validation, quantities, Kueue's Configuration file and the
errors a bad input gets."""

from __future__ import annotations

from typing import TYPE_CHECKING

from flexq.faces import lazy_face

if TYPE_CHECKING:
    from flexq.api.core_rules import config_key_errors, go_quote
    from flexq.api.defaults import apply_defaults, job_labels, job_selector
    from flexq.api.documents import (
        MAX_INPUT_BYTES,
        MAX_NESTING,
        Document,
        decode_input,
        load_documents,
        load_yaml,
        nesting,
        numbers_only,
        text_only,
    )
    from flexq.api.envsubst import find_placeholders, read_env_file, substitute
    from flexq.api.fields import (
        FieldCheck,
        FieldValidation,
        UnknownFields,
        parse_field_validation,
        prune,
        strict_errors,
        unknown_fields,
    )
    from flexq.api.jsoncopy import copy_json
    from flexq.api.kinds import KINDS, Column, KindInfo, UnknownKind, by_gvk, by_resource, resolve
    from flexq.api.kueue_config import (
        DEFAULT_KUEUE_CONFIG,
        AdmissionFairSharing,
        KueueConfig,
        PodsReadyConfig,
        ResourceConfig,
        kueue_config_of,
        load_kueue_config,
        parse_kueue_config,
    )
    from flexq.api.models.ray import CLUSTER_SELECTOR_KEY
    from flexq.api.normal_form import normalize, storage_form
    from flexq.api.object_errors import ApiError, FieldError, InputError, InvalidObject
    from flexq.api.quantity import Quantity, QuantityError, parse_quantity
    from flexq.api.topology_assignment import assignment_domains, to_v1beta2
    from flexq.api.validation import schema_errors, validate_document
    from flexq.api.versions import convert
else:
    __getattr__, __dir__ = lazy_face(__name__, __file__)

__all__ = [
    "CLUSTER_SELECTOR_KEY",
    "DEFAULT_KUEUE_CONFIG",
    "KINDS",
    "MAX_INPUT_BYTES",
    "MAX_NESTING",
    "AdmissionFairSharing",
    "ApiError",
    "Column",
    "Document",
    "FieldCheck",
    "FieldError",
    "FieldValidation",
    "InputError",
    "InvalidObject",
    "KindInfo",
    "KueueConfig",
    "PodsReadyConfig",
    "Quantity",
    "QuantityError",
    "ResourceConfig",
    "UnknownFields",
    "UnknownKind",
    "apply_defaults",
    "assignment_domains",
    "by_gvk",
    "by_resource",
    "config_key_errors",
    "convert",
    "copy_json",
    "decode_input",
    "find_placeholders",
    "go_quote",
    "job_labels",
    "job_selector",
    "kueue_config_of",
    "load_documents",
    "load_kueue_config",
    "load_yaml",
    "nesting",
    "normalize",
    "numbers_only",
    "parse_field_validation",
    "parse_kueue_config",
    "parse_quantity",
    "prune",
    "read_env_file",
    "resolve",
    "schema_errors",
    "storage_form",
    "strict_errors",
    "substitute",
    "text_only",
    "to_v1beta2",
    "unknown_fields",
    "validate_document",
]
