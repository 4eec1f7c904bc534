"""``flexq get KIND [NAME] --watch``, as ``kubectl get -w``: what there is, then a line (or an object) per change.

The list comes first (its table, header and all, or each object in YAML/JSON/name form); then the watch from the
list's resourceVersion prints each change as it comes: a table row under the same columns, an object, or its name.
A watch the server closes (its timeout) is opened again from the last version seen; one whose version has expired
(410) is listed again. It ends on Ctrl-C.
"""

from __future__ import annotations

import json
from typing import Any

import typer

from flexq.api import KindInfo
from flexq.cli.printers import table_cells, to_json, to_yaml
from flexq.client import Client, CliError
from flexq.errors import FlexqError

__all__ = ["watch"]

TABLE_ACCEPT = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"


def _line(cells: list[str], widths: list[int], gap: str = "   ") -> str:
    return gap.join(c.ljust(widths[i]) if i < len(widths) else c for i, c in enumerate(cells)).rstrip()


class _Printer:
    """Prints what the watch sees in the ``output`` form; table columns keep the widths of the first print."""

    def __init__(self, info: KindInfo, output: str | None, all_namespaces: bool) -> None:
        self.info, self.output, self.all_namespaces = info, output, all_namespaces
        self.widths: list[int] = []

    def table(self, tbl: dict[str, Any], *, header: bool) -> None:
        head, rows = table_cells(self.info, tbl, wide=self.output == "wide", all_namespaces=self.all_namespaces)
        if not self.widths:
            self.widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
        for cells in ([head] if header else []) + rows:
            typer.echo(_line(cells, self.widths))

    def obj(self, obj: dict[str, Any]) -> None:
        if self.output == "name":
            resource = f"{self.info.singular}.{self.info.group}" if self.info.group else self.info.singular
            typer.echo(f"{resource}/{obj['metadata']['name']}")
        elif self.output == "yaml":
            typer.echo("---\n" + to_yaml(obj), nl=False)
        else:
            typer.echo(to_json(obj))


def watch(client: Client, info: KindInfo, namespace: str | None, name: str | None, selector: str | None,
          output: str | None, all_namespaces: bool) -> None:
    """List, then follow the changes until interrupted."""
    printer = _Printer(info, output, all_namespaces)
    params: dict[str, str] = {}
    if selector:
        params["labelSelector"] = selector
    if name:
        params["fieldSelector"] = f"metadata.name={name}"
    as_table = output in (None, "wide")
    headers = {"Accept": TABLE_ACCEPT} if as_table else None
    path = client.path(info, namespace)
    try:
        version = _list(client, path, params, headers, printer, as_table)
        while True:
            try:
                version = _follow(client, path, {**params, "watch": "true", "resourceVersion": version,
                                                 "allowWatchBookmarks": "false"}, headers, printer, as_table, version)
            except _Expired:
                version = _list(client, path, params, headers, printer, as_table, again=True)
    except KeyboardInterrupt:
        return


class _Expired(FlexqError):
    """The version the watch started from is gone from the server's window: list again."""


def _list(client: Client, path: str, params: dict[str, str], headers: dict[str, str] | None, printer: _Printer,
          as_table: bool, *, again: bool = False) -> str:
    found = client.request("GET", path, params=params or None, headers=headers)
    if as_table:
        if found.get("rows"):
            printer.table(found, header=not printer.widths and not again)
    else:
        for item in found.get("items", []):
            printer.obj(item)
    return str((found.get("metadata") or {}).get("resourceVersion", ""))


def _follow(client: Client, path: str, params: dict[str, str], headers: dict[str, str] | None, printer: _Printer,
            as_table: bool, version: str) -> str:
    """Print the watch's events until the server closes it; return the last version seen."""
    pending = ""
    for chunk in client.stream_text(path, params, headers):
        pending += chunk
        while "\n" in pending:
            line, pending = pending.split("\n", 1)
            if not line.strip():
                continue
            event = json.loads(line)
            obj = event.get("object") or {}
            if event.get("type") == "ERROR":
                if obj.get("code") == 410:
                    raise _Expired()
                raise CliError(f"error: {obj.get('message', 'the watch failed')}")
            if event.get("type") == "BOOKMARK":
                continue
            if as_table:
                printer.table(obj, header=not printer.widths)
                version = str((obj.get("metadata") or {}).get("resourceVersion") or version)
            else:
                printer.obj(obj)
                version = str((obj.get("metadata") or {}).get("resourceVersion", version))
    return version
