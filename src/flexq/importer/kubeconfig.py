"""A kubeconfig context, resolved as kubectl resolves it, to an HTTP client for the cluster's API.

The context names a cluster (``server``; ``certificate-authority`` or ``-data``;
``insecure-skip-tls-verify``) and a user: a bearer ``token`` or ``tokenFile``, a client certificate
(``client-certificate``/``client-key``, or their ``-data``), ``username``/``password``, or an ``exec``
plugin, run as kubectl runs it (``KUBERNETES_EXEC_INFO`` set, ``env`` added, the ExecCredential's
``status.token`` or client certificate used). That is how GKE's kubeconfig entries authenticate:
``gke-gcloud-auth-plugin`` is such a plugin. Relative paths are read from the kubeconfig's directory.
``KUBECONFIG`` may list several files (``:``-separated); the first that defines a name wins, as kubectl
merges them.
"""

from __future__ import annotations

import base64
import json
import os
import ssl
import subprocess
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import yaml

from flexq.errors import FlexqError

__all__ = ["KubeconfigError", "Target", "client", "load_target"]


class KubeconfigError(FlexqError):
    """A kubeconfig that cannot reach a cluster; the message names the file, context and field."""


@dataclass(frozen=True)
class Target:
    """Where a context points and how it authenticates."""

    context: str
    server: str
    ca_pem: bytes | None = None
    insecure: bool = False
    headers: Mapping[str, str] = field(default_factory=dict)
    client_cert: tuple[bytes, bytes] | None = None  # PEM certificate and key


def _files(path: Path | None) -> list[Path]:
    if path is not None:
        return [path]
    listed = os.environ.get("KUBECONFIG")
    if listed:
        return [Path(p) for p in listed.split(os.pathsep) if p]
    return [Path.home() / ".kube" / "config"]


def _named(configs: list[tuple[Path, dict[str, Any]]], section: str, name: str) -> tuple[Path, dict[str, Any]]:
    key = section[:-1]  # clusters -> cluster, users -> user, contexts -> context
    for path, config in configs:
        for entry in config.get(section) or []:
            if isinstance(entry, dict) and entry.get("name") == name:
                return path, dict(entry.get(key) or {})
    where = ", ".join(str(p) for p, _ in configs)
    raise KubeconfigError(f"{where}: no {key} named {name!r} in {section}")


def load_target(context: str | None, path: Path | None = None) -> Target:
    """The target of ``context`` (default: ``current-context``) in the kubeconfig at ``path`` (or KUBECONFIG)."""
    configs: list[tuple[Path, dict[str, Any]]] = []
    for file in _files(path):
        try:
            loaded = yaml.safe_load(file.read_text(encoding="utf-8"))
        except FileNotFoundError:
            if path is not None:
                raise KubeconfigError(f"--kubeconfig {file}: no such file") from None
            continue
        except (OSError, UnicodeDecodeError) as exc:
            raise KubeconfigError(f"{file}: cannot read: {exc}") from None
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            line = f" line {mark.line + 1}" if mark is not None else ""
            raise KubeconfigError(f"{file}{line}: not YAML: {getattr(exc, 'problem', exc)}") from None
        if not isinstance(loaded, dict):
            raise KubeconfigError(f"{file}: expected a kubeconfig (a mapping with clusters, users, contexts)")
        configs.append((file, loaded))
    if not configs:
        raise KubeconfigError("no kubeconfig found: pass --kubeconfig PATH or set KUBECONFIG")
    name = context or next((c.get("current-context") for _, c in configs if c.get("current-context")), None)
    if not name:
        raise KubeconfigError(f"{configs[0][0]}: no current-context; pass --context NAME")
    _, ctx = _named(configs, "contexts", str(name))
    if not ctx.get("cluster"):
        raise KubeconfigError(f"{configs[0][0]}: context {name!r}: contexts[].context.cluster is missing")
    base, cluster = _named(configs, "clusters", str(ctx["cluster"]))
    server = cluster.get("server")
    if not isinstance(server, str) or not server.startswith(("http://", "https://")):
        raise KubeconfigError(f"{base}: cluster {ctx['cluster']!r}: clusters[].cluster.server must be an "
                              f"http(s) URL, got {server!r}")
    ca = _bytes(cluster, "certificate-authority", base)
    user: dict[str, Any] = {}
    if ctx.get("user"):
        base, user = _named(configs, "users", str(ctx["user"]))
    headers, cert = _credentials(user, base, str(ctx.get("user", "")))
    return Target(str(name), server.rstrip("/"), ca, bool(cluster.get("insecure-skip-tls-verify")), headers, cert)


