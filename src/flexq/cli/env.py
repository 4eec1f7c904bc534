"""``flexq env`` and ``flexq kubeconfig``: point kubectl, gcloud and flexq at the server."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from flexq.cli import options
from flexq.cli.kubeconfigs import kubeconfig_text
from flexq.config import caller_token, flexq_home, write_private

__all__ = ["env", "kubeconfig"]


def kubeconfig(
    write: Annotated[Path | None, typer.Option("--write", "-w", help="Write to this file instead of stdout.")] = None,
) -> None:
    """Print (or write) a kubeconfig that points kubectl at the flexq server."""
    text = kubeconfig_text(options.server_url())
    if "server: http://" in text and caller_token():
        typer.echo("note: the server serves plain HTTP only (--no-tls), over which kubectl sends no token: it will "
                   "be refused unless the server runs with --auth anonymous", err=True)
    if write is None:
        typer.echo(text, nl=False)
        return
    write_private(write, text)  # it holds the caller's token: 0600, as kubectl's own
    typer.echo(f"wrote {write}", err=True)


def env(
    project: Annotated[str, typer.Option(help="The gcloud project to use.")] = "demo",
) -> None:
    """Print shell exports that point kubectl, gcloud and flexq at the server: eval "$(flexq env)".

    Your own gcloud and kubectl configuration is left alone: gcloud gets a configuration directory of
    flexq's own (CLOUDSDK_CONFIG) and kubectl a kubeconfig of flexq's own (KUBECONFIG), both under FLEXQ_HOME.
    """
    home = flexq_home()  # made, 0700, with the kubeconfig where it is not there yet
    server_url = options.server_url().rstrip("/")
    kubeconfig_path = home / "kubeconfig"
    write_private(kubeconfig_path, kubeconfig_text(server_url))
    gcloud = _gcloud_config(home / "gcloud", server_url, project)
    typer.echo(f"export FLEXQ_SERVER={server_url}\nexport KUBECONFIG={kubeconfig_path}\n"
               f"export CLOUDSDK_CONFIG={gcloud}")


def _gcloud_config(gcloud: Path, server_url: str, project: str) -> Path:
    """Write a gcloud configuration directory whose API endpoints are the server's; return it."""
    (gcloud / "configurations").mkdir(mode=0o700, parents=True, exist_ok=True)
    gcloud.chmod(0o700)
    (gcloud / "active_config").write_text("default", encoding="utf-8")
    token = gcloud / "access-token"
    write_private(token, (caller_token() or "anonymous") + "\n")
    # The caller's flexq token as gcloud's access token: gcloud sends it to the GKE API, and
    # gke-gcloud-auth-plugin hands it to kubectl after get-credentials. Without one ("anonymous"), a server in
    # anonymous mode takes the caller for the administrator and one that requires tokens refuses it.
    (gcloud / "configurations" / "config_default").write_text(
        "[core]\n"
        f"project = {project}\n"
        "account = flexq@local\n"
        "disable_prompts = true\n"
        "disable_usage_reporting = true\n"
        "[auth]\n"
        f"access_token_file = {token}\n"
        "[component_manager]\n"
        "disable_update_check = true\n"
        "[api_endpoint_overrides]\n"
        f"container = {server_url}/\n"
        f"cloudresourcemanager = {server_url}/\n"
        f"serviceusage = {server_url}/\n", encoding="utf-8")
    return gcloud
