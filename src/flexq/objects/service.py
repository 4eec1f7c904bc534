"""The object service: what the API server does between a request and the store.

Every write goes through here: validation (schema and each kind's rules), conversion to the storage
version, defaulting, immutable-field checks, then the store; after writes that touch queues, the
queues' Active conditions are brought up to date in the same transaction. Reads convert back to the
version asked for. Both front doors (the Kubernetes API that kubectl uses, and flexq's own apply)
call this class, so they behave alike.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Concatenate, Final, ParamSpec, TypeVar

from flexq.api import (
    KINDS,
    Document,
    FieldCheck,
    FieldError,
    FieldValidation,
    InvalidObject,
    KindInfo,
    convert,
    copy_json,
    job_selector,
    prune,
    storage_form,
    strict_errors,
    unknown_fields,
    validate_document,
)
from flexq.errors import FlexqError
from flexq.objects.patch import PatchError, apply_json_patch, create_three_way_merge_patch, json_merge, strategic_merge
from flexq.objects.queue_active import reconcile_all, reconcile_one
from flexq.objects.selectors import field_labels, field_selector, label_selector
from flexq.store import BaseStore, Gone, Key, NotFound, Stale

__all__ = ["LAST_APPLIED", "AdmissionHook", "ApplyOutcome", "BadRequest", "ObjectService"]

LAST_APPLIED: Final = "kubectl.kubernetes.io/last-applied-configuration"
BOOT_NAMESPACES: Final = ("default", "kube-system", "kube-public", "kube-node-lease", "kueue-system")
_QUEUE_KINDS: Final = frozenset(
    {"ResourceFlavor", "ClusterQueue", "LocalQueue", "AdmissionCheck", "ProvisioningRequestConfig"}
)
_IMMUTABLE: Final[dict[str, tuple[str, ...]]] = {
    "LocalQueue": ("clusterQueue",),
    "AdmissionCheck": ("controllerName",),
    "ClusterQueue": ("concurrentAdmissionPolicy",),
    "Topology": ("levels",),
}


class BadRequest(FlexqError):
    """A request that is wrong as a whole (not one field of an object); ``code`` is the HTTP status."""

    def __init__(self, message: str, code: int = 400, reason: str = "BadRequest") -> None:
        self.message = message
        self.code = code
        self.reason = reason
        super().__init__(message)


@dataclass(frozen=True, slots=True)
class ApplyOutcome:
    kind: str
    group: str
    name: str
    namespace: str
    action: str  # created | configured | unchanged

    def __str__(self) -> str:
        resource = f"{self.kind.lower()}.{self.group}" if self.group else self.kind.lower()
        return f"{resource}/{self.name} {self.action}"


AdmissionHook = Callable[["ObjectService", KindInfo, dict[str, Any], "dict[str, Any] | None"], None]
"""Called before a create (old is None) or an update of an object's main resource, after validation and
defaulting; may change the object, or refuse it by raising InvalidObject or BadRequest (an admission
webhook, in Kubernetes terms)."""


P = ParamSpec("P")
R = TypeVar("R")

STALE_TRIES: Final = 50
"""How many times a write is run when each try finds that another write changed what it read (an API worker's
optimistic transaction, see :mod:`flexq.store.foreign`): the Kubernetes API server likewise runs a write again
on a conflict it met itself, never on one the client caused (a stale resourceVersion the client sent)."""


def _again_when_stale(method: Callable[Concatenate[ObjectService, P], R]) -> Callable[Concatenate[ObjectService, P], R]:
    """``method``, run again on :class:`Stale` (never raised by a store that commits its own transactions)."""
    @functools.wraps(method)
    def run(self: ObjectService, /, *args: P.args, **kwargs: P.kwargs) -> R:
        for _ in range(STALE_TRIES - 1):
            try:
                return method(self, *args, **kwargs)
            except Stale:
                continue
        return method(self, *args, **kwargs)

    return run


class ObjectService:
    """Validated, versioned, defaulted access to the store."""

    def __init__(self, store: BaseStore, hooks: Iterable[AdmissionHook] = ()) -> None:
        self.store = store
        self.hooks = list(hooks)
        # Inside apply(): None outside; False/True = "queue status needs reconciling at the end".
        self._deferred: bool | None = None
        with store.transaction():
            for ns in BOOT_NAMESPACES:
                key = Key("", "namespaces", "", ns)
                try:
                    store.get(key)
                except NotFound:
                    store.create(key, {"apiVersion": "v1", "kind": "Namespace",
                                       "metadata": {"name": ns, "labels": {"kubernetes.io/metadata.name": ns}},
                                       "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}})

    # --- helpers -----------------------------------------------------------------------------------

    @staticmethod
    def key(info: KindInfo, namespace: str | None, name: str) -> Key:
        return Key(info.group, info.plural, namespace or "" if info.namespaced else "", name)

    def _check_namespace(self, info: KindInfo, namespace: str | None) -> str:
        if not info.namespaced:
            return ""
        if not namespace:
            raise BadRequest("the namespace of the object must be set", 400)
        if not self.store.exists(Key("", "namespaces", "", namespace)):
            raise BadRequest(f'namespaces "{namespace}" not found', 404, "NotFound")
        return namespace

    def _prepare(self, info: KindInfo, doc: Document, namespace: str | None,
                 fields: FieldCheck | None = None, trusted: bool = False) -> dict[str, Any]:
        """Check fields (where the request asks), validate (unless ``trusted``: an object flexq's own code made),
        convert to the storage version, default.

        Raise InvalidObject/BadRequest (UnknownFields under ``fieldValidation=Strict``)."""
        if fields is not None and isinstance(doc.obj.get("apiVersion"), str):
            version = doc.obj["apiVersion"].rpartition("/")[2]
            checked = fields.check(info.model, doc.obj, info.kind, version)
            if checked is not doc.obj:
                doc = Document(checked, doc.source, doc.index, doc.line, doc.lines)
        obj = doc.obj
        found = info if trusted else validate_document(doc)
        if found is not info:
            raise BadRequest(f"the object is a {found.kind}, the request is for {info.kind}")
        meta = obj["metadata"]
        if info.namespaced:
            given = meta.get("namespace")
            if given and namespace and given != namespace:
                raise BadRequest(
                    f"the namespace of the provided object ({given}) does not match the namespace sent on "
                    f"the request ({namespace})"
                )
        return storage_form(info, obj, copy=not trusted)  # a trusted object is handed over by its maker

    def _to(self, info: KindInfo, obj: dict[str, Any], version: str | None) -> dict[str, Any]:
        return convert(info, obj, version or info.storage_version)

    def _check_immutable(self, info: KindInfo, old: dict[str, Any], new: dict[str, Any]) -> None:
        errors = [
            FieldError(f"spec.{field}", "Invalid value: field is immutable")
            for field in _IMMUTABLE.get(info.kind, ())
            if old.get("spec", {}).get(field) != new.get("spec", {}).get(field)
        ]
        if errors:
            raise InvalidObject("request", 0, info.kind, old["metadata"]["name"], errors)

    def _after_write(self, kinds: Iterable[str], one: Key | None = None) -> None:
        """Queue objects were written (``one``: that ClusterQueue or LocalQueue alone): their Active conditions."""
        if not _QUEUE_KINDS.intersection(kinds):
            return
        if self._deferred is not None:
            self._deferred = True
        elif one is not None and one.resource in ("clusterqueues", "localqueues"):
            reconcile_one(self.store, one)
        else:
            reconcile_all(self.store)

    # --- reads -------------------------------------------------------------------------------------

    def get(self, info: KindInfo, namespace: str | None, name: str, version: str | None = None) -> dict[str, Any]:
        return self._to(info, self.store.get(self.key(info, namespace, name)), version)

    def list_objects(
        self, info: KindInfo, namespace: str | None, version: str | None = None, *,
        labels: str | None = None, fields: str | None = None,
    ) -> tuple[list[dict[str, Any]], int]:
        items, rv = self.selected(info, namespace, labels=labels, fields=fields)
        return [self._to(info, o, version) for o in items], rv

    def selected(self, info: KindInfo, namespace: str | None, *, labels: str | None = None,
                 fields: str | None = None) -> tuple[list[dict[str, Any]], int]:
        """The objects a list selects, as stored (in the store's order: namespace, then name), and the
        resourceVersion read at; :meth:`served` gives each in the version asked for."""
        items, rv = self.store.list_objects(info.group, info.plural, namespace if info.namespaced else None)
        if not labels and not fields:
            return items, rv
        match_labels = label_selector(labels)
        match_fields = field_selector(fields, field_labels(info.group, info.plural))
        return [o for o in items if match_labels(o) and match_fields(o)], rv

    def served(self, info: KindInfo, obj: dict[str, Any], version: str | None = None) -> dict[str, Any]:
        """An object as stored, in ``version`` of its kind (the storage version where None)."""
        return self._to(info, obj, version)

    def unchanged_since(self, info: KindInfo, resource_version: int) -> bool:
        """Whether no object of ``info``'s kind was written after ``resource_version`` (False where the store's
        change log no longer tells)."""
        resources = frozenset({(info.group, info.plural)})
        since, current = resource_version, self.store.current_rv()
        while since < current:
            try:
                changes, read_to = self.store.changes_of(since, resources)
            except Gone:
                return False
            if changes:
                return False
            if read_to <= since:
                break
            since = read_to
        return resource_version <= current

    # --- writes ------------------------------------------------------------------------------------

    @_again_when_stale
    def create(self, info: KindInfo, namespace: str | None, obj: dict[str, Any],
               version: str | None = None, *, dry_run: bool = False,
               fields: FieldCheck | None = None, trusted: bool = False) -> dict[str, Any]:
        """Create an object as the API does (``trusted``: one flexq's own code made and hands over: not validated
        again, nor copied)."""
        with self.store.transaction():
            ns = self._check_namespace(info, namespace or obj.get("metadata", {}).get("namespace"))
            prepared = self._prepare(info, Document(obj, "request", 0), ns, fields, trusted)
            meta = prepared["metadata"]
            if not meta.get("name"):
                meta["name"] = self._generate_name(info, ns, meta["generateName"])
            if ns:
                meta["namespace"] = ns
            for hook in self.hooks:
                hook(self, info, prepared, None)
            if dry_run:
                return self._to(info, prepared, version)
            key = self.key(info, ns, meta["name"])
            uid = None
            if info.kind == "Job" and info.group == "batch":  # its selector names its uid, given here
                uid = self.store.new_uid()
                job_selector(prepared, uid)
            stored = self.store.create(key, prepared, uid=uid)
            self._after_write([info.kind], key)
            if info.kind in _QUEUE_KINDS:  # its Active condition was just written
                stored = self.store.get(key)
        return self._to(info, stored, version)  # after the commit: with the resourceVersion it gave

    def _generate_name(self, info: KindInfo, namespace: str, prefix: str) -> str:
        import secrets

        alphabet = "bcdfghjklmnpqrstvwxz2456789"
        for _ in range(10):
            name = prefix + "".join(secrets.choice(alphabet) for _ in range(5))
            try:
                self.store.get(self.key(info, namespace, name))
            except NotFound:
                return name
        raise BadRequest("could not generate a unique name", 409, "AlreadyExists")

    @_again_when_stale
    def replace(self, info: KindInfo, namespace: str | None, name: str, obj: dict[str, Any],
                version: str | None = None, *, subresource: str | None = None,
                dry_run: bool = False, fields: FieldCheck | None = None) -> dict[str, Any]:
        with self.store.transaction():
            key = self.key(info, namespace, name)
            stored = self._replace(info, namespace, key, self.store.get(key), obj, subresource, dry_run, fields)
        return self._to(info, stored, version)

    def _replace(self, info: KindInfo, namespace: str | None, key: Key, old: dict[str, Any], obj: dict[str, Any],
                 subresource: str | None, dry_run: bool, fields: FieldCheck | None) -> dict[str, Any]:
        """:meth:`replace` of ``old``, the object as stored, read in the transaction under way (not read again);
        the object as stored (or as it would be, ``dry_run``), in the storage version."""
        name = key.name
        body = copy_json(obj)
        body.setdefault("metadata", {})
        if body["metadata"].get("name") not in (None, name):
            raise BadRequest(
                f"the name of the object ({body['metadata']['name']}) does not match the name on the URL ({name})"
            )
        body["metadata"]["name"] = name
        if subresource == "status":
            # Status writes are checked against the schema with the stored spec.
            merged = copy_json(self._to(info, old, body.get("apiVersion", "").rpartition("/")[2] or None))
            merged["status"] = body.get("status")
            merged["metadata"]["resourceVersion"] = body["metadata"].get("resourceVersion")
            body = merged
        prepared = self._prepare(info, Document(body, "request", 0), namespace, fields)
        if subresource is None:  # a status write keeps the stored spec
            self._check_immutable(info, old, prepared)
            for hook in self.hooks:
                hook(self, info, prepared, old)
        if dry_run:
            return prepared
        stored = self.store.update(key, prepared, subresource=subresource, keep_status=info.status_subresource,
                                   current=old)
        self._after_write([info.kind], key)
        if info.kind in _QUEUE_KINDS:  # its Active condition was just written
            stored = self.store.get(key)
        return stored

    @_again_when_stale
    def patch(self, info: KindInfo, namespace: str | None, name: str, patch_type: str, body: Any,
              version: str | None = None, *, subresource: str | None = None,
              dry_run: bool = False, fields: FieldCheck | None = None) -> dict[str, Any]:
        # Read and write in one transaction: a patch that names no resourceVersion applies to the object as it
        # is, never fails for a write that came in between (the API server retries such a patch itself).
        with self.store.transaction():
            stored = self._patch(info, namespace, name, patch_type, body, version, subresource, dry_run, fields)
        return self._to(info, stored, version)

    def _patch(self, info: KindInfo, namespace: str | None, name: str, patch_type: str, body: Any,
               version: str | None, subresource: str | None, dry_run: bool,
               fields: FieldCheck | None) -> dict[str, Any]:
        key = self.key(info, namespace, name)
        stored = self.store.get(key)
        current = self._to(info, stored, version)
        try:
            if patch_type == "application/json-patch+json":
                patched = apply_json_patch(current, body)
            elif patch_type == "application/merge-patch+json":
                patched = json_merge(current, body)
            elif patch_type == "application/strategic-merge-patch+json":
                if info.group not in ("", "batch"):
                    raise BadRequest(
                        f"strategic merge patch is not supported for {info.kind} ({info.group}); "
                        "use a JSON merge patch", 415, "UnsupportedMediaType")
                patched = strategic_merge(current, body)
            else:
                raise BadRequest(f"unsupported patch type {patch_type!r}", 415, "UnsupportedMediaType")
        except PatchError as exc:
            raise BadRequest(str(exc), 422, "Invalid") from None
        if not isinstance(patched, dict):
            raise BadRequest("the patch does not produce an object", 422, "Invalid")
        if not (isinstance(body, dict) and body.get("metadata", {}).get("resourceVersion")):
            patched.setdefault("metadata", {})["resourceVersion"] = current["metadata"]["resourceVersion"]
        return self._replace(info, namespace, key, stored, patched, subresource, dry_run, fields)

    @_again_when_stale
    def delete(self, info: KindInfo, namespace: str | None, name: str, version: str | None = None,
               *, resource_version: str | None = None) -> dict[str, Any]:
        with self.store.transaction():
            key = self.key(info, namespace, name)
            old = self.store.delete(key, resource_version=resource_version)
            if info.kind == "Namespace":
                self._delete_namespace_contents(name)
            self._after_write([info.kind], key)
        return self._to(info, old, version)

    def _delete_namespace_contents(self, namespace: str) -> None:
        for info in KINDS:
            if info.namespaced:
                for obj in self.store.list_objects(info.group, info.plural, namespace)[0]:
                    self.store.delete(self.key(info, namespace, obj["metadata"]["name"]))

    # --- apply (flexq's own, all or nothing) ------------------------------------------------------

    @_again_when_stale
    def apply(self, docs: list[Document], default_namespace: str = "default",
              fields: FieldCheck | None = None) -> list[ApplyOutcome]:
        """Apply every document, as ``kubectl apply`` would, in one transaction.

        Every document is validated before anything is written; the first invalid one raises
        :class:`InvalidObject` (with all of that document's problems) and nothing is written. Fields the
        schema does not declare are refused with their lines (``fields`` Strict, the default), or dropped
        (Warn, noted in ``fields.warnings``; Ignore).
        """
        check = fields if fields is not None else FieldCheck(FieldValidation.STRICT)
        plans: list[tuple[KindInfo, Document, str]] = []
        errors: list[InvalidObject] = []
        for doc in docs:
            try:
                info = validate_document(doc)
                doc = self._known_fields(info, doc, check)
            except InvalidObject as exc:
                errors.append(exc)
                continue
            ns = (doc.obj["metadata"].get("namespace") or default_namespace) if info.namespaced else ""
            plans.append((info, doc, ns))
        if errors:
            raise errors[0] if len(errors) == 1 else _many(errors)
        outcomes: list[ApplyOutcome] = []
        with self.store.transaction():
            self._deferred = False
            try:
                for info, doc, ns in plans:
                    outcomes.append(self._apply_one(info, doc, ns))
                reconcile = self._deferred
            finally:
                self._deferred = None
            if reconcile:
                reconcile_all(self.store)
        return outcomes

    @staticmethod
    def _known_fields(info: KindInfo, doc: Document, check: FieldCheck) -> Document:
        paths = unknown_fields(info.model, doc.obj)
        if not paths:
            return doc
        if check.mode is FieldValidation.STRICT:
            name = doc.obj["metadata"].get("name", "") if isinstance(doc.obj.get("metadata"), dict) else ""
            raise InvalidObject(doc.source, doc.index, info.kind, str(name), strict_errors(info.model, doc))
        if check.mode is FieldValidation.WARN:
            check.warnings.extend(f'{doc.source}: {info.kind}: unknown field "{p}"' for p in paths)
        return Document(prune(doc.obj, paths, info.model), doc.source, doc.index, doc.line, doc.lines)

    def _apply_one(self, info: KindInfo, doc: Document, namespace: str) -> ApplyOutcome:
        obj = copy_json(doc.obj)
        name = obj["metadata"].get("name")
        if not name:
            raise InvalidObject(doc.source, doc.index, info.kind, "", [
                FieldError("metadata.name", "Required value: apply needs a name (generateName is for create)",
                           doc.line_of("metadata"))])
        self._check_namespace(info, namespace)
        if info.namespaced:
            obj["metadata"]["namespace"] = namespace
        applied = {k: v for k, v in obj.items() if k != "status"}
        applied_meta = {k: v for k, v in applied["metadata"].items()
                        if k not in ("resourceVersion", "uid", "generation", "creationTimestamp")}
        applied_meta.setdefault("annotations", {}).pop(LAST_APPLIED, None)
        if not applied_meta["annotations"]:
            del applied_meta["annotations"]
        applied["metadata"] = applied_meta
        annotation = json.dumps(applied, separators=(",", ":"), sort_keys=True) + "\n"
        version = obj["apiVersion"].rpartition("/")[2]
        try:
            current = self.get(info, namespace, name, version)
        except NotFound:
            new = copy_json(applied)
            new["metadata"].setdefault("annotations", {})[LAST_APPLIED] = annotation
            try:
                self.create(info, namespace, new, version)
            except InvalidObject as exc:
                raise _with_lines(exc, doc) from None
            return ApplyOutcome(info.kind, info.group, name, namespace, "created")
        previous = current["metadata"].get("annotations", {}).get(LAST_APPLIED)
        original = json.loads(previous) if previous else None
        modified = copy_json(applied)
        modified["metadata"].setdefault("annotations", {})[LAST_APPLIED] = annotation
        patch = create_three_way_merge_patch(original, modified, current)
        if not patch:
            return ApplyOutcome(info.kind, info.group, name, namespace, "unchanged")
        before = current["metadata"]["resourceVersion"]
        try:
            after = self.patch(info, namespace, name, "application/merge-patch+json", patch, version)
        except InvalidObject as exc:
            raise _with_lines(exc, doc) from None
        changed = after["metadata"]["resourceVersion"] != before
        return ApplyOutcome(info.kind, info.group, name, namespace, "configured" if changed else "unchanged")


def _with_lines(exc: InvalidObject, doc: Document) -> InvalidObject:
    return InvalidObject(doc.source, doc.index, exc.kind, exc.name,
                         [FieldError(e.path, e.message, doc.line_of(e.path)) for e in exc.errors])


class _ManyInvalid(InvalidObject):
    def __init__(self, errors: list[InvalidObject]) -> None:
        self.all = errors
        first = errors[0]
        super().__init__(first.source, first.document, first.kind, first.name, first.errors)

    def __str__(self) -> str:
        return "\n".join(InvalidObject.__str__(e) for e in self.all)


def _many(errors: list[InvalidObject]) -> InvalidObject:
    return _ManyInvalid(errors)
