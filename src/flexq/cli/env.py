"""``flexq env`` and ``flexq kubeconfig``: point kubectl, gcloud and flexq at the server."""

from __future__ import annotations

import base64
import os
import shlex
from pathlib import Path
from typing import Annotated

import typer

from flexq.cli import options
from flexq.cli.kubeconfigs import kubeconfig_text, secure_endpoint
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
    gcloud, trust = _gcloud_config(home / "gcloud", server_url, project)
    exports = {"FLEXQ_SERVER": server_url, "KUBECONFIG": str(kubeconfig_path), "CLOUDSDK_CONFIG": str(gcloud)}
    if trust is not None:
        # gcloud's own variable outranks its configuration; and its HTTP library takes REQUESTS_CA_BUNDLE over both
        # where the environment sets it: both name the bundle that holds the server's CA (and what that one held).
        exports["CLOUDSDK_CORE_CUSTOM_CA_CERTS_FILE"] = str(trust)
        if os.environ.get("REQUESTS_CA_BUNDLE"):
            exports["REQUESTS_CA_BUNDLE"] = str(trust)
    typer.echo("\n".join(f"export {key}={shlex.quote(value)}" for key, value in exports.items()))


def _gcloud_config(gcloud: Path, server_url: str, project: str) -> tuple[Path, Path | None]:
    """Write a gcloud configuration directory whose API endpoints are the server's HTTPS endpoint, trusting its CA
    (plain HTTP where it serves no HTTPS); return it, and the CA bundle gcloud is to trust (None: plain HTTP)."""
    (gcloud / "configurations").mkdir(mode=0o700, parents=True, exist_ok=True)
    gcloud.chmod(0o700)
    (gcloud / "active_config").write_text("default", encoding="utf-8")
    # gcloud sends the caller's token: to the server that holds the CA's key, never in clear to whatever holds the
    # plain HTTP port (a program that took it after the server died).
    secure, ca = secure_endpoint(server_url)
    bundle: Path | None = None
    trust = ""
    if ca is not None:
        bundle = gcloud / "ca.crt"
        pem = base64.b64decode(ca).decode("ascii")
        inherited = os.environ.get("REQUESTS_CA_BUNDLE", "")
        if inherited and Path(inherited) == bundle:  # a second `eval "$(flexq env)"`: the bundle it named before
            inherited = (gcloud / "ca.inherited").read_text(encoding="utf-8").strip() \
                if (gcloud / "ca.inherited").is_file() else ""
        if inherited and Path(inherited).is_file():
            pem += "\n" + Path(inherited).read_text(encoding="ascii", errors="ignore")
            write_private(gcloud / "ca.inherited", inherited)
        write_private(bundle, pem)
        server_url, trust = secure.rstrip("/"), f"custom_ca_certs_file = {bundle}\n"
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
        f"{trust}"
        "[auth]\n"
        f"access_token_file = {token}\n"
        "[component_manager]\n"
        "disable_update_check = true\n"
        "[api_endpoint_overrides]\n"
        f"container = {server_url}/\n"
        f"cloudresourcemanager = {server_url}/\n"
        f"serviceusage = {server_url}/\n", encoding="utf-8")
    return gcloud, bundle
