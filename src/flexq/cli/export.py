"""``flexq export gke``: the gcloud commands and manifests that set up, on real GKE, what flexq holds."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from flexq.cli import options
from flexq.client import CliError

__all__ = ["export_app"]

export_app = typer.Typer(help="Export flexq's setup to run it elsewhere (gke).", no_args_is_help=True)


@export_app.command("gke")
def gke(
    out: Annotated[Path, typer.Option("--out", "-o", help="Directory to write cluster.sh, kueue.yaml, "
                                                          "jobs.yaml into (made if missing).")] = Path("gke"),
    project: Annotated[str | None, typer.Option("--project", help="GCP project (else the cluster's, else "
                                                                   "gcloud's current one when the script runs).")]
    = None,
    location: Annotated[str | None, typer.Option("--location", "--zone", "--region",
                                                 help="Zone or region (else the cluster's).")] = None,
    cluster: Annotated[str | None, typer.Option("--cluster", help="The cluster to export, when flexq holds "
                                                                   "several.")] = None,
    kueue_version: Annotated[str | None, typer.Option("--kueue-version", help="v1beta1 or v1beta2 for every "
                                                      "Kueue object (default: the version each was applied in).")]
    = None,
    include_finished: Annotated[bool, typer.Option("--include-finished", help="Export finished jobs too.")]
    = False,
) -> None:
    """Write the gcloud commands (cluster, node pools), Kueue's manifests and the jobs, for real GKE."""
    from flexq.export import ExportError, build, write

    client = options.client()
    try:
        export = build(client, project=project, location=location, cluster=cluster, kueue_version=kueue_version,
                       include_finished=include_finished)
        paths = write(export, out)
    except ExportError as exc:
        raise CliError(f"error: {exc}") from None
    except OSError as exc:
        raise CliError(f"error: --out {out}: {exc.strerror or exc}") from None
    finally:
        client.close()
    counts = ", ".join(f"{n} {kind}" for kind, n in export.counts.items()) or "no objects"
    typer.echo(f"wrote {', '.join(str(p) for p in paths)} ({counts}).\nOn GKE: bash {out / 'cluster.sh'}", err=True)
