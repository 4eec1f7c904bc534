"""One request's latency against an idle server, with and without API workers.

    python bench/latency_bench.py [--workers 0 2] [--requests 300]

For each ``--workers`` count, a fresh ``flexq server --runtime none --workers N`` is started, and each kind of
request is sent ``--requests`` times, one at a time over one kept-alive connection (as kubectl and flexq's CLI send
theirs): a Kubernetes API read of one object, a list, a create, a merge patch, and one of flexq's own API (which a
worker passes to the owner). The report gives the median and 99th percentile in milliseconds per kind and count;
with workers, writes cross to the owner and back, and flexq's API is passed through.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx
from live_baseline import Server

HERE = Path(__file__).parent


def _ms(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {"p50_ms": round(statistics.median(ordered) * 1000, 2),
            "p99_ms": round(ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1000, 2)}


def measure(workers: int, requests: int, tmp: Path) -> dict[str, dict[str, float]]:
    server = Server(tmp / f"home-{workers}", None, None, workers)
    try:
        token = server.ready()
        cm = f"{server.base}/api/v1/namespaces/default/configmaps"
        kinds = {
            "get": lambda c, i: c.get(f"{cm}/seed"),
            "list": lambda c, i: c.get(cm),
            "create": lambda c, i: c.post(cm, json={"apiVersion": "v1", "kind": "ConfigMap",
                                                     "metadata": {"name": f"cm-{i}"}}),
            "patch": lambda c, i: c.patch(f"{cm}/seed", json={"data": {"i": str(i)}},
                                          headers={"Content-Type": "application/merge-patch+json"}),
            "flexq api": lambda c, i: c.get(f"{server.base}/flexq/v1/leader"),
        }
        found: dict[str, dict[str, float]] = {}
        with httpx.Client(headers={"Authorization": f"Bearer {token}"}, timeout=30) as client:
            assert client.post(cm, json={"apiVersion": "v1", "kind": "ConfigMap",
                                         "metadata": {"name": "seed"}}).status_code == 201
            for kind, call in kinds.items():
                samples = []
                for i in range(requests + 20):
                    began = time.perf_counter()
                    answer = call(client, i)
                    took = time.perf_counter() - began
                    assert answer.status_code < 300, answer.text
                    if i >= 20:  # the first ones warm the connection and the server's caches
                        samples.append(took)
                found[kind] = _ms(samples)
        return found
    finally:
        server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workers", type=int, nargs="+", default=[0, 2])
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--out", type=Path, default=HERE / "results")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="flexq-latency-") as tmp:
        results = {str(n): measure(n, args.requests, Path(tmp)) for n in args.workers}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "latency.json").write_text(json.dumps(results, indent=2) + "\n")
    kinds = list(next(iter(results.values())))
    print("| workers | " + " | ".join(f"{k} p50 / p99 ms" for k in kinds) + " |", file=sys.stdout)
    print("|---|" + "---|" * len(kinds))
    for n, found in results.items():
        print(f"| {n} | " + " | ".join(f"{found[k]['p50_ms']} / {found[k]['p99_ms']}" for k in kinds) + " |")


if __name__ == "__main__":
    main()
