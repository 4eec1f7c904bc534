"""``flexq dashboard``: the web dashboard's address (the server's ``/ui/``), opened in a browser where there is one.

A browser is opened only where one can show a page: a desktop session (``DISPLAY``, ``WAYLAND_DISPLAY``, macOS,
Windows) or the user's own ``BROWSER``; in a plain terminal (over SSH, in a container) the address is printed and
nothing is started (a text browser would take the terminal over).
"""

from __future__ import annotations

import os
import sys
import webbrowser
from typing import Annotated

import httpx
import typer

from flexq.cli import options
from flexq.client import CliError, route
from flexq.config import caller_token

__all__ = ["dashboard"]


def _requires_token(url: str) -> bool:
    try:
        with route(url, token=False).client(5) as http:
            return http.get(url).status_code == 401
    except (httpx.HTTPError, CliError):
        return False


def _can_show() -> bool:
    return bool(os.environ.get("BROWSER") or os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")
                or sys.platform in ("darwin", "win32"))


def dashboard(
    no_open: Annotated[bool, typer.Option("--no-open", help="Print the address only.")] = False,
) -> None:
    """Print the web dashboard's address and open it in a browser where there is one."""
    client = options.client()  # the server chosen by --server / FLEXQ_SERVER
    client.request_text("GET", "/healthz")  # no server there: the usual message, exit 1
    url = f"{client.server}/ui/"
    token = caller_token()
    if token and _requires_token(url):
        # The browser signs in once and keeps the token as a cookie; the address carries a one-time code for it,
        # asked of the server over the CLI's own way to it, never the token: the address goes over plain HTTP.
        answer = client.request("POST", "/flexq/v1/sign-in-codes") or {}
        url += f"?code={answer.get('code', '')}"
    typer.echo(url)
    if no_open or not _can_show():
        return
    try:
        opened = webbrowser.open(url)
    except webbrowser.Error:
        opened = False
    if not opened:
        typer.echo("no browser could be started here: open the address above in one", err=True)
