"""The docs: the README's opening commands and links, and the reference pages generated from the code (every
command, scenario field and metric there). The site's own links are checked by its strict build (`make docs`, run by
`make test`); the getting-started page is run by tests/docs/test_getting_started.py."""

from __future__ import annotations

import importlib.util
import re
import sys
from types import ModuleType
from typing import Any

import pytest
import typer

from tests.conftest import ROOT

DOCS = ROOT / "docs"


@pytest.fixture(scope="module")
def pages() -> ModuleType:
    spec = importlib.util.spec_from_file_location("reference_pages", DOCS / "reference_pages.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["reference_pages"] = module
    try:
        spec.loader.exec_module(module)
    finally:
        del sys.modules["reference_pages"]
    return module


def test_readme_opens_with_the_two_commands_the_makefile_has() -> None:
    readme = (ROOT / "README.md").read_text()
    opening = re.search(r"```sh\n(.*?)```", readme, re.S)
    assert opening is not None and readme.index("```sh") < readme.index("\n## ")
    commands = [line.split("#")[0].strip() for line in opening.group(1).splitlines()]
    assert commands == ["make demo", "make test"]
    targets = set(re.findall(r"^([a-z-]+):", (ROOT / "Makefile").read_text(), re.M))
    assert {"demo", "test", "docs", "screenshots"} <= targets
    assert len(readme.splitlines()) < 150


def test_readme_links_lead_to_files() -> None:
    readme = (ROOT / "README.md").read_text()
    links = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", readme)
    assert links, "the README links into the docs"
    missing = [link for link in links if not link.startswith("http") and not (ROOT / link).exists()]
    assert missing == []


def test_generated_pages_are_stubs_in_the_tree(pages: Any) -> None:
    """What the build fills: each generated page's file holds only the stub, and a page with text is refused."""
    for path in pages.PAGES:
        assert (DOCS / path).read_text().strip() == pages.STUB, path
    source = [pages.STUB + "\n"]
    pages.fill(None, "reference/metrics", source)
    assert source[0].startswith("# Metrics")
    with pytest.raises(ValueError, match="is generated"):
        pages.fill(None, "reference/metrics", ["# written by hand\n"])
    untouched = ["# Getting started\n"]
    pages.fill(None, "getting-started", untouched)
    assert untouched == ["# Getting started\n"]


def _command_paths(group: Any, path: str) -> list[str]:
    found = [path]
    for name, sub in sorted(getattr(group, "commands", {}).items()):
        if not sub.hidden:
            found += _command_paths(sub, f"{path} {name}")
    return found


def test_cli_page_has_every_command_and_option(pages: Any) -> None:
    from flexq.cli.main import app

    text = pages.cli_page()
    root = typer.main.get_command(app)
    for path in _command_paths(root, "flexq"):
        assert re.search(rf"^#+ `{re.escape(path)}`$", text, re.M), f"{path} is missing"
    for option in ("--capacity", "--from-server", "--max-nodes", "--tpu-topology", "--enable-queued-provisioning",
                   "--event-ttl", "--store", "--ray-address"):
        assert option in text, option
    assert "Aliases: `cq`." in text, "an alias is listed with its command, not as a command of its own"


def test_scenario_page_has_every_field(pages: Any) -> None:
    from flexq.sim import scenario_schema

    text = pages.scenario_page()
    for model in (scenario_schema.ScenarioFile, scenario_schema.ScenarioSpec, scenario_schema.CapacitySection,
                  scenario_schema.PoolEntry, scenario_schema.CloudEntry, scenario_schema.SubmitEntry,
                  scenario_schema.CheckEntry, scenario_schema.Outages, scenario_schema.Poisson):
        section = text.split(f"### `{model.__name__}`\n", 1)[1].split("\n### ", 1)[0]
        for name, info in model.model_fields.items():
            assert f"| `{info.alias or name}` |" in section, f"{model.__name__}.{name}"
    assert "| `fallback` | boolean | `true` |" in text
    assert "| `ratePerHour` | number | required | > 0 |" in text
    assert "| `until` | duration | none |" in text


def test_metrics_page_has_every_served_metric(pages: Any) -> None:
    from flexq.controller import Tally
    from flexq.server import prometheus

    text = pages.metrics_page()
    served = re.findall(r"^# TYPE (\S+) ", prometheus.render(Tally(), pages.empty_sample()).decode(), re.M)
    assert served
    for name in served:
        assert f"| `{name}` |" in text, name
    assert ("| `kueue_evicted_workloads_total` | counter | `cluster_queue`, `reason`, `underlying_cause`, "
            "`priority_class`, `replica_role` | The number of evicted workloads per 'cluster_queue', The label") in text
    assert ("| `kueue_admission_wait_time_seconds` | histogram | `cluster_queue`, `priority_class`, `replica_role` |"
            in text), "a family that writes its own text names its labels too"
    assert "| `kueue_cluster_queue_nominal_quota` | gauge | `cohort`, `cluster_queue`, `flavor`, `resource`, " \
           "`replica_role` |" in text
    assert "\\n" not in text, "a multi-line help reads as one line"
