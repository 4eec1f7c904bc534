"""The queue objects the live tests start from: flavors, one ClusterQueue ``cq`` and its LocalQueue ``q``."""

from __future__ import annotations

POOL_LABEL = "cloud.google.com/gke-nodepool"


def queue_yaml(*flavors: tuple[str, str | None], cpu: int = 4, memory: str = "8Gi") -> str:
    """ResourceFlavors (each on its node pool, where one is named), the ClusterQueue ``cq`` that gives each of them,
    in order, ``cpu`` and ``memory`` of quota, and the LocalQueue ``q`` in ``default``."""
    docs = []
    for name, pool in flavors:
        spec = f"\nspec: {{nodeLabels: {{{POOL_LABEL}: {pool}}}}}" if pool else ""
        docs.append(f"apiVersion: kueue.x-k8s.io/v1beta1\nkind: ResourceFlavor\nmetadata: {{name: {name}}}{spec}\n")
    quotas = "".join(f"      - {{name: {name}, resources: [{{name: cpu, nominalQuota: {cpu}}}, "
                     f"{{name: memory, nominalQuota: {memory}}}]}}\n" for name, _ in flavors)
    docs.append("apiVersion: kueue.x-k8s.io/v1beta1\nkind: ClusterQueue\nmetadata: {name: cq}\nspec:\n"
                "  namespaceSelector: {}\n  resourceGroups:\n    - coveredResources: [cpu, memory]\n      flavors:\n"
                + quotas)
    docs.append("apiVersion: kueue.x-k8s.io/v1beta1\nkind: LocalQueue\nmetadata: {name: q, namespace: default}\n"
                "spec: {clusterQueue: cq}\n")
    return "---\n".join(docs)
