"""What a script reported with Ray Train's ``train.report``, read from its driver log (every worker logs its copy;
rank 0's is kept)."""

from __future__ import annotations

import ast
import re
from typing import Any, Final

__all__ = ["parse_metrics", "parse_reports"]

_REPORT: Final = re.compile(r"Reporting training result (\d+): TrainingReport\(.*?metrics=(\{.*?\}), "
                            r"validation=\w+\)(?: from rank (\d+))?")


def parse_reports(log: str) -> list[dict[str, Any]]:
    """Every report the script made with ``train.report``, in order (rank 0's copy of each), with its number
    under ``report``. A log holding several runs (after an eviction) holds each run's reports."""
    reports: list[dict[str, Any]] = []
    for match in _REPORT.finditer(log):
        if match.group(3) not in (None, "0"):
            continue  # every worker logs its copy of the report
        try:
            value = ast.literal_eval(match.group(2))
        except (ValueError, SyntaxError):
            continue
        if isinstance(value, dict):
            reports.append({**value, "report": int(match.group(1))})
    return reports


def parse_metrics(log: str) -> dict[str, Any] | None:
    """The last metrics the script reported with ``train.report`` (rank 0's copy of each report)."""
    reports = parse_reports(log)
    return reports[-1] if reports else None
