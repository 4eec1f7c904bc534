"""``flexq import``: a real cluster's queues and recent Workloads as a scenario, for ``flexq simulate``."""

from __future__ import annotations

import datetime
import os
import sys
import tempfile
from pathlib import Path
from typing import Annotated

import typer

from flexq.client import CliError

__all__ = ["import_cluster"]


def import_cluster(
    capacity: Annotated[Path, typer.Option("--capacity", help="Capacity file: node pools and the emulated cloud "
                                                              "(the format of a scenario's spec.capacity).")],
    context: Annotated[str | None, typer.Option("--context", "--from-context",
                                                help="kubeconfig context (default: its current-context).")]
    = None,
    kubeconfig: Annotated[Path | None, typer.Option("--kubeconfig", help="kubeconfig file (default: KUBECONFIG, "
                                                                          "else ~/.kube/config).")] = None,
    out: Annotated[str, typer.Option("--out", "-o", help="Scenario file to write (- for stdout).")]
    = "imported-scenario.yaml",
    since: Annotated[str, typer.Option("--since", help="Workloads created this long ago or later (7d, 12h; "
                                                       "all: every Workload).")] = "7d",
    run_for: Annotated[str, typer.Option("--run-for", help="How long a Workload that has not finished runs.")]
    = "1h",
) -> None:
    """Read a real cluster's queues and recent Workloads (through a kubeconfig context) into a scenario.

    Then `flexq simulate FILE` replays them in virtual time under the capacity file: what if the
    cluster had these pools, this cloud, these queues?
    """
    from flexq.api import load_documents
    from flexq.durations import DurationError, parse_duration
    from flexq.importer import ClusterReadError, KubeconfigError, build_scenario, client, load_target, read_cluster
    from flexq.sim import load_capacity, read_text

    try:
        window = None if since == "all" else parse_duration(since)
        default_run = parse_duration(run_for)
    except DurationError as exc:
        raise CliError(f"error: --since/--run-for: {exc}") from None
    load_capacity(capacity)  # refuses a bad file with its line and field, before the cluster is read
    raw = load_documents(read_text(capacity, str(capacity)), str(capacity))[0].obj
    try:
        target = load_target(context, kubeconfig)
        with client(target) as http:
            state = read_cluster(http)
    except (KubeconfigError, ClusterReadError) as exc:
        raise CliError(f"error: {exc}") from None
    name = Path(out).stem if out != "-" else target.context
    imported = build_scenario(state, raw, name=name, context=target.context,
                              now=datetime.datetime.now(datetime.UTC), since=window, run_for=default_run)
    for line in imported.skipped:
        typer.echo(f"warning: skipped {line}", err=True)
    if out == "-":
        sys.stdout.write(imported.text)
    else:
        _write(Path(out), imported.text)
    typer.echo(f"{imported.objects} objects and {imported.jobs} jobs ({imported.finished} finished) from "
               f"{state.server} (context {target.context})" + (f" written to {out}; replay: flexq simulate {out}"
                                                               if out != "-" else ""), err=True)


def _write(path: Path, text: str) -> None:
    """Write the whole file or nothing: a temporary file beside it, renamed over it."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, temp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
        try:
            with os.fdopen(handle, "w", encoding="utf-8") as stream:
                stream.write(text)
            os.replace(temp, path)
        except BaseException:
            Path(temp).unlink(missing_ok=True)
            raise
    except OSError as exc:
        raise CliError(f"error: --out {path}: {exc.strerror or exc}") from None
