"""``flexq token create/list/revoke``: tokens for the guide's two roles, through the server's token API."""

from __future__ import annotations

from typing import Annotated, Any
from urllib.parse import quote

import typer

from flexq.cli import options
from flexq.cli.printers import columns, to_json

__all__ = ["token_app"]

token_app = typer.Typer(help="Tokens for the administrator and AI developers (administrators only).",
                        no_args_is_help=True)


def _rows(records: list[dict[str, Any]]) -> str:
    header = ["NAME", "ROLE", "NAMESPACE", "CREATED"]
    rows = [[r["name"], r["role"], r.get("namespace") or "<all>", r["created"]] for r in records]
    return columns([header, *rows])


@token_app.command("create")
def create(
    role: Annotated[str, typer.Option(help="developer (jobs and ConfigMaps in --namespace, queues read-only) or "
                                           "admin.")] = "developer",
    namespace: Annotated[str | None, typer.Option("--namespace", "-n", help="The developer's namespace.")] = None,
    name: Annotated[str | None, typer.Option(help="A name for the token (default: ROLE-NAMESPACE-N).")] = None,
    output: Annotated[str | None, typer.Option("--output", "-o", help="json: the whole record.")] = None,
) -> None:
    """Create a token and print it (it is shown once). Use it as FLEXQ_TOKEN, then `flexq env`."""
    if role not in ("developer", "admin"):
        raise typer.BadParameter(f"{role!r}: expected developer or admin", param_hint="--role")
    record = options.client().request("POST", "/flexq/v1/tokens",
                                  json={"role": role, "namespace": namespace, "name": name})
    if output == "json":
        typer.echo(to_json(record), nl=False)
        return
    typer.echo(record["token"])
    scope = f" in namespace {record['namespace']}" if record.get("namespace") else ""
    typer.echo(f"token {record['name']} ({record['role']}{scope}) created; it is not shown again. Use it with:\n"
               f"  export FLEXQ_TOKEN=<token>; eval \"$(flexq env)\"", err=True)


@token_app.command("list")
def list_tokens() -> None:
    """The tokens' names, roles and namespaces (never the tokens)."""
    typer.echo(_rows(options.client().request("GET", "/flexq/v1/tokens")))


@token_app.command("revoke")
def revoke(name: Annotated[str, typer.Argument(help="The token's name.")]) -> None:
    """Revoke a token: requests with it are refused (401) from now on."""
    options.client().request("DELETE", f"/flexq/v1/tokens/{quote(name, safe='')}")
    typer.echo(f"token {name} revoked")
