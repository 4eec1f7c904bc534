"""What a scrape of ``/metrics`` costs the server, at Kueue's queue counts.

    python bench/metrics_bench.py [--config large-scale] [--scale 0.02] [--repeat 3] [--out FILE]

The config (bench/kueue/) runs in virtual time with Kueue's metrics counted, as the live server counts them: its
queues make the same series whatever ``--scale`` (the share of each workloads set run), so that a small scale gives a
full-size scrape. Then, as the server answers a scrape (best of ``--repeat``):

- ``snapshot_s``: the copy of the counters read under the controller's lock (``KueueCounts.snapshot``);
  ``deepcopy_s``: a deep copy of the same, what a scrape took under the lock before;
- ``render_s``: the text, written in the pieces the response sends (``exposition_chunks``); ``mb`` its size and
  ``largest_piece_mb`` the most held at once.

A JSON line on stdout, and the same in ``--out``.
"""

from __future__ import annotations

import argparse
import copy
import json
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from live_baseline import scaled_config

from flexq.server.kueue_families import exposition_chunks, kueue_families
from flexq.sim.runner import run_scenario
from flexq.sim.scenario import load_scenario


def best(repeat: int, work: Callable[[], Any]) -> tuple[float, Any]:
    """The shortest of ``repeat`` runs of ``work``, and what the last returned."""
    took, made = [], None
    for _ in range(repeat):
        began = time.perf_counter()
        made = work()
        took.append(time.perf_counter() - began)
    return min(took), made


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", choices=["baseline", "large-scale"], default="large-scale")
    parser.add_argument("--scale", type=float, default=0.02, help="the share of each workloads set's count to run")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "metrics.json")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="flexq-metrics-") as tmp:
        result = run_scenario(load_scenario(scaled_config(args.config, args.scale, Path(tmp))), metrics=True)
    if result.kueue is None:
        raise SystemExit("the simulator counted no metrics")
    counts, state = result.kueue
    snapshot_s, _ = best(args.repeat, counts.snapshot)
    deepcopy_s, _ = best(args.repeat, lambda: copy.deepcopy(counts))
    render_s, pieces = best(args.repeat, lambda: list(exposition_chunks(kueue_families(counts, state, "standalone"))))
    figures = {
        "config": args.config, "scale": args.scale, "cluster_queues": len(state.queue_status),
        "local_queues": len(state.local_queues),
        "snapshot_s": round(snapshot_s, 3), "deepcopy_s": round(deepcopy_s, 3), "render_s": round(render_s, 3),
        "mb": round(sum(map(len, pieces)) / 1e6, 1), "pieces": len(pieces),
        "largest_piece_mb": round(max(map(len, pieces)) / 1e6, 2),
    }
    line = json.dumps(figures)
    print(line)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(line + "\n")


if __name__ == "__main__":
    main()
