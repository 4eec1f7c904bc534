"""``flexq simulate``: replay a scenario in virtual time, with no server, and compare policies."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from flexq.cli.client import CliError
from flexq.cli.printers import columns, rich_table, to_json

if TYPE_CHECKING:
    from flexq.sim.policies import PolicyRun
    from flexq.sim.runner import SimResult
    from flexq.sim.scenario import Scenario

__all__ = ["simulate"]


def simulate(
    scenario: Annotated[Path, typer.Argument(help="Scenario file (kind: Scenario).")],
    events: Annotated[Path | None, typer.Option("--events", help="Write the event log here (JSON lines; - for stdout).")] = None,  # noqa: E501
    output: Annotated[str | None, typer.Option("--output", "-o", help="json: print a summary as JSON.")] = None,
    report: Annotated[Path | None, typer.Option("--report", help="Write report.html, jobs.csv, summary.json here.")]
    = None,
    compare: Annotated[bool, typer.Option("--compare", help="Run every policy (Kueue-compatible, flexq, the "
                                                         "clairvoyant lower bound) and compare them.")] = False,
    progress: Annotated[bool | None, typer.Option("--progress/--no-progress", help="A progress bar on stderr "
                                                   "(default: when stderr is a terminal).")] = None,
) -> None:
    """Replay a scenario in virtual time (no server needed): every admission decision, in order."""
    from flexq.sim.policies import compare_policies
    from flexq.sim.progress import SimProgress
    from flexq.sim.runner import run_scenario
    from flexq.sim.scenario import load_scenario

    if output not in (None, "json"):
        raise CliError(f"error: --output {output!r}: the only format is json")
    loaded = load_scenario(scenario)
    show = sys.stderr.isatty() if progress is None else progress
    with SimProgress(loaded, enabled=show) as bar:
        result = run_scenario(loaded, bar.callback(loaded.name))
        runs = None
        if compare:
            runs = compare_policies(loaded, result, bar.labelled)
    if report is not None or runs is not None:
        _report(loaded, result, runs, report)
    if events is not None:
        _write_events(result, events)
    summary = result.summary()
    if output == "json":
        typer.echo(to_json(summary))
        return
    if str(events) != "-":
        typer.echo(_summary_table(summary))


def _report(loaded: Scenario, result: SimResult, runs: dict[str, PolicyRun] | None, report: Path | None) -> None:
    """Write the report (``--report``), and print each policy's numbers on stderr."""
    from flexq.sim.policies import policy_name, policy_run
    from flexq.sim.report import summarize, write_report

    if runs is None:
        runs = {policy_name(loaded): policy_run(result)}
    if report is not None:
        written = write_report(report, runs, result.flex_flavors)
        typer.echo(f"report written to {report / 'report.html'}", err=True)
    else:
        written = {p: summarize(r.rows, r.events, result.flex_flavors) for p, r in runs.items()}
    _policy_table(written)


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
    from flexq.sim.policies import LOWER_BOUND, ORACLE
    from flexq.sim.report import ratio as _ratio

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
