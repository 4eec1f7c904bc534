"""``flexq top --once`` against a live server running the guide's flow with emulated capacity."""

from __future__ import annotations

import contextlib
import os
import pty
import select
import subprocess
import sys
import time
from pathlib import Path

from tests import forks
from tests.conftest import Server, guide_text
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

        # Into a pipe with no COLUMNS set (a shell or a test runner may export one), the overview is as wide
        # as it needs.
        wide = {k: v for k, v in srv.env().items() if k not in ("COLUMNS", "LINES")}

        def shown() -> str:
            out = forks.run(["top", "--once"], text=True, env=wide, timeout=60)
            assert out.returncode == 0, out.stderr
            text = out.stdout
            assert "cluster-queue" in text and "on-demand-pool" in text and "dws-pool" in text
            lines = text.splitlines()
            # (a line not there yet is an assertion too: eventually() asks again)
            tpu = next((line for line in lines if "on-demand" in line and "google.com/tpu" in line), "")
            assert "16/16" in tpu and "████████████" in tpu, text
            pool = next((line for line in lines if line.split()[:1] == ["on-demand-pool"]), "")
            assert pool.split()[2:5] == ["4", "4", "0"], text  # nodes, ready, booting
            waiting = next((line for line in lines if "rayjob-rayjob-tpu-v6e-dws-2-" in line), "")
            assert "racing: dws: waiting for ProvisioningRequest" in waiting, waiting
            assert not any("-variant-" in line for line in lines), "variants are summed up in their workload's row"
            return text

        eventually(shown)
        narrow = subprocess.run([sys.executable, "-m", "flexq.cli.main", "top", "--once"], capture_output=True,
                                text=True, env={**srv.env(), "COLUMNS": "80"}, timeout=60, check=False)
        assert narrow.returncode == 0 and max(len(line) for line in narrow.stdout.splitlines()) <= 80
        names = [line.split()[0] for line in narrow.stdout.splitlines() if line.strip()]
        assert "cluster-queue" in names and "on-demand-pool" in names, narrow.stdout
        assert any(n.startswith("rayjob-rayjob-tpu-v6e-dws-2-") and len(n) > 30 for n in names), "names kept whole"
        _quits_on_q(srv)
        bad = cli(srv, "top", "--interval", "0")
        assert bad.returncode == 2 and "--interval" in bad.stderr and "Traceback" not in bad.stderr
    finally:
        servers.close()


def _assert(ok: bool) -> None:
    assert ok


def _quits_on_q(srv: Server) -> None:
    """Live in a terminal: a header says when it was refreshed and how to quit; pressing q quits."""
    main, side = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "flexq.cli.main", "top", "--interval", "1"], stdin=side,
                            stdout=side, stderr=side, env={**srv.env(), "COLUMNS": "100", "TERM": "xterm"})
    os.close(side)
    seen = b""
    try:
        deadline = time.monotonic() + 60
        while b"q or Ctrl-C to quit" not in seen:
            assert time.monotonic() < deadline and proc.poll() is None, seen.decode(errors="replace")
            if select.select([main], [], [], 0.5)[0]:
                seen += os.read(main, 65536)
        os.write(main, b"q")
        assert proc.wait(timeout=15) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        with contextlib.suppress(OSError):
            while select.select([main], [], [], 0)[0] and os.read(main, 65536):
                pass
        os.close(main)
