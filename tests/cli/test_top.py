"""``flexq top --once`` against a live server running the guide's flow with emulated capacity."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import guide_text
from tests.support import cli, condition, eventually, guide_setup, serve_capacity, workloads

CAPACITY = """cloud:
  on-demand-pool: {available: 4, bootTime: 1s}
  dws-pool: {queuedDelay: 1h}
  default-pool: {bootTime: 1s}
"""


def test_top_shows_queues_pools_and_why_each_job_waits(tmp_path: Path) -> None:
    servers = serve_capacity(tmp_path, CAPACITY)
    srv = next(servers)
    try:
        guide_setup(srv, guide_text("dws-tpu-queue.yaml"))
        eventually(lambda: _assert(condition(workloads(srv)["rayjob-tpu-v6e-dws-1"], "Admitted") == "True"))

        def shown() -> str:
            out = cli(srv, "top", "--once")
            assert out.returncode == 0, out.stderr
            text = out.stdout
            assert "cluster-queue" in text and "on-demand-pool" in text and "dws-pool" in text
            lines = text.splitlines()
            tpu = next(line for line in lines if "on-demand" in line and "google.com/tpu" in line)
            assert "16/16" in tpu and "████████████" in tpu, tpu
            pool = next(line for line in lines if line.split()[:1] == ["on-demand-pool"])
            assert pool.split()[2:5] == ["4", "4", "0"], pool  # nodes, ready, booting
            waiting = next(line for line in lines if "rayjob-rayjob-tpu-v6e-dws-2-" in line)
            assert "racing: dws: waiting for ProvisioningRequest" in waiting, waiting
            assert not any("-variant-" in line for line in lines), "variants are summed up in their workload's row"
            return text

        eventually(shown)
        bad = cli(srv, "top", "--interval", "0")
        assert bad.returncode == 2 and "--interval" in bad.stderr and "Traceback" not in bad.stderr
    finally:
        servers.close()


def _assert(ok: bool) -> None:
    assert ok
