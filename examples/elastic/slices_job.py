"""An elastic TPU job: WANT tasks, each pinned to a slice of its own by the slice-head resource.

The job starts with one slice, so one task runs and the others wait: Ray's pending demand asks for a whole
slice, flexq's autoscaler raises the TPU group's replicas, the queue admits the growth as a workload slice, and
a Ray node emulating a second slice (its own TPU_NAME) joins. With --shrink the job then waits until the idle
slice is given back.
"""

import os
import sys
import time

import ray

WANT = int(sys.argv[1]) if len(sys.argv) > 1 and sys.argv[1].isdigit() else 2
HEAD = "TPU-v6e-16-head"


def slices():
    return int(ray.cluster_resources().get(HEAD, 0))


@ray.remote(resources={HEAD: 1, "TPU": 4}, num_cpus=1)
def on_slice(want):
    # Hold this slice until the job has all its slices (the waiting tasks' demand makes the autoscaler add them),
    # then a little longer, so that each waiting task starts on a new slice rather than on this one.
    deadline = time.time() + 240
    while slices() < want and time.time() < deadline:
        time.sleep(1)
    time.sleep(5)
    return os.environ.get("TPU_NAME", "?")


def main():
    ray.init()
    print(f"{slices()} slice(s); {WANT} tasks, a slice each", flush=True)
    names = ray.get([on_slice.remote(WANT) for _ in range(WANT)], timeout=300)
    print(f"{WANT} tasks ran on slices: {', '.join(sorted(set(names)))}", flush=True)
    if "--shrink" in sys.argv:
        deadline = time.time() + 300
        while slices() > 1 and time.time() < deadline:
            time.sleep(1)
        if slices() > 1:
            sys.exit("the idle slice was not given back")
        print("1 slice(s): the idle one was given back", flush=True)
    print("Elastic TPU job complete", flush=True)


if __name__ == "__main__":
    main()
