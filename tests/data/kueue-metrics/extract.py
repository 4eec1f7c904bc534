"""Rebuild metrics.json from Kueue's ``pkg/metrics/metrics.go``: every metric Kueue defines, with its type, help
text, label names and histogram buckets.

    python tests/data/kueue-metrics/extract.py KUEUE_CHECKOUT [COMMIT]

Reads the file of the checkout's work tree, or, given COMMIT (a tag or commit id), the file at that commit. The
metrics are read from their constructors (``prometheus.NewCounterVec(prometheus.CounterOpts{...}, labels)``); the
labels Kueue's configuration may add (``customLabels``) are left out, as they are not there by default.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

KINDS = {"NewCounterVec": "counter", "NewGaugeVec": "gauge", "NewHistogramVec": "histogram"}
SUBSYSTEMS = {"constants.KueueName": "kueue", "constants.MultiKueueName": "multikueue"}
DEFAULT_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0]
"""client_golang's ``prometheus.DefBuckets``, for a histogram that names none."""


def _call(text: str, start: int) -> str:
    """The text between the parenthesis at ``start`` and its match (Go strings and runes skipped)."""
    depth, i = 0, start
    while i < len(text):
        c = text[i]
        if c in "\"'`":
            end = text.index("`", i + 1) if c == "`" else _quoted_end(text, i)
            i = end + 1
            continue
        if c in "({[":
            depth += 1
        elif c in ")}]":
            depth -= 1
            if depth == 0:
                return text[start + 1:i]
        i += 1
    raise ValueError(f"unbalanced call at offset {start}")


def _quoted_end(text: str, start: int) -> int:
    i = start + 1
    while text[i] != text[start]:
        i += 2 if text[i] == "\\" else 1
    return i


def _string(expr: str) -> str:
    """A Go string expression: literals (raw or interpreted) joined with ``+``."""
    parts = re.findall(r'`([^`]*)`|"((?:[^"\\]|\\.)*)"', expr)
    if not parts:
        raise ValueError(f"not a string: {expr!r}")
    return "".join(raw if raw or not quoted else json.loads(f'"{quoted}"') for raw, quoted in parts)


def _field(opts: str, name: str) -> str | None:
    """The expression of field ``name`` in a struct literal's body (up to the next field, at depth 0)."""
    m = re.search(rf"^\s*{name}:\s*", opts, re.M)
    if m is None:
        return None
    depth, i = 0, m.end()
    while i < len(opts):
        c = opts[i]
        if c in "\"'`":
            i = (opts.index("`", i + 1) if c == "`" else _quoted_end(opts, i)) + 1
            continue
        if c in "({[":
            depth += 1
        elif c in ")}]":
            depth -= 1
        elif c == "," and depth == 0:
            break
        i += 1
    return opts[m.end():i].strip()


def _buckets(expr: str | None) -> list[float] | None:
    if expr is None:
        return DEFAULT_BUCKETS
    m = re.fullmatch(r"generateExponentialBuckets\((\d+)\)", expr)
    if m:  # Kueue's: 1, then 2.5 doubling (count - 1 of them)
        return [1.0, *(2.5 * 2 ** i for i in range(int(m.group(1)) - 1))]
    m = re.fullmatch(r"prometheus\.ExponentialBuckets\(([\d.]+),\s*([\d.]+),\s*(\d+)\)", expr)
    if m:
        start, factor, count = float(m.group(1)), float(m.group(2)), int(m.group(3))
        return [round(start * factor ** i, 12) for i in range(count)]
    raise ValueError(f"buckets not understood: {expr!r}")


def extract(source: str) -> list[dict[str, Any]]:
    metrics = []
    for m in re.finditer(r"prometheus\.(NewCounterVec|NewGaugeVec|NewHistogramVec)\(", source):
        body = _call(source, m.end() - 1)
        opts_at = body.index("{")
        opts = _call(body, opts_at)
        rest = body[opts_at + len(opts) + 2:]
        labels = re.search(r"\[\]string\{([^}]*)\}", rest)
        if labels is None:
            raise ValueError(f"no labels after {opts[:60]!r}")
        subsystem, name = _field(opts, "Subsystem"), _field(opts, "Name")
        if subsystem not in SUBSYSTEMS or name is None:
            raise ValueError(f"name not understood: {opts[:80]!r}")
        help_expr = _field(opts, "Help")
        kind = KINDS[m.group(1)]
        metrics.append({
            "name": f"{SUBSYSTEMS[subsystem]}_{_string(name)}",
            "type": kind,
            "help": _string(help_expr or '""'),
            "labels": re.findall(r'"([^"]+)"', labels.group(1)),
            **({"buckets": _buckets(_field(opts, "Buckets"))} if kind == "histogram" else {}),
        })
    return sorted(metrics, key=lambda row: row["name"])


LICENSE = """Copyright The Kubernetes Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License."""

PATH = "pkg/metrics/metrics.go"


def main() -> None:
    checkout = Path(sys.argv[1])
    ref = sys.argv[2] if len(sys.argv) > 2 else "HEAD"
    git = ["git", "-C", str(checkout)]
    commit = subprocess.run([*git, "rev-parse", f"{ref}^{{commit}}"], capture_output=True, text=True,
                            check=True).stdout.strip()
    if len(sys.argv) > 2:
        source = subprocess.run([*git, "show", f"{commit}:{PATH}"], capture_output=True, text=True, check=True).stdout
    else:
        source = (checkout / PATH).read_text()
    if LICENSE not in source:
        raise SystemExit(f"{PATH}: the licence header is not the one expected; read it and update LICENSE")
    out = {"source": {"repository": "https://github.com/kubernetes-sigs/kueue", "ref": ref, "commit": commit,
                      "path": PATH},
           "license": LICENSE, "metrics": extract(source)}
    (Path(__file__).parent / "metrics.json").write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
