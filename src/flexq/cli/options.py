"""What every command shares: the server chosen by ``--server`` / ``FLEXQ_SERVER``, ``--namespace``, ``--env``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from flexq.api import read_env_file
from flexq.client import Client, CliError
from flexq.config import default_server_url

__all__ = ["NamespaceOpt", "client", "env_values", "root", "server_url"]

_state: dict[str, str] = {}

NamespaceOpt = Annotated[str | None, typer.Option("--namespace", "-n", help="Namespace (default: default).")]


def root(
    server: Annotated[str | None, typer.Option("--server", "-s", help="flexq server URL (env FLEXQ_SERVER).",
                                               envvar="FLEXQ_SERVER")] = None,
) -> None:
    # the root callback (no docstring: the app's own help stays its help): remember --server
    if server:
        _state["server"] = server


def server_url() -> str:
    """The server every command talks to: ``--server``, else ``FLEXQ_SERVER``, else the local default."""
    return _state.get("server") or default_server_url()


def client() -> Client:
    return Client(server_url())


def env_values(env: list[str] | None, env_file: Path | None) -> dict[str, str]:
    """``--env-file`` then ``--env NAME=VALUE`` pairs: the values to substitute for ``${NAME}``."""
    values: dict[str, str] = {}
    if env_file is not None:
        loaded, warnings = read_env_file(env_file)
        for warning in warnings:
            typer.echo(f"warning: {warning}", err=True)
        values.update(loaded)
    for item in env or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise CliError(f"--env {item!r}: expected NAME=VALUE")
        values[key] = value
    return values
