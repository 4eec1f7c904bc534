"""An elastic Ray job: it waits until its cluster has WANT worker nodes, then finishes.

With --demand it also submits WANT tasks of one CPU each: with fewer workers than tasks some wait, Ray's pending
demand grows, and flexq's autoscaler asks the queue for more workers (up to the group's maxReplicas).
Without it, growth comes from patching the RayJob's worker group replicas (as KubeRay's autoscaler does).
With --shrink it then waits until the idle workers are given back, down to one (the group's minReplicas).
"""

import sys
import time

import ray

WANT = int(sys.argv[1]) if len(sys.argv) > 1 and sys.argv[1].isdigit() else 2


@ray.remote(num_cpus=1)
def work(i):
    time.sleep(8)  # long enough for the waiting task's demand to be seen
    return ray.get_runtime_context().get_node_id()


def workers():
    return sum(1 for n in ray.nodes() if n["Alive"]) - 1  # all but the head


def main():
    ray.init()
    print(f"{workers()} worker node(s); waiting for {WANT}", flush=True)
    refs = [work.remote(i) for i in range(WANT)] if "--demand" in sys.argv else []
    seen, deadline = workers(), time.time() + 300
    while seen < WANT and time.time() < deadline:
        time.sleep(1)
        if workers() != seen:
            seen = workers()
            print(f"{seen} worker node(s)", flush=True)
    if refs:
        print(f"{len(refs)} tasks ran on {len(set(ray.get(refs)))} node(s)", flush=True)
    if seen < WANT:
        sys.exit(f"only {seen} of {WANT} workers joined")
    if "--shrink" in sys.argv:
        deadline = time.time() + 300
        while workers() > 1 and time.time() < deadline:
            time.sleep(1)
        if workers() > 1:
            sys.exit(f"{workers()} workers still up: the idle ones were not given back")
        print("1 worker node(s): the idle ones were given back", flush=True)
    print("Elastic job complete", flush=True)


if __name__ == "__main__":
    main()
