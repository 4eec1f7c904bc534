"""Every bad input: a clear error naming the file/field, a non-zero exit, nothing written."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests import forks
from tests.api.test_concurrent_admission import KUEUE_EXAMPLE
from tests.conftest import GUIDE, Server, guide_text

RF_MISSING_KIND = "apiVersion: kueue.x-k8s.io/v1beta1\nmetadata:\n  name: x\n"


@pytest.fixture
def server(module_server: Server) -> Server:
    """Every test here is refused and writes nothing (each checks so): they share one server, each seeing it as the
    others left it, empty."""
    return module_server


def _nothing_written(flexq: Any) -> None:
    listed = flexq("get", "rf,cq,lq,ac,prc", "-A")  # one call, as kubectl takes it
    assert (listed.code, listed.out, listed.err.strip()) == (0, "", "No resources found")


CASES = {
    "malformed YAML": (guide_text("dws-tpu-queue.yaml").replace("coveredResources: [", "coveredResources: [["),
                       "stdin:33: malformed YAML"),
    "missing kind": (guide_text("dws-tpu-queue.yaml") + "\n---\n" + RF_MISSING_KIND,
                     "document 8 (object 'x') is invalid\n  line 92: kind: Required value"),
    "missing apiVersion": ("kind: ResourceFlavor\nmetadata:\n  name: x\n", "line 1: apiVersion: Required value"),
    "unknown kind": (guide_text("dws-tpu-queue.yaml") + "\n---\napiVersion: kueue.x-k8s.io/v1beta1\nkind: Gizmo\n"
                     "metadata:\n  name: g\n", 'line 93: kind: no kind "Gizmo" is registered'),
    "missing required field": (guide_text("dws-tpu-queue.yaml").replace('clusterQueue: "cluster-queue"',
                                                                        "stopPolicy: Hold"),
                               "spec.clusterQueue: Required value"),
    "negative quantity": (guide_text("dws-tpu-queue.yaml").replace("nominalQuota: 75Gi", "nominalQuota: -75Gi"),
                          'line 47: spec.resourceGroups[0].flavors[1].resources[1].nominalQuota: invalid quantity '
                          '"-75Gi": must be greater than or equal to 0'),
    "malformed quantity": (guide_text("dws-tpu-queue.yaml").replace("nominalQuota: 75Gi", "nominalQuota: lots"),
                           'spec.resourceGroups[0].flavors[1].resources[1].nominalQuota: invalid quantity "lots"'),
    "duplicate flavor": (guide_text("dws-tpu-queue.yaml").replace('name: "dws" # If', 'name: "on-demand" # If'),
                         'line 50: spec.resourceGroups[0].flavors[2].name: Duplicate value: "on-demand"'),
    "unresolved placeholders": ((GUIDE / "dws-tpu-queue.yaml").read_text(),
                                "unresolved placeholders: ${ONDEMAND_NODEPOOL} (line 15), ${DWS_NODEPOOL} (line 23)"),
    "concurrent admission with StrictFIFO": (
        KUEUE_EXAMPLE.replace("  namespaceSelector: {}\n", "  namespaceSelector: {}\n  queueingStrategy: StrictFIFO\n"),
        "stdin: document 4 (ClusterQueue 'research-cq') is invalid\n  line 22: spec.queueingStrategy: "
        'Invalid value: "StrictFIFO": StrictFIFO queueing strategy cannot be used when ConcurrentAdmissionPolicy is '
        "defined"),
    "concurrent admission in v1beta1": (
        KUEUE_EXAMPLE.replace("kueue.x-k8s.io/v1beta2", "kueue.x-k8s.io/v1beta1"),
        "stdin: document 4 (ClusterQueue 'research-cq') is invalid\n  line 22: spec.concurrentAdmissionPolicy: "
        "Unknown field: ClusterQueue kueue.x-k8s.io/v1beta1 has no such field (it is in kueue.x-k8s.io/v1beta2)"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_refused_and_nothing_written(flexq: Any, case: str) -> None:
    text, expected = CASES[case]
    result = flexq("apply", "-f", "-", input=text)
    assert result.code == 1, (result.out, result.err)
    assert expected in result.err, result.err
    assert "Traceback" not in result.err
    assert result.out == ""
    _nothing_written(flexq)


def test_binary_garbage_on_stdin(flexq: Any) -> None:
    result = flexq("apply", "-f", "-", input=bytes(range(256)) * 64)
    assert result.code == 1 and "stdin: not a YAML or JSON manifest: binary data" in result.err
    _nothing_written(flexq)


def test_fifty_megabyte_file(flexq: Any, tmp_path: Path) -> None:
    big = tmp_path / "big.yaml"
    with big.open("w") as fh:
        fh.write(guide_text("dws-tpu-queue.yaml"))
        fh.write("\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: big\ndata:\n  blob: \"")
        chunk = "x" * 1024 * 1024
        for _ in range(50):
            fh.write(chunk)
        fh.write("\"\n")
    result = flexq("apply", "-f", str(big))
    assert result.code == 1 and f"{big}: input is" in result.err and "MiB" in result.err
    _nothing_written(flexq)


def test_missing_file(flexq: Any) -> None:
    result = flexq("apply", "-f", "/nonexistent/q.yaml")
    assert result.code == 1 and "/nonexistent/q.yaml: no such file or directory" in result.err


def test_no_server_says_how_to_start_one(tmp_path: Path) -> None:

    from tests.conftest import free_port

    env = {"FLEXQ_SERVER": f"http://127.0.0.1:{free_port()}", "PATH": "/usr/bin:/bin"}
    proc = forks.run(["get", "cq"], text=True, env=env, timeout=60)
    assert proc.returncode == 1
    assert "cannot reach the flexq server" in proc.stderr and "flexq server" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_bad_options_get_a_usage_message_not_a_traceback(flexq: Any) -> None:
    for args, says in ((("get", "--bogus"), "No such option: --bogus"),
                       (("top", "--interval", "0"), "--interval"),
                       (("simulate",), "Missing argument")):
        result = flexq(*args)
        assert result.code == 2, (args, result.err)
        assert says in result.err and "Traceback" not in result.err, (args, result.err)


def test_a_bad_kueue_configuration_stops_the_server_before_it_starts(tmp_path: Path) -> None:

    bad = tmp_path / "kueue.yaml"
    bad.write_text("apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\nwaitForPodsReady:\n"
                   "  timeout: soon\nfairSharing: {}\n")
    proc = forks.run(["server", "--home", str(tmp_path / "home"), "--kueue-config", str(bad)], text=True, timeout=60)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert f"{bad}: document 1 (Configuration) is invalid" in proc.stderr
    assert "line 4: waitForPodsReady.timeout: invalid duration 'soon'" in proc.stderr
    assert "line 5: fairSharing.preemptionStrategies: Required value" in proc.stderr
    assert not (tmp_path / "home").exists(), "nothing is made of a server that does not start"


KEY_REGEX = ("a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or "
             "'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')")


@pytest.mark.parametrize(("sources", "says"), [
    pytest.param(["--from-file=../../etc/cron.d/x=f"],
                 f"error: \"../../etc/cron.d/x\" is not a valid key name for a ConfigMap: {KEY_REGEX},must not start "
                 "with '..'", id="a key climbing out"),
    pytest.param(["--from-file=/etc/x=f"], f'error: "/etc/x" is not a valid key name for a ConfigMap: {KEY_REGEX}',
                 id="an absolute key"),
    pytest.param(["--from-file=..=f"], "error: \"..\" is not a valid key name for a ConfigMap: must not be '..'",
                 id="dot dot"),
    pytest.param(["--from-literal=a/b=1"], f'error: "a/b" is not a valid key name for a ConfigMap: {KEY_REGEX}',
                 id="a literal with a slash"),
    pytest.param(["--from-literal=a\tb=1"], f'error: "a\\tb" is not a valid key name for a ConfigMap: {KEY_REGEX}',
                 id="a literal with a tab, quoted as kubectl quotes it"),
    pytest.param(["--from-file=f", "--from-literal=f=2"],
                 'error: cannot add key "f", another key by that name already exists in Data for ConfigMap "t"',
                 id="a key twice"),
])
def test_create_configmap_refuses_a_bad_key_before_sending(tmp_path: Path, sources: list[str], says: str) -> None:
    """Refused as kubectl refuses it, before any request: no server is listening."""
    from tests.conftest import free_port

    (tmp_path / "f").write_text("* * * * * root id\n")
    env = {"FLEXQ_SERVER": f"http://127.0.0.1:{free_port()}", "FLEXQ_HOME": str(tmp_path / "home"),
           "PATH": "/usr/bin:/bin"}
    proc = forks.run(["create", "configmap", "t", *sources], text=True, env=env, cwd=tmp_path, timeout=60)
    assert (proc.returncode, proc.stdout, proc.stderr.strip()) == (1, "", says)
