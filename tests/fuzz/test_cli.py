"""The CLI on generated command lines against a real server: a message and an exit code, never a traceback."""

from __future__ import annotations

import contextlib
import io
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from flexq.cli.main import main
from tests.conftest import Server, guide_text, start_server, stop_server

VERBS = [["apply"], ["get"], ["describe"], ["delete"], ["create", "configmap"], ["create"], ["check", "set"],
         ["container", "clusters", "create"], ["container", "clusters", "list"], ["container", "clusters", "describe"],
         ["container", "node-pools", "create"], ["container", "node-pools", "list"],
         ["container", "node-pools", "delete"], ["token", "create"], ["token", "list"], ["token", "revoke"],
         ["logs"], ["version"], ["kubeconfig"], ["env"], ["simulate"]]
WORDS = ["cq", "lq", "wl", "rf", "rayjobs", "rayjob/x", "job/x", "clusterqueue", "cluster-queue", "cq,lq",
         "workloads", "nodes", "nodepools", "pods", "-o", "json", "yaml", "wide", "name", "-n", "default", "team-a",
         "-A", "--all-namespaces", "-f", "-", "missing.yaml", "--from-file", "--from-literal", "a=b", "--role",
         "developer", "admin", "--namespace", "--name", "--cluster", "tpu", "--machine-type", "ct6e-standard-4t",
         "--tpu-topology", "4x4", "--num-nodes", "0", "-1", "1e9", "--min-nodes", "--max-nodes", "--location",
         "us-east5-b", "--enable-autoscaling", "--flex-start", "--enable-queued-provisioning", "--env", "X=1",
         "--validate", "warn", "strict", "--ignore-not-found", "-l", "a=b", "--selector", "!", "Ready", "Retry",
         "--state", "--check", "dws-prov", "--output", "", "''", "--", "-h", "--help", "ümlaut", "x" * 300]
ARGS = st.lists(st.one_of(st.sampled_from(WORDS), st.text(st.characters(exclude_characters="/\x00"), max_size=12)),
                max_size=6)
STDIN = st.one_of(st.just(""), st.sampled_from([guide_text("dws-tpu-queue.yaml"), "kind: [", "a: b\n---\n- 1"]),
                  st.text(max_size=80))


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, Path]]:
    home = tmp_path_factory.mktemp("cli-fuzz")
    srv = start_server(home / "home")
    saved = {k: os.environ.get(k) for k in ("FLEXQ_SERVER", "FLEXQ_HOME", "FLEXQ_TOKEN")}
    os.environ.update({"FLEXQ_SERVER": srv.url, "FLEXQ_HOME": str(srv.home)})
    os.environ.pop("FLEXQ_TOKEN", None)
    cwd = Path.cwd()
    os.chdir(home)
    try:
        yield srv, home
    finally:
        os.chdir(cwd)
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        stop_server(srv)


def _run(args: list[str], stdin: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    argv, sys.argv = sys.argv, ["flexq", *args]
    real_stdin, sys.stdin = sys.stdin, io.StringIO(stdin)
    code: int = 0
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                main()
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    finally:
        sys.argv, sys.stdin = argv, real_stdin
    return code, out.getvalue(), err.getvalue()


@settings(max_examples=1000, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(verb=st.sampled_from(VERBS), args=ARGS, stdin=STDIN)
def test_generated_command_lines(served: tuple[Server, Path], verb: list[str], args: list[str], stdin: str) -> None:
    code, out, err = _run([*verb, *args], stdin)
    assert "Traceback" not in err, err
    if code != 0:
        assert err.strip() or out.strip(), f"exit {code} with nothing said: {[*verb, *args]}"
