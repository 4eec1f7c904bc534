"""flexq's token API (``flexq token create/list/revoke``): the administrator's only (the middleware sees to it)."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field

from flexq.auth import Role, TokenBook, TokenError, TokenInfo, TokensUnwritable, UnknownToken
from flexq.server.status import status_body

__all__ = ["tokens_router"]


class TokenRequest(BaseModel):
    role: Role = Field(description="admin, or developer (jobs and ConfigMaps in one namespace, queues read-only)")
    namespace: str | None = Field(default=None, description="the developer's namespace")
    name: str | None = Field(default=None, description="a name for the token (default: role-namespace-N)")


class TokenRecord(BaseModel):
    name: str
    role: Role
    namespace: str | None
    created: str


class NewToken(TokenRecord):
    token: str = Field(description="the bearer token: shown once, only its digest is kept")


def _record(info: TokenInfo) -> TokenRecord:
    return TokenRecord(name=info.name, role=info.role, namespace=info.namespace, created=info.created)


def _unwritable(exc: TokensUnwritable) -> JSONResponse:
    """503, as the API answers a write its store refused (a full disk): nothing was changed, try again later."""
    return JSONResponse(status_body(503, "ServiceUnavailable", str(exc), {"retryAfterSeconds": 10}), 503,
                        headers={"Retry-After": "10"})


def tokens_router(book: TokenBook) -> APIRouter:
    router = APIRouter(prefix="/flexq/v1/tokens", tags=["tokens"])

    @router.post("", response_model=NewToken, status_code=201,
                 responses={400: {"description": "a bad role, namespace or name"},
                            503: {"description": "the tokens could not be written (a full disk)"}})
    async def create(body: TokenRequest) -> NewToken | JSONResponse:
        """Create a token (administrators only)."""
        try:
            token, info = book.create(body.role, body.namespace, body.name)
        except TokensUnwritable as exc:
            return _unwritable(exc)
        except TokenError as exc:
            return JSONResponse(status_body(400, "BadRequest", str(exc)), 400)
        return NewToken(token=token, **_record(info).model_dump())

    @router.get("", response_model=list[TokenRecord])
    async def list_tokens() -> list[TokenRecord]:
        """Every token's name, role and namespace (never the token)."""
        return [_record(i) for i in book.list()]

    @router.delete("/{name}", response_model=TokenRecord, responses={
        404: {"description": "no such token"}, 503: {"description": "the tokens could not be written (a full disk)"}})
    async def revoke(name: str) -> TokenRecord | JSONResponse:
        """Revoke a token: requests with it get 401 from now on."""
        try:
            return _record(book.revoke(name))
        except TokensUnwritable as exc:
            return _unwritable(exc)
        except UnknownToken as exc:
            return JSONResponse(status_body(404, "NotFound", str(exc)), 404)
        except TokenError as exc:
            return JSONResponse(status_body(400, "BadRequest", str(exc)), 400)

    return router
