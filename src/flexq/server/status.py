"""Kubernetes ``Status`` bodies for every error the API returns."""

from __future__ import annotations

from typing import Any

from fastapi.responses import JSONResponse

from flexq.api import ApiError, InputError, InvalidObject, KindInfo, UnknownKind
from flexq.objects import BadRequest, ContinueExpired, SelectorError
from flexq.store import AlreadyExists, Conflict, Gone, NotFound, StoreError, StoreUnavailable

__all__ = ["error_response", "field_causes", "not_leading", "status_body"]


def status_body(code: int, reason: str, message: str, details: dict[str, Any] | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": message, "reason": reason, "code": code,
    }
    if details:
        body["details"] = details
    return body


def not_leading() -> JSONResponse:
    """503 from a server that runs no controller (it does not lead): what only the controller knows is the leader's
    to answer."""
    return JSONResponse(status_body(503, "ServiceUnavailable", "no controller runs in this server (it does not "
                                    "lead): ask the leader"), 503)


def field_causes(exc: InvalidObject) -> list[dict[str, Any]]:
    """An invalid object's field errors as a Status's ``details.causes``."""
    return [{"reason": "FieldValueInvalid", "message": e.message, "field": e.path,
             **({"line": e.line} if e.line is not None else {})} for e in exc.errors]


def _resource(info: KindInfo | None) -> str:
    if info is None:
        return ""
    return f"{info.plural}.{info.group}" if info.group else info.plural


def error_response(exc: Exception, info: KindInfo | None = None, name: str = "") -> JSONResponse:
    """Map an exception of the object layer or the store to a Status response."""
    details: dict[str, Any] = {}
    if info is not None:
        details = {"name": name, "group": info.group, "kind": info.plural}
    if isinstance(exc, InvalidObject):
        kind = exc.kind or (info.kind if info else "object")
        group = info.group if info else ""
        qualified = f"{kind}.{group}" if group else kind
        causes = field_causes(exc)
        text = "; ".join(f"{e.path}: {e.message}" if e.path else e.message for e in exc.errors)
        message = f'{qualified} "{exc.name}" is invalid: {text}' if exc.name else f"{qualified} is invalid: {text}"
        body = status_body(422, "Invalid", message, {"name": exc.name, "group": group, "kind": kind,
                                                     "causes": causes, "source": exc.source,
                                                     "document": exc.document + 1})
        return JSONResponse(body, status_code=422)
    if isinstance(exc, InputError):
        body = status_body(400, "BadRequest", str(exc), {"causes": [{"reason": "FieldValueInvalid",
                                                                      "message": exc.message,
                                                                      **({"line": exc.line} if exc.line else {})}]})
        return JSONResponse(body, status_code=400)
    if isinstance(exc, NotFound):
        msg = f'{_resource(info) or exc.key.resource} "{exc.key.name}" not found'
        return JSONResponse(status_body(404, "NotFound", msg, details), status_code=404)
    if isinstance(exc, AlreadyExists):
        msg = f'{_resource(info) or exc.key.resource} "{exc.key.name}" already exists'
        return JSONResponse(status_body(409, "AlreadyExists", msg, details), status_code=409)
    if isinstance(exc, Conflict):
        msg = (f'Operation cannot be fulfilled on {_resource(info) or exc.key.resource} "{exc.key.name}": '
               "the object has been modified; please apply your changes to the latest version and try again")
        return JSONResponse(status_body(409, "Conflict", msg, details), status_code=409)
    if isinstance(exc, Gone):
        return JSONResponse(status_body(410, "Expired", str(exc)), status_code=410)
    if isinstance(exc, StoreUnavailable):
        # The write was refused whole (disk full, database locked): the server still serves reads; try again.
        retry = 1 if exc.reason == "Locked" else 10
        body = status_body(503, "ServiceUnavailable", str(exc),
                           {**details, "retryAfterSeconds": retry, "causes": [{"reason": exc.reason,
                                                                               "message": str(exc)}]})
        return JSONResponse(body, status_code=503, headers={"Retry-After": str(retry)})
    if isinstance(exc, ContinueExpired):
        body = status_body(exc.code, exc.reason, exc.message)
        body["metadata"] = {"continue": exc.token}
        return JSONResponse(body, status_code=exc.code)
    if isinstance(exc, BadRequest):
        return JSONResponse(status_body(exc.code, exc.reason, exc.message, details or None), status_code=exc.code)
    if isinstance(exc, SelectorError | UnknownKind):
        return JSONResponse(status_body(400, "BadRequest", str(exc)), status_code=400)
    if isinstance(exc, ApiError | StoreError):
        return JSONResponse(status_body(400, "BadRequest", str(exc)), status_code=400)
    raise exc
