"""``flexq server``: serve the Kubernetes API, the GKE API and flexq's API until interrupted."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from flexq.client import CliError
from flexq.config import DEFAULT_HOST, DEFAULT_PORT, flexq_home

if TYPE_CHECKING:
    from flexq.api import KueueConfig

__all__ = ["server"]


def server(
    host: Annotated[str, typer.Option(help="Address to listen on (loopback by default; any other needs tokens and "
                                           "TLS).")] = DEFAULT_HOST,
    port: Annotated[int, typer.Option(help="Port for plain HTTP (flexq's CLI; on loopback only).")] = DEFAULT_PORT,
    home: Annotated[Path | None, typer.Option(help="State directory (env FLEXQ_HOME).")] = None,
    log_level: Annotated[str, typer.Option(help="critical, error, warning, info or debug.")] = "warning",
    capacity: Annotated[Path | None, typer.Option(
        help="The emulated cloud's behaviour (the format of a scenario's spec.capacity: cloud, timings); read again "
             "on SIGHUP (kill -HUP), its times still counted from the server's start.")] = None,
    runtime: Annotated[str, typer.Option(help="ray: run admitted RayJobs on local Ray clusters; none: do not.")]
    = "ray",
    tls_port: Annotated[int | None, typer.Option(
        help="Port for HTTPS, the endpoint gcloud's get-credentials points kubectl at (default: --port + 1; "
             "0: any free port).")] = None,
    no_tls: Annotated[bool, typer.Option("--no-tls", help="Serve plain HTTP only (loopback only).")] = False,
    auth: Annotated[str | None, typer.Option(
        help="token: every request needs a token (the default; flexq's CLI, flexq env and flexq kubeconfig present "
             "the administrator's); anonymous (loopback only): a caller without a token is the administrator, "
             "whoever they are: any local user and any program.")] = None,
    allowed_host: Annotated[list[str] | None, typer.Option(
        "--allowed-host", help="Another name the server answers to (a request naming any other is refused: DNS "
                               "rebinding). Repeatable; * for any (behind a proxy that rewrites Host).")] = None,
    store: Annotated[str | None, typer.Option(
        envvar="FLEXQ_STORE",
        help="Where objects live: postgresql://USER@HOST:PORT/DB (shared by several servers; one leads the "
             "controllers) or sqlite:///PATH (default: FLEXQ_HOME/flexq.db).")] = None,
    lease_duration: Annotated[str, typer.Option(
        help="With PostgreSQL or --shared: how long the leader's lease lasts without renewal; another server "
             "takes over within it when the leader dies.")] = "15s",
    shared: Annotated[bool, typer.Option(
        "--shared", help="Other servers use the same SQLite file: follow their writes and elect one of them to "
                         "run the controllers (as with PostgreSQL). Each server needs a FLEXQ_HOME of its own.")]
    = False,
    run_as: Annotated[str | None, typer.Option(help=_RUN_AS_HELP)] = None,
    job_uids: Annotated[str | None, typer.Option(help=_JOB_UIDS_HELP)] = None,
    event_ttl: Annotated[str, typer.Option(
        help="How long Events are kept after they were last seen, as the API server's --event-ttl (0: kept).")]
    = "1h",
    kueue_config: Annotated[Path | None, typer.Option(help=_KUEUE_CONFIG_HELP)] = None,
    workers: Annotated[int, typer.Option(help=_WORKERS_HELP, min=0)] = 0,
) -> None:
    """Serve the Kubernetes API, the GKE API and flexq's API until interrupted."""
    from flexq.runtime import JobUserError
    from flexq.server import CapacityFile, ListenError, plan_listeners, serve
    from flexq.sim import load_capacity
    from flexq.store import StoreOptionError, StoreUnavailable

    if runtime not in ("ray", "none"):
        raise CliError(f"error: --runtime {runtime!r}: expected ray or none")
    state, lease, ttl = home or flexq_home(), _lease(lease_duration), _duration("--event-ttl", event_ttl)
    _job_uids(job_uids)
    try:
        plan = plan_listeners(host, port, tls_port, not no_tls, auth, tuple(allowed_host or ()))
        modelled = CapacityFile((lambda: load_capacity(capacity)) if capacity is not None else None)
        serve(state, plan, log_level=log_level, capacity=modelled, runtime=runtime, store_spec=store,
              lease_duration=lease, event_ttl=ttl, shared=shared, run_as=run_as, kueue=_kueue_config(kueue_config),
              workers=workers)
    except (ListenError, StoreOptionError, StoreUnavailable, JobUserError) as exc:  # StoreUnavailable: its first writes
        raise CliError(f"error: {exc}") from None


_RUN_AS_HELP = ("Where the server runs as root: one user every namespace's jobs run as (by default each namespace's "
                "jobs run as a user of its own, from --job-uids), apart from the server's token, CA key and store; "
                "root: as the server itself.")
_JOB_UIDS_HELP = ("Where the server runs as root: the uids namespaces' job users are given, START-END (default "
                  "1500000000-1500065535; a uid a user of this machine has is skipped).")


def _job_uids(text: str | None) -> None:
    """``--job-uids``: the range namespaces' job users are given from."""
    if text is None:
        return
    from flexq.runtime import choose_uids, parse_uid_range
    try:
        choose_uids(parse_uid_range(text))
    except ValueError as exc:
        raise CliError(f"error: --job-uids {exc}") from None


_WORKERS_HELP = ("API worker processes that serve the ports (they parse, authenticate, validate, and serve reads and "
                 "watches) while this one owns the store and runs the controllers; 0: this process serves everything.")
_KUEUE_CONFIG_HELP = ("Kueue's Configuration file (config.kueue.x-k8s.io v1beta1 or v1beta2, as Kueue's manager "
                      "reads it): waitForPodsReady, resources.transformations and excludeResourcePrefixes, "
                      "integrations.frameworks, featureGates. Default: Kueue v0.19's defaults.")


def _kueue_config(path: Path | None) -> KueueConfig:
    """``--kueue-config``, its fields that change nothing in flexq warned about by name on stderr."""
    from flexq.api import DEFAULT_KUEUE_CONFIG, load_kueue_config

    if path is None:
        return DEFAULT_KUEUE_CONFIG
    config = load_kueue_config(path)
    for warning in config.warnings:
        typer.echo(f"warning: {config.source}: {warning}", err=True)
    return config


def _duration(option: str, text: str) -> float:
    from flexq.durations import DurationError, parse_duration

    try:
        return parse_duration(text)
    except DurationError as exc:
        raise CliError(f"error: {option}: {exc}") from None


def _lease(text: str) -> float:
    """``--lease-duration``, in seconds (at least one)."""
    lease = _duration("--lease-duration", text)
    if lease < 1:
        raise CliError(f"error: --lease-duration {text}: must be at least 1s")
    return lease
