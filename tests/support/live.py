"""A live server as its tests read it: the jobs' workloads and their conditions and flavors, the nodes, the CLI run
against it, the guide's setup, and a server with a capacity file."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tests import admin, forks
from tests.conftest import Server, guide_text, start_server, stop_server

WORKLOADS = "/apis/kueue.x-k8s.io/v1beta2/namespaces/default/workloads"


def workloads(server: Server) -> dict[str, dict[str, Any]]:
    """The jobs' workloads in ``default`` by job name (a racing workload's variants, owned by it, are left out)."""
    items = admin.get(server.url + WORKLOADS).json()["items"]
    return {w["metadata"]["ownerReferences"][0]["name"]: w for w in items
            if w["metadata"]["ownerReferences"][0]["kind"] != "Workload"}


def condition(wl: dict[str, Any], type_: str) -> str | None:
    """The status (``"True"``, ``"False"``) of a workload's condition of ``type_``; None where it has none."""
    return next((c["status"] for c in wl.get("status", {}).get("conditions", []) if c["type"] == type_), None)


def flavors(wl: dict[str, Any]) -> dict[str, set[str]]:
    """Pod set -> the flavors its admission gives it."""
    return {ps["name"]: set(ps["flavors"].values()) for ps in wl["status"]["admission"]["podSetAssignments"]}


def nodes(server: Server) -> dict[str, dict[str, Any]]:
    return {n["metadata"]["name"]: n for n in admin.get(server.url + "/api/v1/nodes").json()["items"]}


def get_rayjob(server: Server, name: str) -> dict[str, Any]:
    """The RayJob ``name`` in ``default`` as the server has it."""
    return dict(admin.get(f"{server.url}/apis/ray.io/v1/namespaces/default/rayjobs/{name}").json())


def assert_done(job: dict[str, Any]) -> None:
    assert job.get("status", {}).get("jobDeploymentStatus") in ("Complete", "Failed")


def cli(server: Server, *args: str, input: str | None = None, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """``flexq ARGS`` against ``server``, as the administrator; its exit code is the caller's to check."""
    return forks.run(args, input=input, text=True, env=server.env(), timeout=timeout)


def cli_ok(server: Server, *args: str, input: str | None = None) -> subprocess.CompletedProcess[str]:
    """``flexq ARGS`` against ``server``, which must succeed."""
    proc = cli(server, *args, input=input, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc


def guide_setup(srv: Server, queue: str, jobs: tuple[str, ...] = ("1", "2"), max_nodes: int = 4,
                here: bool = True) -> None:
    """The guide's cluster and pools (cluster.sh's flags, up to ``max_nodes`` nodes each), a queue, and jobs: made
    with flexq's CLI run in this process (:func:`_setup_cli`), or with ``here=False`` each command in a process of
    its own, as from a shell (a second or more apart on a loaded machine)."""
    run = _setup_cli if here else _setup_cli_process
    run(srv, "container", "clusters", "create", "tpu-cluster", "--machine-type=n2-standard-16", "--num-nodes=1")
    for pool, extra in (("on-demand-pool", []), ("dws-pool", ["--enable-queued-provisioning", "--flex-start"])):
        run(srv, "container", "node-pools", "create", pool, "--cluster=tpu-cluster", "--machine-type=ct6e-standard-4t",
            "--tpu-topology=4x4", "--enable-autoscaling", *extra, "--num-nodes=0", "--min-nodes=0",
            f"--max-nodes={max_nodes}")
    run(srv, "apply", "-f", "-", input=queue)
    for job_id in jobs:
        run(srv, "apply", "-f", "-", input=guide_text("rayjob-tpu-v6e-dws.yaml", JOB_ID=job_id))


def _setup_cli_process(server: Server, *args: str, input: str | None = None) -> None:
    cli_ok(server, *args, input=input)


def _setup_cli(server: Server, *args: str, input: str | None = None) -> None:
    """``flexq ARGS`` against ``server``, as the administrator, which must succeed: the same commands as
    :func:`cli_ok` runs, in this process. A test's setup, where the CLI's own process is not what it shows, is spared
    an interpreter's start and flexq's imports (most of a CLI call's second), and made before a server's real-clock
    window (a stock-out from its start) runs out, even on a loaded machine."""
    from typer.testing import CliRunner

    from flexq.cli.main import app
    from flexq.client import close_clients

    try:
        result = CliRunner().invoke(app, list(args), input=input,
                                    env={"FLEXQ_SERVER": server.url, "FLEXQ_HOME": str(server.home)})
    finally:
        close_clients()
    assert result.exit_code == 0 and result.exception is None, (args, result.output, result.exception)


def serve_capacity(tmp_path: Path, capacity: str) -> Iterator[Server]:
    """A server (jobs not executed) with the capacity file ``capacity``; stopped when the generator closes (one
    that does not start is stopped at once, and its error shown)."""
    path = tmp_path / "capacity.yaml"
    path.write_text(capacity)
    srv = start_server(tmp_path / "home", "--capacity", str(path), "--runtime", "none")
    try:
        yield srv
    finally:
        stop_server(srv)


def serve_kueue_config(tmp_path: Path, config: str) -> Iterator[Server]:
    """A server reading Kueue's Configuration ``config`` (``flexq server --kueue-config``); stopped when the generator
    closes."""
    path = tmp_path / "kueue.yaml"
    path.write_text(config)
    srv = start_server(tmp_path / "home", "--kueue-config", str(path))
    try:
        yield srv
    finally:
        stop_server(srv)
