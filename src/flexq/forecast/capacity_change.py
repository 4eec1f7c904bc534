"""What if capacity were otherwise: the capacity a fork runs ahead under, changed from the live one."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from flexq.capacity import CapacityConfig, EmulatedCloud
from flexq.errors import FlexqError

__all__ = ["CapacityChangeError", "reshape"]


class CapacityChangeError(FlexqError, ValueError):
    """A change that names a pool the capacity does not have, or a count below 0."""


def reshape(current: CapacityConfig, file: CapacityConfig | None = None, max_nodes: Mapping[str, int] | None = None,
            available: Mapping[str, int] | None = None) -> CapacityConfig:
    """``current`` changed: ``file``'s pools take the place of those of their names (or are added) and its cloud's
    specs of theirs; ``max_nodes`` sets pools' maximum nodes; ``available`` the machines the cloud has for pools. The
    times of the cloud's specs keep counting from the server's start."""
    pools = {p.name: p for p in current.pools}
    specs = dict(current.cloud.specs)
    if file is not None:
        pools.update({p.name: p for p in file.pools})
        specs.update(file.cloud.specs)
    for pool, count in _counts("--max-nodes", max_nodes, pools):
        pools[pool] = dataclasses.replace(pools[pool], max_nodes=count)
    for pool, count in _counts("--available", available, pools):
        spec = current.cloud.spec(pool, pools[pool].machine.name) if pool not in specs else specs[pool]
        specs[pool] = dataclasses.replace(spec, available=count, stockouts=(), trace=())
    cloud = EmulatedCloud(specs, current.cloud.seed, current.cloud.origin)
    return dataclasses.replace(current, pools=tuple(pools.values()), cloud=cloud)


def _counts(flag: str, counts: Mapping[str, int] | None, pools: Mapping[str, object]) -> list[tuple[str, int]]:
    """``counts`` by pool, each naming a pool there is and a count of 0 or more."""
    for pool, count in (counts or {}).items():
        if pool not in pools:
            raise CapacityChangeError(f"{flag} {pool}={count}: no node pool {pool} (there are: "
                                      f"{', '.join(sorted(pools)) or 'none'})")
        if count < 0:
            raise CapacityChangeError(f"{flag} {pool}={count}: a count is 0 or more")
    return list((counts or {}).items())
