"""A real Prometheus (Debian's ``prometheus``, installed by ``.ci/run`` where the machine allows) scrapes a live
server with the administrator's token and answers a PromQL query on a Kueue metric as it would for Kueue."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from tests import admin
from tests.conftest import Server, free_port, guide_text
from tests.support import cli_ok, eventually

PROMETHEUS = shutil.which("prometheus")


@pytest.mark.skipif(PROMETHEUS is None, reason="no prometheus binary (apt-get install prometheus; .ci/run does)")
def test_prometheus_scrapes_kueue_metrics_and_answers_promql(server: Server, tmp_path: Path) -> None:
    assert PROMETHEUS is not None
    cli_ok(server, "apply", "-f", "-", input=guide_text("dws-tpu-queue.yaml"))
    port = free_port()
    config = tmp_path / "prometheus.yml"
    config.write_text(yaml.safe_dump({
        "global": {"scrape_interval": "1s", "scrape_timeout": "1s"},
        "scrape_configs": [{
            "job_name": "flexq", "metrics_path": "/metrics",
            "authorization": {"credentials": admin.token_of(server.home)},
            "static_configs": [{"targets": [server.url.removeprefix("http://")]}]}]}))
    log = tmp_path / "prometheus.log"
    with log.open("wb") as out:
        proc = subprocess.Popen([PROMETHEUS, f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                                 f"--web.listen-address=127.0.0.1:{port}"], stdout=out, stderr=subprocess.STDOUT)
    try:
        def query(promql: str) -> list[dict[str, Any]]:
            answer = httpx.get(f"http://127.0.0.1:{port}/api/v1/query", params={"query": promql}, timeout=5).json()
            assert answer["status"] == "success", answer
            result: list[dict[str, Any]] = answer["data"]["result"]
            return result

        def ready() -> None:
            assert proc.poll() is None, log.read_text()
            try:
                answer = httpx.get(f"http://127.0.0.1:{port}/-/ready", timeout=5)
            except httpx.TransportError as exc:
                raise AssertionError(f"Prometheus is not listening yet: {exc}") from exc
            assert answer.status_code == 200, answer.text

        def quota() -> list[dict[str, Any]]:
            found = query('sum by (cluster_queue, flavor) '
                          '(kueue_cluster_queue_nominal_quota{resource="google.com/tpu", replica_role="standalone"})')
            assert found, "not scraped yet"
            return found

        eventually(ready, timeout=30)
        by_flavor = {r["metric"]["flavor"]: float(r["value"][1]) for r in eventually(quota, timeout=30)}
        assert by_flavor == {"default-cpu": 0.0, "on-demand": 16.0, "dws": 1e9}
        active = query('kueue_cluster_queue_status{cluster_queue="cluster-queue"} == 1')
        assert [r["metric"]["status"] for r in active] == ["active"]
        up = query('up{job="flexq"}')
        assert [float(r["value"][1]) for r in up] == [1.0], "the scrape succeeds (a good token, a parsable text)"
    finally:
        proc.terminate()
        proc.wait(timeout=10)
