"""The suite's forked commands (:mod:`tests.forks`) are the commands a user runs: the same output, exit code and
process behaviour as ``python -m flexq.cli.main`` started afresh."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests import forks
from tests.conftest import free_port

COMMANDS = [
    (["version"], None),
    (["get", "--bogus"], None),
    (["--help"], None),
    (["get", "cq"], None),  # no server there: how to start one
    (["apply", "-f", "-"], "kind: ResourceFlavor\nmetadata: {name: x}\n"),  # no apiVersion: refused by line
    (["simulate", "/nonexistent.yaml"], None),
]


@pytest.mark.parametrize(("args", "stdin"), COMMANDS, ids=[" ".join(a) for a, _ in COMMANDS])
def test_a_forked_command_says_what_the_command_says(args: list[str], stdin: str | None, tmp_path: Path) -> None:
    if os.environ.get("FLEXQ_TEST_FORKS") == "0":
        pytest.skip("FLEXQ_TEST_FORKS=0: every command is started afresh")
    env = {**os.environ, "FLEXQ_SERVER": f"http://127.0.0.1:{free_port()}", "FLEXQ_HOME": str(tmp_path / "home"),
           "COLUMNS": "100"}
    fresh = subprocess.run([sys.executable, "-m", "flexq.cli.main", *args], input=stdin, capture_output=True,
                           text=True, env=env, cwd=tmp_path, timeout=60, check=False)
    forked = forks.run(args, input=stdin, text=True, env=env, cwd=tmp_path, timeout=60)
    assert isinstance(forked, subprocess.CompletedProcess)
    assert (forked.returncode, forked.stdout, forked.stderr) == (fresh.returncode, fresh.stdout, fresh.stderr)


def test_a_forked_process_is_its_own_with_the_tests_environment_and_folder(tmp_path: Path) -> None:
    """Its pid is the command's (signals reach it; a signal's end reads as Popen says it: negative), its environment
    and working folder the test's, and its streams go where the test sends them."""
    if os.environ.get("FLEXQ_TEST_FORKS") == "0":
        pytest.skip("FLEXQ_TEST_FORKS=0: every command is started afresh")
    home = tmp_path / "home"
    port = free_port()
    process = forks.popen(["server", "--port", str(port), "--runtime", "none", "--no-tls"],  # FLEXQ_HOME: its home
                          env={**os.environ, "FLEXQ_HOME": str(home)}, cwd=tmp_path, stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE)
    try:
        assert isinstance(process, forks.Forked)
        deadline = time.monotonic() + 60
        while not (home / "auth" / "admin.token").exists() and time.monotonic() < deadline:
            assert process.poll() is None
            time.sleep(0.1)
        assert Path(f"/proc/{process.pid}/cwd").resolve() == tmp_path.resolve()
        assert process.poll() is None
        with pytest.raises(subprocess.TimeoutExpired):
            process.wait(timeout=0.2)
    finally:
        process.send_signal(signal.SIGKILL)
        assert process.wait(timeout=30) == -signal.SIGKILL
        assert process.stderr is not None
        process.stderr.close()
