"""``make screenshots``: pictures of the dashboard for the docs, taken in Chromium (Playwright) from a server of
their own.

The server runs the guide's setup (the cluster, its two TPU node pools, the queues, two RayJobs) in an emulated
cloud where DWS answers after ten minutes, with ``--runtime none`` (nothing is trained: the pictures are of the
queues, not of Ray). Job 1 then holds Plan A and job 2 waits on Plan B with a forecast. The guide's scenario is also
simulated into a report. Pictures: ``overview.png``, ``jobs.png``, ``job.png`` (job 2's page) and ``report.png``,
written into the folder given (``docs/images``). Takes about half a minute; the server and its state go at the end.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
GUIDE = ROOT / "examples" / "guide"
CAPACITY = """cloud:
  on-demand-pool: {available: 4, bootTime: 2s}
  dws-pool: {queuedDelay: 10m}
  default-pool: {bootTime: 1s}
"""
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--no-first-run", "--disable-sync"]


def main() -> None:
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "docs/images").resolve()
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        raise SystemExit("error: make screenshots needs chromium (apt-get install chromium)")
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="flexq-screenshots-") as folder:
        home = Path(folder) / "home"
        capacity = Path(folder) / "capacity.yaml"
        capacity.write_text(CAPACITY)
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        url = f"http://127.0.0.1:{port}"
        env = {**os.environ, "FLEXQ_SERVER": url, "FLEXQ_HOME": str(home)}
        server = subprocess.Popen([sys.executable, "-m", "flexq.cli.main", "server", "--port", str(port),
                                   "--tls-port", "0", "--runtime", "none", "--capacity", str(capacity)],
                                  env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            _ready(url, server)
            _setup(env, home)
            _pictures(url, home, chromium, out)
        finally:
            server.terminate()
            server.wait(timeout=20)


def _ready(url: str, server: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise SystemExit("error: flexq server exited during start-up")
        try:
            if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise SystemExit("error: flexq server did not become ready in time")


def _flexq(env: dict[str, str], *args: str, input: str | None = None) -> None:
    done = subprocess.run([sys.executable, "-m", "flexq.cli.main", *args], env=env, input=input, text=True,
                          capture_output=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"error: flexq {' '.join(args)}: {done.stderr.strip()}")


def _guide(name: str, **values: str) -> str:
    text = (GUIDE / name).read_text()
    for key, value in {"ONDEMAND_NODEPOOL": "on-demand-pool", "DWS_NODEPOOL": "dws-pool", **values}.items():
        text = text.replace("${" + key + "}", value)
    return text


def _setup(env: dict[str, str], home: Path) -> None:
    _flexq(env, "simulate", str(GUIDE / "scenario-capacity.yaml"), "--report", str(home / "reports" / "guide"),
           "--no-progress")
    _flexq(env, "container", "clusters", "create", "tpu-cluster", "--machine-type=n2-standard-16", "--num-nodes=1")
    for pool, extra in (("on-demand-pool", []), ("dws-pool", ["--enable-queued-provisioning", "--flex-start"])):
        _flexq(env, "container", "node-pools", "create", pool, "--cluster=tpu-cluster",
               "--machine-type=ct6e-standard-4t", "--tpu-topology=4x4", "--enable-autoscaling", *extra,
               "--num-nodes=0", "--min-nodes=0", "--max-nodes=4")
    _flexq(env, "apply", "-f", "-", input=_guide("dws-tpu-queue.yaml"))
    _flexq(env, "create", "configmap", "jax-train-script", f"--from-file={GUIDE / 'train.py'}")
    for job_id in ("1", "2"):
        _flexq(env, "apply", "-f", "-", input=_guide("rayjob-tpu-v6e-dws.yaml", JOB_ID=job_id))


def _pictures(url: str, home: Path, chromium: str, out: Path) -> None:
    from playwright.sync_api import expect, sync_playwright

    from flexq.auth import read_token

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=ARGS)
        try:
            context = browser.new_context(viewport={"width": 1280, "height": 800}, timezone_id="UTC")
            page = context.new_page()
            page.goto(f"{url}/ui/?token={read_token(home)}")  # as `flexq dashboard` opens it: then a cookie
            jobs = context.new_page()
            jobs.goto(f"{url}/ui/jobs")
            two = jobs.locator('#jobs tbody tr[data-job="rayjob-tpu-v6e-dws-2"]')
            expect(two.locator("td.reason")).to_contain_text("waiting for ProvisioningRequest", timeout=60_000)
            one = jobs.locator('#jobs tbody tr[data-job="rayjob-tpu-v6e-dws-1"]')
            expect(one.locator("td.flavors")).to_contain_text("on-demand", timeout=60_000)
            jobs.screenshot(path=str(out / "jobs.png"))
            page.goto(f"{url}/ui/")
            expect(page.locator("#provisioning tbody tr").first).to_be_visible(timeout=30_000)
            page.screenshot(path=str(out / "overview.png"), full_page=True)
            jobs.get_by_role("link", name="rayjob-tpu-v6e-dws-2").click()
            expect(jobs.locator("#state")).to_have_text("pending", timeout=30_000)
            jobs.wait_for_timeout(1500)  # the cards below fill from their own requests
            jobs.screenshot(path=str(out / "job.png"), full_page=True)
            page.goto(f"{url}/ui/reports")
            report = page.get_by_role("link", name="guide").first
            report.click()
            page.wait_for_load_state("load")
            page.screenshot(path=str(out / "report.png"))
        finally:
            browser.close()
    for name in ("overview", "jobs", "job", "report"):
        print(out / f"{name}.png")


if __name__ == "__main__":
    main()
