"""``flexq simulate``: replay a scenario in virtual time, with no server, and compare policies."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from flexq.cli.printers import columns, rich_table, to_json
from flexq.client import CliError
from flexq.durations import format_seconds

if TYPE_CHECKING:
    from flexq.sim import PolicyRun, Scenario, SimResult

__all__ = ["simulate"]


def simulate(
    scenario: Annotated[Path | None, typer.Argument(help="Scenario file (kind: Scenario).")] = None,
    events: Annotated[Path | None, typer.Option("--events", help="Write the event log here (JSON lines; - for stdout).")] = None,  # noqa: E501
    output: Annotated[str | None, typer.Option("--output", "-o", help="json: print a summary as JSON.")] = None,
    metrics: Annotated[Path | None, typer.Option("--metrics", help="Write Kueue's metrics at the end here (Prometheus' "
                                                 "text format, as /metrics; - for stdout).")] = None,
    report: Annotated[Path | None, typer.Option("--report", help="Write report.html, jobs.csv, summary.json here.")]
    = None,
    compare: Annotated[bool, typer.Option("--compare", help="Run every policy (Kueue-compatible, flexq, the "
                                                         "clairvoyant lower bound) and compare them.")] = False,
    progress: Annotated[bool | None, typer.Option("--progress/--no-progress", help="A progress bar on stderr "
                                                   "(default: when stderr is a terminal).")] = None,
    from_server: Annotated[bool, typer.Option("--from-server", help="Run the live server's state ahead instead of a "
                                              "scenario, under the capacity changed by --capacity, --max-nodes, "
                                              "--available: every waiting job's start now and then.")] = False,
    capacity: Annotated[Path | None, typer.Option("--capacity", help="With --from-server: a capacity file whose pools "
                                                  "replace those of their names, or are added.")] = None,
    max_nodes: Annotated[list[str] | None, typer.Option("--max-nodes", help="With --from-server: POOL=N, the pool's "
                                                        "maximum nodes.")] = None,
    available: Annotated[list[str] | None, typer.Option("--available", help="With --from-server: POOL=N, the "
                                                        "machines the cloud has for the pool.")] = None,
) -> None:
    """Replay a scenario in virtual time (no server needed): every admission decision, in order. With
    --from-server, run the live server's state ahead under a changed capacity (what if Plan A had two more slices?)."""
    if from_server:
        if scenario is not None:
            raise CliError("error: --from-server runs the server's state: give no scenario file")
        _from_server(capacity, _counts("--max-nodes", max_nodes), _counts("--available", available), output)
        return
    if scenario is None:
        import click

        raise click.UsageError("Missing argument 'SCENARIO' (a scenario file), or --from-server.")
    if capacity is not None or max_nodes or available:
        raise CliError("error: --capacity, --max-nodes and --available change the server's capacity: use them with "
                       "--from-server (a scenario says its own capacity)")
    from flexq.sim import SimProgress, compare_policies, load_scenario, run_scenario

    _check_outputs(output, metrics)
    loaded = load_scenario(scenario)
    _warn(loaded)
    show = sys.stderr.isatty() if progress is None else progress
    with SimProgress(loaded, enabled=show) as bar:
        result = run_scenario(loaded, bar.callback(loaded.name), metrics=metrics is not None)
        runs = None
        if compare:
            runs = compare_policies(loaded, result, bar.labelled)
    _write_outputs(loaded, result, runs, report, events, metrics)
    summary = result.summary()
    if output == "json":
        typer.echo(to_json(summary))
        return
    if str(events) != "-" and str(metrics) != "-":
        typer.echo(_summary_table(summary))


def _write_outputs(loaded: Scenario, result: SimResult, runs: dict[str, PolicyRun] | None, report: Path | None,
                   events: Path | None, metrics: Path | None) -> None:
    """The report, the event log and Kueue's metrics, each where it was asked for."""
    if report is not None or runs is not None:
        _report(loaded, result, runs, report)
    if events is not None:
        _write_events(result, events)
    _write_metrics(result, metrics)


def _counts(flag: str, values: list[str] | None) -> dict[str, int]:
    out: dict[str, int] = {}
    for value in values or []:
        pool, _, count = value.partition("=")
        if not pool or not count.strip().isdigit():
            raise CliError(f"error: {flag} {value!r}: expected POOL=N (N a whole number)")
        out[pool] = int(count)
    return out


def _from_server(capacity: Path | None, max_nodes: dict[str, int], available: dict[str, int],
                 output: str | None) -> None:
    import time
    from datetime import datetime

    from flexq.cli import options
    from flexq.cli.inputs import read_manifests

    body: dict[str, Any] = {"maxNodes": max_nodes, "available": available}
    if capacity is not None:
        for manifest in read_manifests([str(capacity)], {}):
            body |= {"capacity": manifest.text, "capacitySource": manifest.source}
    items = options.client().submit("/flexq/v1/simulate", body)["items"]
    if output == "json":
        typer.echo(to_json(items))
        return
    if not items:
        typer.echo("No job is waiting.")
        return
    now = time.time()

    def at(start: float | None) -> str:
        if start is None:
            return "unknown"
        return datetime.fromtimestamp(start).strftime("%H:%M:%S") + f" (in {format_seconds(max(0.0, start - now))})"

    rows = [["WORKLOAD", "CLUSTERQUEUE", "STARTS NOW AT", "WITH THE CHANGE", "SOONER BY"]]
    for item in sorted(items, key=lambda i: i["now"]["start"] or float("inf")):
        before, after = item["now"]["start"], (item["changed"] or {}).get("start")
        gain = format_seconds(before - after) if before is not None and after is not None and before > after else "-"
        rows.append([item["workload"], item["clusterQueue"], at(before), at(after), gain])
    typer.echo(columns(rows))


