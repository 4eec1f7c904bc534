"""The docs' getting-started page, run as written: every ``sh`` block of docs/getting-started.md, in order, in one
shell, from a copy of the guide's files, with the real gcloud and kubectl. So the page cannot drift from what flexq
does. Only the server's address and state folder are the test's own (a free port, a temporary FLEXQ_HOME), given
through a wrapper of ``flexq server`` and FLEXQ_SERVER, as a user's shell would give them."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import GUIDE, ROOT, free_port
from tests.support import wait_until

PAGE = ROOT / "docs" / "getting-started.md"
TOOLS = ("gcloud", "kubectl", "gke-gcloud-auth-plugin", "envsubst")
pytestmark = pytest.mark.skipif(any(shutil.which(t) is None for t in TOOLS), reason=f"needs {', '.join(TOOLS)}")


def page_commands(text: str) -> list[str]:
    """The page's ``sh`` blocks in order (``bash`` blocks are shown, not run)."""
    return [block.strip("\n") for block in re.findall(r"^```sh\n(.*?)^```$", text, flags=re.M | re.S)]


def _alive(group: int) -> bool:
    try:
        os.killpg(group, 0)
    except ProcessLookupError:
        return False
    return True


def test_page_commands_are_found() -> None:
    """The blocks the run below depends on are there: a server started, both jobs followed, kubectl and gcloud."""
    script = "\n".join(page_commands(PAGE.read_text()))
    for needed in ("flexq server --capacity capacity-demo.yaml &", "flexq logs job/rayjob-tpu-v6e-dws-2 -f",
                   'eval "$(flexq env)"', "kubectl get", "gcloud container clusters get-credentials", "kill %1"):
        assert needed in script, f"the getting-started page no longer runs {needed!r}"
    assert page_commands("```sh\na\n```\n```bash\nb\n```\n```sh\nc\nd\n```\n") == ["a", "c\nd"]


@pytest.mark.long
@pytest.mark.timeout(900)
def test_getting_started_page_runs(tmp_path: Path) -> None:
    work = tmp_path / "checkout"
    shutil.copytree(GUIDE, work / "examples" / "guide")
    home = tmp_path / "home"
    port = free_port()
    bindir = Path(sys.executable).parent
    # The page starts `flexq server ... &`: here on a free port, HTTPS on any free port, state in `home`. `exec` makes
    # the background job the server itself, so the page's `kill %1` stops it.
    prelude = f"""set -xeo pipefail
flexq() {{
  if [ "$1" = server ]; then shift; exec flexq server --port {port} --tls-port 0 --home {home} "$@"; fi
  command flexq "$@"
}}
"""
    script = prelude + "\n".join(page_commands(PAGE.read_text())) + "\n"
    env = {**os.environ, "PATH": f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}", "FLEXQ_HOME": str(home),
           "FLEXQ_SERVER": f"http://127.0.0.1:{port}", "HOME": str(tmp_path)}
    for name in ("KUBECONFIG", "CLOUDSDK_CONFIG", "FLEXQ_TOKEN"):
        env.pop(name, None)
    log = tmp_path / "page.log"  # a file, not a pipe: a server left running by a failed step holds no pipe open
    with log.open("w") as sink:
        run = subprocess.Popen(["bash", "-c", script], cwd=work, env=env, stdout=sink, stderr=subprocess.STDOUT,
                               start_new_session=True)
        try:
            run.wait(timeout=840)
        except subprocess.TimeoutExpired:
            pass
        finally:
            with contextlib.suppress(ProcessLookupError):  # what the page left running (the server, had a step failed)
                os.killpg(run.pid, signal.SIGTERM)
            run.wait()
            wait_until(lambda: not _alive(run.pid), timeout=60, every=0.2)  # the server stops its clusters, then ends
    output = log.read_text(errors="replace")
    assert run.returncode == 0, output[-6000:]
    for job in ("rayjob-tpu-v6e-dws-1", "rayjob-tpu-v6e-dws-2"):
        assert re.search(rf"^Job '{job}-\S+' succeeded", output, re.M), f"{job} did not succeed:\n{output[-6000:]}"
    # flexq logs, then kubectl logs, show job 1's driver log.
    assert len(re.findall(r"^Job 'rayjob-tpu-v6e-dws-1-\S+' succeeded", output, re.M)) == 2, output[-6000:]
    assert "on-demand-pool" in output and "dws-pool" in output, "gcloud lists the node pools"
    assert re.search(r"^\s*Queueing Strategy:\s+BestEffortFIFO$", output, re.M), "kubectl describes it"