def _bytes(entry: Mapping[str, Any], key: str, base: Path) -> bytes | None:
    data = entry.get(f"{key}-data")
    if data:
        try:
            return base64.b64decode(str(data), validate=True)
        except ValueError:
            raise KubeconfigError(f"{base}: {key}-data is not base64") from None
    if entry.get(key):
        file = base.parent / str(entry[key])
        try:
            return file.read_bytes()
        except OSError as exc:
            raise KubeconfigError(f"{base}: {key}: cannot read {file}: {exc.strerror}") from None
    return None


def _credentials(user: Mapping[str, Any], base: Path, name: str) -> tuple[dict[str, str],
                                                                         tuple[bytes, bytes] | None]:
    cert, key = _bytes(user, "client-certificate", base), _bytes(user, "client-key", base)
    pair = (cert, key) if cert and key else None
    token = user.get("token")
    if not token and user.get("tokenFile"):
        token = (_bytes({"t": user["tokenFile"]}, "t", base) or b"").decode().strip()
    if not token and isinstance(user.get("exec"), dict):
        token, pair = _exec(user["exec"], base, name, pair)
    if token:
        return {"Authorization": f"Bearer {token}"}, pair
    if user.get("username") is not None:
        basic = base64.b64encode(f"{user['username']}:{user.get('password', '')}".encode()).decode()
        return {"Authorization": f"Basic {basic}"}, pair
    return {}, pair


def _exec(spec: Mapping[str, Any], base: Path, name: str,
          pair: tuple[bytes, bytes] | None) -> tuple[str | None, tuple[bytes, bytes] | None]:
    command = spec.get("command")
    if not command:
        raise KubeconfigError(f"{base}: user {name!r}: users[].user.exec.command is missing")
    api_version = str(spec.get("apiVersion") or "client.authentication.k8s.io/v1")
    env = dict(os.environ)
    for entry in spec.get("env") or []:
        env[str(entry["name"])] = str(entry["value"])
    env["KUBERNETES_EXEC_INFO"] = json.dumps({"apiVersion": api_version, "kind": "ExecCredential",
                                              "spec": {"interactive": False}})
    argv = [str(command), *(str(a) for a in spec.get("args") or [])]
    try:
        done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60, check=False,
                              cwd=base.parent)
    except FileNotFoundError:
        hint = f" ({spec['installHint']})" if spec.get("installHint") else ""
        raise KubeconfigError(f"{base}: user {name!r}: exec plugin {command!r} not found{hint}") from None
    except subprocess.TimeoutExpired:
        raise KubeconfigError(f"{base}: user {name!r}: exec plugin {command!r} did not answer in 60 s") from None
    if done.returncode != 0:
        raise KubeconfigError(f"{base}: user {name!r}: exec plugin {command!r} exited {done.returncode}: "
                              f"{done.stderr.strip()[:500]}")
    try:
        status = json.loads(done.stdout).get("status") or {}
    except (ValueError, AttributeError):
        raise KubeconfigError(f"{base}: user {name!r}: exec plugin {command!r} printed no ExecCredential") from None
    if status.get("clientCertificateData") and status.get("clientKeyData"):
        pair = (str(status["clientCertificateData"]).encode(), str(status["clientKeyData"]).encode())
    return status.get("token"), pair


@contextmanager
def client(target: Target, timeout: float = 30.0) -> Iterator[httpx.Client]:
    """An httpx client for ``target``: its CA (else the system's), its credentials."""
    with tempfile.TemporaryDirectory(prefix="flexq-kube-") as folder:
        verify: ssl.SSLContext | bool = not target.insecure
        if target.server.startswith("https://") and not target.insecure:
            context = ssl.create_default_context()
            try:
                if target.ca_pem:
                    context.load_verify_locations(cadata=target.ca_pem.decode("ascii", "replace"))
            except (ssl.SSLError, ValueError) as exc:
                raise KubeconfigError(f"context {target.context!r}: certificate-authority(-data) holds no usable "
                                      f"PEM certificate ({exc})") from None
            if target.client_cert:
                # ssl reads a client certificate only from files: they live in a private folder until closed.
                cert, key = Path(folder) / "client.crt", Path(folder) / "client.key"
                cert.write_bytes(target.client_cert[0])
                key.write_bytes(target.client_cert[1])
                try:
                    context.load_cert_chain(cert, key)
                except (ssl.SSLError, ValueError) as exc:
                    raise KubeconfigError(f"context {target.context!r}: client-certificate/client-key do not make "
                                          f"a usable pair ({exc})") from None
            verify = context
        with httpx.Client(base_url=target.server, headers=dict(target.headers), verify=verify,
                          timeout=timeout) as http:
            yield http
