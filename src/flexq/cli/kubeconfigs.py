"""Kubeconfigs that point kubectl at a flexq server: over HTTPS with its CA where the server serves it.

kubectl sends a bearer token only over HTTPS, so a kubeconfig carrying the caller's token names the server's
HTTPS endpoint and embeds its CA (both from the server's public ``/flexq/v1/cluster-info``, asked the way flexq's
CLI would send the token: what answers is trusted with it). A server that serves plain HTTP only, or one not
running yet, gets the plain URL, which serves anonymous mode.
"""

from __future__ import annotations

from typing import Any

import httpx

from flexq.cli.printers import to_yaml
from flexq.client import CliError, route
from flexq.config import caller_token

__all__ = ["kubeconfig_text", "secure_endpoint"]


def secure_endpoint(server_url: str) -> tuple[str, str | None]:
    """The URL kubectl should use for ``server_url`` and the base64 CA data to verify it with (None: plain)."""
    try:
        with route(server_url).client(5) as http:
            info: Any = http.get("/flexq/v1/cluster-info").json()
    except (httpx.HTTPError, ValueError, CliError):
        return server_url, None
    if isinstance(info, dict) and isinstance(info.get("server"), str) and info.get("certificateAuthorityData"):
        return info["server"], str(info["certificateAuthorityData"])
    return server_url, None


def kubeconfig_text(server_url: str) -> str:
    url, ca = secure_endpoint(server_url)
    cluster: dict[str, str] = {"server": url}
    if ca is not None:
        cluster["certificate-authority-data"] = ca
    token = caller_token()
    return to_yaml({
        "apiVersion": "v1", "kind": "Config", "current-context": "flexq", "preferences": {},
        "clusters": [{"name": "flexq", "cluster": cluster}],
        "users": [{"name": "flexq", "user": {"token": token} if token else {}}],
        "contexts": [{"name": "flexq", "context": {"cluster": "flexq", "user": "flexq", "namespace": "default"}}],
    })