def _report(loaded: Scenario, result: SimResult, runs: dict[str, PolicyRun] | None, report: Path | None) -> None:
    """Write the report (``--report``), and print each policy's numbers on stderr."""
    from flexq.sim import policy_name, policy_run, summarize, write_report

    if runs is None:
        runs = {policy_name(loaded): policy_run(result)}
    if report is not None:
        written = write_report(report, runs, result.flex_flavors)
        typer.echo(f"report written to {report / 'report.html'}", err=True)
    else:
        written = {p: summarize(r.rows, r.events, result.flex_flavors) for p, r in runs.items()}
    _policy_table(written)


def _check_outputs(output: str | None, metrics: Path | None) -> None:
    if output not in (None, "json"):
        raise CliError(f"error: --output {output!r}: the only format is json")
    if metrics is not None and metrics.is_dir():
        raise CliError(f"error: --metrics {metrics}: a directory; give a file to write")


def _write_metrics(result: SimResult, path: Path | None) -> None:
    """Kueue's metrics as a scrape at the end of the run would find them, in Prometheus' text format (to ``path``,
    if any)."""
    from flexq.server import render_kueue

    if path is None or result.kueue is None:
        return
    text = render_kueue(*result.kueue)
    if str(path) == "-":
        typer.echo(text.decode(), nl=False)
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text)


def _write_events(result: SimResult, events: Path) -> None:
    """The event log as JSON lines, to ``events`` (``-``: stdout)."""
    text = "".join(line + "\n" for line in result.log_lines())
    if str(events) == "-":
        typer.echo(text, nl=False)
    else:
        events.parent.mkdir(parents=True, exist_ok=True)
        events.write_text(text, encoding="utf-8")


def _policy_table(summary: dict[str, Any]) -> None:
    """Each policy's waits (and p95 over the oracle's), fallbacks and cost, as a table on stderr."""
    from rich.console import Console

    from flexq.durations import format_seconds
    from flexq.sim import LOWER_BOUND, ORACLE
    from flexq.sim import ratio as _ratio

    def t(value: float | None) -> str:
        return "-" if value is None else format_seconds(value)

    reference = (summary.get(ORACLE) or {}).get("wait", {}).get("p95")
    table = rich_table("policy", "jobs", "started", "p50 wait", "p95 wait", "max wait", "p95/oracle", "fallbacks",
                       "DWS retries", "cost", "wasted")
    for policy, numbers in summary.items():
        wait = numbers["wait"]
        clairvoyant = policy in (LOWER_BOUND, ORACLE)
        ratio = _ratio(wait["p95"], reference)
        table.add_row(policy, str(numbers["jobs"]), str(numbers["jobs"] - numbers["neverStarted"]), t(wait["p50"]),
                      t(wait["p95"]), t(wait["max"]), ratio, str(numbers["fallbacks"]),
                      str(numbers["provisioningRetries"]),
                      "-" if clairvoyant else f"${numbers['cost']['total']:,.2f}",
                      "-" if clairvoyant else f"${numbers['cost']['wasted']:,.2f}")
    Console(stderr=True, width=160).print(table)


def _summary_table(summary: dict[str, Any]) -> str:
    """Every workload's times, wait and flavors (or why it never started), one row each."""
    from flexq.durations import format_seconds

    def t(value: float | None) -> str:
        return "" if value is None else format_seconds(value)

    header = ["WORKLOAD", "QUEUE", "STATE", "SUBMITTED", "ADMITTED", "STARTED", "FINISHED", "WAIT", "FLAVORS"]
    costed = any("cost" in row for row in summary["workloads"])
    if costed:
        header.insert(-1, "COST")
    rows = [header]
    for row in summary["workloads"]:
        flavors = ",".join(f"{ps}={'/'.join(sorted(set(res.values())))}" for ps, res in (row["flavors"] or {}).items())
        cells = [row["workload"], row["clusterQueue"], row["state"], t(row["submitted"]), t(row["admitted"]),
                 t(row["started"]), t(row["finished"]), t(row["wait"]), flavors or (row["pendingReason"] or "")]
        if costed:
            cells.insert(-1, f"${row.get('cost', 0):.2f}")
        rows.append(cells)
    return columns(rows)


def _warn(loaded: Scenario) -> None:
    """The fields of the scenario's Kueue Configuration that change nothing in flexq, each named on stderr."""
    kueue = loaded.kueue
    if kueue is not None:
        for warning in kueue.warnings:
            typer.echo(f"warning: {kueue.source}: {warning}", err=True)
